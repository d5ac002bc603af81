package pricing

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"
)

// Table is a price table in its JSON shape: the table shipped in the binary
// (prices.json in this package), a price file an operator writes, or the
// merge of both. Prices are keyed by provider TYPE (openai, anthropic,
// bedrock, …, as the provider modules are named), not by the name a
// Caddyfile gives a provider, and then by model name.
type Table struct {
	// AsOf is the date (YYYY-MM-DD) the prices were last checked against
	// the providers' pricing pages. Optional in a price file.
	AsOf string `json:"as_of,omitempty"`

	// Providers maps a provider type to its prices.
	Providers map[string]*ProviderPrices `json:"providers,omitempty"`
}

// ProviderPrices holds the prices of one provider type and the rules that
// map the model names clients send to the table's entries.
//
// A model name is looked up as follows, and the first entry (or alias)
// found wins: the name as sent; then the name with one version suffix cut
// off, then another, and so on while a suffix pattern matches; then the same
// again after cutting one prefix pattern, then another prefix, and so on.
// The most specific name therefore wins: "gpt-4o-2024-05-13" has an entry
// of its own (it costs more than "gpt-4o"), and a Bedrock "global." profile
// can be priced apart from the regional one. A name that reaches no entry is
// unpriced; nothing is matched by similarity. At most 8 prefixes and 8
// suffixes are cut, and a name longer than 512 bytes is unpriced.
type ProviderPrices struct {
	// AsOf is the date (YYYY-MM-DD) this provider's prices were last
	// checked, where it differs from the table's. Default: the table's.
	AsOf string `json:"as_of,omitempty"`

	// Source is the provider's pricing page, where whoever updates the
	// table looks. An entry may name a page of its own.
	Source string `json:"source,omitempty"`

	// Prefixes are patterns cut from the start of a model name before it is
	// looked up again: "models/" (Gemini), "us." (Bedrock geographic
	// inference profiles), "arn:*/" (Bedrock ARNs). In a pattern, '#'
	// matches one ASCII digit and '*', which must be followed by '/', the
	// rest of a path segment (one or more characters up to the next '/');
	// every other character matches itself. Merged over the shipped
	// table, an operator's patterns are added to the shipped ones.
	Prefixes []string `json:"prefixes,omitempty"`

	// Suffixes are patterns cut from the end of a model name: dated
	// snapshots such as "-####-##-##" (gpt-4o-2024-08-06) or "-########"
	// (claude-sonnet-4-5-20250929), Bedrock versions such as ":#" and
	// "-v#". '#' matches one digit; '*' is not allowed here. They are
	// tried in the order given; the first that matches is cut.
	Suffixes []string `json:"suffixes,omitempty"`

	// Models maps a model name to its price.
	Models map[string]*Price `json:"models,omitempty"`

	// BatchDiscount is how much less, in per cent of every rate, a
	// request costs in the provider's own batch API (50: half the live
	// price, as OpenAI, Anthropic, Google and AWS bill batches). An entry's
	// Batch rates, where it has them, take its place. Unset: batch
	// requests cost what live ones do.
	BatchDiscount *int `json:"batch_discount,omitempty"`
}

// Price is the price of one model. Every rate is in US dollars, per million
// tokens except Search (per 1,000 searches). A rate left out is not charged
// at all and makes a request that needs it unpriced, except where a
// fallback is written below.
type Price struct {
	// Input is the price of a million prompt tokens that were neither read
	// from nor written to the provider's prompt cache. For per-token
	// rerankers (Voyage, Jina) it is the price of the rerank tokens.
	Input *Rate `json:"input,omitempty"`

	// Cached is the price of a million prompt tokens read from the
	// provider's prompt cache (cache hits). Default: the Input price.
	Cached *Rate `json:"cached,omitempty"`

	// CacheWrite is the price of a million prompt tokens written to the
	// provider's prompt cache, where the provider charges for writes
	// (Anthropic, Claude on Bedrock and Vertex; the 5-minute rate).
	// Default: the Input price.
	CacheWrite *Rate `json:"cache_write,omitempty"`

	// CacheWrite1h is the price of a million prompt tokens written to a
	// prompt cache that lasts an hour, where the provider prices those
	// apart and reports them (Anthropic bills them at twice the input
	// price, five-minute writes at 1.25 times). Default: the CacheWrite
	// price.
	CacheWrite1h *Rate `json:"cache_write_1h,omitempty"`

	// Output is the price of a million completion tokens, reasoning tokens
	// included.
	Output *Rate `json:"output,omitempty"`

	// Embedding is the price of a million tokens sent to an embedding
	// model. Default: the Input price.
	Embedding *Rate `json:"embedding,omitempty"`

	// Search is the price of 1,000 rerank searches, for providers that bill
	// rerank by the search (Cohere: one query with up to 100 documents).
	// When set, a rerank request is billed by its searches and its tokens
	// are not billed.
	Search *Rate `json:"search,omitempty"`

	// CacheHit is the price of 1,000 requests the gateway answered from
	// its own response cache, without calling the provider: such a
	// request is billed this and nothing else. Default: the configuration's
	// cache_hit (Config.CacheHit), else nothing ($0).
	CacheHit *Rate `json:"cache_hit,omitempty"`

	// Tiers are higher prices that apply to a whole request whose prompt
	// (cached and cache-write tokens included) is longer than a threshold,
	// as Gemini 2.5 Pro charges above 200,000 prompt tokens. The tier with
	// the highest threshold below the prompt's length applies.
	Tiers []Tier `json:"tiers,omitempty"`

	// Batch are the model's rates in the provider's own batch API, where
	// they are not the provider's BatchDiscount off its live rates. A rate
	// left out takes the live rate less the discount.
	Batch *BatchRates `json:"batch,omitempty"`

	// Aliases are other exact names of the same model, priced the same
	// ("chatgpt-4o-latest", a Bedrock "global." profile id, …).
	Aliases []string `json:"aliases,omitempty"`

	// Source is the page this price was read from, where it is not the
	// provider's Source.
	Source string `json:"source,omitempty"`

	// Note says anything a reader of the table should know: what is not
	// modelled (batch discounts, audio tokens), where a price came from.
	Note string `json:"note,omitempty"`
}

// Tier is a long-context price tier: the rates it sets replace the
// model's rates for a request whose prompt is longer than Above tokens; a
// rate it leaves out keeps the model's rate.
type Tier struct {
	// Above is the prompt length, in tokens (cached and cache-write tokens
	// included), above which the tier applies. Required, above 0.
	Above int64 `json:"above"`

	// Input, Cached, CacheWrite, CacheWrite1h and Output are as in
	// Price.
	Input        *Rate `json:"input,omitempty"`
	Cached       *Rate `json:"cached,omitempty"`
	CacheWrite   *Rate `json:"cache_write,omitempty"`
	CacheWrite1h *Rate `json:"cache_write_1h,omitempty"`
	Output       *Rate `json:"output,omitempty"`
}

// BatchRates are a model's batch prices, in the units of Price.
type BatchRates struct {
	Input        *Rate `json:"input,omitempty"`
	Cached       *Rate `json:"cached,omitempty"`
	CacheWrite   *Rate `json:"cache_write,omitempty"`
	CacheWrite1h *Rate `json:"cache_write_1h,omitempty"`
	Output       *Rate `json:"output,omitempty"`
	Embedding    *Rate `json:"embedding,omitempty"`
}

// ParseTable reads a price table or price file strictly: unknown fields,
// duplicate keys in any object, values of the wrong type and trailing data
// are errors, and the table must pass Validate.
func ParseTable(data []byte) (*Table, error) {
	if err := checkDuplicateKeys(data); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var t Table
	if err := dec.Decode(&t); err != nil {
		return nil, fmt.Errorf("price table: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("price table: data after the top-level object")
	}
	if err := t.Validate(); err != nil {
		return nil, err
	}
	return &t, nil
}

// checkDuplicateKeys walks the JSON tokens and fails on an object that has
// the same key twice, which encoding/json would silently resolve to the
// last one: in a price file that hides a mistake. It also bounds nesting:
// a price table is six levels deep.
func checkDuplicateKeys(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := walkJSON(dec, "", 0); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("price table: %w", err)
	}
	return nil
}

// maxTableDepth bounds the nesting of a price table's JSON.
const maxTableDepth = 16

func walkJSON(dec *json.Decoder, path string, depth int) error {
	if depth > maxTableDepth {
		return fmt.Errorf("nested more than %d levels deep at %s", maxTableDepth, where(path))
	}
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	switch d {
	case '{':
		seen := make(map[string]struct{})
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return err
			}
			key, _ := tok.(string)
			if _, dup := seen[key]; dup {
				return fmt.Errorf("%q appears twice in %s", key, where(path))
			}
			seen[key] = struct{}{}
			child := key
			if path != "" {
				child = path + "." + key
			}
			if err := walkJSON(dec, child, depth+1); err != nil {
				return err
			}
		}
	case '[':
		for i := 0; dec.More(); i++ {
			if err := walkJSON(dec, fmt.Sprintf("%s[%d]", path, i), depth+1); err != nil {
				return err
			}
		}
	}
	_, err = dec.Token() // the closing delimiter
	return err
}

func where(path string) string {
	if path == "" {
		return "the top-level object"
	}
	return path
}

// Validate checks a table: dates, provider type and model names, patterns,
// sources, every rate (a negative or over-precise rate cannot be read at
// all), that every entry prices something, tiers, and that no name is an
// entry or alias twice within a provider.
func (t *Table) Validate() error {
	var errs []error
	if t.AsOf != "" {
		if err := checkDate(t.AsOf); err != nil {
			errs = append(errs, fmt.Errorf("as_of: %w", err))
		}
	}
	for _, typ := range sortedKeys(t.Providers) {
		p := t.Providers[typ]
		if err := checkName(typ); err != nil {
			errs = append(errs, fmt.Errorf("provider type %q: %w", typ, err))
			continue
		}
		if strings.Contains(typ, "/") {
			errs = append(errs, fmt.Errorf("provider type %q: a provider type has no '/'", typ))
			continue
		}
		if p == nil {
			errs = append(errs, fmt.Errorf("%s: null instead of the provider's prices", typ))
			continue
		}
		if err := p.validate(typ); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (p *ProviderPrices) validate(typ string) error {
	var errs []error
	if p.AsOf != "" {
		if err := checkDate(p.AsOf); err != nil {
			errs = append(errs, fmt.Errorf("%s: as_of: %w", typ, err))
		}
	}
	if p.Source != "" {
		if err := checkSource(p.Source); err != nil {
			errs = append(errs, fmt.Errorf("%s: source: %w", typ, err))
		}
	}
	for _, pat := range p.Prefixes {
		if err := checkPattern(pat, true); err != nil {
			errs = append(errs, fmt.Errorf("%s: prefix %q: %w", typ, pat, err))
		}
	}
	for _, pat := range p.Suffixes {
		if err := checkPattern(pat, false); err != nil {
			errs = append(errs, fmt.Errorf("%s: suffix %q: %w", typ, pat, err))
		}
	}
	if d := p.BatchDiscount; d != nil && (*d < 0 || *d > 100) {
		errs = append(errs, fmt.Errorf("%s: batch_discount %d is not a per cent from 0 to 100", typ, *d))
	}
	if dup := firstDuplicate(p.Prefixes); dup != "" {
		errs = append(errs, fmt.Errorf("%s: prefix %q is listed twice", typ, dup))
	}
	if dup := firstDuplicate(p.Suffixes); dup != "" {
		errs = append(errs, fmt.Errorf("%s: suffix %q is listed twice", typ, dup))
	}
	names := make(map[string]string) // name or alias → the entry defining it
	for _, model := range sortedKeys(p.Models) {
		names[model] = model
	}
	for _, model := range sortedKeys(p.Models) {
		where := typ + "/" + model
		if err := checkName(model); err != nil {
			errs = append(errs, fmt.Errorf("model %q of %s: %w", model, typ, err))
			continue
		}
		pr := p.Models[model]
		if pr == nil {
			errs = append(errs, fmt.Errorf("%s: null instead of a price", where))
			continue
		}
		if err := pr.validate(where); err != nil {
			errs = append(errs, err)
		}
		for _, a := range pr.Aliases {
			if err := checkName(a); err != nil {
				errs = append(errs, fmt.Errorf("%s: alias %q: %w", where, a, err))
				continue
			}
			if other, dup := names[a]; dup {
				if other == model {
					errs = append(errs, fmt.Errorf("%s: alias %q names the entry itself or is listed twice", where, a))
				} else {
					errs = append(errs, fmt.Errorf("%s: alias %q is already %s", where, a, describeName(a, other)))
				}
				continue
			}
			names[a] = model
		}
	}
	return errors.Join(errs...)
}

func describeName(name, entry string) string {
	if name == entry {
		return "an entry of its own"
	}
	return "an alias of " + entry
}

// validate checks one entry; where names it in errors ("openai/gpt-4o").
func (pr *Price) validate(where string) error {
	var errs []error
	if pr.Input == nil && pr.Cached == nil && pr.CacheWrite == nil && pr.CacheWrite1h == nil && pr.Output == nil &&
		pr.Embedding == nil && pr.Search == nil && pr.CacheHit == nil {
		errs = append(errs, fmt.Errorf("%s: prices nothing: give at least one of input, cached, cache_write, cache_write_1h, output, embedding, search, cache_hit", where))
	}
	for _, r := range []*Rate{pr.Input, pr.Cached, pr.CacheWrite, pr.CacheWrite1h, pr.Output, pr.Embedding, pr.Search, pr.CacheHit} {
		if err := checkRate(r); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
		}
	}
	if pr.Source != "" {
		if err := checkSource(pr.Source); err != nil {
			errs = append(errs, fmt.Errorf("%s: source: %w", where, err))
		}
	}
	if b := pr.Batch; b != nil {
		for _, r := range []*Rate{b.Input, b.Cached, b.CacheWrite, b.CacheWrite1h, b.Output, b.Embedding} {
			if err := checkRate(r); err != nil {
				errs = append(errs, fmt.Errorf("%s: batch: %w", where, err))
			}
		}
	}
	var last int64
	for i, t := range pr.Tiers {
		if t.Above <= 0 {
			errs = append(errs, fmt.Errorf("%s: tier %d: above must be a number of prompt tokens above 0", where, i+1))
			continue
		}
		if t.Above <= last {
			errs = append(errs, fmt.Errorf("%s: tier %d: thresholds must increase (above %d after above %d)", where, i+1, t.Above, last))
		}
		last = t.Above
		if t.Input == nil && t.Cached == nil && t.CacheWrite == nil && t.CacheWrite1h == nil && t.Output == nil {
			errs = append(errs, fmt.Errorf("%s: tier above %d sets no rate", where, t.Above))
		}
		for _, r := range []*Rate{t.Input, t.Cached, t.CacheWrite, t.CacheWrite1h, t.Output} {
			if err := checkRate(r); err != nil {
				errs = append(errs, fmt.Errorf("%s: tier above %d: %w", where, t.Above, err))
			}
		}
	}
	return errors.Join(errs...)
}

// checkRate catches rates built in Go rather than parsed: ParseRate
// already refuses these.
func checkRate(r *Rate) error {
	switch {
	case r == nil:
		return nil
	case *r < 0:
		return fmt.Errorf("negative price %s", *r)
	case *r > MaxRate:
		return fmt.Errorf("price %s is above the limit of %s", *r, MaxRate)
	}
	return nil
}

func checkDate(s string) error {
	if _, err := time.Parse(time.DateOnly, s); err != nil {
		return fmt.Errorf("%q is not a date such as 2026-07-24", s)
	}
	return nil
}

func checkSource(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("%q is not an http(s) URL", s)
	}
	return nil
}

// checkName accepts model and provider type names: not empty, no spaces or
// control characters, no more than 256 bytes.
func checkName(s string) error {
	if s == "" {
		return errors.New("empty name")
	}
	if len(s) > 256 {
		return errors.New("longer than 256 bytes")
	}
	for _, c := range []byte(s) {
		if c <= ' ' || c == 0x7f {
			return errors.New("contains a space or a control character")
		}
	}
	return nil
}

func firstDuplicate(list []string) string {
	seen := make(map[string]struct{}, len(list))
	for _, s := range list {
		if _, dup := seen[s]; dup {
			return s
		}
		seen[s] = struct{}{}
	}
	return ""
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Clone returns a deep copy of t.
func (t *Table) Clone() *Table {
	if t == nil {
		return nil
	}
	out := &Table{AsOf: t.AsOf}
	if t.Providers != nil {
		out.Providers = make(map[string]*ProviderPrices, len(t.Providers))
		for typ, p := range t.Providers {
			out.Providers[typ] = p.clone()
		}
	}
	return out
}

func (p *ProviderPrices) clone() *ProviderPrices {
	if p == nil {
		return nil
	}
	out := &ProviderPrices{AsOf: p.AsOf, Source: p.Source, Prefixes: slices.Clone(p.Prefixes), Suffixes: slices.Clone(p.Suffixes)}
	if p.BatchDiscount != nil {
		d := *p.BatchDiscount
		out.BatchDiscount = &d
	}
	if p.Models != nil {
		out.Models = make(map[string]*Price, len(p.Models))
		for m, pr := range p.Models {
			out.Models[m] = pr.clone()
		}
	}
	return out
}

func (pr *Price) clone() *Price {
	if pr == nil {
		return nil
	}
	out := *pr
	out.Input = cloneRate(pr.Input)
	out.Cached = cloneRate(pr.Cached)
	out.CacheWrite = cloneRate(pr.CacheWrite)
	out.CacheWrite1h = cloneRate(pr.CacheWrite1h)
	out.Output = cloneRate(pr.Output)
	out.Embedding = cloneRate(pr.Embedding)
	out.Search = cloneRate(pr.Search)
	out.CacheHit = cloneRate(pr.CacheHit)
	out.Aliases = slices.Clone(pr.Aliases)
	if pr.Batch != nil {
		out.Batch = &BatchRates{Input: cloneRate(pr.Batch.Input), Cached: cloneRate(pr.Batch.Cached), CacheWrite: cloneRate(pr.Batch.CacheWrite), CacheWrite1h: cloneRate(pr.Batch.CacheWrite1h),
			Output: cloneRate(pr.Batch.Output), Embedding: cloneRate(pr.Batch.Embedding)}
	}
	if pr.Tiers != nil {
		out.Tiers = make([]Tier, len(pr.Tiers))
		for i, t := range pr.Tiers {
			out.Tiers[i] = Tier{Above: t.Above, Input: cloneRate(t.Input), Cached: cloneRate(t.Cached), CacheWrite: cloneRate(t.CacheWrite),
				CacheWrite1h: cloneRate(t.CacheWrite1h), Output: cloneRate(t.Output)}
		}
	}
	return &out
}

func cloneRate(r *Rate) *Rate {
	if r == nil {
		return nil
	}
	v := *r
	return &v
}

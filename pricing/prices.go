// Package pricing prices the requests the gateway serves: a price table of
// the providers' models shipped in the binary (prices.json), merged with the
// operator's overrides from a file and from the Caddyfile, and the exact cost
// of a request's usage under it.
//
// Money is exact: rates are integers of micro-dollars per million tokens
// (Rate), costs integers of nano-dollars (Money), and a request's cost is
// rounded once. A model the table does not price is unpriced — Lookup and
// Cost say so — and never costs $0 by accident.
//
// The package imports nothing of Caddy: the host reads the Caddyfile block
// line by line and hands each line's tokens to Config.UnmarshalLine.
package pricing

import (
	_ "embed"
	"fmt"
	"math"
	"math/bits"
	"os"
	"slices"
	"strings"
	"sync"
)

//go:embed prices.json
var shippedJSON []byte

var shipped = sync.OnceValues(func() (*Table, error) { return ParseTable(shippedJSON) })

// Shipped returns a copy of the price table shipped in the binary. It
// panics if that table is invalid, which its tests rule out.
func Shipped() *Table {
	t, err := shipped()
	if err != nil {
		panic("pricing: the shipped price table is invalid: " + err.Error())
	}
	return t.Clone()
}

var shippedPrices = sync.OnceValue(func() *Prices {
	p, err := Build(Shipped())
	if err != nil {
		panic("pricing: the shipped price table is invalid: " + err.Error())
	}
	return p
})

// Default returns the shipped table, compiled. It is shared: Prices are
// immutable.
func Default() *Prices { return shippedPrices() }

// Load builds the prices the gateway uses from the operator's
// configuration: the shipped table, then the file c.File names (if any),
// then the inline entries c.Models. A nil c gives the shipped prices.
func Load(c *Config) (*Prices, error) {
	if c == nil {
		return Default(), nil
	}
	layers := []*Table{Shipped()}
	if err := checkRate(c.CacheHit); err != nil {
		return nil, fmt.Errorf("cache_hit: %w", err)
	}
	if c.File != "" {
		data, err := os.ReadFile(c.File)
		if err != nil {
			return nil, fmt.Errorf("price file: %w", err)
		}
		t, err := ParseTable(data)
		if err != nil {
			return nil, fmt.Errorf("price file %s: %w", c.File, err)
		}
		layers = append(layers, t)
	}
	inline, err := c.InlineTable()
	if err != nil {
		return nil, err
	}
	if inline != nil {
		layers = append(layers, inline)
	}
	p, err := Build(layers...)
	if err != nil {
		return nil, err
	}
	if c.CacheHit != nil {
		p.cacheHit = *c.CacheHit
	}
	return p, nil
}

// Merge returns a new table: base with each override applied in turn. For
// every provider type an override lists:
//   - each of its model entries replaces the entry of the same name WHOLE
//     (rates, tiers, aliases, source, note): what the operator writes is the
//     price, with nothing left over from the shipped entry. A name the
//     override defines, as an entry or as an alias, is taken away from the
//     earlier layers' entries and aliases;
//   - its prefixes and suffixes are added after the earlier ones;
//   - its source and as_of, when set, replace the earlier ones.
//
// Provider types the override does not list are kept as they are. The
// table's as_of stays base's. Merge does not validate; Build does.
func Merge(base *Table, overrides ...*Table) *Table {
	out := base.Clone()
	if out == nil {
		out = &Table{}
	}
	for _, o := range overrides {
		if o == nil {
			continue
		}
		for _, typ := range sortedKeys(o.Providers) {
			op := o.Providers[typ]
			if op == nil {
				continue
			}
			if out.Providers == nil {
				out.Providers = make(map[string]*ProviderPrices)
			}
			dst := out.Providers[typ]
			if dst == nil {
				out.Providers[typ] = op.clone()
				continue
			}
			if op.AsOf != "" {
				dst.AsOf = op.AsOf
			}
			if op.Source != "" {
				dst.Source = op.Source
			}
			if op.BatchDiscount != nil {
				d := *op.BatchDiscount
				dst.BatchDiscount = &d
			}
			dst.Prefixes = appendNew(dst.Prefixes, op.Prefixes)
			dst.Suffixes = appendNew(dst.Suffixes, op.Suffixes)
			if dst.Models == nil {
				dst.Models = make(map[string]*Price)
			}
			for _, name := range sortedKeys(op.Models) {
				pr := op.Models[name]
				if pr == nil {
					continue
				}
				for _, taken := range append([]string{name}, pr.Aliases...) {
					delete(dst.Models, taken)
					for _, other := range dst.Models {
						if i := slices.Index(other.Aliases, taken); i >= 0 {
							other.Aliases = slices.Delete(other.Aliases, i, i+1)
						}
					}
				}
				dst.Models[name] = pr.clone()
			}
		}
	}
	return out
}

func appendNew(dst, add []string) []string {
	for _, s := range add {
		if !slices.Contains(dst, s) {
			dst = append(dst, s)
		}
	}
	return dst
}

// Build validates each layer, merges them in order (Merge) and compiles
// the result for lookups. The first layer is usually Shipped().
func Build(layers ...*Table) (*Prices, error) {
	for i, l := range layers {
		if l == nil {
			continue
		}
		if err := l.Validate(); err != nil {
			return nil, fmt.Errorf("price table %d: %w", i+1, err)
		}
	}
	var merged *Table
	if len(layers) > 0 {
		merged = Merge(layers[0], layers[1:]...)
	} else {
		merged = &Table{}
	}
	if err := merged.Validate(); err != nil {
		return nil, fmt.Errorf("merged price table: %w", err)
	}
	return compile(merged), nil
}

// Prices is a compiled price table, immutable and safe for concurrent use.
// A nil *Prices prices nothing.
type Prices struct {
	table     *Table
	providers map[string]*provider
	entries   int
	cacheHit  Rate // the price of 1,000 cache hits of a model without its own (Config.CacheHit)
}

type provider struct {
	prefixes []string
	suffixes []string
	names    map[string]*entry // entry names and aliases
}

type entry struct {
	typ, name, source, asOf string
	base                    rates
	tiers                   []tier
	cacheHit                *Rate // the entry's own price of 1,000 cache hits
	// batch is the entry at the provider's batch prices; nil when they
	// are its live prices.
	batch *entry
}

type tier struct {
	above int64
	rates rates
}

// rates are a model's effective rates, the fallbacks of Price applied:
// cached, cache_write and embedding take the input rate when unset,
// cache_write_1h the cache_write rate.
type rates struct {
	input, cached, cacheWrite, cacheWrite1h, output, embedding, search Rate
	has                                                                uint8
}

const (
	hasInput uint8 = 1 << iota
	hasCached
	hasCacheWrite
	hasCacheWrite1h
	hasOutput
	hasEmbedding
	hasSearch
)

func compile(t *Table) *Prices {
	p := &Prices{table: t, providers: make(map[string]*provider, len(t.Providers))}
	for typ, pp := range t.Providers {
		cp := &provider{prefixes: pp.Prefixes, suffixes: pp.Suffixes, names: make(map[string]*entry, len(pp.Models))}
		asOf := pp.AsOf
		if asOf == "" {
			asOf = t.AsOf
		}
		for name, pr := range pp.Models {
			e := &entry{typ: typ, name: name, source: pr.Source, asOf: asOf, cacheHit: cloneRate(pr.CacheHit)}
			if e.source == "" {
				e.source = pp.Source
			}
			raw := rawRates{pr.Input, pr.Cached, pr.CacheWrite, pr.CacheWrite1h, pr.Output, pr.Embedding, pr.Search}
			e.base = raw.effective()
			for _, tr := range pr.Tiers {
				r := raw
				r.set(tr.Input, tr.Cached, tr.CacheWrite, tr.CacheWrite1h, tr.Output)
				e.tiers = append(e.tiers, tier{above: tr.Above, rates: r.effective()})
			}
			e.batch = batchEntry(e, pr, raw, pp.BatchDiscount)
			cp.names[name] = e
			for _, a := range pr.Aliases {
				cp.names[a] = e
			}
			p.entries++
		}
		p.providers[typ] = cp
	}
	return p
}

// batchEntry is e at the batch prices: pr's Batch rates where given, the
// rest (and the tiers) discount per cent off the live ones; nil when
// neither applies.
func batchEntry(e *entry, pr *Price, raw rawRates, discount *int) *entry {
	d := 0
	if discount != nil {
		d = *discount
	}
	if pr.Batch == nil && d == 0 {
		return nil
	}
	off := func(r *Rate) *Rate {
		if r == nil {
			return nil
		}
		// Half up, to the micro-dollar: (r × (100−d) + 50) / 100.
		v := Rate((int64(*r)*int64(100-d) + 50) / 100)
		return &v
	}
	b := rawRates{off(raw.input), off(raw.cached), off(raw.cacheWrite), off(raw.cacheWrite1h), off(raw.output), off(raw.embedding), off(raw.search)}
	if o := pr.Batch; o != nil {
		for _, p := range []struct {
			dst **Rate
			v   *Rate
		}{{&b.input, o.Input}, {&b.cached, o.Cached}, {&b.cacheWrite, o.CacheWrite}, {&b.cacheWrite1h, o.CacheWrite1h}, {&b.output, o.Output}, {&b.embedding, o.Embedding}} {
			if p.v != nil {
				*p.dst = p.v
			}
		}
	}
	be := &entry{typ: e.typ, name: e.name, source: e.source, asOf: e.asOf, base: b.effective(), cacheHit: e.cacheHit}
	for _, tr := range pr.Tiers {
		t := b
		t.set(off(tr.Input), off(tr.Cached), off(tr.CacheWrite), off(tr.CacheWrite1h), off(tr.Output))
		be.tiers = append(be.tiers, tier{above: tr.Above, rates: t.effective()})
	}
	return be
}

type rawRates struct {
	input, cached, cacheWrite, cacheWrite1h, output, embedding, search *Rate
}

func (r *rawRates) set(input, cached, cacheWrite, cacheWrite1h, output *Rate) {
	if input != nil {
		r.input = input
	}
	if cached != nil {
		r.cached = cached
	}
	if cacheWrite != nil {
		r.cacheWrite = cacheWrite
	}
	if cacheWrite1h != nil {
		r.cacheWrite1h = cacheWrite1h
	}
	if output != nil {
		r.output = output
	}
}

func (r rawRates) effective() rates {
	var out rates
	pick := func(dst *Rate, flag uint8, v, fallback *Rate) {
		if v == nil {
			v = fallback
		}
		if v != nil {
			*dst = *v
			out.has |= flag
		}
	}
	pick(&out.input, hasInput, r.input, nil)
	pick(&out.cached, hasCached, r.cached, r.input)
	pick(&out.cacheWrite, hasCacheWrite, r.cacheWrite, r.input)
	write := r.cacheWrite
	if write == nil {
		write = r.input
	}
	pick(&out.cacheWrite1h, hasCacheWrite1h, r.cacheWrite1h, write)
	pick(&out.output, hasOutput, r.output, nil)
	pick(&out.embedding, hasEmbedding, r.embedding, r.input)
	pick(&out.search, hasSearch, r.search, nil)
	return out
}

// Table returns a copy of the merged table p was built from.
func (p *Prices) Table() *Table {
	if p == nil {
		return &Table{}
	}
	return p.table.Clone()
}

// AsOf is the date of the table p was built from (the shipped table's).
func (p *Prices) AsOf() string {
	if p == nil {
		return ""
	}
	return p.table.AsOf
}

// Len is the number of model entries (aliases not counted).
func (p *Prices) Len() int {
	if p == nil {
		return 0
	}
	return p.entries
}

// Entry is the price of one model, as Lookup found it. The zero Entry
// prices nothing.
type Entry struct {
	e   *entry
	hit Rate // the table's price of 1,000 cache hits, for an entry without its own
}

// Lookup finds the price of a model of a provider type by the rules of
// ProviderPrices: the name as sent, then with version suffixes and routing
// prefixes cut, most specific first. ok is false when nothing prices it: the
// request is unpriced. It allocates nothing.
func (p *Prices) Lookup(providerType, model string) (Entry, bool) {
	if p == nil {
		return Entry{}, false
	}
	pv := p.providers[providerType]
	if pv == nil || len(model) > maxModelName {
		return Entry{}, false
	}
	// At most (maxCuts+1)² map lookups, whatever the client sends.
	s := model
	for range maxCuts + 1 {
		t := s
		for range maxCuts + 1 {
			if e := pv.names[t]; e != nil {
				return Entry{e, p.cacheHit}, true
			}
			var cut bool
			if t, cut = cutSuffix(pv.suffixes, t); !cut {
				break
			}
		}
		var cut bool
		if s, cut = cutPrefix(pv.prefixes, s); !cut {
			break
		}
	}
	return Entry{}, false
}

// Bounds of a lookup: the longest model name looked up, and how many
// prefixes and suffixes are cut at most. Real names need two prefix cuts
// (a Bedrock ARN, then a geographic profile) and three suffix cuts (":0",
// "-v1", a date).
const (
	maxModelName = 512
	maxCuts      = 8
)

// Cost is Lookup followed by Entry.Cost: the cost of usage u of a model,
// and whether it was priced. An unpriced request returns (0, false); the
// caller counts it as unpriced, never as free. A cache hit (u.CacheHits)
// is always priced: at the model's cache_hit, else the configuration's,
// else $0, whether the table knows the model or not.
func (p *Prices) Cost(providerType, model string, u Usage) (Money, bool) {
	e, ok := p.Lookup(providerType, model)
	if !ok {
		if u.CacheHits > 0 {
			var hit Rate
			if p != nil {
				hit = p.cacheHit
			}
			return Entry{hit: hit}.Cost(u)
		}
		return 0, false
	}
	return e.Cost(u)
}

// Batch is the entry at the provider's batch prices: what a request of
// the provider's own batch API costs. An entry without batch prices is
// itself.
func (e Entry) Batch() Entry {
	if e.e != nil && e.e.batch != nil {
		return Entry{e: e.e.batch, hit: e.hit}
	}
	return e
}

// BatchCost is Cost at the provider's batch prices (Entry.Batch).
func (p *Prices) BatchCost(providerType, model string, u Usage) (Money, bool) {
	e, ok := p.Lookup(providerType, model)
	if !ok {
		return 0, false
	}
	return e.Batch().Cost(u)
}

// Model is the name of the table entry (not the alias or versioned name
// that was looked up).
func (e Entry) Model() string {
	if e.e == nil {
		return ""
	}
	return e.e.name
}

// ProviderType is the provider type the entry belongs to.
func (e Entry) ProviderType() string {
	if e.e == nil {
		return ""
	}
	return e.e.typ
}

// Source is the pricing page the entry's price comes from.
func (e Entry) Source() string {
	if e.e == nil {
		return ""
	}
	return e.e.source
}

// AsOf is the date the entry's provider prices were last checked.
func (e Entry) AsOf() string {
	if e.e == nil {
		return ""
	}
	return e.e.asOf
}

// Usage is what one request used, in the hub's terms. Counts below zero
// count as zero.
type Usage struct {
	// PromptTokens are the prompt's tokens, cached and cache-write tokens
	// included (the hub's usage.prompt_tokens). For a per-token reranker,
	// the tokens the provider reports.
	PromptTokens int64

	// CachedTokens are the prompt tokens read from the provider's cache
	// (prompt_tokens_details.cached_tokens; Anthropic's
	// cache_read_input_tokens).
	CachedTokens int64

	// CacheWriteTokens are the prompt tokens written to the provider's
	// cache (Anthropic's cache_creation_input_tokens).
	CacheWriteTokens int64

	// CacheWrite1hTokens are the CacheWriteTokens written to a cache that
	// lasts an hour (Anthropic's cache_creation.ephemeral_1h_input_tokens;
	// prompt_tokens_details.cache_write_1h_tokens).
	CacheWrite1hTokens int64

	// CompletionTokens are the answer's tokens, reasoning tokens included.
	CompletionTokens int64

	// Searches are the rerank searches of a rerank request: the search
	// units the provider billed (Cohere's meta.billed_units.search_units),
	// else 1 per request. Non-zero marks the usage as a rerank.
	Searches int64

	// EmbeddingTokens are the tokens sent to an embedding model.
	EmbeddingTokens int64

	// CacheHits are requests the gateway answered from its own response
	// cache: non-zero marks the usage as a cache hit, billed by the
	// cache_hit price alone; its tokens (those the stored answer used) are
	// not billed again.
	CacheHits int64
}

// Cost computes what usage u costs under the entry, exactly:
//
//   - the prompt's uncached tokens (PromptTokens − CachedTokens −
//     CacheWriteTokens, not below zero) at the input rate, cached tokens at
//     the cached rate and cache-write tokens at the cache_write rate, those
//     of them written for an hour (CacheWrite1hTokens) at the
//     cache_write_1h rate, so no token is billed twice; completion tokens
//     (reasoning included) at the output rate; embedding tokens at the
//     embedding rate;
//   - a rerank (Searches > 0) is billed by its searches at the search rate
//     when the entry has one, its tokens then not billed; otherwise by its
//     prompt tokens at the input rate;
//   - a long-context tier replaces the rates for the whole request when
//     PromptTokens is above its threshold;
//   - a cache hit (CacheHits > 0) is billed by its hits at the entry's
//     cache_hit rate (per 1,000), else the configuration's, else nothing:
//     always priced, and nothing else of the usage is billed.
//
// ok is false, and the cost 0, when a quantity the usage has is one the
// entry has no rate for (completion tokens of an embedding-only entry, a
// rerank with neither a search rate nor tokens to bill, …): the request is
// unpriced rather than partly free. The products are summed in pico-dollars
// and rounded once, half up, to a nano-dollar; a total beyond an int64 of
// nano-dollars saturates. It allocates nothing.
func (e Entry) Cost(u Usage) (cost Money, ok bool) {
	if u.CacheHits > 0 {
		hit := e.hit
		if e.e != nil && e.e.cacheHit != nil {
			hit = *e.e.cacheHit
		}
		// One Rate unit per 1,000 hits is a nano-dollar per hit, as for
		// searches.
		var sum picos
		sum.add(u.CacheHits, int64(hit)*1000)
		return sum.nanos(), true
	}
	if e.e == nil {
		return 0, false
	}
	prompt := max(u.PromptTokens, 0)
	cached := max(u.CachedTokens, 0)
	write := max(u.CacheWriteTokens, 0)
	write1h := min(max(u.CacheWrite1hTokens, 0), write)
	completion := max(u.CompletionTokens, 0)
	searches := max(u.Searches, 0)
	embedding := max(u.EmbeddingTokens, 0)

	r := &e.e.base
	for i := len(e.e.tiers) - 1; i >= 0; i-- {
		if prompt > e.e.tiers[i].above {
			r = &e.e.tiers[i].rates
			break
		}
	}

	var sum picos
	ok = true
	if searches > 0 {
		switch {
		case r.has&hasSearch != 0:
			// A search-billed rerank: one Rate unit per 1,000 searches is a
			// nano-dollar, 1,000 pico-dollars, per search.
			sum.add(searches, int64(r.search)*1000)
			prompt, cached, write, write1h = 0, 0, 0, 0
		case prompt == 0:
			ok = false
		}
	}
	uncached := max(prompt-cached-write, 0)
	ok = sum.charge(uncached, r.input, r.has&hasInput != 0) && ok
	ok = sum.charge(cached, r.cached, r.has&hasCached != 0) && ok
	ok = sum.charge(write-write1h, r.cacheWrite, r.has&hasCacheWrite != 0) && ok
	ok = sum.charge(write1h, r.cacheWrite1h, r.has&hasCacheWrite1h != 0) && ok
	ok = sum.charge(completion, r.output, r.has&hasOutput != 0) && ok
	ok = sum.charge(embedding, r.embedding, r.has&hasEmbedding != 0) && ok
	if !ok {
		return 0, false
	}
	return sum.nanos(), true
}

// picos is an unsigned 128-bit sum of pico-dollars.
type picos struct{ hi, lo uint64 }

// add adds qty × rate pico-dollars (both not negative).
func (p *picos) add(qty, rate int64) {
	hi, lo := bits.Mul64(uint64(qty), uint64(rate))
	var c uint64
	p.lo, c = bits.Add64(p.lo, lo, 0)
	p.hi, _ = bits.Add64(p.hi, hi, c)
}

// charge adds qty tokens at a rate per million tokens (one Rate unit per
// million tokens is one pico-dollar per token). It reports false when there
// are tokens to charge and no rate.
func (p *picos) charge(qty int64, rate Rate, has bool) bool {
	if qty == 0 {
		return true
	}
	if !has {
		return false
	}
	p.add(qty, int64(rate))
	return true
}

// nanos rounds the sum to nano-dollars, half up, saturating at the largest
// Money.
func (p picos) nanos() Money {
	lo, c := bits.Add64(p.lo, 500, 0)
	hi := p.hi + c
	if hi >= 1000 {
		return math.MaxInt64
	}
	q, _ := bits.Div64(hi, lo, 1000)
	if q > math.MaxInt64 {
		return math.MaxInt64
	}
	return Money(q)
}

// Config is the operator's price configuration, the "prices" of the
// modelgate app: the shipped table, overridden by a file, then by inline
// entries.
type Config struct {
	// File is a JSON price file in the shipped table's shape (see the
	// README's Prices section), read when the configuration loads. Its
	// entries replace shipped entries of the same name whole and add new
	// ones. Default: none.
	File string `json:"file,omitempty"`

	// Models are price entries keyed "<provider type>/<model>" (the model
	// may itself contain '/'), applied after the file, replacing entries of
	// the same name whole. Default: none.
	Models map[string]*Price `json:"models,omitempty"`

	// CacheHit is the price of 1,000 requests answered from the gateway's
	// response cache, for every model whose entry sets no cache_hit of its
	// own. Default: nothing ($0): a hit costs the gateway no provider call.
	CacheHit *Rate `json:"cache_hit,omitempty"`
}

// InlineTable returns the inline entries (Models) as a Table, nil when
// there are none, and fails on a key that is not "<type>/<model>".
func (c *Config) InlineTable() (*Table, error) {
	if c == nil || len(c.Models) == 0 {
		return nil, nil
	}
	t := &Table{Providers: make(map[string]*ProviderPrices)}
	for _, key := range sortedKeys(c.Models) {
		typ, model, err := splitKey(key)
		if err != nil {
			return nil, err
		}
		pp := t.Providers[typ]
		if pp == nil {
			pp = &ProviderPrices{Models: make(map[string]*Price)}
			t.Providers[typ] = pp
		}
		pp.Models[model] = c.Models[key]
	}
	if err := t.Validate(); err != nil {
		return nil, err
	}
	return t, nil
}

// splitKey splits "<type>/<model>" at the first '/'.
func splitKey(key string) (typ, model string, err error) {
	typ, model, found := strings.Cut(key, "/")
	if !found || typ == "" || model == "" {
		return "", "", fmt.Errorf("price entry %q: name it <provider type>/<model>, such as openai/gpt-4o", key)
	}
	return typ, model, nil
}

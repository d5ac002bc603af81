package caddymodule

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/tidwall/gjson"
	"go.uber.org/zap"

	"github.com/modelgate/modelgate/keys"
	"github.com/modelgate/modelgate/pricing"
	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/quota"
	"github.com/modelgate/modelgate/state"
	"github.com/modelgate/modelgate/usage"
)

// This file puts limits, budgets and usage on the request path (DESIGN.md
// §2c): before a request reaches a provider its key and the key's owner
// are admitted by the quota engine (quota/), which checks and counts every
// rate limit and reserves the estimated cost from every budget at once;
// after it, the reservation gives way to what the answer cost, and the
// usage records (usage/) count it.

// usagePrefix is where the usage records live in the app's storage.
const usagePrefix = "modelgate/usage"

// provisionQuota makes the usage recorder and the quota engine on the
// app's storage and state. With a shared state, the engine leases large
// limits and budgets to this instance in slices (quota.Leasing), and a
// second engine on an in-process state stands by: while the shared one
// cannot be reached, limits and budgets count within what this instance
// holds, then on this instance alone, rather than not at all.
func (a *App) provisionQuota() error {
	id, err := caddy.InstanceID()
	if err != nil {
		return fmt.Errorf("usage: instance ID: %v", err)
	}
	a.usage, err = usage.New(a.storage, usage.Options{Instance: id.String(), Prefix: usagePrefix, Logger: a.logger.Named("usage")})
	if err != nil {
		return fmt.Errorf("usage: %v", err)
	}
	qc := quota.Config{State: a.state, Spender: a.usage}
	if a.stateShared {
		qc.Lease, qc.Logger = a.Limits.leasing(), a.logger.Named("limits")
	}
	if a.quota, err = quota.New(qc); err != nil {
		return fmt.Errorf("limits: %v", err)
	}
	if a.stateShared {
		v, _, err := localStates.LoadOrNew(a.storageID+"#standby", func() (caddy.Destructor, error) {
			return localState{state.NewLocal()}, nil
		})
		if err != nil {
			return err
		}
		prev := a.closeState
		a.closeState = func() error {
			_, _ = localStates.Delete(a.storageID + "#standby")
			return prev()
		}
		if a.standbyQuota, err = quota.New(quota.Config{State: v.(localState).State, Spender: standbySpender{a}}); err != nil {
			return fmt.Errorf("limits: %v", err)
		}
	}
	return a.Limits.provision()
}

// errStateDown is what the standby's budgets are told while the shared
// state is known unreachable.
var errStateDown = errors.New("the shared state and its storage are unreachable: the usage records cannot be read")

// standbySpender gives the standby engine's budgets the usage records,
// except while the shared state is known unreachable: the records are in
// its storage, on the same Redis, and reading them would make every
// budgeted request wait the storage's timeout, several times over (8 s and
// more with Redis hanging), only to fail. It fails at once instead, and the
// request is served without its budget, as when the records cannot be read
// (see admitQuota).
type standbySpender struct{ a *App }

func (s standbySpender) Spent(ctx context.Context, by usage.Dimension, id string, from, to time.Time) (pricing.Money, error) {
	if s.a.health.stateDown.Load() {
		return 0, errStateDown
	}
	return s.a.usage.Spent(ctx, by, id, from, to)
}

// countedAs is the id key is counted under in the usage records and the
// limits: a managed key's id, or "static:<name>" for a static key (managed
// key ids never hold a colon).
func (k *Key) countedAs() string {
	if k.ID != "" {
		return k.ID
	}
	return "static:" + k.Name
}

// subjects are what key's requests count against: the key, under its own
// policy or the configured one, and its owner.
func (a *App) subjects(key *Key) quota.Subjects {
	s := quota.Subjects{Key: quota.Subject{ID: key.countedAs(), Name: key.Name}}
	lc := a.Limits
	kp := lc.keyPolicy(key)
	s.Key.Limits, s.Key.Budget = quotaLimits(kp.Limits), lc.budget(kp.Budget)
	if key.Owner != "" {
		op := lc.ownerPolicy(key.Owner)
		s.Owner = quota.Subject{ID: key.Owner, Name: key.Owner, Limits: quotaLimits(op.Limits), Budget: lc.budget(op.Budget)}
	}
	return s
}

func quotaLimits(l *keys.Limits) quota.Limits {
	if l == nil {
		return quota.Limits{}
	}
	return quota.Limits{RequestsPerMinute: l.RequestsPerMinute, TokensPerMinute: l.TokensPerMinute, Concurrent: l.ConcurrentRequests}
}

// budget converts a validated budget; the amounts of the configured ones
// are parsed once, at provision.
func (lc *LimitsConfig) budget(b *keys.Budget) quota.Budget {
	if b == nil {
		return quota.Budget{}
	}
	if lc != nil {
		if qb, ok := lc.parsed[*b]; ok {
			return qb
		}
	}
	amount, err := pricing.ParseMoney(b.USD)
	if err != nil {
		return quota.Budget{} // refused by ValidatePolicy before it is stored
	}
	return quota.Budget{Amount: amount, Period: quota.Period(b.Period)}
}

// enforced reports whether s has anything to check: a request of a key
// and owner without limits or budgets costs the state nothing.
func enforced(s *quota.Subjects) bool {
	return s.Key.Limits != (quota.Limits{}) || s.Key.Budget.Amount > 0 ||
		s.Owner.Limits != (quota.Limits{}) || s.Owner.Budget.Amount > 0
}

// budgeted reports whether the key or the owner of s has a budget.
func budgeted(s *quota.Subjects) bool { return s.Key.Budget.Amount > 0 || s.Owner.Budget.Amount > 0 }

// estimated reports whether a limit or a budget of s counts what a
// request is expected to use: tokens per minute, or a budget.
func estimated(s *quota.Subjects) bool {
	return s.Key.Limits.TokensPerMinute > 0 || s.Owner.Limits.TokensPerMinute > 0 || budgeted(s)
}

// batchLineKey marks the context of a batch line's request: it counts
// against budgets, not against rate limits.
type batchLineKey struct{}

// admission is a request's admission by the quota engine: done is called
// once, when it ends. The zero admission admits without counting.
type admission struct {
	adm *quota.Admission
	est estimate
}

// estimate is what a request is expected to use before it is sent.
type estimate struct {
	tokens int64 // counted against tokens per minute
	cost   pricing.Money
	priced bool // every target that may serve it has a price
}

// outputAllowance is the answer a request without a maximum is expected to
// cost: what its budget reservation counts for the output.
const outputAllowance = 1000

// estimateCall estimates what c will use: its input by its text (see
// estimateInputTokens), its output by the maximum it asks for, priced at
// the most expensive of the targets that may serve it.
func (a *App) estimateCall(c *call, targets []target) estimate {
	in, maxOut := estimateBody(c.body)
	e := estimate{tokens: in + maxOut, priced: true}
	var u pricing.Usage
	switch c.endpoint.label {
	case endpointEmbeddings.label:
		u.EmbeddingTokens = in
	case endpointRerank.label:
		u.Searches = 1
	default:
		u.PromptTokens, u.CompletionTokens = in, maxOut
		if maxOut == 0 {
			u.CompletionTokens = outputAllowance
		}
	}
	for _, t := range targets {
		if !c.endpoint.serves(t.provider) {
			continue
		}
		cost, ok := a.prices.Cost(t.provider.typ, t.model, u)
		if !ok {
			e.priced = false
			continue
		}
		e.cost = max(e.cost, cost)
	}
	return e
}

// maxOutputFields are the fields a request asks for its maximum output
// with, the first present (and a positive number) winning.
var maxOutputFields = [...]string{"max_completion_tokens", "max_tokens", "max_output_tokens"}

// estimateBody reads in one pass what estimateCall needs of a request
// body: its input tokens (estimateInputTokens) and the maximum output it
// asks for (the first of maxOutputFields at its top level that is a
// positive number; 0 for none).
//
// It scans the bytes once, keeping only which containers it is in: a walk
// with gjson's ForEach reads every nested value once per level above it,
// and request bodies nest (messages, content parts, tool calls). The body
// has been checked to be JSON; on a broken one it returns some estimate,
// never panics, and never reads past the end.
func estimateBody(body []byte) (in, maxOut int64) {
	// Every variable is the loop's own (no closure shares them), so that
	// they stay in registers: the loop runs for every byte outside strings.
	var (
		stack     [16]bool
		objects   = stack[:0] // the containers we are in: true for an object
		expectKey bool        // in an object, before a key
		skip      int         // > 0: inside the value of a "model" field, this deep
		skipNext  bool        // the next value is a "model" field's
		outNext   = -1        // the next value is this maxOutputFields' one
		outs      [len(maxOutputFields)]string
		seen      [len(maxOutputFields)]bool
	)
	for i := 0; i < len(body); i++ {
		raw := "" // a number's text
		switch c := body[i]; c {
		case '"':
			end := providers.SkipString(body, i)
			if end < 0 {
				return in, maxOutOf(outs)
			}
			start := i + 1
			i = end - 1 // the closing quote
			if skip > 0 {
				continue
			}
			str := providers.InPlace(body[start:i])
			if bytes.IndexByte(body[start:i], '\\') >= 0 {
				str = gjson.Parse(providers.InPlace(body[start-1 : i+1])).Str
			}
			if expectKey {
				expectKey = false
				skipNext = str == "model"
				if len(objects) == 1 {
					for j, f := range maxOutputFields {
						if str == f {
							outNext = j
						}
					}
				}
				continue
			}
			if !skipNext {
				in += stringTokens(str)
			}
		case '{', '[':
			switch {
			case skip > 0:
				skip++
				continue
			case skipNext:
				skip = 1
			default:
				objects = append(objects, c == '{')
				expectKey = c == '{'
			}
		case '}', ']':
			switch {
			case skip > 0:
				skip--
			case len(objects) > 0:
				objects = objects[:len(objects)-1]
				expectKey = false
			}
			continue
		case ',':
			if skip == 0 && len(objects) > 0 {
				expectKey = objects[len(objects)-1]
			}
			continue
		case ':', ' ', '\t', '\n', '\r':
			continue
		default: // a number, true, false or null
			start := i
			for i+1 < len(body) && !jsonDelimiter[body[i+1]] {
				i++
			}
			if skip > 0 {
				continue
			}
			if c == '-' || c >= '0' && c <= '9' {
				raw = providers.InPlace(body[start : i+1])
			}
		}
		// A value (its start, for a container) ends the field it is of.
		skipNext = false
		if outNext >= 0 {
			if !seen[outNext] {
				seen[outNext], outs[outNext] = true, raw
			}
			outNext = -1
		}
	}
	return in, maxOutOf(outs)
}

// jsonDelimiter marks the bytes that end a number, true, false or null.
var jsonDelimiter = [256]bool{',': true, ':': true, ']': true, '}': true, ' ': true, '\t': true,
	'\n': true, '\r': true, '"': true, '{': true, '[': true}

// maxOutOf is the maximum output of a request whose maxOutputFields'
// values are outs (the numbers' texts; "" for none or another type).
func maxOutOf(outs [len(maxOutputFields)]string) int64 {
	for _, raw := range outs {
		if raw == "" {
			continue
		}
		if n, ok := digits(raw); ok {
			if n > 0 {
				return n
			}
			continue
		}
		if v := gjson.Parse(raw); v.Type == gjson.Number && v.Int() > 0 {
			return v.Int()
		}
	}
	return 0
}

// digits reads a JSON number written in up to 18 decimal digits alone,
// how nearly every maximum and token count is written; ok is false for
// anything else (a sign, a fraction, an exponent, another type), which
// the callers leave to gjson.
func digits(s string) (n int64, ok bool) {
	if len(s) == 0 || len(s) > 18 {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		d := s[i] - '0'
		if d > 9 {
			return 0, false
		}
		n = n*10 + int64(d)
	}
	return n, true
}

// estimateInputTokens estimates the input tokens of a request body of any
// of the APIs: every string value by providers.EstimateTextTokens, except
// what is binary (a data: URL, base64) — an image or a document, counted
// as imageTokens — and the names of fields and the values of "model". It
// is meant for limits, not bills: it errs high on JSON-heavy bodies such
// as tool schemas.
func estimateInputTokens(body []byte) int64 {
	in, _ := estimateBody(body)
	return in
}

// imageTokens is what an image or a document in a request is counted as:
// about the cost of the largest image Anthropic and OpenAI take unresized.
const imageTokens = 1600

func stringTokens(s string) int64 {
	if len(s) > 1024 {
		head := s[:1024]
		if len(head) >= 5 && head[:5] == "data:" || !containsSpace(head) {
			return imageTokens
		}
	}
	return int64(providers.EstimateTextTokens(s))
}

func containsSpace(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == ' ' || s[i] == '\n' {
			return true
		}
	}
	return false
}

// admitQuota admits a request of key (live, or a batch line) or refuses
// it, answering the client. It returns the zero admission and true when
// nothing applies. (An admission is a value: it travels in the settling
// closure without an allocation of its own.)
func (a *App) admitQuota(w http.ResponseWriter, r *http.Request, key *Key, c *call, targets []target) (admission, bool) {
	if key == nil || a.quota == nil || c.endpoint.free {
		return admission{}, true
	}
	s := a.subjects(key)
	batchLine := r.Context().Value(batchLineKey{}) != nil
	if batchLine {
		s.Key.Limits, s.Owner.Limits = quota.Limits{}, quota.Limits{}
	}
	if !enforced(&s) {
		return admission{}, true
	}
	// Only tokens per minute and budgets count what a request is expected
	// to use; limits of requests and of concurrency need no estimate.
	var est estimate
	if estimated(&s) {
		est = a.estimateCall(c, targets)
		if !est.priced && budgeted(&s) && !a.Limits.allowUnpriced() {
			refuseUnpriced(w, c, key, s)
			return admission{}, false
		}
	}
	ask := quota.Ask{EstimatedTokens: est.tokens, EstimatedCost: est.cost, Rate: !batchLine}
	q := a.quota
	var adm *quota.Admission
	var ref *quota.Refusal
	var err error
	if a.standbyQuota != nil && a.health.stateDown.Load() {
		// Known to be unreachable (watchState, or an earlier request):
		// what this instance holds of the limits, else the standby at
		// once, rather than each request waiting for its own failure,
		// which takes the whole command timeout when Redis hangs.
		if adm = a.quota.AdmitHeld(s, ask); adm == nil {
			q = a.standbyQuota
		}
	}
	if adm == nil {
		adm, ref, err = q.Admit(r.Context(), s, ask)
	}
	if err != nil && q != a.standbyQuota && a.standbyQuota != nil {
		if StorageUnreachable(err) {
			a.setStateDown(true, err) // until watchState's next ping says otherwise
		}
		a.warnQuota(err)
		adm, ref, err = a.standbyQuota.Admit(r.Context(), s, ask)
	}
	if err != nil {
		// Nothing can count (the state and the usage records are
		// unreachable): the request is served, and the log says so.
		a.warnQuota(err)
		return admission{}, true
	}
	if ref != nil {
		a.refuse(w, c, ref)
		return admission{}, false
	}
	if !batchLine {
		if c.endpoint.apiOf() == messagesAPI {
			adm.Headers().SetAnthropic(w.Header(), time.Now())
		} else {
			adm.Headers().SetOpenAI(w.Header())
		}
	}
	return admission{adm: adm, est: est}, true
}

// refuse answers a request over a limit or a budget: 429 in the shape of
// the request's API, with its headers.
func (a *App) refuse(w http.ResponseWriter, c *call, ref *quota.Refusal) {
	metrics.refusals.WithLabelValues(ref.Limit.String(), ref.Subject.String()).Inc()
	api := c.endpoint.apiOf()
	if api == messagesAPI {
		ref.SetAnthropicHeaders(w.Header(), time.Now())
	} else {
		ref.SetOpenAIHeaders(w.Header())
	}
	writeEndpointError(w, c.endpoint, "", &providers.Error{Status: http.StatusTooManyRequests,
		Type: ref.Type(), Code: ref.Code(), Message: ref.Message()})
}

// refuseUnpriced refuses a request of a model without a price by a key
// or owner with a budget: the budget could not count what it spends.
func refuseUnpriced(w http.ResponseWriter, c *call, key *Key, s quota.Subjects) {
	scope, who := "key", "key "+strconv.Quote(key.Name)
	if s.Key.Budget.Amount == 0 {
		scope, who = "owner", "owner "+strconv.Quote(key.Owner)
	}
	metrics.refusals.WithLabelValues("unpriced", scope).Inc()
	writeEndpointError(w, c.endpoint, "", &providers.Error{Status: http.StatusForbidden, Type: "invalid_request_error",
		Code: "model_not_priced", Param: "model",
		Message: fmt.Sprintf("the model %q has no price, and the budget of %s could not count what it spends: use a priced model, or ask the gateway's operator to price this one", c.model, who)})
}

var lastQuotaWarning atomic.Int64

// warnQuota logs, at most every 10 seconds, that limits could not be
// checked.
func (a *App) warnQuota(err error) {
	now := time.Now().UnixMilli()
	if last := lastQuotaWarning.Load(); now-last < 10_000 || !lastQuotaWarning.CompareAndSwap(last, now) {
		return
	}
	msg := "limits and budgets cannot be checked; the request is served without them"
	if a.standbyQuota != nil {
		msg = "the shared state is unreachable: limits and budgets count on this instance only"
	}
	a.logger.Warn(msg, zap.Error(err))
}

// done settles an admission with what the request used: its actual tokens
// and cost (the estimate when the answer said nothing, so a budget is not
// passed by answers without usage). m is nil when no provider answered.
func (ad admission) done(ctx context.Context, m *meter, cost pricing.Money, priced bool) {
	if ad.adm == nil {
		return
	}
	actual := quota.Actual{}
	switch {
	case m == nil: // nothing answered: nothing spent
		actual.Priced = true
	case m.usage.Known:
		actual = quota.Actual{Tokens: m.usage.total(), Cost: cost, Priced: priced}
	default:
		actual = quota.Actual{Tokens: ad.est.tokens, Cost: ad.est.cost, Priced: ad.est.priced}
	}
	_ = ad.adm.Done(ctx, actual) // which goes on when ctx is cancelled
}

// recordUsage counts a request a provider answered in the usage records,
// under the day it was admitted on.
func (a *App) recordUsage(key *Key, m *meter, ad admission, cost pricing.Money, priced bool) {
	if a.usage == nil || key == nil || m == nil {
		return
	}
	at := m.start
	if ad.adm != nil {
		at = ad.adm.At()
	}
	u := m.usage
	c := usage.Counts{Requests: 1, InputTokens: u.Prompt, CachedTokens: u.Cached, CacheWriteTokens: u.CacheWrite,
		OutputTokens: u.Completion, ReasoningTokens: u.Reasoning, Searches: u.Searches, EmbeddingTokens: u.Embedding}
	if priced {
		c.Cost = cost
	} else {
		c.Unpriced = 1
	}
	a.usage.Add(usage.Bucket{KeyID: key.countedAs(), KeyName: key.Name, Owner: key.Owner, Model: m.model,
		Provider: m.provider.name, ProviderType: m.provider.typ, Day: usage.DayOf(at)}, c)
}

// Usage sums the usage records over q: every instance's, with what this
// instance counted since its last flush.
func (a *App) Usage(ctx context.Context, q usage.Query) (usage.Report, error) {
	if a.usage == nil {
		return usage.Report{}, errors.New("usage is not recorded")
	}
	return a.usage.Query(ctx, q)
}

// KeyStatus tells how the managed key k stands against its limits and
// budget and its owner's (its own policy, else the configured one): what
// is left now, and of the budgets what is spent, reserved and left.
func (a *App) KeyStatus(ctx context.Context, k keys.Key) (quota.Status, error) {
	if a.quota == nil {
		return quota.Status{}, errors.New("limits are not checked")
	}
	s := a.subjects(&Key{Name: k.Name, Owner: k.Owner, ID: k.ID, Limits: k.Limits, Budget: k.Budget})
	st, err := a.quota.Status(ctx, s)
	if err != nil && a.standbyQuota != nil {
		st, err = a.standbyQuota.Status(ctx, s)
	}
	return st, err
}

// EffectivePolicy is the policy that applies to the managed key k and to
// its owner: its own limits and budget where it has them, else the
// configured ones.
func (a *App) EffectivePolicy(k keys.Key) (key, owner keys.Policy) {
	key = a.Limits.keyPolicy(&Key{Name: k.Name, Owner: k.Owner, ID: k.ID, Limits: k.Limits, Budget: k.Budget})
	if k.Owner != "" {
		owner = a.Limits.ownerPolicy(k.Owner)
	}
	return key, owner
}

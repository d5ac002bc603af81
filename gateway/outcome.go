package gateway

import (
	"net/http"
	"strconv"
	"time"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/pricing"
	"github.com/modelgate/modelgate/providers"
)

// This file is what became of a call (Outcome): its answer or its error in
// the client's API, the retry hints, and what it used — its tokens,
// searches and the provider and model that answered — as the translators
// report it with each answer (providers.Used), streams included; nothing
// is read back out of the bytes bound for the client.

// An Outcome is what became of a call: everything the host needs, as data.
// The host may give Serve an outcome whose Header is its own (the response
// writer's header map, which the gateway then writes into), and may read
// Tried and Settled while the call is served (placeholders).
type Outcome struct {
	// Status, Header and Body are what the client gets: the answer or the
	// error in the API's shape; Body is nil when the answer was streamed
	// to the Sink (Streamed). Header holds x-request-id, retry-after(-ms)
	// and the rate-limit headers of the key.
	Status   int
	Header   http.Header
	Body     []byte
	Streamed bool

	// Err is the failure, when there is one; Retryable whether a retry may
	// succeed (429, 5xx, an unreachable provider; not a spent budget);
	// RetryAfter how long to wait before one (0: no hint).
	Err        *providers.Error
	Retryable  bool
	RetryAfter time.Duration

	// RequestID is the provider's id of its answer (x-request-id).
	RequestID string

	// Target is who answered (a provider's answer, or an error of its that
	// the client must fix): the provider and its name of the model; its
	// Provider is nil when no provider answered.
	Target Target

	// Tried are the targets tried, in order (the last one is being tried
	// while the call is served).
	Tried []Target

	// Settled is set once the call is settled, when a provider answered
	// it: then Usage is what it used (Known when the answer said), Cost
	// what it cost at the price table's rates, Priced whether the table
	// priced it.
	Settled bool
	Usage   Usage
	Cost    pricing.Money
	Priced  bool

	// Cache is what the response cache did with the call:
	// respcache.StatusHit (answered from it), StatusMiss or StatusBypass;
	// "" when the cache is off or does not serve the call.
	Cache string

	// Key is the call's key; Start is when Serve began, FirstByte when the
	// first event of a stream reached the Sink.
	Key              *Key
	Start, FirstByte time.Time

	trace *callTrace // the call's span, when it is traced (trace.go)
}

// CostText is what a settled call cost, in dollars, or "unpriced".
func (o *Outcome) CostText() string {
	if !o.Priced {
		return "unpriced"
	}
	return o.Cost.String()
}

// answer sets o to the answer body, which reached nobody yet.
func (o *Outcome) answer(body []byte) {
	o.Status, o.Body = http.StatusOK, body
}

// fail sets o to the error e in the API's shape, with its retry hints:
// e.RetryAfter, unless the provider's header (h, may be nil) says when.
func (o *Outcome) fail(a *api, e *providers.Error) {
	o.Err = e
	o.Status, o.Body = a.errorBody(e)
	o.Retryable = o.Status == http.StatusTooManyRequests || o.Status >= 500
	if e.RetryAfter > 0 && o.RetryAfter == 0 {
		o.RetryAfter = msOf(e.RetryAfter)
	}
}

// msOf is d in whole milliseconds, as retry-after-ms says it.
func msOf(d time.Duration) time.Duration { return d.Truncate(time.Millisecond) }

// setHeader is h[key] = value for a key in canonical form, without
// http.Header.Set's pass over the key.
func setHeader(h http.Header, key, value string) { h[key] = []string{value} }

// headerValue is h.Get(key) for a key in canonical form, as net/http
// stores the headers it reads and reverse_proxy those it copies: without
// Get's canonicalising pass over the key.
func headerValue(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// retryAfterHeaders sets retry-after (whole seconds, rounded up) and
// retry-after-ms for d, as OpenAI's SDKs and the batch runner read them.
func retryAfterHeaders(h http.Header, d time.Duration) {
	setHeader(h, "Retry-After", strconv.FormatInt(int64((d+time.Second-1)/time.Second), 10))
	setHeader(h, "Retry-After-Ms", strconv.FormatInt(d.Milliseconds(), 10))
}

// lookup is gjson.GetBytes without its copy of the result: every caller
// here reads a value at once and keeps nothing of the result, so it may
// point into b.
func lookup(b []byte, path string) gjson.Result {
	return gjson.Get(providers.InPlace(b), path)
}

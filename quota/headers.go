package quota

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/modelgate/modelgate/pricing"
	"github.com/modelgate/modelgate/state"
)

// RateLimit is the state of one rate limit, as response headers tell it.
type RateLimit struct {
	// Limit is the limit per minute; 0 is none (and no headers).
	Limit int64
	// Remaining is what is left of it now.
	Remaining int64
	// Reset is how long until what counts against it now has drained.
	Reset time.Duration
}

// RateLimits are the request and token limits the headers of a response
// tell of: the key's or the owner's, whichever has the fewest left.
type RateLimits struct {
	Requests RateLimit
	Tokens   RateLimit
}

// SetOpenAI sets OpenAI's headers (x-ratelimit-limit-requests,
// x-ratelimit-remaining-requests, x-ratelimit-reset-requests and the
// same for tokens; resets as Go durations such as "1s" or "6m0s") for the
// limits there are.
func (l RateLimits) SetOpenAI(h http.Header) {
	var v headerValues
	var buf [192]byte
	b := buf[:0]
	for i, r := range [2]RateLimit{l.Requests, l.Tokens} {
		if r.Limit <= 0 {
			continue
		}
		names := &openAINames[i]
		b = v.limitAndRemaining(b, names, r)
		// String does not escape: append copies it from the stack.
		b = append(b, r.Reset.Round(time.Millisecond).String()...)
		v.add(names[2], len(b))
	}
	v.set(h, b)
}

// SetAnthropic sets Anthropic's headers (anthropic-ratelimit-requests-limit,
// -remaining, -reset and the same for tokens; resets as RFC 3339 times
// from now) for the limits there are.
func (l RateLimits) SetAnthropic(h http.Header, now time.Time) {
	var v headerValues
	var buf [192]byte
	b := buf[:0]
	for i, r := range [2]RateLimit{l.Requests, l.Tokens} {
		if r.Limit <= 0 {
			continue
		}
		names := &anthropicNames[i]
		b = v.limitAndRemaining(b, names, r)
		// In whole seconds, rounded up: a reset must not come early.
		at := now.Add(r.Reset).UTC()
		if t := at.Truncate(time.Second); t.Before(at) {
			at = t.Add(time.Second)
		}
		b = at.AppendFormat(b, time.RFC3339)
		v.add(names[2], len(b))
	}
	v.set(h, b)
}

// The names of the rate-limit headers, for requests and for tokens:
// limit, remaining, reset; in the canonical form http.Header.Set would
// give them.
var (
	openAINames = [2][3]string{
		{"X-Ratelimit-Limit-Requests", "X-Ratelimit-Remaining-Requests", "X-Ratelimit-Reset-Requests"},
		{"X-Ratelimit-Limit-Tokens", "X-Ratelimit-Remaining-Tokens", "X-Ratelimit-Reset-Tokens"},
	}
	anthropicNames = [2][3]string{
		{"Anthropic-Ratelimit-Requests-Limit", "Anthropic-Ratelimit-Requests-Remaining", "Anthropic-Ratelimit-Requests-Reset"},
		{"Anthropic-Ratelimit-Tokens-Limit", "Anthropic-Ratelimit-Tokens-Remaining", "Anthropic-Ratelimit-Tokens-Reset"},
	}
)

// headerValues sets up to six headers whose values were appended one
// after the other to one buffer, with two allocations (one string holding
// every value, one array holding every []string) where http.Header.Set
// makes four per header: these headers go on every admitted request.
type headerValues struct {
	names [6]string
	ends  [6]int // where each value ends in the buffer
	n     int
}

// add notes that the value of the header name ends at end.
func (v *headerValues) add(name string, end int) {
	v.names[v.n], v.ends[v.n] = name, end
	v.n++
}

// limitAndRemaining appends r's limit and what remains of it to b, as the
// values of names[0] and names[1].
func (v *headerValues) limitAndRemaining(b []byte, names *[3]string, r RateLimit) []byte {
	b = strconv.AppendInt(b, r.Limit, 10)
	v.add(names[0], len(b))
	b = strconv.AppendInt(b, r.Remaining, 10)
	v.add(names[1], len(b))
	return b
}

// set sets the headers to their values in b, replacing any they had.
func (v *headerValues) set(h http.Header, b []byte) {
	if v.n == 0 {
		return
	}
	all := string(b)
	vals := make([]string, v.n)
	start := 0
	for i := range v.n {
		vals[i] = all[start:v.ends[i]]
		start = v.ends[i]
		h[v.names[i]] = vals[i : i+1 : i+1]
	}
}

// rateLimits picks, for requests and for tokens, the limit with the fewest
// left. When the Apply was refused, the takes that fit were not counted:
// their results, which count the request, are given it back.
func rateLimits(plans []plan, res []state.Result, refused bool) RateLimits {
	var out RateLimits
	pick := func(dst *RateLimit, i int, n int64) {
		if i < 0 {
			return
		}
		t := res[i].Taken
		r := RateLimit{Limit: t.Limit, Remaining: t.Remaining, Reset: t.Reset}
		if refused && t.OK {
			r.Remaining = min(r.Remaining+n, r.Limit)
		}
		if dst.Limit == 0 || r.Remaining < dst.Remaining {
			*dst = r
		}
	}
	for i := range plans {
		p := &plans[i]
		pick(&out.Requests, p.rpm, 1)
		pick(&out.Tokens, p.tpm, p.tokens)
	}
	return out
}

// Limit is a limit that refuses a request.
type Limit uint8

// The limits.
const (
	LimitRequests Limit = iota + 1
	LimitTokens
	LimitConcurrent
	LimitBudget
)

func (l Limit) String() string {
	switch l {
	case LimitRequests:
		return "requests"
	case LimitTokens:
		return "tokens"
	case LimitConcurrent:
		return "concurrent"
	case LimitBudget:
		return "budget"
	}
	return "Limit(" + strconv.Itoa(int(l)) + ")"
}

// Refusal says why a request was refused: always a 429, in OpenAI's shape
// (Type, Code, Message) with SetOpenAIHeaders, or in Anthropic's with
// SetAnthropicHeaders.
type Refusal struct {
	// Limit is the limit that refused, of the subject Subject (its ID
	// and Name).
	Limit   Limit
	Subject Kind
	ID      string
	Name    string

	// For rate limits: the limit (per minute, or in flight), what counts
	// against it now, and what the request asked.
	Max, Used, Asked int64

	// For budgets: the budget, what is spent or reserved in the period,
	// what the request would reserve, and when the period ends (zero for
	// a total budget, and for a request estimated at more than the
	// budget, which no period would admit).
	Budget    Budget
	Spent     pricing.Money
	Estimated pricing.Money
	Resets    time.Time

	// RetryAfter is when trying again can succeed, nothing else being
	// counted meanwhile: the retry-after header. 0 when it never can (a
	// request larger than the limit, a total budget).
	RetryAfter time.Duration

	// Headers are what the x-ratelimit-* (or anthropic-ratelimit-*)
	// headers say.
	Headers RateLimits
}

// Retryable reports whether the client should try again by itself: not
// for a budget (OpenAI's insufficient_quota: it needs a person), nor for
// a request that can never fit.
func (r *Refusal) Retryable() bool { return r.Limit != LimitBudget && r.RetryAfter > 0 }

// Type is the OpenAI error type: insufficient_quota for a budget,
// rate_limit_error otherwise.
func (r *Refusal) Type() string {
	if r.Limit == LimitBudget {
		return "insufficient_quota"
	}
	return "rate_limit_error"
}

// Code is the OpenAI error code: insufficient_quota for a budget,
// rate_limit_exceeded otherwise.
func (r *Refusal) Code() string {
	if r.Limit == LimitBudget {
		return "insufficient_quota"
	}
	return "rate_limit_exceeded"
}

// Error returns Message.
func (r *Refusal) Error() string { return r.Message() }

// Message says what refused, for the error body. It never holds a secret:
// the key's name and id only.
func (r *Refusal) Message() string {
	who := r.Subject.String() + " " + strconv.Quote(cmpOr(r.Name, r.ID))
	switch r.Limit {
	case LimitRequests, LimitTokens:
		what := r.Limit.String() + " per minute"
		if r.RetryAfter <= 0 {
			return fmt.Sprintf("Request too large for %s on %s: limit %d, requested %d. Ask for fewer tokens (max_tokens) or have the limit raised.",
				what, who, r.Max, r.Asked)
		}
		return fmt.Sprintf("Rate limit reached for %s on %s: limit %d, used %d, requested %d. Please try again in %s.",
			what, who, r.Max, r.Used, r.Asked, wait(r.RetryAfter))
	case LimitConcurrent:
		return fmt.Sprintf("Too many concurrent requests on %s: limit %d in flight. Please try again in %s.", who, r.Max, wait(r.RetryAfter))
	}
	per := "in total"
	switch r.Budget.Period {
	case Day:
		per = "per day"
	case Month:
		per = "per month"
	}
	var msg string
	switch {
	case r.Estimated > r.Budget.Amount:
		// Nothing spent would make room for it.
		return fmt.Sprintf("This request, estimated at $%s, is more than the whole budget of %s ($%s %s). Ask for fewer tokens (max_tokens, n) or send less, or have the budget raised.",
			r.Estimated, who, r.Budget.Amount, per)
	case r.Spent < r.Budget.Amount:
		msg = fmt.Sprintf("This request, estimated at $%s, would pass the budget of %s: $%s left of $%s %s ($%s spent or reserved). Ask for fewer tokens (max_tokens, n) or send less.",
			r.Estimated, who, r.Budget.Amount-r.Spent, r.Budget.Amount, per, r.Spent)
	default:
		msg = fmt.Sprintf("You exceeded the budget of %s: $%s %s, $%s spent or reserved, and this request is estimated at $%s.",
			who, r.Budget.Amount, per, r.Spent, r.Estimated)
	}
	if !r.Resets.IsZero() {
		msg += " The budget resets at " + r.Resets.UTC().Format(time.RFC3339) + "."
	}
	return msg
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// wait writes a delay as Codex and people read it: "900ms", "1.5s", "90s".
func wait(d time.Duration) string {
	if d < time.Second {
		return strconv.FormatInt(max(1, (d+time.Millisecond-1).Milliseconds()), 10) + "ms"
	}
	s := strconv.FormatFloat(d.Round(time.Millisecond).Seconds(), 'f', -1, 64)
	return strings.TrimSuffix(s, ".0") + "s"
}

// SetOpenAIHeaders sets the headers of the 429 for OpenAI's SDKs:
// retry-after (whole seconds, rounded up) and retry-after-ms when there is
// a time to retry after, x-should-retry: false when retrying by itself
// cannot help, and the x-ratelimit-* headers.
func (r *Refusal) SetOpenAIHeaders(h http.Header) {
	r.Headers.SetOpenAI(h)
	r.setRetry(h)
}

// SetAnthropicHeaders sets the headers of the 429 for Anthropic's SDKs:
// retry-after, x-should-retry as for OpenAI, and the
// anthropic-ratelimit-* headers (resets from now).
func (r *Refusal) SetAnthropicHeaders(h http.Header, now time.Time) {
	r.Headers.SetAnthropic(h, now)
	r.setRetry(h)
}

func (r *Refusal) setRetry(h http.Header) {
	if r.RetryAfter > 0 {
		secs := (r.RetryAfter + time.Second - 1) / time.Second
		h.Set("retry-after", strconv.FormatInt(int64(max(1, secs)), 10))
		h.Set("retry-after-ms", strconv.FormatInt(max(1, (r.RetryAfter+time.Millisecond-1).Milliseconds()), 10))
	}
	if !r.Retryable() {
		h.Set("x-should-retry", "false")
	}
}

// concurrentRetry is the retry-after of a request refused for
// concurrency: a slot frees when another request ends, which nothing
// predicts.
const concurrentRetry = time.Second

// refusal builds the Refusal of a refused Apply: a budget first (it needs
// a person), then the rate limit to wait longest for (one that can never
// fit first); the key before its owner.
func (q *Quota) refusal(plans []plan, res []state.Result, at time.Time) *Refusal {
	var best *Refusal
	rank := func(r *Refusal) time.Duration {
		switch {
		case r.Limit == LimitBudget:
			return 1<<63 - 1
		case r.RetryAfter <= 0:
			return 1<<63 - 2
		}
		return r.RetryAfter
	}
	consider := func(r *Refusal) {
		if best == nil || rank(r) > rank(best) {
			best = r
		}
	}
	for i := range plans {
		p := &plans[i]
		base := Refusal{Subject: p.kind, ID: p.s.ID, Name: p.s.Name}
		if p.rs >= 0 && !res[p.rs].OK && (p.seeded || !res[p.spent].Missing) {
			r := base
			r.Limit, r.Budget, r.Spent, r.Estimated = LimitBudget, p.s.Budget, pricing.Money(res[p.rs].Total), pricing.Money(p.reserve)
			// A request estimated at more than the whole budget fits in
			// no period: no time to retry after.
			if !p.b.end.IsZero() && p.reserve <= int64(p.s.Budget.Amount) {
				r.Resets, r.RetryAfter = p.b.end, p.b.end.Sub(at)
			}
			consider(&r)
		}
		for _, t := range []struct {
			i     int
			limit Limit
		}{{p.rpm, LimitRequests}, {p.tpm, LimitTokens}} {
			if t.i < 0 || res[t.i].OK {
				continue
			}
			tk := res[t.i].Taken
			r := base
			r.Limit, r.Max, r.Used, r.RetryAfter = t.limit, tk.Limit, tk.Count, max(tk.RetryAfter, 0)
			r.Asked = 1
			if t.limit == LimitTokens {
				r.Asked = p.tokens
			}
			consider(&r)
		}
		if p.conc >= 0 && !res[p.conc].OK {
			r := base
			r.Limit, r.Max, r.Used, r.Asked, r.RetryAfter = LimitConcurrent, p.s.Limits.Concurrent, res[p.conc].Slots, 1, concurrentRetry
			consider(&r)
		}
	}
	if best != nil {
		best.Headers = rateLimits(plans, res, true)
	}
	return best
}

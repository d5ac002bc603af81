package routing

import (
	"net/http"
	"time"
)

// Kind is what became of an attempt, as the host saw it.
type Kind uint8

// The kinds of attempts.
const (
	// Answered: the provider answered with an HTTP status (Result.Status),
	// and the answer (a stream too) ended well. 2xx and the client's own
	// 4xx count as the target's success, 429 as a rate limit, 408 and 5xx
	// as failures.
	Answered Kind = iota
	// Refused: the provider could not be reached (connection refused, DNS,
	// TLS handshake): nothing was sent.
	Refused
	// TimedOut: no answer in time (no response headers, or a stream's
	// first byte not within the target's first-token timeout).
	TimedOut
	// Reset: the connection was reset or closed before the answer ended
	// (before or after its first byte).
	Reset
	// Stalled: a stream went silent past the target's idle timeout after
	// its first byte.
	Stalled
	// Malformed: an answer came that could not be read or translated.
	Malformed
	// Canceled: the client went away; this says nothing of the target.
	Canceled
)

var kindNames = [...]string{Answered: "answered", Refused: "refused", TimedOut: "timed_out", Reset: "reset",
	Stalled: "stalled", Malformed: "malformed", Canceled: "canceled"}

// String names the kind in logs.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "unknown"
}

// Result is what the host reports of one attempt.
type Result struct {
	Kind Kind
	// Status is the provider's HTTP status, for Answered.
	Status int
	// Latency is how long the whole answer took, from sending the
	// request; TTFB is how long its first byte took. A stream's plan
	// averages TTFB (or Latency when TTFB is 0), any other plan Latency.
	// Only answers with a 2xx status that ended well are averaged.
	Latency, TTFB time.Duration
	// Header holds the answer's headers; on a 429 or 503 the router reads
	// the cool-down the provider asks for from them (see Cooldown). It is
	// not kept.
	Header http.Header
}

// outcome is how a result counts.
type outcome uint8

const (
	succeeded   outcome = iota // the target works (even if the request was the client's mistake)
	failed                     // a failure of the target: counts for its breaker
	rateLimited                // a 429: a cool-down, not a failure
	canceled                   // nothing to learn
)

func (r Result) outcome() outcome {
	switch r.Kind {
	case Answered:
		switch {
		case r.Status == http.StatusTooManyRequests:
			return rateLimited
		case r.Status == http.StatusRequestTimeout, r.Status >= 500, r.Status < 100:
			return failed
		}
		return succeeded
	case Canceled:
		return canceled
	}
	return failed
}

// Retry reports whether the request may go on to the next target: the
// target failed or is rate limited. It is the fallback rule of a host
// that has written nothing to its client yet; once a stream has started,
// nothing is retried. A success, an answer that is the client's to fix,
// or a client that left end the plan.
func (r Result) Retry() bool {
	o := r.outcome()
	return o == failed || o == rateLimited
}

// cooling reports whether the result may carry a cool-down: a 429, or an
// overloaded 503 (or Anthropic's 529).
func (r Result) cooling() bool {
	return r.Kind == Answered && (r.Status == http.StatusTooManyRequests ||
		r.Status == http.StatusServiceUnavailable || r.Status == 529)
}

// latency is the duration a plan of the given kind averages, or 0 when
// the result is not an answer to average.
func (r Result) latency(stream bool) time.Duration {
	if r.Kind != Answered || r.Status < 200 || r.Status > 299 {
		return 0
	}
	if stream && r.TTFB > 0 {
		return r.TTFB
	}
	return r.Latency
}

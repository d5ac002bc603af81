package providertest

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Chaos is a fake provider that fails the ways real providers fail, for
// tests of a gateway's circuit breakers, cool-downs and routing. It sits
// in front of a fake Server, which answers what it lets through in every
// wire format the fake speaks; its own failures take the shape of the
// format the request's path belongs to (OpenAI's, Anthropic's on
// /v1/messages, …), exactly as the fake's scripted ones do.
//
// Its Behaviour decides what happens to each request, and may be changed
// while it runs (Set). The behaviours:
//
//	Healthy()                  every request goes to the fake
//	BlackHole()                the request is read and never answered, until
//	                           the client gives up or the test ends
//	ResetMidStream()           a stream's connection is reset (TCP RST) right
//	                           after its first event; any other answer's
//	                           before its first byte
//	RateLimited(RateLimit{…})  a 429 storm, with Retry-After, retry-after-ms,
//	                           OpenAI's or Anthropic's reset headers
//	ServerErrors()             500
//	Overloaded()               503 (Anthropic's 529 overloaded_error)
//	SlowFirstToken(d)          the status and headers at once, the first byte
//	                           of the body d later
//	Slow(d)                    a working provider that takes d longer
//	Flapping(up, down, b)      healthy for up, then b for down, and so on
type Chaos struct {
	// URL is the base URL ("http://127.0.0.1:port").
	URL string
	// Fake answers the requests the chaos lets through; its Requests are
	// those.
	Fake *Server

	now    func() time.Time
	closed chan struct{} // closed when the test ends: releases what waits

	mu    sync.Mutex
	b     Behaviour
	since time.Time // when b was set: phases and storms count from it

	requests, passed, limited, failed, reset, held atomic.Int64
}

// ChaosOptions configure a Chaos.
type ChaosOptions struct {
	// Options configure the fake behind it.
	Options
	// Now is the clock that flapping phases and storms follow. Default:
	// time.Now.
	Now func() time.Time
}

// ChaosStats count what a Chaos did with the requests it received.
type ChaosStats struct {
	Requests    int64 // every request received
	Passed      int64 // handed to the fake (whatever it answered)
	RateLimited int64 // answered 429 by the chaos
	Failed      int64 // answered 500, 503 or 529 by the chaos
	Reset       int64 // connections reset
	Held        int64 // requests a black hole took
}

// StartChaos serves a Chaos with behaviour b on 127.0.0.1 until the test
// ends.
func StartChaos(tb testing.TB, b Behaviour, opts ...ChaosOptions) *Chaos {
	var o ChaosOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	c := &Chaos{Fake: New(o.Options), now: o.Now, closed: make(chan struct{})}
	if c.now == nil {
		c.now = time.Now
	}
	c.Set(b)
	hs := httptest.NewServer(c)
	c.URL = hs.URL
	c.Fake.URL = hs.URL
	tb.Cleanup(func() {
		close(c.closed)
		hs.CloseClientConnections()
		hs.Close()
	})
	return c
}

// Set changes the behaviour; flapping phases and storms start now.
func (c *Chaos) Set(b Behaviour) {
	if b == nil {
		b = Healthy()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.b, c.since = b, c.now()
}

// Stats returns the counts so far.
func (c *Chaos) Stats() ChaosStats {
	return ChaosStats{Requests: c.requests.Load(), Passed: c.passed.Load(), RateLimited: c.limited.Load(),
		Failed: c.failed.Load(), Reset: c.reset.Load(), Held: c.held.Load()}
}

// ServeHTTP applies the behaviour to one request.
func (c *Chaos) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.requests.Add(1)
	c.mu.Lock()
	b, since := c.b, c.since
	c.mu.Unlock()
	b.serve(c, w, r, since)
}

// A Behaviour is what a Chaos does with a request.
type Behaviour interface {
	// serve handles one request; since is when the behaviour was set.
	serve(c *Chaos, w http.ResponseWriter, r *http.Request, since time.Time)
}

type behaviourFunc func(c *Chaos, w http.ResponseWriter, r *http.Request, since time.Time)

func (f behaviourFunc) serve(c *Chaos, w http.ResponseWriter, r *http.Request, since time.Time) {
	f(c, w, r, since)
}

// pass hands the request to the fake.
func (c *Chaos) pass(w http.ResponseWriter, r *http.Request) {
	c.passed.Add(1)
	c.Fake.ServeHTTP(w, r)
}

// Healthy hands every request to the fake.
func Healthy() Behaviour {
	return behaviourFunc(func(c *Chaos, w http.ResponseWriter, r *http.Request, _ time.Time) { c.pass(w, r) })
}

// BlackHole reads each request and never answers it: the connection stays
// open until the client gives up (a timeout) or the test ends.
func BlackHole() Behaviour {
	return behaviourFunc(func(c *Chaos, w http.ResponseWriter, r *http.Request, _ time.Time) {
		c.held.Add(1)
		drain(r)
		select {
		case <-r.Context().Done():
		case <-c.closed:
		}
	})
}

// drain reads what is left of a request's body, at most MaxBody bytes.
func drain(r *http.Request) {
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, MaxBody))
}

// ServerErrors answers every request with a 500 in the format's shape.
func ServerErrors() Behaviour { return failWith(serverError) }

// Overloaded answers every request with a 503 in the format's shape
// (Anthropic's 529 overloaded_error on /v1/messages).
func Overloaded() Behaviour { return failWith(overloaded) }

func failWith(f fault) Behaviour {
	return behaviourFunc(func(c *Chaos, w http.ResponseWriter, r *http.Request, _ time.Time) {
		c.failed.Add(1)
		c.fail(w, r, f)
	})
}

// fail writes a fault in the shape of the request's format, with its
// request-id header.
func (c *Chaos) fail(w http.ResponseWriter, r *http.Request, f fault) {
	drain(r)
	format, _ := route(r)
	format.headers(w.Header(), "chaos"+strconv.FormatInt(c.requests.Load(), 10))
	format.fail(w, r, f)
}

// RateLimit is a 429 storm.
type RateLimit struct {
	// For is how long the storm lasts from when it was set; requests after
	// it go to the fake. 0: until the behaviour changes.
	For time.Duration
	// RetryAfter is the wait the answers announce. Default: what is left
	// of For (rounded up to a millisecond; to a second for the seconds
	// form), or a second without For.
	RetryAfter time.Duration
	// Headers are the forms the wait is announced in. Default:
	// RetryAfterSeconds.
	Headers RetryForm
}

// RetryForm is a set of ways a provider announces when to come back.
type RetryForm uint8

// The forms.
const (
	// RetryAfterSeconds: retry-after, whole seconds rounded up.
	RetryAfterSeconds RetryForm = 1 << iota
	// RetryAfterDate: retry-after as an HTTP date (whole seconds, rounded
	// up).
	RetryAfterDate
	// RetryAfterMs: retry-after-ms, milliseconds (OpenAI's SDKs read it
	// first).
	RetryAfterMs
	// OpenAIResets: OpenAI's x-ratelimit-* headers, with the requests
	// limit spent (remaining 0, reset after the wait, as a Go duration
	// such as "1.5s") and the tokens limit not (remaining above 0, reset
	// after "6m0s").
	OpenAIResets
	// AnthropicResets: Anthropic's anthropic-ratelimit-* headers, with the
	// requests limit spent (remaining 0, reset at the end of the wait, RFC
	// 3339) and the token limits not.
	AnthropicResets
)

// RateLimited answers every request with a 429 in the format's shape,
// announcing when to come back, for as long as the storm lasts.
func RateLimited(rl RateLimit) Behaviour {
	if rl.Headers == 0 {
		rl.Headers = RetryAfterSeconds
	}
	return behaviourFunc(func(c *Chaos, w http.ResponseWriter, r *http.Request, since time.Time) {
		now := c.now()
		left := since.Add(rl.For).Sub(now)
		if rl.For > 0 && left <= 0 {
			c.pass(w, r)
			return
		}
		wait := rl.RetryAfter
		if wait <= 0 {
			wait = time.Second
			if rl.For > 0 {
				wait = left
			}
		}
		wait = (wait + time.Millisecond - 1).Truncate(time.Millisecond)
		announce(w.Header(), rl.Headers, wait, now)
		c.limited.Add(1)
		c.fail(w, r, rateLimited)
	})
}

// announce sets the headers of the forms for a wait from now.
func announce(h http.Header, forms RetryForm, wait time.Duration, now time.Time) {
	secs := (wait + time.Second - 1) / time.Second
	if forms&RetryAfterSeconds != 0 {
		h.Set("Retry-After", strconv.FormatInt(int64(secs), 10))
	}
	if forms&RetryAfterDate != 0 {
		// An HTTP date has whole seconds: the next one at or after the end.
		at := now.Add(wait)
		if at.Truncate(time.Second) != at {
			at = at.Truncate(time.Second).Add(time.Second)
		}
		h.Set("Retry-After", at.UTC().Format(http.TimeFormat))
	}
	if forms&RetryAfterMs != 0 {
		h.Set("Retry-After-Ms", strconv.FormatInt(wait.Milliseconds(), 10))
	}
	if forms&OpenAIResets != 0 {
		h.Set("X-Ratelimit-Limit-Requests", "60")
		h.Set("X-Ratelimit-Remaining-Requests", "0")
		h.Set("X-Ratelimit-Reset-Requests", wait.String())
		h.Set("X-Ratelimit-Limit-Tokens", "150000")
		h.Set("X-Ratelimit-Remaining-Tokens", "149984")
		h.Set("X-Ratelimit-Reset-Tokens", "6m0s")
	}
	if forms&AnthropicResets != 0 {
		h.Set("Anthropic-Ratelimit-Requests-Limit", "50")
		h.Set("Anthropic-Ratelimit-Requests-Remaining", "0")
		h.Set("Anthropic-Ratelimit-Requests-Reset", now.Add(wait).UTC().Format(time.RFC3339Nano))
		for _, kind := range []string{"Tokens", "Input-Tokens", "Output-Tokens"} {
			h.Set("Anthropic-Ratelimit-"+kind+"-Limit", "4000000")
			h.Set("Anthropic-Ratelimit-"+kind+"-Remaining", "3999000")
			h.Set("Anthropic-Ratelimit-"+kind+"-Reset", now.Add(time.Minute).UTC().Format(time.RFC3339))
		}
	}
}

// SlowFirstToken sends the fake's status and headers at once and the
// first byte of its body d later: a stream's first event, or a whole
// answer.
func SlowFirstToken(d time.Duration) Behaviour {
	return behaviourFunc(func(c *Chaos, w http.ResponseWriter, r *http.Request, _ time.Time) {
		c.pass(&slowWriter{ResponseWriter: w, c: c, r: r, wait: d}, r)
	})
}

// slowWriter flushes the header at once and holds the first write back.
type slowWriter struct {
	http.ResponseWriter
	c       *Chaos
	r       *http.Request
	wait    time.Duration
	started bool
}

func (w *slowWriter) WriteHeader(status int) {
	w.ResponseWriter.WriteHeader(status)
	if status >= 200 {
		_ = http.NewResponseController(w.ResponseWriter).Flush()
	}
}

func (w *slowWriter) Write(p []byte) (int, error) {
	if !w.started {
		w.started = true
		t := time.NewTimer(w.wait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-w.r.Context().Done():
			return 0, w.r.Context().Err()
		case <-w.c.closed:
			return 0, http.ErrAbortHandler
		}
	}
	return w.ResponseWriter.Write(p)
}

// FlushError lets the fake's flushes through (http.ResponseController).
func (w *slowWriter) FlushError() error {
	return http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap gives http.ResponseController the writer beneath.
func (w *slowWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Slow is a working provider that takes d longer to answer: a target
// for latency routing to avoid.
func Slow(d time.Duration) Behaviour {
	return behaviourFunc(func(c *Chaos, w http.ResponseWriter, r *http.Request, _ time.Time) {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			c.pass(w, r)
		case <-r.Context().Done():
		case <-c.closed:
		}
	})
}

// ResetMidStream resets the connection (TCP RST): a stream's right after
// its first event reached the client, any other answer before its first
// byte.
func ResetMidStream() Behaviour {
	return behaviourFunc(func(c *Chaos, w http.ResponseWriter, r *http.Request, _ time.Time) {
		c.pass(&resetWriter{ResponseWriter: w, c: c}, r)
	})
}

// resetWriter passes a stream's first write and resets the connection at
// the next; an answer that is not a stream is reset at its first write,
// before its status line leaves.
type resetWriter struct {
	http.ResponseWriter
	c      *Chaos
	status int
	writes int
	gone   bool
}

func (w *resetWriter) WriteHeader(status int) {
	if w.status == 0 && status >= 200 {
		w.status = status // held back: the first write decides
	}
}

func (w *resetWriter) Write(p []byte) (int, error) {
	if w.gone {
		return 0, http.ErrHijacked
	}
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.writes++
	stream := isEventStream(w.Header().Get("Content-Type"))
	if stream && w.writes == 1 {
		w.ResponseWriter.WriteHeader(w.status)
		n, err := w.ResponseWriter.Write(p)
		_ = http.NewResponseController(w.ResponseWriter).Flush()
		return n, err
	}
	w.resetConn()
	return 0, http.ErrHijacked
}

// resetConn takes the connection over and closes it with a reset.
func (w *resetWriter) resetConn() {
	w.gone = true
	conn, _, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return
	}
	w.c.reset.Add(1)
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0) // close sends RST
	}
	_ = conn.Close()
}

func (w *resetWriter) FlushError() error {
	if w.gone || w.writes == 0 {
		return nil // nothing has left; a reset is all that will
	}
	return http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *resetWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flapping alternates: healthy for up, then failing as down behaves for
// downFor, and so on, from when it is set (by the Chaos's clock).
func Flapping(up, downFor time.Duration, down Behaviour) Behaviour {
	return behaviourFunc(func(c *Chaos, w http.ResponseWriter, r *http.Request, since time.Time) {
		period := up + downFor
		if period <= 0 || c.now().Sub(since)%period < up {
			c.pass(w, r)
			return
		}
		down.serve(c, w, r, since)
	})
}

// isEventStream reports whether a Content-Type is server-sent events.
func isEventStream(ct string) bool { return strings.HasPrefix(ct, "text/event-stream") }

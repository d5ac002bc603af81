package gateway

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/routing"
)

// This file joins the routing engine (package routing) to the attempt
// loop of serve: which target is tried next (a route), what one attempt
// measured (routing.Result), the stream timeouts an attempt runs under,
// and the answer when every target is out of rotation
// (docs/routing.md).

// route offers the targets of one call in turn: an alias's or a tracked
// "<provider>/<model>" target's through a routing.Plan, which skips the
// targets out of rotation and is told what became of each attempt;
// anything else (a bare name from a models list, the default provider)
// in the resolved order, as one target alone.
type route struct {
	plan   routing.Plan
	routed bool
	cur    *routing.Target // the target the plan offered last

	gw      *Gateway
	targets []Target // the resolved targets, when not routed
	next    int
	tried   []Target // the targets the plan offered, in order
}

// route starts routing a call to model, whose resolved targets are
// targets; stream says whether its answer is streamed.
func (g *Gateway) route(model string, targets []Target, stream bool) route {
	rt := route{gw: g, targets: targets}
	if g.router == nil {
		return rt
	}
	if pname, rest, ok := strings.Cut(model, "/"); ok && rest != "" && g.providers[pname] != nil {
		rt.plan, rt.routed = g.router.PlanTarget(model, stream)
		return rt
	}
	rt.plan, rt.routed = g.router.Plan(model, stream)
	return rt
}

// offered returns the targets tried so far (Outcome.Tried), t the last.
func (rt *route) offered(t Target) []Target {
	if !rt.routed {
		return rt.targets[:rt.next]
	}
	rt.tried = append(rt.tried, t)
	return rt.tried
}

// nextTarget returns the next target to try, and its stream timeouts; ok
// is false when there is none (the plan's Stop says why).
func (rt *route) nextTarget() (t Target, timeouts streamTimeouts, ok bool) {
	if !rt.routed {
		if rt.next >= len(rt.targets) {
			return Target{}, streamTimeouts{}, false
		}
		rt.next++
		return rt.targets[rt.next-1], streamTimeouts{}, true
	}
	rt.cur, ok = rt.plan.Next()
	if !ok {
		return Target{}, streamTimeouts{}, false
	}
	p := rt.gw.providers[rt.cur.Provider()]
	return Target{Provider: p, Model: rt.cur.Model()},
		streamTimeouts{firstToken: rt.cur.FirstTokenTimeout(), idle: rt.cur.IdleTimeout()}, true
}

// report tells the plan what became of the attempt at the target offered
// last. It is called once per attempt, when the attempt is over.
func (rt *route) report(res routing.Result) {
	if rt.routed {
		rt.plan.Report(res)
	}
}

// close ends the route, giving back what an offer not reported holds.
func (rt *route) close() {
	if rt.routed {
		rt.plan.Close()
	}
}

// unavailable reports whether every target was out of rotation and none
// was tried, and how long until the first comes back.
func (rt *route) unavailable() (time.Duration, bool) {
	if !rt.routed || rt.plan.Attempts() > 0 || rt.plan.Stop() != routing.Unavailable {
		return 0, false
	}
	return rt.plan.RetryAfter(), true
}

// targetsUnavailable is the 503 of a call whose targets are all out of
// rotation: nothing was tried; the client may retry after d.
func targetsUnavailable(model string, d time.Duration) *providers.Error {
	d = max(d, time.Second)
	secs := int64((d + time.Second - 1) / time.Second)
	return &providers.Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "targets_unavailable",
		Message: "every target of model " + model + " is out of rotation (circuit breakers open or cooling down); retry after " +
			strconv.FormatInt(secs, 10) + "s",
		RetryAfter: d}
}

// streamTimeouts are the stream timeouts of one attempt's target: how
// long its first byte may take (firstToken), how long it may go silent
// after it (idle); 0: no limit.
type streamTimeouts struct{ firstToken, idle time.Duration }

// The causes with which an attempt's own timeouts cancel its upstream
// request, told apart from the client's going away by context.Cause.
var (
	errFirstToken = errors.New("no first token within the target's first_token_timeout")
	errStalled    = errors.New("the stream went silent past the target's idle_timeout")
)

// streamClock runs a stream attempt's timeouts: a timer that cancels the
// upstream request with errFirstToken unless the first byte comes in
// time, then one that cancels it with errStalled when no byte comes for
// the idle timeout. Its methods are called by the one goroutine that
// writes the provider's answer; the timers' functions only cancel.
type streamClock struct {
	cancel  context.CancelCauseFunc
	idle    time.Duration
	first   *time.Timer // nil: no first-token timeout
	stall   *time.Timer // nil: no idle timeout, or no byte yet
	mu      sync.Mutex
	expired bool // a timeout fired: what comes after is dropped
	gotByte bool
}

// startClock returns the context an attempt's upstream request runs
// under, and its clock (nil when the attempt has no stream timeouts).
func startClock(ctx context.Context, to streamTimeouts) (context.Context, *streamClock) {
	if to.firstToken <= 0 && to.idle <= 0 {
		return ctx, nil
	}
	actx, cancel := context.WithCancelCause(ctx)
	c := &streamClock{cancel: cancel, idle: to.idle}
	if to.firstToken > 0 {
		c.first = time.AfterFunc(to.firstToken, func() { c.fire(errFirstToken) })
	}
	return actx, c
}

// fire cancels the upstream request with cause, unless a byte came in
// the meantime that stopped the timer too late.
func (c *streamClock) fire(cause error) {
	c.mu.Lock()
	c.expired = true
	c.mu.Unlock()
	c.cancel(cause)
}

// onByte is told of each piece of the provider's body; it reports false
// when a timeout has fired already (the piece must not reach the client).
func (c *streamClock) onByte() bool {
	if c == nil {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.expired {
		return false
	}
	if !c.gotByte {
		c.gotByte = true
		if c.first != nil {
			c.first.Stop()
		}
		if c.idle > 0 {
			c.stall = time.AfterFunc(c.idle, func() { c.fire(errStalled) })
		}
		return true
	}
	if c.stall != nil {
		c.stall.Reset(c.idle)
	}
	return true
}

// stop ends the clock once the upstream request has returned, and
// releases its context.
func (c *streamClock) stop() {
	if c == nil {
		return
	}
	c.mu.Lock()
	if c.first != nil {
		c.first.Stop()
	}
	if c.stall != nil {
		c.stall.Stop()
	}
	c.mu.Unlock()
	c.cancel(nil)
}

// resultOf classifies what one upstream request became, for the routing
// engine: ctx is the client's, actx the attempt's (with its timeouts'
// causes), err what Send returned.
func resultOf(ctx, actx context.Context, uw *upstreamWriter, err error) routing.Result {
	res := routing.Result{Header: uw.header}
	cause := context.Cause(actx)
	switch {
	case ctx.Err() != nil:
		res.Kind = routing.Canceled
	case errors.Is(cause, errFirstToken):
		res.Kind = routing.TimedOut
	case errors.Is(cause, errStalled):
		res.Kind = routing.Stalled
	case uw.streaming && (uw.failed || uw.tooLarge):
		res.Kind = routing.Malformed
	case err != nil && errors.Is(err, ErrTimeout):
		res.Kind = routing.TimedOut
	case err != nil && (uw.wroteHeader || errors.Is(err, ErrAborted) || broken(err)):
		res.Kind = routing.Reset
	case err != nil:
		res.Kind = routing.Refused
	case uw.tooLarge:
		res.Kind = routing.Malformed
	default:
		res.Kind, res.Status = routing.Answered, uw.status
	}
	return res
}

// broken reports whether err is a connection that broke off once it was
// made (reset, closed early), rather than one never made.
func broken(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.EPIPE)
}

// timedOut is the failure of an attempt whose stream timeout fired
// before anything reached the client.
func timedOut(name string) *providers.Error {
	return &providers.Error{Status: http.StatusGatewayTimeout, Type: "server_error", Code: "upstream_timeout",
		Message: "provider " + name + " did not send its first token in time"}
}

// begin readies at for an attempt at a target with the stream timeouts
// to.
func (at *attempt) begin(to streamTimeouts) {
	at.timeouts, at.res, at.sent, at.start = to, routing.Result{}, false, time.Time{}
}

// measure notes what one upstream request of the attempt became: its
// kind, the provider's status and headers, how long the answer took from
// the attempt's first request, how long its first byte from this one.
func (at *attempt) measure(ctx, actx context.Context, uw *upstreamWriter, err error, start time.Time) {
	at.res = resultOf(ctx, actx, uw, err)
	at.res.Latency = time.Since(at.start)
	if !uw.firstAt.IsZero() {
		at.res.TTFB = uw.firstAt.Sub(start)
	}
}

// report tells the route what became of the attempt, once it is over: a
// call answered without a provider request reports nothing.
func (at *attempt) report(rt *route) {
	if at.sent {
		rt.report(at.res)
	}
}

// cmpErr is err, or def when err is nil.
func cmpErr(err, def error) error {
	if err != nil {
		return err
	}
	return def
}

// withRetryHint is a provider's error headers h as the routing engine
// reads them for a cool-down: with retry-after-ms of d, the wait the
// provider's translator read from elsewhere (its body: Google's
// RetryInfo; a header of its own), when h says nothing of it. h itself,
// which the client's headers are copied from, is left as it is.
func withRetryHint(h http.Header, d time.Duration) http.Header {
	if d <= 0 || retryAfter(h, time.Now()) > 0 {
		return h
	}
	out := h.Clone()
	if out == nil {
		out = make(http.Header, 1)
	}
	setHeader(out, "Retry-After-Ms", strconv.FormatInt(d.Milliseconds(), 10))
	return out
}

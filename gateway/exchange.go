package gateway

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/routing"
)

// maxUpstreamBody bounds what is buffered of a non-streamed answer or an
// error body; a longer answer is a provider fault (502).
const maxUpstreamBody = 64 << 20

// failure is an attempt that sent nothing to the client: the error to
// send if no other target answers, and the provider headers that go with
// it.
type failure struct {
	err    *providers.Error
	header http.Header
	cause  error // why the provider could not be reached, for the log; may be nil
}

// failWith sets o to the failure f in the API's shape, with the provider
// headers a client may see, and the retry hints: the provider's, else
// what f's error says (a provider that says when to retry in its body,
// Google's RetryInfo), which the headers then carry for the SDKs.
func (o *Outcome) failWith(a *api, f *failure) {
	h := o.Header
	copyClientHeaders(h, f.header)
	o.RequestID = requestID(f.header)
	d := f.err.RetryAfter
	switch {
	case d > 0 && headerValue(f.header, "Retry-After") == "":
		retryAfterHeaders(h, d)
		o.RetryAfter = msOf(d)
	default:
		o.RetryAfter = retryAfter(f.header, time.Now())
	}
	o.fail(a, f.err)
}

// retryable reports whether the next target should be tried: connection
// failures, 429 and 5xx.
func (f *failure) retryable() bool {
	return f.err.Status == http.StatusTooManyRequests || f.err.Status >= 500
}

// exchange says how one provider call's answer is read: a stream, through
// tr (a translator, or the relay of a stream passed through), or a buffered
// body that translate turns into the unified answer; failed answers go
// through mapError. Each returns what the answer used. A call made of
// several upstream requests (an embeddings provider that takes one input per
// request) sets more and collect instead of translate: the requests are sent
// in turn, and collect gets every answer once all have succeeded.
type exchange struct {
	stream    bool
	tr        providers.StreamTranslator
	translate func(body []byte) ([]byte, Usage, error)
	mapError  func(status int, header http.Header, body []byte) *providers.Error

	more    []providers.Request
	collect func(headers []http.Header, bodies [][]byte) ([]byte, Usage, error)

	// answer, when set, is the answer itself: the gateway answers without
	// calling the provider (a token count estimated for a provider that
	// has no such endpoint).
	answer []byte
}

// attempt is one provider call of a call: where its answer goes.
type attempt struct {
	api  *api     // how the call's API writes the gateway's own errors
	sink Sink     // where a stream goes; nil: nowhere
	o    *Outcome // what the call became
	obs  Observer

	// One attempt's: the stream timeouts of its target, and what it
	// measured for the routing engine (see routing.go).
	timeouts streamTimeouts
	res      routing.Result
	sent     bool      // a request went to the provider: res is to be reported
	start    time.Time // when the first request was sent
}

// forward sends one translated request to the provider and answers the
// client (into o: a buffered answer, or a stream to the sink), returning
// the status it gave, unless the attempt failed in a way that lets the next
// target try: then it has sent nothing and returns the failure.
func (at *attempt) forward(ctx context.Context, p *Provider, preq providers.Request, ex *exchange) (int, *failure) {
	o := at.o
	if ex.answer != nil {
		o.answer(ex.answer)
		return http.StatusOK, nil
	}
	if ex.collect != nil {
		return at.forwardAll(ctx, p, append([]providers.Request{preq}, ex.more...), ex)
	}
	uw, f := at.send(ctx, p, preq, ex)
	if uw.started {
		o.Status, o.Streamed = http.StatusOK, true
		return http.StatusOK, nil
	}
	if f != nil {
		return at.settle(f)
	}
	out, used, err := ex.translate(uw.buf)
	if err != nil {
		at.res.Kind = routing.Malformed
		return 0, unreadable(p, err)
	}
	o.Usage = used
	copyClientHeaders(o.Header, uw.header)
	o.RequestID = requestID(uw.header)
	o.answer(out)
	return http.StatusOK, nil
}

// forwardAll sends reqs in turn, each answer buffered, and answers what
// ex.collect makes of them; the first failure ends the call.
func (at *attempt) forwardAll(ctx context.Context, p *Provider, reqs []providers.Request, ex *exchange) (int, *failure) {
	headers := make([]http.Header, len(reqs))
	bodies := make([][]byte, len(reqs))
	for i, req := range reqs {
		uw, f := at.send(ctx, p, req, ex)
		if f != nil {
			return at.settle(f)
		}
		headers[i], bodies[i] = uw.header, uw.buf
	}
	out, used, err := ex.collect(headers, bodies)
	if err != nil {
		at.res.Kind = routing.Malformed
		return 0, unreadable(p, err)
	}
	o := at.o
	o.Usage = used
	copyClientHeaders(o.Header, headers[len(headers)-1])
	o.RequestID = requestID(headers[len(headers)-1])
	o.answer(out)
	return http.StatusOK, nil
}

// send makes one upstream request. A stream that reached the client is
// finished here; otherwise the answer is in the writer's buffer, or the
// failure says why there is none.
func (at *attempt) send(ctx context.Context, p *Provider, preq providers.Request, ex *exchange) (*upstreamWriter, *failure) {
	framing := preq.Framing
	if framing == nil {
		framing = providers.SSE
	}
	uw := &upstreamWriter{sink: at.sink, client: at.o.Header, header: make(http.Header), wantStream: ex.stream && at.sink != nil,
		tr: ex.tr, framing: framing, api: at.api, o: at.o}
	actx := ctx
	if uw.wantStream {
		actx, uw.clock = startClock(ctx, at.timeouts)
	}
	start := time.Now()
	if !at.sent {
		at.sent, at.start = true, start
	}
	err := p.Upstream.Send(actx, preq, ex.stream, uw)
	took := time.Since(start)
	uw.clock.stop()
	at.obs.Upstream(p.Name, uw.status, took)
	at.measure(ctx, actx, uw, err, start)
	at.o.trace.sent(uw.status, err, uw.started, uw.failed)
	switch {
	case uw.started || uw.streaming && err == nil && at.res.Kind == routing.Answered:
		// A stream that reached the client (or ended well without an
		// event: the client gets its end) is finished here.
		uw.stalled = at.res.Kind == routing.Stalled
		uw.finishStream(err != nil || uw.stalled)
		if ex.tr != nil {
			at.o.Usage = ex.tr.Usage()
		}
		return uw, nil
	case uw.streaming:
		// The stream broke off or timed out before anything reached the
		// client: another target may answer it.
		uw.releaseBuffers()
		if at.res.Kind == routing.TimedOut {
			return uw, &failure{err: timedOut(p.Name), cause: context.Cause(actx)}
		}
		return uw, &failure{err: unreachable(p.Name, cmpErr(err, ErrAborted), false), cause: err}
	case at.res.Kind == routing.TimedOut && err != nil && !errors.Is(err, ErrTimeout):
		return uw, &failure{err: timedOut(p.Name), cause: context.Cause(actx)}
	case err != nil || uw.tooLarge:
		return uw, &failure{err: unreachable(p.Name, err, uw.tooLarge), cause: err}
	case uw.status >= 400:
		e := upstreamError(p, uw.status, uw.header, uw.buf, ex.mapError)
		at.res.Header = withRetryHint(uw.header, e.RetryAfter)
		return uw, &failure{err: e, header: uw.header}
	}
	return uw, nil
}

// settle returns a failure the next target may retry, and answers any
// other (a 4xx that is the client's to fix).
func (at *attempt) settle(f *failure) (int, *failure) {
	if f.cause != nil || f.retryable() {
		return 0, f
	}
	at.o.failWith(at.api, f)
	return f.err.Status, nil
}

// unreadable is the failure of an answer that could not be translated. A
// translator that read the answer and found a failure in it (Cohere's
// finish_reason ERROR, say) returns a *providers.Error, which is kept.
func unreadable(p *Provider, err error) *failure {
	if pe, ok := errors.AsType[*providers.Error](err); ok {
		return &failure{err: pe, cause: err}
	}
	return &failure{err: &providers.Error{Status: http.StatusBadGateway, Type: "server_error",
		Code: "bad_upstream_response", Message: "provider " + p.Name + " sent an answer that could not be read"}, cause: err}
}

// upstreamError maps a provider's error answer. A 401 or 403 from the
// provider means the gateway's own provider key is wrong, not the client's:
// the client gets a 502 that does not repeat the provider's message, which
// may quote part of that key.
func upstreamError(p *Provider, status int, header http.Header, body []byte, mapError func(int, http.Header, []byte) *providers.Error) *providers.Error {
	if status == http.StatusUnauthorized || status == http.StatusForbidden {
		return &providers.Error{Status: http.StatusBadGateway, Type: "server_error", Code: "upstream_auth_failed",
			Message: "provider " + p.Name + " rejected the gateway's credentials (status " + strconv.Itoa(status) + ")"}
	}
	e := mapError(status, header, body)
	if e.Status < 400 || e.Status > 599 {
		e.Status = http.StatusBadGateway
	}
	return e
}

// unreachable is the error for a provider that could not be reached or
// broke off its answer.
func unreachable(name string, err error, tooLarge bool) *providers.Error {
	e := &providers.Error{Status: http.StatusBadGateway, Type: "server_error", Code: "upstream_unreachable",
		Message: "provider " + name + " could not be reached"}
	switch {
	case tooLarge:
		e.Code, e.Message = "bad_upstream_response", "provider "+name+" sent an answer larger than the gateway accepts"
	case errors.Is(err, ErrTimeout):
		e.Status, e.Code, e.Message = http.StatusGatewayTimeout, "upstream_timeout", "provider "+name+" did not answer in time"
	case errors.Is(err, ErrAborted):
		e.Code, e.Message = "upstream_aborted", "provider "+name+" broke off its answer"
	case errors.Is(err, ErrCredentials):
		e.Code, e.Message = "upstream_auth_failed", "the gateway could not authenticate to provider "+name
	}
	return e
}

// clientHeaders are the provider response headers a client may see. A
// provider's own rate-limit headers (x-ratelimit-*, anthropic-ratelimit-*)
// are not among them: they tell of the gateway's account with the
// provider, shared by every key and only one of the targets, not of the
// client's limits — those the gateway sets itself (admission.go).
var clientHeaders = []string{"X-Request-Id", "Openai-Processing-Ms", "Retry-After", "Retry-After-Ms"}

// copyClientHeaders copies the allow-listed provider headers; Anthropic's
// request-id becomes x-request-id.
func copyClientHeaders(dst, src http.Header) {
	for _, k := range clientHeaders {
		if v := src[k]; len(v) > 0 {
			dst[k] = v
		}
	}
	if v := src["Request-Id"]; len(v) > 0 && len(dst["X-Request-Id"]) == 0 {
		dst["X-Request-Id"] = v
	}
}

// requestID is the provider's id of an answer with header h: its
// x-request-id, or Anthropic's request-id.
func requestID(h http.Header) string {
	if id := headerValue(h, "X-Request-Id"); id != "" {
		return id
	}
	return headerValue(h, "Request-Id")
}

// retryAfter reads how long a provider's header h asks to wait:
// retry-after-ms, then retry-after (seconds or an HTTP date).
func retryAfter(h http.Header, now time.Time) time.Duration {
	if v := headerValue(h, "Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && ms > 0 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(headerValue(h, "Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s <= 0 {
			return 0
		}
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// upstreamWriter is the ResponseWriter an Upstream writes the provider's
// answer into. It keeps its own header map, so nothing reaches the client
// before the gateway decides what to do with the answer:
//
//   - a 2xx event stream, when the client asked for one, is translated event
//     by event and flushed to the client as reverse_proxy flushes;
//   - anything else (a non-streamed answer, an error) is buffered, so that a
//     429 or 5xx can still fall back to the next target.
type upstreamWriter struct {
	sink       Sink        // where a stream goes
	client     http.Header // the header the sink sends
	header     http.Header // the provider's
	wantStream bool
	tr         providers.StreamTranslator // nil: events pass through as they are
	framing    providers.Framing          // how the provider's stream is cut into events
	api        *api                       // how the client's API ends a stream the gateway cannot finish
	o          *Outcome                   // times the first byte a stream sends the client

	clock *streamClock // the attempt's stream timeouts; nil: none

	// passThrough is tr when it is a relay of server-sent events, which
	// may pass a write of whole events on as it is (set with streaming,
	// once, not asked again at every write).
	passThrough providers.Relay

	wroteHeader bool
	status      int
	streaming   bool      // the provider's answer is a stream for the client
	started     bool      // the client has the status line: no fallback any more
	stalled     bool      // the idle timeout cut the stream
	firstAt     time.Time // when the provider's first body byte came
	failed      bool      // the translator rejected an event; the rest is dropped
	ended       bool      // the translator had ended the stream when a frame failed; the rest is dropped
	tooLarge    bool
	buf         []byte // buffered body, or pending partial SSE event
	out         []byte // translated events, reused
	bufs        *streamBuffers
}

// streamBuffers are a translated stream's buffers (upstreamWriter's buf and
// out: the part of an event still to come, the events for the client), a
// few hundred bytes to a few KiB each, passed from one stream to the next
// instead of grown from nothing for every stream.
type streamBuffers struct{ pending, out []byte }

var streamBufferPool = sync.Pool{New: func() any { return new(streamBuffers) }}

// maxPooledBuffer is the largest buffer that goes back to the pool: a
// stream with an exceptionally large event does not keep its memory.
const maxPooledBuffer = 64 << 10

// Header returns the writer's own header map, which receives the provider's
// response headers.
func (w *upstreamWriter) Header() http.Header { return w.header }

// WriteHeader decides, on the provider's status, whether to stream or to
// buffer. The client gets its status line with the stream's first event
// (start), not before: until then another target may still answer.
func (w *upstreamWriter) WriteHeader(status int) {
	if w.wroteHeader || status < 200 {
		return // 1xx are informational; reverse_proxy handles them
	}
	w.wroteHeader = true
	w.status = status
	if status >= 300 || !w.wantStream || !w.framing.IsStream(headerValue(w.header, "Content-Type")) {
		return
	}
	w.streaming = true
	if r, ok := w.tr.(providers.Relay); ok && w.framing == providers.SSE {
		w.passThrough = r
	}
	if w.tr != nil {
		w.bufs = streamBufferPool.Get().(*streamBuffers)
		w.buf, w.out = w.bufs.pending[:0], w.bufs.out[:0]
	}
}

// start sends the client the status line of a stream, once.
func (w *upstreamWriter) start() {
	if w.started {
		return
	}
	w.started = true
	h := w.client
	copyClientHeaders(h, w.header)
	setHeader(h, "Content-Type", "text/event-stream")
	setHeader(h, "Cache-Control", "no-cache")
	delete(h, "Content-Length")
	w.sink.WriteHeader(http.StatusOK)
}

// errTimedOut is what Write answers once a stream timeout has fired: the
// rest of the answer is not wanted.
var errTimedOut = errors.New("the attempt's stream timeout fired")

// Write buffers, passes through or translates the provider's bytes.
func (w *upstreamWriter) Write(p []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if w.firstAt.IsZero() && len(p) > 0 {
		w.firstAt = time.Now()
	}
	if !w.clock.onByte() {
		return 0, errTimedOut
	}
	switch {
	case !w.streaming:
		if len(w.buf)+len(p) > maxUpstreamBody {
			w.tooLarge = true
			return len(p), nil
		}
		if w.buf == nil {
			// One allocation for an answer whose length is known (a
			// large embeddings answer would otherwise be copied a dozen
			// times as the buffer grows).
			if n, err := strconv.Atoi(headerValue(w.header, "Content-Length")); err == nil && n > len(p) && n <= maxUpstreamBody {
				w.buf = make([]byte, 0, n)
			}
		}
		w.buf = append(w.buf, p...)
		return len(p), nil
	case w.failed, w.ended:
		return len(p), nil
	case w.tr == nil:
		w.firstByte()
		return w.sink.Write(p)
	}
	if w.passThrough != nil && len(w.buf) == 0 && w.passThrough.Passes(p) {
		// Whole events passed through as they are, nothing in them to read
		// or take out: the client gets p itself, without a copy.
		w.firstByte()
		return w.sink.Write(p)
	}
	// While no part of an event is pending, events are cut from p itself;
	// only what is left of one is kept (p is reverse_proxy's, reused).
	pending := p
	if len(w.buf) > 0 {
		w.buf = append(w.buf, p...)
		pending = w.buf
	}
	out := w.out[:0]
	for {
		ev, rest, ok, err := w.framing.Cut(pending)
		if err == nil && !ok {
			break
		}
		pending = rest
		if err == nil {
			out, err = w.tr.Event(out, ev)
		}
		if err != nil && providers.StreamEnded(w.tr) {
			// What follows the end of the client's stream is dropped, a
			// frame that cannot be read included; Close still runs.
			w.ended, pending = true, nil
			break
		}
		if err != nil {
			w.failed = true
			out = w.api.streamError(out, &providers.Error{Status: http.StatusBadGateway, Type: "server_error", Code: "bad_upstream_event",
				Message: "the provider sent an event that could not be translated"})
			break
		}
	}
	w.buf = append(w.buf[:0], pending...)
	w.out = out
	if len(out) > 0 {
		w.firstByte()
		if _, err := w.sink.Write(out); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// firstByte starts the client's stream, and notes when its first bytes
// reach the client.
func (w *upstreamWriter) firstByte() {
	w.start()
	if w.o.FirstByte.IsZero() {
		w.o.FirstByte = time.Now()
	}
}

// FlushError is what http.ResponseController, which an upstream flushes
// through, calls. Only a stream has anything to flush.
func (w *upstreamWriter) FlushError() error {
	if !w.started {
		return nil
	}
	return w.sink.Flush()
}

// finishStream ends a stream that reached the client: the translator
// closes it (data: [DONE], or an error event if the provider's stream was
// cut off; a relay's, an error event if the provider closed it before its
// end). A stream passed through that reverse_proxy aborted before the
// client had the whole answer gets an error event instead.
func (w *upstreamWriter) finishStream(aborted bool) {
	var out []byte
	r, relay := w.tr.(providers.Relay)
	switch {
	case w.failed:
	case w.stalled:
		out = w.api.streamError(nil, &providers.Error{Status: http.StatusGatewayTimeout, Type: "server_error", Code: "upstream_stalled",
			Message: "the provider's stream went silent for longer than the gateway waits"})
	case aborted && (w.tr == nil || relay && !r.Ended()):
		out = w.api.streamError(nil, &providers.Error{Status: http.StatusBadGateway, Type: "server_error", Code: "upstream_aborted",
			Message: "the provider broke off its answer"})
	case w.tr != nil:
		out = w.tr.Close(w.out[:0])
	}
	w.start()
	if len(out) > 0 {
		_, _ = w.sink.Write(out)
	}
	_ = w.sink.Flush()
	w.releaseBuffers()
}

// releaseBuffers returns a finished stream's buffers to the pool.
func (w *upstreamWriter) releaseBuffers() {
	if w.bufs == nil {
		return
	}
	w.bufs.pending, w.bufs.out = nil, nil
	if cap(w.buf) <= maxPooledBuffer {
		w.bufs.pending = w.buf[:0]
	}
	if cap(w.out) <= maxPooledBuffer {
		w.bufs.out = w.out[:0]
	}
	streamBufferPool.Put(w.bufs)
	w.bufs, w.buf, w.out = nil, nil, nil
}

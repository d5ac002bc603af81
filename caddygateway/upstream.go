package caddygateway

import (
	"bytes"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"

	"github.com/modelgate/modelgate/providers"
)

// maxUpstreamBody bounds what is buffered of a non-streamed answer or an
// error body; a longer answer is a provider fault (502).
const maxUpstreamBody = 64 << 20

// failure is an attempt that wrote nothing to the client: the error to send
// if no other target answers, and the provider headers that go with it.
type failure struct {
	err    *providers.Error
	header http.Header
	cause  error // why the provider could not be reached, for the log; may be nil
}

func (f *failure) write(w http.ResponseWriter, a *api) {
	if a == nil {
		a = openAIAPI
	}
	h := w.Header()
	copyClientHeaders(h, f.header)
	// A provider that says when to retry in its body (Google's RetryInfo)
	// gets the headers the SDKs and the batch runner read.
	if d := f.err.RetryAfter; d > 0 && h.Get("Retry-After") == "" {
		h.Set("Retry-After", strconv.FormatInt(int64((d+time.Second-1)/time.Second), 10))
		h.Set("Retry-After-Ms", strconv.FormatInt(d.Milliseconds(), 10))
	}
	a.writeError(w, f.err)
}

// retryable reports whether the next target should be tried: connection
// failures, 429 and 5xx.
func (f *failure) retryable() bool {
	return f.err.Status == http.StatusTooManyRequests || f.err.Status >= 500
}

// exchange says how one provider call's answer is read: a stream, passed
// through tr (nil: untouched), or a buffered body that translate turns into
// the unified answer; failed answers go through mapError. A call made of
// several upstream requests (an embeddings provider that takes one input per
// request) sets more and collect instead of translate: the requests are sent
// in turn, and collect gets every answer once all have succeeded.
type exchange struct {
	stream    bool
	tr        providers.StreamTranslator
	translate func(body []byte) ([]byte, error)
	mapError  func(status int, header http.Header, body []byte) *providers.Error

	more    []providers.Request
	collect func(headers []http.Header, bodies [][]byte) ([]byte, error)

	// api writes the gateway's own errors in the endpoint's API; set by
	// the dispatcher.
	api *api

	// answer, when set, is the answer itself: the gateway answers without
	// calling the provider (a token count estimated for a provider that
	// has no such endpoint).
	answer []byte

	// meter follows what the call used; usage reads it from answers and
	// streams in the endpoint's API; stripUsage drops from a chat stream
	// the usage the gateway asked for and the client did not. Set by the
	// dispatcher (stripUsage by the endpoint's prepare).
	meter      *meter
	usage      usageParser
	stripUsage bool
}

// forward sends one translated request through the provider's
// reverse_proxy and answers the client, returning the status it sent, unless
// the attempt failed in a way that lets the next target try: then it has
// written nothing and returns the failure.
func (p *provider) forward(w http.ResponseWriter, r *http.Request, preq providers.Request, ex exchange) (int, *failure) {
	if ex.answer != nil {
		WriteJSON(w, http.StatusOK, ex.answer)
		return http.StatusOK, nil
	}
	if ex.collect != nil {
		return p.forwardAll(w, r, append([]providers.Request{preq}, ex.more...), ex)
	}
	uw, f := p.send(w, r, preq, ex)
	if uw.streaming {
		return http.StatusOK, nil
	}
	if f != nil {
		return p.settle(w, f, ex.api)
	}
	out, err := ex.translate(uw.buf)
	if err != nil {
		return 0, p.unreadable(err)
	}
	ex.read(out)
	copyClientHeaders(w.Header(), uw.header)
	WriteJSON(w, http.StatusOK, out)
	return http.StatusOK, nil
}

// read reads what an answer says was used.
func (ex *exchange) read(answer []byte) {
	if ex.meter != nil && ex.usage.answer != nil {
		ex.usage.answer(answer, &ex.meter.usage)
	}
}

// forwardAll sends reqs in turn, each answer buffered, and writes what
// ex.collect makes of them; the first failure ends the call.
func (p *provider) forwardAll(w http.ResponseWriter, r *http.Request, reqs []providers.Request, ex exchange) (int, *failure) {
	headers := make([]http.Header, len(reqs))
	bodies := make([][]byte, len(reqs))
	for i, req := range reqs {
		uw, f := p.send(w, r, req, ex)
		if f != nil {
			return p.settle(w, f, ex.api)
		}
		headers[i], bodies[i] = uw.header, uw.buf
	}
	out, err := ex.collect(headers, bodies)
	if err != nil {
		return 0, p.unreadable(err)
	}
	ex.read(out)
	copyClientHeaders(w.Header(), headers[len(headers)-1])
	WriteJSON(w, http.StatusOK, out)
	return http.StatusOK, nil
}

// send makes one upstream request. A stream that reached the client is
// finished here; otherwise the answer is in the writer's buffer, or the
// failure says why there is none.
func (p *provider) send(w http.ResponseWriter, r *http.Request, preq providers.Request, ex exchange) (*upstreamWriter, *failure) {
	framing := preq.Framing
	if framing == nil {
		framing = providers.SSE
	}
	if ex.api == nil {
		ex.api = openAIAPI
	}
	uw := &upstreamWriter{client: w, header: make(http.Header), wantStream: ex.stream, tr: ex.tr, framing: framing, api: ex.api}
	start := time.Now()
	err := uw.serve(p.base.proxy, p.base.upstreamRequest(r, preq, ex.stream))
	observeUpstream(p.name, uw.status, start)
	switch {
	case uw.streaming:
		uw.finishStream(err != nil)
		return uw, nil
	case err != nil || uw.tooLarge:
		return uw, &failure{err: unreachable(p.name, err, uw.tooLarge), cause: err}
	case uw.status >= 400:
		return uw, &failure{err: p.upstreamError(uw.status, uw.header, uw.buf, ex.mapError), header: uw.header}
	}
	return uw, nil
}

// settle returns a failure the next target may retry, and writes any
// other (a 4xx that is the client's to fix) to the client.
func (p *provider) settle(w http.ResponseWriter, f *failure, a *api) (int, *failure) {
	if f.cause != nil || f.retryable() {
		return 0, f
	}
	f.write(w, a)
	return f.err.Status, nil
}

// unreadable is the failure of an answer that could not be translated. A
// translator that read the answer and found a failure in it (Cohere's
// finish_reason ERROR, say) returns a *providers.Error, which is kept.
func (p *provider) unreadable(err error) *failure {
	if pe, ok := errors.AsType[*providers.Error](err); ok {
		return &failure{err: pe, cause: err}
	}
	return &failure{err: &providers.Error{Status: http.StatusBadGateway, Type: "server_error",
		Code: "bad_upstream_response", Message: "provider " + p.name + " sent an answer that could not be read"}, cause: err}
}

// upstreamError maps a provider's error answer. A 401 or 403 from the
// provider means the gateway's own provider key is wrong, not the client's:
// the client gets a 502 that does not repeat the provider's message, which
// may quote part of that key.
func (p *provider) upstreamError(status int, header http.Header, body []byte, mapError func(int, http.Header, []byte) *providers.Error) *providers.Error {
	if status == http.StatusUnauthorized || status == http.StatusForbidden {
		return &providers.Error{Status: http.StatusBadGateway, Type: "server_error", Code: "upstream_auth_failed",
			Message: "provider " + p.name + " rejected the gateway's credentials (status " + strconv.Itoa(status) + ")"}
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
	var he caddyhttp.HandlerError
	switch {
	case tooLarge:
		e.Code, e.Message = "bad_upstream_response", "provider "+name+" sent an answer larger than the gateway accepts"
	case errors.As(err, &he) && he.StatusCode == http.StatusGatewayTimeout:
		e.Status, e.Code, e.Message = http.StatusGatewayTimeout, "upstream_timeout", "provider "+name+" did not answer in time"
	case errors.Is(err, errAborted):
		e.Code, e.Message = "upstream_aborted", "provider "+name+" broke off its answer"
	case errors.As(err, new(authError)):
		e.Code, e.Message = "upstream_auth_failed", "the gateway could not authenticate to provider "+name
	}
	return e
}

// clientHeaders are the provider response headers a client may see. A
// provider's own rate-limit headers (x-ratelimit-*, anthropic-ratelimit-*)
// are not among them: they tell of the gateway's account with the
// provider, shared by every key and only one of the targets, not of the
// client's limits — those the gateway sets itself (quota.go).
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

// setPath sets u's path to raw, escaped as the translator wrote it.
func setPath(u *url.URL, raw string) {
	if plainPath(raw) {
		// Nothing to unescape nor to escape (every provider's paths):
		// what the general case below gives, without its two passes.
		u.Path, u.RawPath = raw, raw
		return
	}
	u.RawPath = raw
	if p, err := url.PathUnescape(raw); err == nil {
		u.Path = p
	} else {
		u.Path = raw // not a valid escape: sent as it is
	}
	if u.EscapedPath() != u.RawPath {
		u.RawPath = "" // the path needs no other escaping than Go's own
	}
}

// plainPath reports whether every byte of p stands for itself in a URL
// path: a letter, a digit, or one of -._~$&+,/:;=@ (no escape, and none
// that Go's URL escapes in a path).
func plainPath(p string) bool {
	for i := 0; i < len(p); i++ {
		if !pathByte[p[i]] {
			return false
		}
	}
	return true
}

var pathByte = func() (t [256]bool) {
	for c := 0; c < 256; c++ {
		t[c] = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~$&+,/:;=@", byte(c)) >= 0
	}
	return t
}()

// errAborted reports that reverse_proxy gave up on a broken upstream body.
var errAborted = errors.New("upstream answer aborted")

// upstreamWriter is the ResponseWriter reverse_proxy writes the provider's
// answer into. It keeps its own header map, so nothing reaches the client
// before modelgate decides what to do with the answer:
//
//   - a 2xx event stream, when the client asked for one, is translated event
//     by event and flushed to the client as reverse_proxy flushes;
//   - anything else (a non-streamed answer, an error) is buffered, so that a
//     429 or 5xx can still fall back to the next target.
type upstreamWriter struct {
	client     http.ResponseWriter
	header     http.Header
	wantStream bool
	tr         providers.StreamTranslator // nil: events pass through as they are
	framing    providers.Framing          // how the provider's stream is cut into events
	api        *api                       // how the client's API ends a stream the gateway cannot finish

	wroteHeader bool
	status      int
	streaming   bool // the client has the status line: no fallback any more
	failed      bool // the translator rejected an event; the rest is dropped
	ended       bool // the translator had ended the stream when a frame failed; the rest is dropped
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

// serve runs the proxy, turning its abort panic (a provider that breaks off
// its body) into an error.
func (w *upstreamWriter) serve(proxy *reverseproxy.Handler, r *http.Request) (err error) {
	defer func() {
		if v := recover(); v != nil {
			if v != http.ErrAbortHandler { //nolint:errorlint // panic values are compared, not wrapped
				panic(v)
			}
			err = errAborted
		}
	}()
	return proxy.ServeHTTP(w, r, noNext)
}

// Header returns the writer's own header map, which receives the provider's
// response headers.
func (w *upstreamWriter) Header() http.Header { return w.header }

// WriteHeader decides, on the provider's status, whether to stream or to
// buffer.
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
	h := w.client.Header()
	copyClientHeaders(h, w.header)
	setHeader(h, "Content-Type", "text/event-stream")
	setHeader(h, "Cache-Control", "no-cache")
	delete(h, "Content-Length")
	w.client.WriteHeader(http.StatusOK)
	if w.tr != nil {
		w.bufs = streamBufferPool.Get().(*streamBuffers)
		w.buf, w.out = w.bufs.pending[:0], w.bufs.out[:0]
	}
}

// Write buffers, passes through or translates the provider's bytes.
func (w *upstreamWriter) Write(p []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
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
		return w.client.Write(p)
	}
	if t, ok := w.tr.(*tapStream); ok && len(w.buf) == 0 && w.framing == providers.SSE && t.passes(p) {
		// Whole events passed through as they are, nothing in them to read
		// or take out: the client gets p itself, without a copy.
		return w.client.Write(p)
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
		if _, err := w.client.Write(out); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// FlushError is what http.ResponseController, which reverse_proxy flushes
// through, calls. Only a stream has anything to flush.
func (w *upstreamWriter) FlushError() error {
	if !w.streaming {
		return nil
	}
	return http.NewResponseController(w.client).Flush()
}

// finishStream ends a stream that reached the client: the translator closes
// it (data: [DONE], or an error event if the provider's stream was cut off);
// a passed-through stream that reverse_proxy aborted gets an error event.
func (w *upstreamWriter) finishStream(aborted bool) {
	var out []byte
	switch {
	case w.failed:
	case w.tr != nil && !passedThrough(w.tr):
		out = w.tr.Close(w.out[:0]) // the translator ends its stream
	case aborted && !tapOf(w.tr).whole():
		// A stream passed through has no translator to end it (every
		// stream is read by a tapStream, whose Close adds nothing without
		// one): the error event is written here, unless the client has
		// the whole answer already (the provider reset the connection
		// after its last event).
		out = w.api.streamError(nil, &providers.Error{Status: http.StatusBadGateway, Type: "server_error", Code: "upstream_aborted",
			Message: "the provider broke off its answer"})
	case tapOf(w.tr).cutShort():
		// The provider closed its stream cleanly, between two events, but
		// before its last one ([DONE], message_stop, response.completed):
		// without this event a client could not tell a cut-off answer
		// from a whole one.
		out = w.api.streamError(nil, providers.StreamIncomplete())
	}
	if len(out) > 0 {
		_, _ = w.client.Write(out)
	}
	_ = http.NewResponseController(w.client).Flush()
	w.releaseBuffers()
}

// passedThrough reports whether tr passes the provider's events on as they
// are (read by the meter, not translated).
func passedThrough(tr providers.StreamTranslator) bool {
	t := tapOf(tr)
	return t != nil && relays(t.inner)
}

// relay is a StreamTranslator that passes the provider's events on as they
// are, only reading them (pointerTap).
type relay interface{ relays() }

// relays reports whether tr passes the provider's events on as they are:
// none does, or a relay.
func relays(tr providers.StreamTranslator) bool {
	if tr == nil {
		return true
	}
	_, ok := tr.(relay)
	return ok
}

// tapOf returns the tap that reads tr, or nil.
func tapOf(tr providers.StreamTranslator) *tapStream {
	t, _ := tr.(*tapStream)
	return t
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

func isEventStream(contentType string) bool {
	mt, _, _ := strings.Cut(contentType, ";")
	return strings.EqualFold(strings.TrimSpace(mt), "text/event-stream")
}

// upstreamCalledVar marks the variables of a request that made a provider
// call with them (see upstreamRequest).
const upstreamCalledVar = "modelgate.upstream_called"

// noNext ends reverse_proxy's handler chain.
var noNext = caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { return nil })

// upstreamRequest builds the request reverse_proxy sends to the provider. It
// starts from a fresh header map, so nothing of the client's request (its
// gateway key above all) reaches the provider except the translated body.
// The Host header is the provider's (a proxy block's header operations may
// still set another). The provider's credentials are added by the
// transport.
func (b *ProviderBase) upstreamRequest(r *http.Request, preq providers.Request, stream bool) *http.Request {
	body := preq.Body
	// Every provider call after a request's first gets its own copy of the
	// request variables: reverse_proxy writes into them before it sends,
	// while a connection an earlier call (a fallback's first target) began
	// to dial may still read them in net/http's dial goroutine. The first
	// call uses the request's own, as plain reverse_proxy does, and marks
	// them before reverse_proxy starts anything that reads them; a later
	// call only reads them, to copy them. The body goes down to the
	// transport's Authenticator beside the request.
	call := &upstreamCall{upstreamCtx: upstreamCtx{Context: r.Context(), body: body}}
	if vars, ok := r.Context().Value(caddyhttp.VarsCtxKey).(map[string]any); ok {
		if _, called := vars[upstreamCalledVar]; called {
			call.vars = maps.Clone(vars)
		} else {
			vars[upstreamCalledVar] = true
		}
	}
	r2 := r.WithContext(&call.upstreamCtx) // a shallow copy, whose fields are replaced below

	u := &call.url
	*u = *r.URL
	setPath(u, b.basePath+preq.Path)
	u.RawQuery = preq.Query
	r2.URL = u
	r2.Method = http.MethodPost
	if preq.Method != "" {
		r2.Method = preq.Method
	}
	r2.RequestURI = ""
	r2.Host = b.host

	accept := "application/json"
	if stream {
		accept = "text/event-stream"
	}
	// The values share one array, each header its own full slice of it
	// (an append to one cannot write into another).
	v := &call.values
	*v = [4]string{"application/json", accept, "identity", "modelgate"}
	h := make(http.Header, 7+len(preq.Header))
	h["Content-Type"] = v[0:1:1]
	h["Accept"] = v[1:2:2]
	h["Accept-Encoding"] = v[2:3:3] // translators need plain bytes
	h["User-Agent"] = v[3:4:4]
	// A nil value tells reverse_proxy not to add the header: nothing of the
	// gateway's clients reaches the provider. (The transport drops the
	// entries themselves, see outgoingHeader.)
	h["X-Forwarded-For"] = nil
	h["X-Forwarded-Proto"] = nil
	h["X-Forwarded-Host"] = nil
	for k, v := range preq.Header {
		h[k] = v
	}
	r2.Header = h
	r2.Trailer = nil

	call.reader.Reset(body)
	r2.Body = &call.reader
	r2.ContentLength = int64(len(body))
	r2.GetBody = func() (io.ReadCloser, error) { return newBytesBody(body), nil }
	r2.TransferEncoding = nil
	r2.Close = false
	return r2
}

func newBytesBody(b []byte) io.ReadCloser { return io.NopCloser(bytes.NewReader(b)) }

package gateway

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sync"

	"go.uber.org/zap"

	"github.com/modelgate/modelgate/guardrails"
	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/sse"
)

// This file runs the guards (package guardrails, docs/guardrails.md) on a
// call: the request guards once the call is authenticated and admitted and
// before anything reaches a provider (native pass-through included), on
// the client's body; the answer guards on the answer in the client's API,
// before it is written, stored or cached; a streamed answer's guards on
// the events bound for the sink, as they flow. A call refused by a guard
// costs nothing; an answer refused by one was paid for, and is settled.

// guardAPI is how the guards read the bodies of a; false: they have no
// texts the guards read (file uploads).
func guardAPI(a API) (guardrails.API, bool) {
	switch a {
	case APIChat:
		return guardrails.Chat, true
	case APIResponses:
		return guardrails.Responses, true
	case APIMessages, APICountTokens:
		return guardrails.Messages, true
	case APIEmbeddings:
		return guardrails.Embeddings, true
	case APIRerank:
		return guardrails.Rerank, true
	}
	return 0, false
}

// callGuards are the guards of one call: the engine, the API its bodies
// are read as, and the scope its guards' filters and the webhook protocol
// read — the model as the client named it and every target it routes to,
// so that a guard of a target catches an alias of it.
type callGuards struct {
	eng   *guardrails.Engine
	api   guardrails.API
	trace *callTrace // the call's span, when it is traced
	scope guardrails.Scope
	model string // as the client named it, for events

	// The result of the request's guards and then of the answer's, made
	// with them.
	result guardrails.Result
}

// guardsOf returns the guards of a call of rq's model routed to targets,
// traced by ct (nil: untraced), or nil when no guard is configured or the
// API has no texts.
func (g *Gateway) guardsOf(c *Call, rq *request, targets []Target, ct *callTrace) *callGuards {
	if g.guards == nil {
		return nil
	}
	api, ok := guardAPI(c.API)
	if !ok {
		return nil
	}
	cg := &callGuards{eng: g.guards, api: api, model: rq.model, trace: ct}
	if g.guards.ByModel() {
		cg.scope.Models = append(make([]string, 0, 1+len(targets)), rq.model)
		for _, t := range targets {
			cg.scope.Models = append(cg.scope.Models, t.String())
		}
	}
	if c.Key != nil {
		cg.scope.Key, cg.scope.Account = c.Key.Name, c.Key.Owner
	}
	return cg
}

// guardRequest runs the request guards on the client's body, which the
// request takes masked (rq.guarded). It reports false when a guard
// refused the request, or could not decide and fails closed: then o says
// why, in the API's shape.
func (g *Gateway) guardRequest(ctx context.Context, c *Call, o *Outcome, rq *request, cg *callGuards) bool {
	if cg == nil || !cg.eng.Applies(guardrails.Request, &cg.scope) {
		return true
	}
	r := &cg.result
	cg.eng.Check(ctx, r, cg.api, guardrails.Request, c.Body, &cg.scope)
	g.guarded(c, cg, r.Decisions)
	a := rq.endpoint.apiOf()
	if pe := r.Error(); pe != nil {
		o.fail(a, pe)
		return false
	}
	if r.Masked && rq.guarded != nil {
		if err := rq.guarded(r.Body); err != nil {
			o.fail(a, asProviderError(err))
			return false
		}
	}
	return true
}

// guardOutcome runs the answer guards on the answer o holds, which has
// reached nobody yet: it is replaced by the masked answer, or by the
// guard's error in the API's shape. What the answer used is still settled
// (the provider was paid).
func (g *Gateway) guardOutcome(ctx context.Context, c *Call, o *Outcome, rq *request, cg *callGuards) {
	if cg == nil || o.Streamed || o.Body == nil || o.Status >= 300 || c.API == APICountTokens {
		return
	}
	body, pe := g.answerGuards(ctx, c, cg, o.Body)
	if pe != nil {
		o.fail(rq.endpoint.apiOf(), pe)
		return
	}
	o.Body = body
}

// guardAnswer runs the answer guards of call c, to rq's model, on body, a
// whole (non-streamed) answer in the call's API that has reached nobody
// yet — an answer from a provider, or one kept from before (a cached
// answer, which the guards as they are now must see). It returns the body
// to send (masked, or body itself), or the error to send instead: 400
// content_blocked, 503 guard_unavailable.
func (g *Gateway) guardAnswer(ctx context.Context, c *Call, rq *request, body []byte) ([]byte, *providers.Error) {
	cg := rq.guards
	if cg == nil {
		cg = g.guardsOf(c, rq, g.routes.resolve(rq.model), traceOf(ctx))
	}
	if cg == nil || c.API == APICountTokens {
		return body, nil
	}
	return g.answerGuards(ctx, c, cg, body)
}

// answerGuards runs cg's answer guards on body.
func (g *Gateway) answerGuards(ctx context.Context, c *Call, cg *callGuards, body []byte) ([]byte, *providers.Error) {
	if !cg.eng.Applies(guardrails.Response, &cg.scope) {
		return body, nil
	}
	r := &cg.result
	cg.eng.Check(ctx, r, cg.api, guardrails.Response, body, &cg.scope)
	g.guarded(c, cg, r.Decisions)
	if pe := r.Error(); pe != nil {
		return nil, pe
	}
	return r.Body, nil
}

// guarded counts what the guards decided in the engine's tallies, tells
// the call's span, and the observer when a guard did more than allow,
// and logs each guard that could not decide: why (which may name the
// service) is for the log alone.
func (g *Gateway) guarded(c *Call, cg *callGuards, ds []guardrails.Decision) {
	if len(ds) == 0 {
		return
	}
	cg.eng.Count(ds)
	allowed := true
	for i := range ds {
		d := &ds[i]
		allowed = allowed && d.Action == guardrails.Allow
		if d.Action == guardrails.Error {
			c.Log.Warn("a guard could not decide",
				zap.String("guard", d.Guard),
				zap.String("type", d.Type),
				zap.String("direction", d.Direction.String()),
				zap.Bool("allowed", d.Allowed),
				zap.NamedError("cause", d.Err))
		}
	}
	if !allowed {
		g.obs.Guarded(c, cg.model, ds)
	}
	cg.trace.noteGuards(ds)
}

// streamGuard is the Sink of a streamed answer with guards on answers: it
// cuts the server-sent events the gateway writes for the client into
// events, passes each event's data through the answer stream's guards and
// sends what they release, in order, in the same framing. A guard that
// blocks (or fails closed) ends the stream with the API's error event;
// nothing is sent after it.
type streamGuard struct {
	Sink
	ctx     context.Context
	g       *Gateway
	c       *Call
	cg      *callGuards
	as      *guardrails.AnswerStream
	api     *api
	events  bool // the API names its events (event: <type>): Responses, Messages
	out     []byte
	outp    *[]byte // out's place in guardOuts
	stopped bool    // a guard ended the stream
	ended   bool    // End was called
	lines   bool    // an event's data was of more than one line: each event is framed line by line
	pending []byte  // an event whose end is still to come
}

// streamSink returns the sink the call's stream goes to: sink (the
// client's), or, for a streamed answer, sink behind the answer guards
// when any applies.
func (g *Gateway) streamSink(ctx context.Context, c *Call, rq *request, cg *callGuards, sink Sink) (Sink, *streamGuard) {
	if cg == nil || sink == nil || !rq.stream || !cg.eng.Applies(guardrails.Response, &cg.scope) {
		return sink, nil // an answer not streamed is guarded whole
	}
	// The answer stream and the buffer are taken at the first write: a
	// stream that fails before it never writes to the sink.
	sg := &streamGuard{Sink: sink, ctx: ctx, g: g, c: c, cg: cg, api: rq.endpoint.apiOf(),
		events: c.API == APIResponses || c.API == APIMessages}
	return sg, sg
}

// start takes the answer stream and the write buffer, at the first write.
func (s *streamGuard) start() {
	s.as = s.cg.eng.AnswerStream(s.cg.api, &s.cg.scope)
	s.outp = guardOuts.Get().(*[]byte)
	s.out = *s.outp
}

// Write takes the gateway's events for the client.
func (s *streamGuard) Write(p []byte) (int, error) {
	if s.stopped {
		return len(p), nil
	}
	if s.as == nil {
		s.start()
	}
	// The events are cut from p itself, or from what was pending and p
	// when an event began in a write before, and added to the answer
	// stream; one flush then decides on all of them, and the guards copy
	// what they hold.
	rest := p
	if len(s.pending) > 0 {
		s.pending = append(s.pending, p...)
		rest = s.pending
	}
	out := s.out[:0]
	for !s.stopped {
		ev, data, more, ok := sse.CutData(rest)
		if !ok {
			if ev, more, ok = sse.Cut(rest); !ok {
				break
			}
			data = s.fields(ev)
		}
		out = s.event(out, ev, data)
		rest = more
	}
	out = s.flush(out)
	if len(s.pending) > 0 {
		// rest is the end of pending: it moves to the front.
		s.pending = s.pending[:copy(s.pending, rest)]
	} else {
		s.pending = append(s.pending, rest...)
	}
	s.out = out
	if len(out) > 0 {
		if _, err := s.Sink.Write(out); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// fields returns the data of an event that is not a single data line
// (sse.CutData reads those), noting when it is of more than one line.
func (s *streamGuard) fields(ev []byte) []byte {
	_, data := sse.Fields(ev)
	s.lines = s.lines || bytes.IndexByte(data, '\n') >= 0
	return data
}

// event adds one event (without the blank line that ends it) and its
// data to the answer stream, and appends what may be sent before it is
// flushed.
func (s *streamGuard) event(out, ev, data []byte) []byte {
	if len(data) > 0 && data[0] != '{' {
		// JSON after white space is JSON to the client's parser too.
		if j := bytes.TrimLeft(data, " \t\r\n"); len(j) > 0 && j[0] == '{' {
			data = j
		}
	}
	switch {
	case bytes.Equal(data, []byte("[DONE]")):
		evs, d := s.as.End(s.ctx)
		s.ended = true
		if out = s.append(out, evs, d); s.stopped {
			return out
		}
		return append(out, sse.Done...)
	case len(data) == 0 || data[0] != '{':
		// A comment, or no JSON: nothing to guard; it follows the events
		// before it.
		if out = s.flush(out); s.stopped {
			return out
		}
		return append(append(out, ev...), "\n\n"...)
	}
	if d := s.as.Add(s.ctx, data); d != nil {
		return s.append(out, nil, d)
	}
	return out
}

// flush appends the events the answer stream releases of those added.
func (s *streamGuard) flush(out []byte) []byte {
	if s.stopped || s.ended {
		return out
	}
	evs, d := s.as.Flush(s.ctx)
	return s.append(out, evs, d)
}

// append appends the events the guards released, or the error event of
// the guard that stopped the stream.
func (s *streamGuard) append(out []byte, evs [][]byte, d *guardrails.Decision) []byte {
	for _, e := range evs {
		if s.events {
			if t := lookup(e, "type"); t.Str != "" {
				out = append(append(append(out, "event: "...), t.Str...), '\n')
			}
		}
		if s.lines {
			out = sse.AppendDataLines(out, e)
		} else {
			out = sse.AppendData(out, e)
		}
	}
	if d != nil {
		s.stopped = true
		pe := guardrails.BlockedError(guardrails.Response, d)
		if d.Action == guardrails.Error {
			pe = guardrails.UndecidedError(guardrails.Response, d)
		}
		out = s.api.streamError(out, pe)
	}
	return out
}

// finish ends the guarded stream once the provider's has ended: what the
// guards still hold is released (a stream that ended without its last
// event), and the observer is told what they decided.
func (s *streamGuard) finish() {
	if s.as == nil {
		// Nothing was written: no text to guard.
		s.stopped = true
		return
	}
	if !s.stopped && !s.ended {
		var out []byte
		if len(s.pending) > 0 {
			// An event the stream ended without its blank line: End,
			// below, decides on it with the rest.
			out = s.event(out, s.pending, s.fields(s.pending))
			s.pending = nil
		}
		if !s.stopped && !s.ended {
			evs, d := s.as.End(s.ctx)
			s.ended = true
			out = s.append(out, evs, d)
		}
		if len(out) > 0 {
			_, _ = s.Sink.Write(out)
			_ = s.Sink.Flush()
		}
	}
	s.g.guarded(s.c, s.cg, s.as.Decisions())
	// What the stream used serves the next; a write after its end (none
	// is made) would be dropped.
	s.as.Release()
	s.as, s.stopped = nil, true
	if cap(s.out) <= maxPooledOut {
		*s.outp = s.out[:0]
		guardOuts.Put(s.outp)
	}
	s.out, s.outp = nil, nil
}

// guardOuts are the buffers of guarded streams' writes, of ended streams.
var guardOuts = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledOut is the most a buffer of guardOuts holds: a larger one
// (from a write of a whole answer) is left to the collector.
const maxPooledOut = 64 << 10

// Moderator reaches the moderation endpoints of providers (OpenAI's POST
// /moderations, under the provider's base URL) through their upstreams,
// with their credentials, for the guards of type moderation.
type Moderator map[string]*Provider

// maxModerationAnswer bounds a moderation answer the gateway reads.
const maxModerationAnswer = 1 << 20

// Moderate implements guardrails.Moderator.
func (m Moderator) Moderate(ctx context.Context, provider, model string, texts []string) (guardrails.Moderation, error) {
	p := m[provider]
	if p == nil || p.Upstream == nil {
		return guardrails.Moderation{}, fmt.Errorf("moderation: no provider %q", provider)
	}
	req := providers.Request{Method: http.MethodPost, Path: "/moderations", Body: guardrails.ModerationRequest(model, texts)}
	w := &bufferWriter{header: make(http.Header)}
	if err := p.Upstream.Send(ctx, req, false, w); err != nil {
		return guardrails.Moderation{}, fmt.Errorf("moderation by provider %s: %w", provider, err)
	}
	switch {
	case w.status != http.StatusOK:
		return guardrails.Moderation{}, fmt.Errorf("moderation by provider %s: status %d", provider, w.status)
	case w.tooLarge:
		return guardrails.Moderation{}, fmt.Errorf("moderation by provider %s: the answer is too large", provider)
	}
	return guardrails.ParseModeration(w.buf)
}

// bufferWriter is the ResponseWriter a whole, bounded answer is read
// into.
type bufferWriter struct {
	header   http.Header
	status   int
	buf      []byte
	tooLarge bool
}

func (w *bufferWriter) Header() http.Header { return w.header }

func (w *bufferWriter) WriteHeader(status int) {
	if w.status == 0 && status >= 200 {
		w.status = status
	}
}

func (w *bufferWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	if len(w.buf)+len(p) > maxModerationAnswer {
		w.tooLarge = true
		return len(p), nil
	}
	w.buf = append(w.buf, p...)
	return len(p), nil
}

// FlushError is what http.ResponseController calls: nothing to flush.
func (w *bufferWriter) FlushError() error { return nil }

// recordGuard returns what the record of a translated Responses answer
// goes through before the gateway stores it, so that GET
// /v1/responses/{id} and a conversation continued from it never give back
// what the answer guards kept from the client: the answer in the record
// masked as the client got it, or no record for an answer they refused.
// It is nil when no answer guard applies. (The decisions were told with
// the answer.)
func (g *Gateway) recordGuard(ctx context.Context, cg *callGuards) func(rec []byte) []byte {
	if cg == nil || !cg.eng.Applies(guardrails.Response, &cg.scope) {
		return nil
	}
	return func(rec []byte) []byte {
		v := lookup(rec, "response")
		if !v.IsObject() || v.Index <= 0 {
			return rec
		}
		r := cg.eng.Answer(ctx, cg.api, rec[v.Index:v.Index+len(v.Raw)], &cg.scope)
		switch {
		case r.Verdict != guardrails.Allowed || r.Err != nil:
			return nil
		case !r.Masked:
			return rec
		}
		out := make([]byte, 0, len(rec)-len(v.Raw)+len(r.Body))
		out = append(append(append(out, rec[:v.Index]...), r.Body...), rec[v.Index+len(v.Raw):]...)
		return out
	}
}

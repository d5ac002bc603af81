package gateway

import (
	"bytes"
	"context"
	"net/http"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/modelgate/modelgate/guardrails"
	"github.com/modelgate/modelgate/pricing"
	"github.com/modelgate/modelgate/providers"
)

// This file traces calls (docs/tracing.md): a call gets a span of its own,
// a child of the span in the call's context (the host's server span), and
// each provider attempt a client span under it, both named and described
// by OpenTelemetry's semantic conventions for generative AI. The spans are
// made with the tracer provider of the span in the context: the core keeps
// no tracer of its own and no global state. A call whose context holds no
// recording span (no tracing configured, or a request the sampler left
// out) is not traced at all, and costs a context lookup.

// Tracing configures what the gateway's spans hold beyond the attributes
// that describe a call.
type Tracing struct {
	// CaptureContent records what a call says: the request body the
	// gateway sends each provider (after the guards masked it) on the
	// attempt's span, and the answer the client gets (after the guards)
	// on the call's span. Off by default: prompts and answers are
	// personal data.
	CaptureContent bool
}

// tracerName is the instrumentation scope of the gateway's spans.
const tracerName = "github.com/modelgate/modelgate/gateway"

// maxCapturedContent bounds a body recorded in a span; a longer one is
// cut, and its span says so (modelgate.content.truncated).
const maxCapturedContent = 256 << 10

// The attributes of the gateway's spans (docs/tracing.md lists them).
const (
	attrOperation      = attribute.Key("gen_ai.operation.name")
	attrProvider       = attribute.Key("gen_ai.provider.name")
	attrRequestModel   = attribute.Key("gen_ai.request.model")
	attrResponseModel  = attribute.Key("gen_ai.response.model")
	attrResponseID     = attribute.Key("gen_ai.response.id")
	attrFinishReasons  = attribute.Key("gen_ai.response.finish_reasons")
	attrInputTokens    = attribute.Key("gen_ai.usage.input_tokens")
	attrOutputTokens   = attribute.Key("gen_ai.usage.output_tokens")
	attrServerAddress  = attribute.Key("server.address")
	attrServerPort     = attribute.Key("server.port")
	attrErrorType      = attribute.Key("error.type")
	attrStatus         = attribute.Key("http.response.status_code")
	attrKeyName        = attribute.Key("modelgate.key.name")
	attrAccount        = attribute.Key("modelgate.account")
	attrCost           = attribute.Key("modelgate.cost")
	attrCache          = attribute.Key("modelgate.cache")
	attrFallback       = attribute.Key("modelgate.fallback")
	attrAttempts       = attribute.Key("modelgate.attempts")
	attrProviderName   = attribute.Key("modelgate.provider")
	attrCacheRead      = attribute.Key("gen_ai.usage.cache_read.input_tokens")
	attrCacheCreation  = attribute.Key("gen_ai.usage.cache_creation.input_tokens")
	attrGuards         = attribute.Key("modelgate.guards")
	attrRequestBody    = attribute.Key("modelgate.request.body")
	attrResponseBody   = attribute.Key("modelgate.response.body")
	attrContentTrimmed = attribute.Key("modelgate.content.truncated")
)

// callTrace is a traced call: its span, the attempt being made, and what
// its stream told of the answer. It lives on the call's Outcome; a nil
// callTrace (a call not traced) does nothing.
type callTrace struct {
	span    trace.Span
	tracer  trace.Tracer
	op      string
	capture bool

	attempt        trace.Span // the attempt being made; nil between attempts
	attempts       int
	upstreamStatus int // the status of the attempt's last request to the provider; 0: none came

	// What the answer streamed to the client said of itself.
	streamModel, streamID string
	streamFinish          []string
	streamErr             string // error.type of a stream that did not end well
	captured              []byte // the stream, when content is captured
	trimmed               bool

	sink   Sink     // the call's own sink, which traceSink wraps
	guards []string // the guards' decisions, "<guard>:<direction>:<action>"
}

// traceCall starts the span of call c when the span in ctx records, and
// returns the context its attempts are made in. A streamed call's sink is
// wrapped to read what the answer says of itself (its model, its finish
// reasons) and, with content captured, what it says.
func (g *Gateway) traceCall(ctx context.Context, c *Call, o *Outcome) context.Context {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx
	}
	op := operationOf(c.API)
	// (lookup points into the body: what a span keeps is copied.)
	model := strings.Clone(lookup(c.Body, "model").String())
	name := op
	if model != "" {
		name += " " + model
	}
	tracer := parent.TracerProvider().Tracer(tracerName)
	ctx, span := tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attrOperation.String(op)))
	if model != "" {
		span.SetAttributes(attrRequestModel.String(model))
	}
	if k := c.Key; k != nil {
		span.SetAttributes(attrKeyName.String(k.Name))
		if k.Owner != "" {
			span.SetAttributes(attrAccount.String(k.Owner))
		}
	}
	ct := &callTrace{span: span, tracer: tracer, op: op, capture: g.tracing.CaptureContent, sink: c.Sink}
	if c.Sink != nil {
		c.Sink = &traceSink{Sink: c.Sink, ct: ct, api: c.API}
	}
	o.trace = ct
	return context.WithValue(ctx, callTraceKey{}, ct)
}

// callTraceKey is the context key of a traced call's callTrace, for what
// has the call's context and not its Outcome (the guards).
type callTraceKey struct{}

// end ends the call's span with what became of the call, and gives the
// call its own sink back.
func (ct *callTrace) end(c *Call, o *Outcome) {
	if ct == nil {
		return
	}
	c.Sink = ct.sink
	span := ct.span
	attrs := make([]attribute.KeyValue, 0, 16)
	attrs = append(attrs, attrAttempts.Int(ct.attempts), attrFallback.Bool(len(o.Tried) > 1))
	if p := o.Target.Provider; p != nil {
		attrs = append(attrs, attrProvider.String(providerName(p.Type)), attrProviderName.String(p.Name))
	}
	attrs = ct.answerAttributes(attrs, c.API, o)
	if o.Settled && o.Priced {
		attrs = append(attrs, attrCost.Float64(float64(o.Cost)/float64(pricing.Dollar)))
	}
	if o.Cache != "" {
		attrs = append(attrs, attrCache.String(o.Cache))
	}
	if len(ct.guards) > 0 {
		attrs = append(attrs, attrGuards.StringSlice(ct.guards))
	}
	if o.Status != 0 {
		attrs = append(attrs, attrStatus.Int(o.Status))
	}
	if ct.capture {
		body, trimmed := o.Body, false
		if o.Streamed {
			body, trimmed = ct.captured, ct.trimmed
		}
		attrs = appendContent(attrs, attrResponseBody, body, trimmed)
	}
	span.SetAttributes(attrs...)
	switch {
	case o.Status == 0:
		span.SetAttributes(attrErrorType.String("canceled"))
		span.SetStatus(codes.Error, "the client went away")
	case o.Err != nil:
		span.SetAttributes(attrErrorType.String(errorType(o.Err)))
		span.SetStatus(codes.Error, o.Err.Message)
	case o.Streamed && ct.streamErr != "":
		span.SetAttributes(attrErrorType.String(ct.streamErr))
		span.SetStatus(codes.Error, "the stream did not end well")
	}
	span.End()
}

// answerAttributes appends what the answer said of itself — the model that
// answered, its id, its finish reasons — and what it used.
func (ct *callTrace) answerAttributes(attrs []attribute.KeyValue, a API, o *Outcome) []attribute.KeyValue {
	var model, id string
	var finish []string
	switch {
	case o.Streamed:
		model, id, finish = ct.streamModel, ct.streamID, ct.streamFinish
	case o.Status == http.StatusOK:
		model, id, finish = answerFacts(a, o.Body)
	}
	if model != "" {
		attrs = append(attrs, attrResponseModel.String(model))
	}
	if id != "" {
		attrs = append(attrs, attrResponseID.String(id))
	}
	if len(finish) > 0 {
		attrs = append(attrs, attrFinishReasons.StringSlice(finish))
	}
	if u := o.Usage; u.Known {
		attrs = append(attrs, attrInputTokens.Int64(u.Prompt+u.Embedding), attrOutputTokens.Int64(u.Completion))
		if u.Cached > 0 {
			attrs = append(attrs, attrCacheRead.Int64(u.Cached))
		}
		if u.CacheWrite > 0 {
			attrs = append(attrs, attrCacheCreation.Int64(u.CacheWrite))
		}
	}
	return attrs
}

// startAttempt starts the span of an attempt at target t, the last of
// the targets tried (o.Tried), with the request the provider is sent, and
// returns the attempt's context. An answer the gateway gives itself
// (ex.answer) calls no provider and has no attempt span.
func (ct *callTrace) startAttempt(ctx context.Context, o *Outcome, t Target, preq *providers.Request, ex *exchange) context.Context {
	if ct == nil || ex.answer != nil {
		return ctx
	}
	p := t.Provider
	ct.attempts++
	ct.upstreamStatus = 0
	attrs := make([]attribute.KeyValue, 0, 9)
	attrs = append(attrs, attrOperation.String(ct.op), attrProvider.String(providerName(p.Type)), attrProviderName.String(p.Name),
		attrRequestModel.String(t.Model), attrFallback.Bool(len(o.Tried) > 1))
	if p.Address != "" {
		attrs = append(attrs, attrServerAddress.String(p.Address))
		if p.Port != 0 {
			attrs = append(attrs, attrServerPort.Int(p.Port))
		}
	}
	if ct.capture {
		attrs = appendContent(attrs, attrRequestBody, preq.Body, false)
	}
	ctx, ct.attempt = ct.tracer.Start(ctx, ct.op+" "+t.Model, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	return ctx
}

// endAttempt ends the attempt's span: what the provider answered (the
// status forward returned; f, a failure that lets the next target try).
// A stream's attempt ends when the stream has ended, with its usage.
func (ct *callTrace) endAttempt(api API, o *Outcome, status int, f *failure) {
	if ct == nil || ct.attempt == nil {
		return
	}
	span := ct.attempt
	ct.attempt = nil
	if ct.upstreamStatus != 0 {
		span.SetAttributes(attrStatus.Int(ct.upstreamStatus))
	}
	switch {
	case f != nil:
		span.SetAttributes(attrErrorType.String(errorType(f.err)))
		span.SetStatus(codes.Error, f.err.Message)
	case status >= 300:
		if o.Err != nil {
			span.SetAttributes(attrErrorType.String(errorType(o.Err)))
			span.SetStatus(codes.Error, o.Err.Message)
		}
	default:
		span.SetAttributes(ct.answerAttributes(make([]attribute.KeyValue, 0, 8), api, o)...)
		if o.Streamed && ct.streamErr != "" {
			span.SetAttributes(attrErrorType.String(ct.streamErr))
			span.SetStatus(codes.Error, "the stream did not end well")
		}
	}
	span.End()
}

// sent notes what became of a request to the provider: its status (0:
// none came) and, for a stream that reached the client, how it ended —
// broken off by the provider (err), or with an event the gateway could
// not translate (failed).
func (ct *callTrace) sent(status int, err error, streaming, failed bool) {
	if ct == nil {
		return
	}
	ct.upstreamStatus = status
	switch {
	case !streaming:
	case failed:
		ct.streamErr = "bad_upstream_event"
	case err != nil:
		ct.streamErr = "upstream_aborted"
	}
}

// traceOf is the trace of the call of ctx, or nil when it is not traced:
// a walk up every layer of ctx, which a call that has its outcome at
// hand (Outcome.trace) need not make.
func traceOf(ctx context.Context) *callTrace {
	ct, _ := ctx.Value(callTraceKey{}).(*callTrace)
	return ct
}

// noteGuards notes the guards' decisions on the call's span
// (modelgate.guards), when the call is traced (ct not nil):
// "<guard>:<direction>:<action>", say "pii:request:mask". What a guard
// found or why it could not decide stays out of the span: it may quote
// the body.
func (ct *callTrace) noteGuards(ds []guardrails.Decision) {
	if ct == nil {
		return
	}
	for i := range ds {
		d := &ds[i]
		ct.guards = append(ct.guards, d.Guard+":"+d.Direction.String()+":"+d.Action.String())
	}
}

// appendContent appends body as the attribute k, cut to
// maxCapturedContent.
func appendContent(attrs []attribute.KeyValue, k attribute.Key, body []byte, trimmed bool) []attribute.KeyValue {
	if len(body) > maxCapturedContent {
		body, trimmed = body[:maxCapturedContent], true
	}
	attrs = append(attrs, k.String(string(body)))
	if trimmed {
		attrs = append(attrs, attrContentTrimmed.Bool(true))
	}
	return attrs
}

// traceSink is a traced call's sink: it passes the stream on and reads
// each event's data for what the answer says of itself, and keeps the
// stream when content is captured. The events it reads are the client's,
// in the client's API, whatever the provider spoke; only a traced call
// pays for the reading.
type traceSink struct {
	Sink
	ct  *callTrace
	api API
}

func (s *traceSink) Write(p []byte) (int, error) {
	ct := s.ct
	if ct.capture && !ct.trimmed {
		room := maxCapturedContent - len(ct.captured)
		if len(p) > room {
			ct.captured, ct.trimmed = append(ct.captured, p[:room]...), true
		} else {
			ct.captured = append(ct.captured, p...)
		}
	}
	for rest := p; len(rest) > 0; {
		var line []byte
		line, rest, _ = bytes.Cut(rest, []byte("\n"))
		if data, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			ct.readEvent(s.api, bytes.TrimSpace(data))
		}
	}
	return s.Sink.Write(p)
}

// readEvent reads a streamed event's data for the answer's model, id and
// finish reasons, in the API's shape. The model and id are read until an
// event has said them. The event's bytes are the writer's, reused: what
// is kept of them is copied.
func (ct *callTrace) readEvent(a API, data []byte) {
	if len(data) == 0 || data[0] != '{' {
		return // data: [DONE]
	}
	known := ct.streamModel != "" && ct.streamID != ""
	var model, id gjson.Result
	switch a {
	case APIMessages:
		if !known {
			model, id = lookup(data, "message.model"), lookup(data, "message.id")
		}
		if r := lookup(data, "delta.stop_reason"); r.Type == gjson.String {
			ct.streamFinish = append(ct.streamFinish, strings.Clone(r.Str))
		}
	case APIResponses:
		if !known {
			model, id = lookup(data, "response.model"), lookup(data, "response.id")
		}
		switch lookup(data, "type").Str {
		case "response.completed", "response.incomplete", "response.failed":
			ct.streamFinish = append(ct.streamFinish[:0], responseFinish(lookup(data, "response")))
		}
	default:
		if !known {
			model, id = lookup(data, "model"), lookup(data, "id")
		}
		ct.streamFinish = appendFinish(ct.streamFinish, lookup(data, "choices"))
	}
	if model.Type == gjson.String && model.Str != "" {
		ct.streamModel = strings.Clone(model.Str)
	}
	if id.Type == gjson.String && id.Str != "" && ct.streamID == "" {
		ct.streamID = strings.Clone(id.Str)
	}
}

// appendFinish appends the finish reasons of a chat answer's or chunk's
// choices that have one.
func appendFinish(dst []string, choices gjson.Result) []string {
	choices.ForEach(func(_, ch gjson.Result) bool {
		if r := ch.Get("finish_reason"); r.Type == gjson.String {
			dst = append(dst, strings.Clone(r.Str))
		}
		return true
	})
	return dst
}

// answerFacts reads an answer of the API for its model, id and finish
// reasons.
func answerFacts(a API, body []byte) (model, id string, finish []string) {
	switch a {
	case APIMessages:
		if r := lookup(body, "stop_reason"); r.Type == gjson.String {
			finish = []string{strings.Clone(r.Str)}
		}
	case APIResponses:
		if lookup(body, "status").Exists() {
			finish = []string{responseFinish(gjson.ParseBytes(body))}
		}
	case APIChat:
		finish = appendFinish(nil, lookup(body, "choices"))
	case APICountTokens, APIEmbeddings:
		// A token count names no model; an embeddings answer names the
		// model as the client did, not as the provider answered.
		return "", "", nil
	}
	return strings.Clone(lookup(body, "model").String()), strings.Clone(lookup(body, "id").String()), finish
}

// responseFinish is why a Responses API answer ended: its status, or the
// reason it is incomplete.
func responseFinish(r gjson.Result) string {
	if reason := r.Get("incomplete_details.reason"); reason.Type == gjson.String {
		return strings.Clone(reason.Str)
	}
	return strings.Clone(r.Get("status").String())
}

// operationOf is the semantic conventions' operation of a call of API a.
func operationOf(a API) string {
	switch a {
	case APIChat, APIMessages, APIResponses:
		return "chat"
	case APIEmbeddings:
		return "embeddings"
	case APIRerank:
		return "rerank"
	case APICountTokens:
		return "count_tokens"
	}
	return a.String()
}

// providerName is the semantic conventions' name of a provider type
// (gen_ai.provider.name); a type they do not name is its own.
func providerName(typ string) string {
	switch typ {
	case "azure_openai":
		return "azure.ai.openai"
	case "bedrock":
		return "aws.bedrock"
	case "vertex":
		return "gcp.vertex_ai"
	case "gemini":
		return "gcp.gemini"
	case "mistral":
		return "mistral_ai"
	case "xai":
		return "x_ai"
	}
	return typ
}

// errorType is error.type for a failure: the gateway's or the provider's
// code, else its type, else its status.
func errorType(e *providers.Error) string {
	switch {
	case e.Code != "":
		return e.Code
	case e.Type != "":
		return e.Type
	}
	return strconv.Itoa(e.Status)
}

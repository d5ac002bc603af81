package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/modelgate/modelgate/guardrails"
	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/openai"
	"github.com/modelgate/modelgate/providers/providertest"
)

// tracedGateway is a testGateway with a provider "down" whose every
// answer is a 500, and aliases that fall back from it: "smart" to
// oa/gpt-4o-mini, "doomed" to nothing else.
func tracedGateway(t *testing.T, capture bool) *testGateway {
	t.Helper()
	g := newTestGateway(t)
	chaos := providertest.StartChaos(t, providertest.ServerErrors())
	down := &memUpstream{base: "/v1", h: chaos}
	g.upstreams["down"] = down
	g.cfg.Providers["down"] = NewProvider("down", "openai", nil, Endpoints{Chat: openai.Chat{}}, down)
	g.cfg.Providers["oa"].Address, g.cfg.Providers["oa"].Port = "api.openai.example", 443
	g.cfg.Aliases = map[string][]string{"smart": {"down/gpt-4o", "oa/gpt-4o-mini"}, "doomed": {"down/gpt-4o", "down/gpt-4o-mini"}}
	g.cfg.Tracing.CaptureContent = capture
	g.rebuild(t)
	return g
}

// tracedServe serves a call in the context of a server span of a
// recording tracer provider, as the host's tracing handler would, and
// returns the outcome, the sink, and the spans ended under the server
// span (the server span's own last).
func tracedServe(t *testing.T, g *testGateway, api API, body []byte, key *Key) (*Outcome, *timedSink, []sdktrace.ReadOnlySpan) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	ctx, server := tp.Tracer("test").Start(context.Background(), "POST", trace.WithSpanKind(trace.SpanKindServer))
	sink := &timedSink{}
	o := &Outcome{}
	g.Serve(ctx, &Call{API: api, Body: body, Key: key, Sink: sink, Path: "/test"}, o)
	server.End()
	return o, sink, rec.Ended()
}

// timedSink is a recordingSink that notes when it was last written to.
type timedSink struct {
	recordingSink
	last time.Time
}

func (s *timedSink) Write(p []byte) (int, error) {
	s.last = time.Now()
	return s.recordingSink.Write(p)
}

// attrs are a span's attributes by key.
func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := make(map[attribute.Key]attribute.Value)
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

// wantAttrs checks that span s has the attributes want (their values as
// Value.String writes them) and none of the keys in absent.
func wantAttrs(t *testing.T, s sdktrace.ReadOnlySpan, want map[attribute.Key]string, absent ...attribute.Key) {
	t.Helper()
	got := attrs(s)
	for k, v := range want {
		if g, ok := got[k]; !ok || g.String() != v {
			t.Errorf("span %q: %s = %q (set: %v), want %q", s.Name(), k, g.String(), ok, v)
		}
	}
	for _, k := range absent {
		if v, ok := got[k]; ok {
			t.Errorf("span %q: %s = %q, want none", s.Name(), k, v.String())
		}
	}
}

// split returns the call's span and its attempt spans, checking that the
// call's span is the server span's child and every attempt the call's.
func split(t *testing.T, spans []sdktrace.ReadOnlySpan) (call sdktrace.ReadOnlySpan, attempts []sdktrace.ReadOnlySpan) {
	t.Helper()
	server := spans[len(spans)-1]
	for _, s := range spans[:len(spans)-1] {
		if s.SpanKind() == trace.SpanKindInternal {
			call = s
		}
	}
	if call == nil || call.Parent().SpanID() != server.SpanContext().SpanID() {
		t.Fatalf("no call span under the server span: %v", names(spans))
	}
	for _, s := range spans[:len(spans)-1] {
		if s == call {
			continue
		}
		if s.SpanKind() != trace.SpanKindClient || s.Parent().SpanID() != call.SpanContext().SpanID() {
			t.Fatalf("span %q (%v) is not an attempt of the call", s.Name(), s.SpanKind())
		}
		attempts = append(attempts, s)
	}
	return call, attempts
}

func names(spans []sdktrace.ReadOnlySpan) []string {
	var n []string
	for _, s := range spans {
		n = append(n, s.Name())
	}
	return n
}

func TestTraceChat(t *testing.T) {
	g := tracedGateway(t, false)
	key := &Key{Name: "team-a", Owner: "acme"}
	o, _, spans := tracedServe(t, g, APIChat, chatBody("oa/gpt-4o-mini", "", "hello there"), key)
	if o.Status != 200 {
		t.Fatalf("status %d: %s", o.Status, o.Body)
	}
	call, attempts := split(t, spans)
	if call.Name() != "chat oa/gpt-4o-mini" || len(attempts) != 1 || attempts[0].Name() != "chat gpt-4o-mini" {
		t.Fatalf("spans %v", names(spans))
	}
	wantAttrs(t, call, map[attribute.Key]string{
		"gen_ai.operation.name": "chat", "gen_ai.request.model": "oa/gpt-4o-mini", "gen_ai.provider.name": "openai",
		"gen_ai.response.model": "gpt-4o-mini", "gen_ai.usage.input_tokens": "2", "gen_ai.usage.output_tokens": "3",
		"gen_ai.response.finish_reasons": `["stop"]`, "modelgate.key.name": "team-a", "modelgate.account": "acme",
		"modelgate.provider": "oa", "modelgate.fallback": "false", "modelgate.attempts": "1", "http.response.status_code": "200",
		"modelgate.cost": attrs(call)["modelgate.cost"].String(),
	}, "error.type", "modelgate.request.body", "modelgate.response.body")
	if cost := attrs(call)["modelgate.cost"]; cost.Type() != attribute.FLOAT64 || cost.AsFloat64() <= 0 {
		t.Errorf("modelgate.cost %v, want the call's price", cost.String())
	}
	wantAttrs(t, attempts[0], map[attribute.Key]string{
		"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-4o-mini",
		"gen_ai.response.model": "gpt-4o-mini", "gen_ai.usage.input_tokens": "2", "gen_ai.usage.output_tokens": "3",
		"gen_ai.response.finish_reasons": `["stop"]`, "server.address": "api.openai.example", "server.port": "443",
		"modelgate.provider": "oa", "modelgate.fallback": "false",
	}, "error.type", "modelgate.request.body")
	if id := attrs(attempts[0])["gen_ai.response.id"].AsString(); id == "" || !strings.Contains(string(o.Body), id) {
		t.Errorf("gen_ai.response.id %q, answer %s", id, o.Body)
	}
	for _, s := range spans {
		if s.Status().Code == codes.Error {
			t.Errorf("span %q: status %v", s.Name(), s.Status())
		}
	}
}

func TestTraceStream(t *testing.T) {
	g := tracedGateway(t, false)
	o, sink, spans := tracedServe(t, g, APIChat, chatBody("smart", `,"stream":true`, "hello there"), g.static)
	if !o.Streamed || !strings.Contains(sink.body.String(), "[DONE]") {
		t.Fatalf("not streamed: %d %s", o.Status, sink.body.String())
	}
	call, attempts := split(t, spans)
	if len(attempts) != 2 {
		t.Fatalf("spans %v", names(spans))
	}
	ok := attempts[1]
	// The attempt that streamed ends when the stream has ended, with the
	// stream's usage and what its chunks said.
	if ok.EndTime().Before(sink.last) {
		t.Errorf("the attempt ended at %v, before the stream's last write at %v", ok.EndTime(), sink.last)
	}
	want := map[attribute.Key]string{
		"gen_ai.response.model": "gpt-4o-mini", "gen_ai.usage.input_tokens": "2", "gen_ai.usage.output_tokens": "3",
		"gen_ai.response.finish_reasons": `["stop"]`,
	}
	wantAttrs(t, ok, want, "error.type")
	wantAttrs(t, call, want, "error.type")
}

func TestTraceFallback(t *testing.T) {
	g := tracedGateway(t, false)
	o, _, spans := tracedServe(t, g, APIChat, chatBody("smart", "", "hello there"), g.static)
	if o.Status != 200 {
		t.Fatalf("status %d: %s", o.Status, o.Body)
	}
	call, attempts := split(t, spans)
	if call.Name() != "chat smart" || len(attempts) != 2 || attempts[0].Name() != "chat gpt-4o" || attempts[1].Name() != "chat gpt-4o-mini" {
		t.Fatalf("spans %v", names(spans))
	}
	wantAttrs(t, attempts[0], map[attribute.Key]string{"modelgate.provider": "down", "modelgate.fallback": "false",
		"error.type": "server_error", "http.response.status_code": "500"}, "gen_ai.usage.input_tokens")
	if attempts[0].Status().Code != codes.Error {
		t.Errorf("the failed attempt's status %v", attempts[0].Status())
	}
	wantAttrs(t, attempts[1], map[attribute.Key]string{"modelgate.provider": "oa", "modelgate.fallback": "true",
		"gen_ai.usage.output_tokens": "3"}, "error.type")
	wantAttrs(t, call, map[attribute.Key]string{"modelgate.fallback": "true", "modelgate.attempts": "2",
		"modelgate.provider": "oa", "gen_ai.request.model": "smart"}, "error.type")
}

func TestTraceError(t *testing.T) {
	g := tracedGateway(t, false)
	o, _, spans := tracedServe(t, g, APIChat, chatBody("doomed", "", "hello there"), g.static)
	if o.Status != 500 {
		t.Fatalf("status %d: %s", o.Status, o.Body)
	}
	call, attempts := split(t, spans)
	if len(attempts) != 2 {
		t.Fatalf("spans %v", names(spans))
	}
	for _, s := range append(attempts, call) {
		if s.Status().Code != codes.Error {
			t.Errorf("span %q: status %v", s.Name(), s.Status())
		}
		wantAttrs(t, s, map[attribute.Key]string{"error.type": "server_error", "http.response.status_code": "500"})
	}
	wantAttrs(t, call, nil, "modelgate.cost", "gen_ai.usage.input_tokens")

	// A call refused before any provider: its span says why, with no
	// attempt.
	_, _, spans = tracedServe(t, g, APIChat, chatBody("no-such-model", "", "hi"), g.static)
	call, attempts = split(t, spans)
	if len(attempts) != 0 || call.Status().Code != codes.Error {
		t.Fatalf("spans %v, status %v", names(spans), call.Status())
	}
	wantAttrs(t, call, map[attribute.Key]string{"error.type": "model_not_found", "http.response.status_code": "404"})
}

func TestTraceContent(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "answer", true: "stream"}[stream], func(t *testing.T) {
			fields := ""
			if stream {
				fields = `,"stream":true`
			}
			body := chatBody("oa/gpt-4o-mini", fields, "the secret plan")

			// Off by default: no prompt, no answer.
			g := tracedGateway(t, false)
			_, _, spans := tracedServe(t, g, APIChat, body, g.static)
			for _, s := range spans {
				wantAttrs(t, s, nil, "modelgate.request.body", "modelgate.response.body")
			}

			g = tracedGateway(t, true)
			up := &bodyRecorder{Upstream: g.cfg.Providers["oa"].Upstream}
			g.cfg.Providers["oa"].Upstream = up
			g.rebuild(t)
			o, sink, spans := tracedServe(t, g, APIChat, body, g.static)
			call, attempts := split(t, spans)
			// The attempt holds the body the provider was sent (the
			// guards' masking done), the call what the client got.
			if len(up.bodies) != 1 || len(attempts) != 1 {
				t.Fatalf("%d requests, spans %v", len(up.bodies), names(spans))
			}
			req := attrs(attempts[0])["modelgate.request.body"].AsString()
			if req != string(up.bodies[0]) || !strings.Contains(req, "the secret plan") {
				t.Errorf("request body %q, the provider got %q", req, up.bodies[0])
			}
			wantAnswer := string(o.Body)
			if stream {
				wantAnswer = sink.body.String()
			}
			if a := attrs(call)["modelgate.response.body"].AsString(); a != wantAnswer || !strings.Contains(a, " secret") {
				t.Errorf("response body %q, the client got %q", a, wantAnswer)
			}
		})
	}
}

// bodyRecorder is an Upstream that keeps the bodies it sends.
type bodyRecorder struct {
	Upstream
	bodies [][]byte
}

func (u *bodyRecorder) Send(ctx context.Context, req providers.Request, stream bool, w http.ResponseWriter) error {
	u.bodies = append(u.bodies, req.Body)
	return u.Upstream.Send(ctx, req, stream, w)
}

func TestTraceContentTrimmed(t *testing.T) {
	attrs := appendContent(nil, attrRequestBody, []byte(strings.Repeat("x", maxCapturedContent+10)), false)
	if len(attrs) != 2 || len(attrs[0].Value.AsString()) != maxCapturedContent || !attrs[1].Value.AsBool() {
		t.Fatalf("%d attributes", len(attrs))
	}
}

func TestTraceGuards(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	ctx, server := tp.Tracer("test").Start(context.Background(), "POST")
	g := tracedGateway(t, false)
	c, o := &Call{API: APIChat, Body: chatBody("oa/gpt-4o-mini", "", "hi")}, &Outcome{}
	cctx := g.traceCall(ctx, c, o)
	// The guards see the call's context, or an attempt's under it.
	traceOf(cctx).noteGuards([]guardrails.Decision{{Guard: "pii", Direction: guardrails.Request, Action: guardrails.Mask, Found: []string{"email"}}})
	actx := o.trace.startAttempt(cctx, o, Target{Provider: g.Provider("oa"), Model: "gpt-4o-mini"}, &providers.Request{}, &exchange{})
	traceOf(actx).noteGuards([]guardrails.Decision{{Guard: "jailbreak", Direction: guardrails.Response, Action: guardrails.Log}})
	o.trace.endAttempt(c.API, o, 200, nil)
	o.trace.end(c, o)
	server.End()
	call, _ := split(t, rec.Ended())
	wantAttrs(t, call, map[attribute.Key]string{"modelgate.guards": `["pii:request:mask","jailbreak:response:log"]`})

	// Untraced, it does nothing.
	traceOf(context.Background()).noteGuards([]guardrails.Decision{{Guard: "pii"}})
}

// TestTraceCache checks the spans of calls the response cache sees: a
// miss goes to the provider, a hit (plain or streamed) has no attempt and
// says what the stored answer used.
func TestTraceCache(t *testing.T) {
	g := tracedGateway(t, true)
	g.withCache(t)
	for _, stream := range []string{"", `,"stream":true`} {
		body := chatBody("oa/gpt-4o-mini", stream, "cache me"+stream)
		_, _, spans := tracedServe(t, g, APIChat, body, g.static)
		call, attempts := split(t, spans)
		if len(attempts) != 1 {
			t.Fatalf("miss: spans %v", names(spans))
		}
		wantAttrs(t, call, map[attribute.Key]string{"modelgate.cache": "miss"})

		o, sink, spans := tracedServe(t, g, APIChat, body, g.static)
		call, attempts = split(t, spans)
		if len(attempts) != 0 || o.Cache != "hit" {
			t.Fatalf("hit: spans %v, cache %q", names(spans), o.Cache)
		}
		wantAttrs(t, call, map[attribute.Key]string{"modelgate.cache": "hit", "gen_ai.usage.input_tokens": "2", "modelgate.attempts": "0",
			"gen_ai.response.finish_reasons": `["stop"]`, "gen_ai.response.model": "gpt-4o-mini"}, "error.type")
		if got := attrs(call)["modelgate.response.body"].AsString(); got != answer(o, &sink.recordingSink) {
			t.Errorf("captured %q, the client got %q", got, answer(o, &sink.recordingSink))
		}
	}
}

// TestTraceNotRecording checks that a call whose context holds no
// recording span makes no span and costs the tracing nothing.
func TestTraceNotRecording(t *testing.T) {
	g := tracedGateway(t, false)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.NeverSample())))
	sampledOut, server := tp.Tracer("test").Start(context.Background(), "POST")
	for name, ctx := range map[string]context.Context{"no span": context.Background(), "sampled out": sampledOut} {
		sink := &recordingSink{}
		c, o := &Call{API: APIChat, Body: chatBody("smart", "", "hi"), Sink: sink}, &Outcome{}
		t0 := Target{Provider: g.Provider("oa"), Model: "gpt-4o-mini"}
		ex := exchange{}
		allocs := testing.AllocsPerRun(100, func() {
			actx := g.traceCall(ctx, c, o)
			actx = o.trace.startAttempt(actx, o, t0, nil, &ex)
			o.trace.sent(200, nil, false, false)
			o.trace.endAttempt(c.API, o, 200, nil)
			o.trace.end(c, o)
			_ = actx
		})
		if allocs != 0 || o.trace != nil || c.Sink != Sink(sink) {
			t.Errorf("%s: %v allocations, trace %v", name, allocs, o.trace)
		}
	}
	server.End()
	if n := len(rec.Ended()); n != 0 {
		t.Errorf("%d spans recorded", n)
	}
}

func TestProviderName(t *testing.T) {
	for typ, want := range map[string]string{"openai": "openai", "anthropic": "anthropic", "azure_openai": "azure.ai.openai",
		"bedrock": "aws.bedrock", "vertex": "gcp.vertex_ai", "gemini": "gcp.gemini", "cohere": "cohere", "mistral": "mistral_ai",
		"xai": "x_ai", "groq": "groq", "ollama": "ollama"} {
		if got := providerName(typ); got != want {
			t.Errorf("providerName(%q) = %q, want %q", typ, got, want)
		}
	}
	if !slices.Equal([]string{operationOf(APIMessages), operationOf(APIEmbeddings), operationOf(APIRerank)}, []string{"chat", "embeddings", "rerank"}) {
		t.Error("operations")
	}
}

// abortingUpstream starts a stream and breaks it off.
type abortingUpstream struct{}

func (abortingUpstream) Send(_ context.Context, _ providers.Request, _ bool, w http.ResponseWriter) error {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(`data: {"id":"chatcmpl-9","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"half"},"finish_reason":null}]}` + "\n\n"))
	return fmt.Errorf("reading the body: %w", ErrAborted)
}

func TestTraceStreamAborted(t *testing.T) {
	g := tracedGateway(t, false)
	g.cfg.Providers["cut"] = NewProvider("cut", "openai", nil, Endpoints{Chat: openai.Chat{}}, abortingUpstream{})
	g.rebuild(t)
	o, sink, spans := tracedServe(t, g, APIChat, chatBody("cut/gpt-4o-mini", `,"stream":true`, "hello"), g.static)
	if !o.Streamed || !strings.Contains(sink.body.String(), "upstream_aborted") {
		t.Fatalf("%d %s", o.Status, sink.body.String())
	}
	call, attempts := split(t, spans)
	for _, s := range []sdktrace.ReadOnlySpan{call, attempts[0]} {
		wantAttrs(t, s, map[attribute.Key]string{"error.type": "upstream_aborted", "gen_ai.response.id": "chatcmpl-9"}, "gen_ai.usage.input_tokens")
		if s.Status().Code != codes.Error {
			t.Errorf("span %q: status %v", s.Name(), s.Status())
		}
	}
}

// reusingUpstream streams its events from one buffer, which it
// overwrites after each write, as reverse_proxy reuses its read buffer.
type reusingUpstream struct{ events []string }

func (u reusingUpstream) Send(_ context.Context, _ providers.Request, _ bool, w http.ResponseWriter) error {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	buf := make([]byte, 4096)
	for _, ev := range u.events {
		n := copy(buf, ev)
		_, _ = w.Write(buf[:n])
		for i := range buf {
			buf[i] = 'x'
		}
	}
	return nil
}

// TestTraceStreamBuffersReused checks that what a span keeps of a
// stream's events survives the writer's reuse of their bytes.
func TestTraceStreamBuffersReused(t *testing.T) {
	g := tracedGateway(t, false)
	chunk := `data: {"id":"chatcmpl-7","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":%s}]}` + "\n\n"
	up := reusingUpstream{events: []string{fmt.Sprintf(chunk, "null"), fmt.Sprintf(chunk, `"length"`),
		`data: {"id":"chatcmpl-7","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}` + "\n\n",
		"data: [DONE]\n\n"}}
	g.cfg.Providers["reuse"] = NewProvider("reuse", "openai", nil, Endpoints{Chat: openai.Chat{}}, up)
	g.rebuild(t)
	o, sink, spans := tracedServe(t, g, APIChat, chatBody("reuse/gpt-4o-mini", `,"stream":true`, "hello"), g.static)
	if !o.Streamed || !strings.Contains(sink.body.String(), "[DONE]") {
		t.Fatalf("%d %s", o.Status, sink.body.String())
	}
	call, attempts := split(t, spans)
	for _, s := range []sdktrace.ReadOnlySpan{call, attempts[0]} {
		wantAttrs(t, s, map[attribute.Key]string{"gen_ai.response.model": "gpt-4o-mini", "gen_ai.response.id": "chatcmpl-7",
			"gen_ai.response.finish_reasons": `["length"]`, "gen_ai.usage.input_tokens": "5"}, "error.type")
	}
}

// TestTraceAPIs checks what the spans read of the answers of each API,
// passed through and translated, streamed and not.
func TestTraceAPIs(t *testing.T) {
	g := tracedGateway(t, false)
	messages := func(model, fields string) []byte {
		return fmt.Appendf(nil, `{"model":%q,"max_tokens":100%s,"messages":[{"role":"user","content":"hello there"}]}`, model, fields)
	}
	responsesBody := func(model, fields string) []byte {
		return fmt.Appendf(nil, `{"model":%q%s,"input":"hello there"}`, model, fields)
	}
	for _, tc := range []struct {
		name     string
		api      API
		body     []byte
		finish   string // gen_ai.response.finish_reasons as Value.String writes it
		provider string
		model    string // gen_ai.response.model
	}{
		{"messages, native", APIMessages, messages("claude/claude-sonnet-4-5", ""), `["end_turn"]`, "anthropic", "claude-sonnet-4-5"},
		{"messages, native, streamed", APIMessages, messages("claude/claude-sonnet-4-5", `,"stream":true`), `["end_turn"]`, "anthropic", "claude-sonnet-4-5"},
		{"messages, translated", APIMessages, messages("oa/gpt-4o-mini", ""), `["end_turn"]`, "openai", "gpt-4o-mini"},
		{"messages, translated, streamed", APIMessages, messages("oa/gpt-4o-mini", `,"stream":true`), `["end_turn"]`, "openai", "gpt-4o-mini"},
		{"responses, native", APIResponses, responsesBody("oa/gpt-4o-mini", ""), `["completed"]`, "openai", "gpt-4o-mini"},
		{"responses, native, streamed", APIResponses, responsesBody("oa/gpt-4o-mini", `,"stream":true`), `["completed"]`, "openai", "gpt-4o-mini"},
		{"responses, translated, streamed", APIResponses, responsesBody("claude/claude-sonnet-4-5", `,"stream":true,"max_output_tokens":100`), `["completed"]`, "anthropic", "claude-sonnet-4-5"},
		{"chat, translated", APIChat, chatBody("claude/claude-sonnet-4-5", `,"max_tokens":100`, "hello there"), `["stop"]`, "anthropic", "claude-sonnet-4-5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, sink, spans := tracedServe(t, g, tc.api, tc.body, g.static)
			if o.Status != 200 {
				t.Fatalf("status %d: %s%s", o.Status, o.Body, sink.body.String())
			}
			call, attempts := split(t, spans)
			if len(attempts) != 1 || call.Name() != "chat "+lookup(tc.body, "model").String() {
				t.Fatalf("spans %v", names(spans))
			}
			for _, s := range []sdktrace.ReadOnlySpan{call, attempts[0]} {
				wantAttrs(t, s, map[attribute.Key]string{"gen_ai.operation.name": "chat", "gen_ai.provider.name": tc.provider,
					"gen_ai.response.finish_reasons": tc.finish, "gen_ai.response.model": tc.model}, "error.type")
				if a := attrs(s); a["gen_ai.response.id"].AsString() == "" || a["gen_ai.usage.input_tokens"].AsInt64() <= 0 {
					t.Errorf("span %q: id %q, input tokens %v", s.Name(), a["gen_ai.response.id"].AsString(), a["gen_ai.usage.input_tokens"].String())
				}
			}
		})
	}
}

func TestTraceEmbeddingsAndRerank(t *testing.T) {
	g := tracedGateway(t, false)
	for _, tc := range []struct {
		api  API
		body string
		name string
		want map[attribute.Key]string
	}{
		{APIEmbeddings, `{"model":"oa/text-embedding-3-small","input":["one","two"]}`, "embeddings text-embedding-3-small",
			map[attribute.Key]string{"gen_ai.operation.name": "embeddings", "gen_ai.provider.name": "openai"}},
		{APIRerank, `{"model":"co/rerank-v3.5","query":"cats","documents":["cats purr","dogs bark"]}`, "rerank rerank-v3.5",
			map[attribute.Key]string{"gen_ai.operation.name": "rerank", "gen_ai.provider.name": "cohere"}},
	} {
		o, _, spans := tracedServe(t, g, tc.api, []byte(tc.body), g.static)
		if o.Status != 200 {
			t.Fatalf("status %d: %s", o.Status, o.Body)
		}
		call, attempts := split(t, spans)
		if len(attempts) != 1 || attempts[0].Name() != tc.name {
			t.Fatalf("spans %v", names(spans))
		}
		for _, s := range []sdktrace.ReadOnlySpan{call, attempts[0]} {
			wantAttrs(t, s, tc.want, "error.type", "gen_ai.response.finish_reasons", "gen_ai.response.model")
		}
		if tc.api == APIEmbeddings && attrs(call)["gen_ai.usage.input_tokens"].AsInt64() <= 0 {
			t.Errorf("embeddings input tokens %v", attrs(call)["gen_ai.usage.input_tokens"].String())
		}
	}
}

func TestTracePromptCache(t *testing.T) {
	g := tracedGateway(t, false)
	body := func(q string) []byte {
		return []byte(`{"model":"claude/claude-sonnet-4-5","max_tokens":100,"system":[{"type":"text","text":"one two three four","cache_control":{"type":"ephemeral"}}],` +
			`"messages":[{"role":"user","content":"` + q + `"}]}`)
	}
	_, _, spans := tracedServe(t, g, APIMessages, body("hi"), g.static)
	call, _ := split(t, spans)
	wantAttrs(t, call, map[attribute.Key]string{"gen_ai.usage.cache_creation.input_tokens": "4", "gen_ai.usage.input_tokens": "5"},
		"gen_ai.usage.cache_read.input_tokens")
	_, _, spans = tracedServe(t, g, APIMessages, body("hi there"), g.static)
	call, _ = split(t, spans)
	wantAttrs(t, call, map[attribute.Key]string{"gen_ai.usage.cache_read.input_tokens": "4", "gen_ai.usage.input_tokens": "6"},
		"gen_ai.usage.cache_creation.input_tokens")
}

// failingUpstream answers status with an OpenAI error, or (status 0)
// cannot reach its provider.
type failingUpstream struct{ status int }

func (u failingUpstream) Send(_ context.Context, _ providers.Request, _ bool, w http.ResponseWriter) error {
	if u.status == 0 {
		return errors.New("dial tcp 10.0.0.1:443: connect: connection refused")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(u.status)
	_, _ = w.Write([]byte(`{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}`))
	return nil
}

// TestTraceAttemptStatus checks an attempt span's status code: the
// provider's, even where the client gets another (a provider's 401 is
// the client's 502), and none when the provider could not be reached.
func TestTraceAttemptStatus(t *testing.T) {
	g := tracedGateway(t, false)
	g.cfg.Providers["refused"] = NewProvider("refused", "openai", nil, Endpoints{Chat: openai.Chat{}}, failingUpstream{})
	g.cfg.Providers["badkey"] = NewProvider("badkey", "openai", nil, Endpoints{Chat: openai.Chat{}}, failingUpstream{status: 401})
	g.cfg.Aliases["unlucky"] = []string{"refused/gpt-4o", "badkey/gpt-4o"}
	g.rebuild(t)
	o, _, spans := tracedServe(t, g, APIChat, chatBody("unlucky", "", "hi"), g.static)
	if o.Status != 502 {
		t.Fatalf("status %d: %s", o.Status, o.Body)
	}
	call, attempts := split(t, spans)
	if len(attempts) != 2 {
		t.Fatalf("spans %v", names(spans))
	}
	wantAttrs(t, attempts[0], map[attribute.Key]string{"error.type": "upstream_unreachable"}, "http.response.status_code")
	wantAttrs(t, attempts[1], map[attribute.Key]string{"error.type": "upstream_auth_failed", "http.response.status_code": "401"})
	wantAttrs(t, call, map[attribute.Key]string{"error.type": "upstream_auth_failed", "http.response.status_code": "502"})
	for _, s := range spans[:len(spans)-1] {
		if strings.Contains(s.Status().Description, "Incorrect API key") {
			t.Errorf("span %q repeats the provider's message: %q", s.Name(), s.Status().Description)
		}
	}
}

// TestTraceGuardsServed checks that the guards' decisions of a call served
// through the core reach its span: the request's mask, and the answer
// guard's allow (the provider echoed the masked text), streamed or not.
func TestTraceGuardsServed(t *testing.T) {
	gt := newGuardTest(t, piiRequest, piiResponse)
	for _, stream := range []string{"", `,"stream":true`} {
		body := chatBody("oa/gpt-4o-mini", stream, "write to ann@example.com")
		o, _, spans := tracedServe(t, gt.testGateway, APIChat, body, gt.static)
		if o.Status != 200 {
			t.Fatalf("stream %q: status %d", stream, o.Status)
		}
		call, _ := split(t, spans)
		wantAttrs(t, call, map[attribute.Key]string{"modelgate.guards": `["pii:request:mask","pii-out:response:allow"]`})
	}
}

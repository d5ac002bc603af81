package integration

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/modelgate/modelgate/internal/otlptest"
	"github.com/modelgate/modelgate/providers/providertest"
)

// gatewayScope is the instrumentation scope of modelgate's spans.
const gatewayScope = "github.com/modelgate/modelgate/gateway"

// TestProcessTracing runs caddy with testdata/caddyfiles/tracing.Caddyfile
// (Caddy's tracing handler before modelgate, content captured), exporting
// to an OTLP receiver over gRPC and over HTTP as the OTEL_* environment
// variables say, and checks the spans of a chat, a streamed chat, a
// fallback and a call every target failed: the call's span under the
// tracing handler's server span, an attempt span per provider call under
// it, with their attributes.
func TestProcessTracing(t *testing.T) {
	for _, tc := range []struct{ name, protocol string }{{"grpc", "grpc"}, {"http", "http/protobuf"}} {
		t.Run(tc.name, func(t *testing.T) {
			recv := otlptest.Start(t)
			fake := providertest.Start(t, providertest.Options{OpenAIKey: openAIKey})
			down := providertest.StartChaos(t, providertest.ServerErrors())
			in := newInstance(t, "tracing-"+tc.name, t.TempDir(), fake)
			in.config = "tracing.Caddyfile"
			in.set("MG_DOWN=" + down.URL).set(recv.Env(tc.protocol)...)
			in.start()

			ctx := context.Background()
			c := in.client()
			if _, err := c.Chat.Completions.New(ctx, userChat("oa/gpt-4o-mini", "plain question")); err != nil {
				t.Fatal(err)
			}
			s := c.Chat.Completions.NewStreaming(ctx, userChat("oa/gpt-4o-mini", "streamed question"))
			for s.Next() {
			}
			if err := s.Err(); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Chat.Completions.New(ctx, userChat("smart", "fallback question")); err != nil {
				t.Fatal(err)
			}
			_, err := c.Chat.Completions.New(ctx, userChat("doomed", "doomed question"))
			if apiErr, ok := errors.AsType[*openai.Error](err); !ok || apiErr.StatusCode != 500 {
				t.Fatalf("doomed: %v", err)
			}

			spans := recv.Wait(t, 20*time.Second, func(spans []otlptest.Span) bool {
				calls, attempts := 0, 0
				for _, s := range spans {
					if s.Scope == gatewayScope && s.Kind == tracepb.Span_SPAN_KIND_INTERNAL {
						calls++
					}
					if s.Scope == gatewayScope && s.Kind == tracepb.Span_SPAN_KIND_CLIENT {
						attempts++
					}
				}
				return calls == 4 && attempts == 5
			})
			tr := traces(t, spans, tc.name)

			plain := tr.call("plain question")
			tr.want(plain.call, "chat oa/gpt-4o-mini", map[string]any{"gen_ai.operation.name": "chat", "gen_ai.request.model": "oa/gpt-4o-mini",
				"gen_ai.provider.name": "openai", "gen_ai.response.model": "gpt-4o-mini", "gen_ai.usage.input_tokens": int64(4),
				"gen_ai.usage.output_tokens": int64(3), "modelgate.key.name": "alice", "modelgate.fallback": false, "modelgate.attempts": int64(1)})
			if cost, ok := plain.call.Attrs["modelgate.cost"].(float64); !ok || cost <= 0 {
				t.Errorf("modelgate.cost %v", plain.call.Attrs["modelgate.cost"])
			}
			if !strings.Contains(plain.call.Str("modelgate.response.body"), "echo: plain question") {
				t.Errorf("response body %q", plain.call.Str("modelgate.response.body"))
			}
			tr.want(plain.attempts[0], "chat gpt-4o-mini", map[string]any{"gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-4o-mini",
				"gen_ai.response.model": "gpt-4o-mini", "gen_ai.usage.input_tokens": int64(4), "gen_ai.usage.output_tokens": int64(3),
				"gen_ai.response.finish_reasons": []any{"stop"}, "server.address": "127.0.0.1", "modelgate.provider": "oa"})

			streamed := tr.call("streamed question")
			tr.want(streamed.attempts[0], "chat gpt-4o-mini", map[string]any{"gen_ai.usage.input_tokens": int64(4),
				"gen_ai.usage.output_tokens": int64(3), "gen_ai.response.finish_reasons": []any{"stop"}, "gen_ai.response.model": "gpt-4o-mini"})
			if body := streamed.call.Str("modelgate.response.body"); !strings.Contains(body, "data: [DONE]") {
				t.Errorf("streamed response body %q", body)
			}

			fb := tr.call("fallback question")
			if len(fb.attempts) != 2 {
				t.Fatalf("fallback: %d attempts", len(fb.attempts))
			}
			tr.want(fb.call, "chat smart", map[string]any{"modelgate.fallback": true, "modelgate.attempts": int64(2), "modelgate.provider": "oa"})
			tr.want(fb.attempts[0], "chat gpt-4o", map[string]any{"modelgate.provider": "down", "error.type": "server_error",
				"http.response.status_code": int64(500), "modelgate.fallback": false})
			tr.want(fb.attempts[1], "chat gpt-4o-mini", map[string]any{"modelgate.provider": "oa", "modelgate.fallback": true,
				"gen_ai.usage.output_tokens": int64(3)})
			if fb.attempts[0].Status != tracepb.Status_STATUS_CODE_ERROR || fb.attempts[1].Status == tracepb.Status_STATUS_CODE_ERROR {
				t.Errorf("fallback attempts' statuses %v, %v", fb.attempts[0].Status, fb.attempts[1].Status)
			}

			doomed := tr.call("doomed question")
			tr.want(doomed.call, "chat doomed", map[string]any{"error.type": "server_error", "http.response.status_code": int64(500)})
			if doomed.call.Status != tracepb.Status_STATUS_CODE_ERROR {
				t.Errorf("doomed call's status %v", doomed.call.Status)
			}
		})
	}
}

// callSpans are the spans of one call: the call's and its attempts', in
// the order they started.
type callSpans struct {
	call     otlptest.Span
	attempts []otlptest.Span
}

// spanTraces are received spans by trace.
type spanTraces struct {
	t     *testing.T
	spans []otlptest.Span
}

// traces checks that the spans came over protocol and returns them.
func traces(t *testing.T, spans []otlptest.Span, protocol string) *spanTraces {
	t.Helper()
	for _, s := range spans {
		if s.Protocol != protocol {
			t.Fatalf("span %q came over %s", s.Name, s.Protocol)
		}
	}
	return &spanTraces{t: t, spans: spans}
}

// call finds the call whose first attempt was sent prompt, and checks
// that its span is the child of the tracing handler's server span and
// its attempts its children.
func (tr *spanTraces) call(prompt string) callSpans {
	t := tr.t
	t.Helper()
	var cs callSpans
	for _, s := range tr.spans {
		if s.Scope == gatewayScope && s.Kind == tracepb.Span_SPAN_KIND_CLIENT && strings.Contains(s.Str("modelgate.request.body"), prompt) {
			cs.attempts = append(cs.attempts, s)
		}
	}
	if len(cs.attempts) == 0 {
		t.Fatalf("no attempt was sent %q", prompt)
	}
	for _, s := range tr.spans {
		if s.SpanID == cs.attempts[0].ParentSpanID {
			cs.call = s
		}
	}
	if cs.call.Kind != tracepb.Span_SPAN_KIND_INTERNAL || cs.call.Scope != gatewayScope {
		t.Fatalf("the attempt of %q has no call span", prompt)
	}
	for _, a := range cs.attempts {
		if a.ParentSpanID != cs.call.SpanID || a.TraceID != cs.call.TraceID {
			t.Fatalf("an attempt of %q is not the call's child", prompt)
		}
	}
	var server otlptest.Span
	for _, s := range tr.spans {
		if s.SpanID == cs.call.ParentSpanID {
			server = s
		}
	}
	if server.Kind != tracepb.Span_SPAN_KIND_SERVER || server.Name != "modelgate" || server.TraceID != cs.call.TraceID {
		t.Fatalf("the call span of %q is not the child of the tracing handler's span: parent %+v", prompt, server)
	}
	if cs.call.End.Before(cs.attempts[len(cs.attempts)-1].End) || server.End.Before(cs.call.End) {
		t.Errorf("the spans of %q end out of order", prompt)
	}
	return cs
}

// want checks a span's name and attributes.
func (tr *spanTraces) want(s otlptest.Span, name string, attrs map[string]any) {
	t := tr.t
	t.Helper()
	if s.Name != name {
		t.Errorf("span %q, want %q", s.Name, name)
	}
	for k, v := range attrs {
		got := s.Attrs[k]
		if gl, ok := got.([]any); ok {
			if wl, ok := v.([]any); !ok || len(gl) != len(wl) || (len(gl) > 0 && gl[0] != wl[0]) {
				t.Errorf("span %q: %s = %v, want %v", s.Name, k, got, v)
			}
			continue
		}
		if got != v {
			t.Errorf("span %q: %s = %v (%T), want %v (%T)", s.Name, k, got, got, v, v)
		}
	}
}

package gateway

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// BenchmarkServeTraced is one chat call served through the fake provider,
// answered and streamed: untraced (no span in the context), sampled out
// (a span that does not record, as Caddy's tracing handler gives a
// request its sampler left out), and recorded by the SDK (no exporter:
// the cost of the spans themselves), with and without content captured.
// The difference between "off" and the others is the tracing's cost.
func BenchmarkServeTraced(b *testing.B) {
	recording := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
	sampledOut := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
	for _, stream := range []bool{false, true} {
		fields := ""
		if stream {
			fields = `,"stream":true`
		}
		body := chatBody("oa/gpt-4o-mini", fields, "Summarise the plot of Hamlet in one sentence please")
		for _, bc := range []struct {
			name    string
			tp      trace.TracerProvider // nil: no span
			capture bool
		}{
			{"off", nil, false},
			{"sampled_out", sampledOut, false},
			{"recording", recording, false},
			{"recording_capture", recording, true},
		} {
			name := map[bool]string{false: "answer", true: "stream"}[stream] + "/" + bc.name
			b.Run(name, func(b *testing.B) {
				g := newTestGateway(b)
				g.cfg.Tracing.CaptureContent = bc.capture
				g.rebuild(b)
				ctx := context.Background()
				if bc.tp != nil {
					var server trace.Span
					ctx, server = bc.tp.Tracer("bench").Start(ctx, "POST", trace.WithSpanKind(trace.SpanKindServer))
					defer server.End()
				}
				c := Call{API: APIChat, Body: body, Key: g.static, Sink: discardSink{}, Path: "/v1/chat/completions"}
				b.ReportAllocs()
				for b.Loop() {
					var o Outcome
					g.Serve(ctx, &c, &o)
					if o.Status != 200 {
						b.Fatalf("status %d: %s", o.Status, o.Body)
					}
				}
			})
		}
	}
}

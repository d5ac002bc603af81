package otlptest

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// TestReceiver exports a span through the SDK's OTLP exporters, over gRPC
// and over HTTP (gzipped), and finds it received whole.
func TestReceiver(t *testing.T) {
	r := Start(t)
	ctx := context.Background()
	for _, tc := range []struct {
		protocol string
		exporter func() (sdktrace.SpanExporter, error)
	}{
		{"grpc", func() (sdktrace.SpanExporter, error) {
			return otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL(r.GRPCEndpoint))
		}},
		{"http", func() (sdktrace.SpanExporter, error) {
			return otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(r.HTTPEndpoint+"/v1/traces"), otlptracehttp.WithCompression(otlptracehttp.GzipCompression))
		}},
	} {
		t.Run(tc.protocol, func(t *testing.T) {
			exp, err := tc.exporter()
			if err != nil {
				t.Fatal(err)
			}
			tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
			_, span := tp.Tracer("otlptest").Start(ctx, "span "+tc.protocol, trace.WithSpanKind(trace.SpanKindClient),
				trace.WithAttributes(attribute.String("s", "v"), attribute.Int("n", 7), attribute.StringSlice("l", []string{"a", "b"})))
			span.End()
			if err := tp.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			spans := r.Wait(t, 5*time.Second, func(s []Span) bool {
				for _, x := range s {
					if x.Name == "span "+tc.protocol {
						return true
					}
				}
				return false
			})
			got := spans[len(spans)-1]
			if got.Protocol != tc.protocol || got.Kind != tracepb.Span_SPAN_KIND_CLIENT || got.Str("s") != "v" || got.Attrs["n"] != int64(7) ||
				len(got.Attrs["l"].([]any)) != 2 || got.Scope != "otlptest" || got.TraceID != span.SpanContext().TraceID().String() {
				t.Fatalf("%+v", got)
			}
		})
	}
}

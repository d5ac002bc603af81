// Package otlptest is an OTLP trace receiver for tests: the collector's
// trace service over gRPC and its HTTP endpoint POST /v1/traces
// (protobuf, gzip or not), both on loopback, keeping every span it is
// sent. A process under test exports to it as the OTEL_EXPORTER_OTLP_*
// environment variables say (Env).
package otlptest

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// A Span is a span as the receiver got it.
type Span struct {
	Name                          string
	Kind                          tracepb.Span_SpanKind
	TraceID, SpanID, ParentSpanID string // hex
	Start, End                    time.Time
	Status                        tracepb.Status_StatusCode
	StatusMessage                 string
	Attrs                         map[string]any // string, int64, float64, bool, or []any of those
	Scope                         string         // the instrumentation scope's name
	Protocol                      string         // "grpc" or "http"
}

// Str is the string attribute k ("" when there is none).
func (s Span) Str(k string) string {
	v, _ := s.Attrs[k].(string)
	return v
}

// A Receiver keeps the spans exported to it.
type Receiver struct {
	coltracepb.UnimplementedTraceServiceServer

	// GRPCEndpoint and HTTPEndpoint are the base URLs of the two
	// transports ("http://127.0.0.1:port").
	GRPCEndpoint, HTTPEndpoint string

	mu      sync.Mutex
	spans   []Span
	changed chan struct{} // closed and replaced when spans arrive
}

// Start serves a receiver on loopback until the test ends.
func Start(tb testing.TB) *Receiver {
	tb.Helper()
	r := &Receiver{changed: make(chan struct{})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	gs := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(gs, r)
	go func() { _ = gs.Serve(ln) }()
	hs := httptest.NewServer(http.HandlerFunc(r.serveHTTP))
	r.GRPCEndpoint, r.HTTPEndpoint = "http://"+ln.Addr().String(), hs.URL
	tb.Cleanup(func() {
		gs.Stop()
		hs.Close()
	})
	return r
}

// Env is the environment that has a process export its spans to r over
// protocol ("grpc" or "http/protobuf"), in batches sent every 100 ms.
func (r *Receiver) Env(protocol string) []string {
	endpoint := r.HTTPEndpoint
	if protocol == "grpc" {
		endpoint = r.GRPCEndpoint
	}
	return []string{"OTEL_TRACES_EXPORTER=otlp", "OTEL_EXPORTER_OTLP_PROTOCOL=" + protocol,
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + endpoint, "OTEL_BSP_SCHEDULE_DELAY=100", "OTEL_TRACES_SAMPLER=parentbased_always_on"}
}

// Export implements the collector's trace service.
func (r *Receiver) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	r.add(req, "grpc")
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// serveHTTP serves POST /v1/traces, the OTLP/HTTP binary protobuf
// encoding.
func (r *Receiver) serveHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		http.NotFound(w, req)
		return
	}
	if ct := req.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		http.Error(w, "content type "+ct+" is not application/x-protobuf", http.StatusUnsupportedMediaType)
		return
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var ex coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &ex); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.add(&ex, "http")
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// add keeps the spans of an export request.
func (r *Receiver) add(req *coltracepb.ExportTraceServiceRequest, protocol string) {
	var got []Span
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				got = append(got, Span{Name: s.GetName(), Kind: s.GetKind(),
					TraceID: hex.EncodeToString(s.GetTraceId()), SpanID: hex.EncodeToString(s.GetSpanId()),
					ParentSpanID: hex.EncodeToString(s.GetParentSpanId()),
					Start:        time.Unix(0, int64(s.GetStartTimeUnixNano())), End: time.Unix(0, int64(s.GetEndTimeUnixNano())),
					Status: s.GetStatus().GetCode(), StatusMessage: s.GetStatus().GetMessage(),
					Attrs: attrs(s.GetAttributes()), Scope: ss.GetScope().GetName(), Protocol: protocol})
			}
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.spans = append(r.spans, got...)
	close(r.changed)
	r.changed = make(chan struct{})
}

// Spans returns the spans received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.spans)
}

// Wait waits up to timeout for the spans received to satisfy done, and
// returns them; the test fails if they never do.
func (r *Receiver) Wait(tb testing.TB, timeout time.Duration, done func([]Span) bool) []Span {
	tb.Helper()
	deadline := time.After(timeout)
	for {
		r.mu.Lock()
		spans, changed := slices.Clone(r.spans), r.changed
		r.mu.Unlock()
		if done(spans) {
			return spans
		}
		select {
		case <-changed:
		case <-deadline:
			tb.Fatalf("the spans received in %v are not the ones awaited: %d spans", timeout, len(spans))
			return nil
		}
	}
}

// attrs are OTLP attributes as Go values.
func attrs(kvs []*commonpb.KeyValue) map[string]any {
	m := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		m[kv.GetKey()] = value(kv.GetValue())
	}
	return m
}

func value(v *commonpb.AnyValue) any {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return x.IntValue
	case *commonpb.AnyValue_DoubleValue:
		return x.DoubleValue
	case *commonpb.AnyValue_BoolValue:
		return x.BoolValue
	case *commonpb.AnyValue_ArrayValue:
		var out []any
		for _, e := range x.ArrayValue.GetValues() {
			out = append(out, value(e))
		}
		return out
	}
	return nil
}

package providertest

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
)

// discardWriter is a ResponseWriter that keeps only the status, so the
// benchmarks measure the fake, not a recorder.
type discardWriter struct {
	h      http.Header
	status int
	n      int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) WriteHeader(status int)      { w.status = status }
func (w *discardWriter) Write(b []byte) (int, error) { w.n += len(b); return len(b), nil }
func (w *discardWriter) Flush()                      {}

// benchServe runs one request through ServeHTTP per iteration, as the load
// benchmark's upstream sees them (NoRecord).
func benchServe(b *testing.B, path, body string, header ...string) {
	s := New(Options{NoRecord: true})
	req, err := http.NewRequest(http.MethodPost, "http://fake"+path, nil)
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rd := bytes.NewReader([]byte(body))
	req.ContentLength = int64(len(body))
	w := &discardWriter{h: http.Header{}}
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		rd.Reset([]byte(body))
		req.Body = io.NopCloser(rd)
		clear(w.h)
		w.status = 0
		s.ServeHTTP(w, req)
		if w.status != http.StatusOK {
			b.Fatalf("status %d", w.status)
		}
	}
}

const (
	benchOpenAI    = `{"model":"gpt-4o-mini","messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"What is the capital of France?"}],"max_tokens":64,"temperature":0.2}`
	benchAnthropic = `{"model":"claude-sonnet-4-5","max_tokens":64,"system":"You are a helpful assistant.","temperature":0.2,"messages":[{"role":"user","content":"What is the capital of France?"}]}`
	benchCohere    = `{"model":"command-a-03-2025","messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"What is the capital of France?"}],"stream":false,"max_tokens":64,"temperature":0.2}`
)

func BenchmarkOpenAI(b *testing.B) {
	benchServe(b, oaPath, benchOpenAI, "Authorization", "Bearer k")
}

func BenchmarkOpenAIStream(b *testing.B) {
	benchServe(b, oaPath, `{"stream":true,`+benchOpenAI[1:], "Authorization", "Bearer k")
}

func BenchmarkAnthropic(b *testing.B) {
	benchServe(b, anPath, benchAnthropic, "X-Api-Key", "k", "Anthropic-Version", "2023-06-01")
}

func BenchmarkAnthropicStream(b *testing.B) {
	benchServe(b, anPath, `{"stream":true,`+benchAnthropic[1:], "X-Api-Key", "k", "Anthropic-Version", "2023-06-01")
}

func BenchmarkCohere(b *testing.B) {
	benchServe(b, cohereChatPath, benchCohere, "Authorization", "Bearer k")
}

func BenchmarkCohereStream(b *testing.B) {
	benchServe(b, cohereChatPath, strings.Replace(benchCohere, `"stream":false`, `"stream":true`, 1), "Authorization", "Bearer k")
}

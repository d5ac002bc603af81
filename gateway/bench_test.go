package gateway

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelgate/modelgate/guardrails"
	"github.com/modelgate/modelgate/internal/evicted"
	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/openai"
)

// BenchmarkPassThroughAnswer is the OpenAI pass-through's answer rewrite
// (the translator's, with the usage it reads, then the model filled in
// where the provider left it out).
func BenchmarkPassThroughAnswer(b *testing.B) {
	answer := []byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1795448284,"model":"gpt-4o-mini","system_fingerprint":"fp_fake","choices":[{"index":0,"message":{"role":"assistant","content":"echo: Summarise the plot of Hamlet in one sentence please","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":14,"completion_tokens":10,"total_tokens":24,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},"service_tier":"default"}`)
	var u Usage
	b.ReportAllocs()
	b.SetBytes(int64(len(answer)))
	for b.Loop() {
		out, used, err := openai.Chat{}.ChatResponse(answer)
		if err != nil {
			b.Fatal(err)
		}
		_ = withModel(out, "gpt-4o-mini")
		u = used
	}
	if u.Prompt != 14 {
		b.Fatalf("usage %+v", u)
	}
}

// discardSink is a client's connection that forgets what it is sent, as
// a client reads it: a benchmark measures the gateway, not a buffer of
// everything a stream ever sent.
type discardSink struct{}

func (discardSink) WriteHeader(int)             {}
func (discardSink) Write(p []byte) (int, error) { return len(p), nil }
func (discardSink) Flush() error                { return nil }

// BenchmarkStreamWrite is one write of a provider's stream, one event,
// through the upstreamWriter of a stream passed through (its relay), on
// its way to the client: with the usage the client asked for
// ("usage":null in every chunk, passed on as it is, so the write itself
// goes on), and without (the gateway asked for it and takes the field out,
// a copy); and with the usage asked, through a pii guard (every detector,
// mask) on answers. The evicted ones write eight events at a time, as the
// harness's streams arrive, each write with the caches cold
// (evicted-ns/op).
func BenchmarkStreamWrite(b *testing.B) {
	ev := []byte(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1795448284,"model":"gpt-4o-mini","system_fingerprint":"fp_fake","choices":[{"index":0,"delta":{"content":" word"},"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n")
	eng, err := guardrails.New(guardrails.Config{Guards: []guardrails.GuardConfig{{Name: "pii", Type: "pii", Apply: []string{"response"}}}}, guardrails.Options{})
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name    string
		strip   bool
		guarded bool
		burst   int  // events a write
		cold    bool // the core's caches written over before each write
	}{
		{"usage_asked", false, false, 1, false},
		{"usage_stripped", true, false, 1, false},
		{"guarded", false, true, 1, false},
		{"burst10_unguarded", false, false, 10, false},
		{"burst10_guarded", false, true, 10, false},
		// As in a busy server, where the kernel's and other requests' work
		// between two reads of a stream moves the code and the stream's
		// state out of the core's caches (evicted.Ops).
		{"evicted/burst8_unguarded", false, false, 8, true},
		{"evicted/burst8_guarded", false, true, 8, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var sink Sink = discardSink{}
			if bc.guarded {
				sink = &streamGuard{Sink: sink, ctx: context.Background(), as: eng.AnswerStream(guardrails.Chat, nil), api: openAIAPI}
			}
			w := &upstreamWriter{sink: sink, client: make(http.Header), header: make(http.Header), framing: providers.SSE, api: openAIAPI,
				wantStream: true, tr: openai.NewRelay(!bc.strip), o: &Outcome{Start: time.Now()}}
			w.Header().Set("Content-Type", "text/event-stream")
			b.ReportAllocs()
			p := bytes.Repeat(ev, bc.burst)
			if bc.cold {
				b.ReportMetric(evicted.Ops(b, func() {
					if _, err := w.Write(p); err != nil {
						b.Fatal(err)
					}
				}), "evicted-ns/op")
				return
			}
			for b.Loop() {
				if _, err := w.Write(p); err != nil {
					b.Fatal(err)
				}
			}
			w.finishStream(false)
		})
	}
}

// BenchmarkStreamWhole is a whole chat stream of 50 words, and of 120
// (its opening chunk, the words, its finish, usage and [DONE]; 120 words
// are about the 32 KiB a proxy reads at once) in one write through the
// relay and its sink, without and with a pii guard (every detector,
// mask) on answers: a stream as it arrives at a busy gateway, whose read
// finds all of it (on the harness at 50 connections, a stream comes in a
// read or two). What it costs is its events read, held and sent one by
// one.
func BenchmarkStreamWhole(b *testing.B) {
	const head = `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1795448284,"model":"gpt-4o-mini","system_fingerprint":"fp_fake","choices":[`
	chunk := func(delta, finish string) string {
		return head + `{"index":0,"delta":` + delta + `,"logprobs":null,"finish_reason":` + finish + `}],"usage":null}` + "\n\n"
	}
	eng, err := guardrails.New(guardrails.Config{Guards: []guardrails.GuardConfig{{Name: "pii", Type: "pii", Apply: []string{"response"}}}}, guardrails.Options{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for _, c := range []struct {
		words   int
		guarded bool
	}{{50, false}, {50, true}, {120, false}, {120, true}} {
		var p strings.Builder
		p.WriteString(chunk(`{"role":"assistant","content":"","refusal":null}`, "null"))
		for i := range c.words {
			p.WriteString(chunk(fmt.Sprintf(`{"content":" word%d"}`, i), "null"))
		}
		p.WriteString(chunk(`{}`, `"stop"`))
		p.WriteString(head + fmt.Sprintf(`],"usage":{"prompt_tokens":19,"completion_tokens":%d,"total_tokens":%d}}`, c.words, c.words+19) + "\n\n" + "data: [DONE]\n\n")
		stream := []byte(p.String())
		guarded := c.guarded
		b.Run(fmt.Sprintf("words=%d/", c.words)+map[bool]string{false: "unguarded", true: "guarded"}[guarded], func(b *testing.B) {
			var sent countSink
			b.ReportAllocs()
			for b.Loop() {
				var sink Sink = &sent
				var sg *streamGuard
				if guarded {
					// As start and finish take and give back the stream and
					// the buffer (finish also tells the observer).
					sg = &streamGuard{Sink: sink, ctx: ctx, as: eng.AnswerStream(guardrails.Chat, nil), api: openAIAPI, outp: guardOuts.Get().(*[]byte)}
					sg.out = *sg.outp
					sink = sg
				}
				w := &upstreamWriter{sink: sink, client: make(http.Header), header: make(http.Header), framing: providers.SSE, api: openAIAPI,
					wantStream: true, tr: openai.NewRelay(true), o: &Outcome{Start: time.Now()}}
				w.Header().Set("Content-Type", "text/event-stream")
				if _, err := w.Write(stream); err != nil {
					b.Fatal(err)
				}
				w.finishStream(false)
				if sg != nil {
					sg.as.Release()
					*sg.outp = sg.out[:0]
					guardOuts.Put(sg.outp)
				}
			}
			if sent.n != b.N*len(stream) {
				b.Fatalf("%d bytes sent, want %d", sent.n, b.N*len(stream))
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*c.words), "ns/word")
		})
	}
}

// countSink is a client's connection that counts what it is sent.
type countSink struct{ n int }

func (*countSink) WriteHeader(int)               {}
func (c *countSink) Write(p []byte) (int, error) { c.n += len(p); return len(p), nil }
func (*countSink) Flush() error                  { return nil }

// BenchmarkServeGuards is one whole call through the core, against the
// fake provider in memory, without guards and with a pii guard (every
// detector, mask) on requests and answers: what the guards add to a
// request, streams included. The texts hold nothing to mask (the common
// case).
func BenchmarkServeGuards(b *testing.B) {
	prompt := "Summarise the plot of Hamlet in one sentence please"
	var words strings.Builder
	for i := range 50 {
		fmt.Fprintf(&words, "word%d ", i)
	}
	calls := []struct {
		name string
		api  API
		body []byte
	}{
		{"chat", APIChat, chatBody("oa/gpt-4o-mini", "", prompt)},
		{"chat_stream50", APIChat, chatBody("oa/gpt-4o-mini", `,"stream":true`, words.String())},
		// A stream of one word: what a guarded stream costs whatever its
		// length (the request's guard, the answer stream taken and
		// released, its first and last chunks).
		{"chat_stream1", APIChat, chatBody("oa/gpt-4o-mini", `,"stream":true,"max_tokens":1`, words.String())},
		{"messages", APIMessages, []byte(`{"model":"claude/claude-sonnet-4-5","max_tokens":100,"messages":[{"role":"user","content":"` + prompt + `"}]}`)},
		{"responses", APIResponses, []byte(`{"model":"oa/gpt-4o-mini","store":false,"input":"` + prompt + `"}`)},
	}
	for _, guards := range []string{"none", "pii"} {
		g := newTestGateway(b)
		if guards == "pii" {
			eng, err := guardrails.New(guardrails.Config{Guards: []guardrails.GuardConfig{{Name: "pii", Type: "pii"}}}, guardrails.Options{})
			if err != nil {
				b.Fatal(err)
			}
			g.cfg.Guards = eng
			g.rebuild(b)
		}
		for _, c := range calls {
			b.Run(c.name+"/guards="+guards, func(b *testing.B) {
				b.ReportAllocs()
				ctx := context.Background()
				cpu, ok := processCPU()
				for b.Loop() {
					o := &Outcome{}
					g.Serve(ctx, &Call{API: c.api, Body: c.body, Key: g.static, Sink: discardSink{}, Path: "/bench"}, o)
					if o.Status != 200 {
						b.Fatalf("%d %s", o.Status, o.Body)
					}
				}
				// The process's CPU time per call, which a busy machine
				// disturbs less than the wall time.
				if after, ok2 := processCPU(); ok && ok2 {
					b.ReportMetric(float64(after-cpu)/float64(b.N), "cpu-ns/op")
				}
			})
		}
	}
}

package guardrails

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/modelgate/modelgate/internal/evicted"
)

// benchProse is typical chat content: prose, a little code, numbers,
// dates and versions, and no personal data (the common case).
const benchProse = `The deployment on 2024-03-15 moved the service to version 2.14.1; latency fell from 120 ms to 85 ms at the 99th percentile. ` +
	"Here is the handler:\n\n```go\nfunc (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {\n\tctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)\n\tdefer cancel()\n\tif err := h.do(ctx, r); err != nil {\n\t\thttp.Error(w, err.Error(), 500)\n\t}\n}\n```\n\n" +
	`Please summarise the quarterly report: revenue grew 12.5% to 4,200,000 EUR, and the team closed 37 of 42 tickets. ` +
	`The meeting is at 10:30 in room 4B; bring the draft, the budget sheet and your questions about the migration plan. `

// benchText returns about n bytes of benchProse.
func benchText(n int) string {
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(benchProse)
	}
	return b.String()[:n]
}

// kib measures b's ops over n bytes each: call it before the loop and
// the function it returns after. It reports ns/KiB of wall time and
// cpu-ns/KiB of the process's CPU time (the garbage collector's
// included), which a busy machine disturbs less.
func kib(b *testing.B, n int) func() {
	b.SetBytes(int64(n))
	cpu, ok := processCPU()
	return func() {
		per := float64(b.N) * float64(n) / 1024
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/per, "ns/KiB")
		if after, ok2 := processCPU(); ok && ok2 {
			b.ReportMetric(float64(after-cpu)/per, "cpu-ns/KiB")
		}
	}
}

// BenchmarkDetector measures each detector alone, and all of them, over
// 4 KiB of typical text.
func BenchmarkDetector(b *testing.B) {
	text := benchText(4 << 10)
	for k := range numKinds + 1 {
		name, d := "all", NewDetectors(Kinds()...)
		if k < numKinds {
			name, d = k.String(), NewDetectors(k)
		}
		b.Run(name, func(b *testing.B) {
			var buf [8]Match
			done := kib(b, len(text))
			for b.Loop() {
				d.Find(text, buf[:0])
			}
			done()
		})
	}
}

// chatBody is a chat request of about n bytes of content over a few
// messages.
func chatBody(n int) []byte {
	msgs := []any{map[string]any{"role": "system", "content": "You are a helpful assistant."}}
	per := n / 4
	for i := range 4 {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		msgs = append(msgs, map[string]any{"role": role, "content": benchText(per)})
	}
	b, _ := json.Marshal(map[string]any{"model": "oai/gpt-4o", "messages": msgs, "temperature": 0.2})
	return b
}

// BenchmarkPIIGuard measures a typical pii guard (every detector, mask)
// on a 4 KiB and a 64 KiB chat request that has nothing to mask, and on
// one with an address to mask.
func BenchmarkPIIGuard(b *testing.B) {
	e := newEngine(b, Options{}, GuardConfig{Name: "pii", Type: "pii", Apply: []string{"request"}})
	ctx := context.Background()
	for _, size := range []struct {
		name string
		n    int
	}{{"4KiB", 4 << 10}, {"64KiB", 64 << 10}} {
		body := chatBody(size.n)
		b.Run(size.name, func(b *testing.B) {
			done := kib(b, len(body))
			for b.Loop() {
				if r := e.Request(ctx, Chat, body, nil); r.Verdict != Allowed || r.Masked {
					b.Fatal("masked")
				}
			}
			done()
		})
		masked := []byte(strings.Replace(string(body), "the draft", "bob@example.com", 1))
		b.Run(size.name+"/masked", func(b *testing.B) {
			done := kib(b, len(masked))
			for b.Loop() {
				if r := e.Request(ctx, Chat, masked, nil); !r.Masked {
					b.Fatal("not masked")
				}
			}
			done()
		})
	}
}

// BenchmarkShortCall measures what a pii guard (every detector, mask)
// does for a short chat call, the common case: the request and the
// answer of the harness's chat scenario, nothing in them to mask; the
// same with the core's caches written over before each (evicted, as in a
// busy server: evicted.Ops); and reading their texts alone (walk).
func BenchmarkShortCall(b *testing.B) {
	request := []byte(`{"model":"oa/gpt-4o-mini","max_tokens":256,"temperature":0.2,"messages":[{"role":"system","content":"You are a terse assistant."},{"role":"user","content":"Summarise the plot of Hamlet in one sentence please"}]}`)
	answer := []byte(`{"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion","created":1741569952,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_eb9dce56a8","choices":[{"index":0,"message":{"role":"assistant","content":"echo: Summarise the plot of Hamlet in one sentence please","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":19,"completion_tokens":10,"total_tokens":29,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},"service_tier":"default"}`)
	e := newEngine(b, Options{}, piiMask)
	ctx := context.Background()
	for _, c := range []struct {
		name string
		dir  Direction
		body []byte
	}{{"request", Request, request}, {"answer", Response, answer}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			var r Result
			for b.Loop() {
				if e.Check(ctx, &r, Chat, c.dir, c.body, nil); r.Verdict != Allowed || r.Masked {
					b.Fatal("not allowed as it is")
				}
			}
		})
		b.Run(c.name+"/evicted", func(b *testing.B) {
			var r Result
			b.ReportMetric(evicted.Ops(b, func() {
				if e.Check(ctx, &r, Chat, c.dir, c.body, nil); r.Verdict != Allowed || r.Masked {
					b.Fatal("not allowed as it is")
				}
			}), "evicted-ns/op")
		})
		b.Run(c.name+"/walk", func(b *testing.B) {
			b.ReportAllocs()
			var buf [4]text
			for b.Loop() {
				if texts, err := bodyTexts(Chat, c.dir, c.body, buf[:0]); err != nil || len(texts) != 2 && len(texts) != 1 {
					b.Fatal(texts, err)
				}
			}
		})
	}
}

// BenchmarkStream measures a streamed answer of 4 KiB in 4-byte deltas
// through a pii guard.
func BenchmarkStream(b *testing.B) {
	e := newEngine(b, Options{}, piiMask)
	text := benchText(4 << 10)
	ctx := context.Background()
	done := kib(b, len(text))
	for b.Loop() {
		ts := e.AnswerStream(Chat, nil).newTextStream()
		for i := 0; i < len(text); i += 4 {
			ts.Write(ctx, text[i:min(i+4, len(text))])
		}
		ts.Close(ctx)
	}
	done()
}

// BenchmarkStreamLength measures the cost of one event of a streamed chat
// answer through a pii guard, at answers of 4 KiB to 1 MiB in 16-byte
// deltas: a guard that held or rescanned the answer so far would cost
// more per event as the answer grows; an incremental one costs the same.
func BenchmarkStreamLength(b *testing.B) {
	e := newEngine(b, Options{}, piiMask)
	for _, n := range []int{4 << 10, 64 << 10, 1 << 20} {
		text := benchText(n)
		var events [][]byte
		for i := 0; i < len(text); i += 16 {
			delta, _ := json.Marshal(text[i:min(i+16, len(text))])
			events = append(events, []byte(`{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":`+string(delta)+`},"finish_reason":null}]}`))
		}
		b.Run(strconv.Itoa(n>>10)+"KiB", func(b *testing.B) {
			for b.Loop() {
				streamEvents(b, e, events)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(events)), "ns/event")
		})
	}
}

// BenchmarkAnswerStreamWords measures one event of a chat stream whose
// chunks carry a word each, as OpenAI's do, through a pii guard: the
// common case, an answer with nothing to mask.
func BenchmarkAnswerStreamWords(b *testing.B) {
	e := newEngine(b, Options{}, piiMask)
	events := wordEvents(strings.Fields(benchText(2 << 10)))
	b.ReportAllocs()
	for b.Loop() {
		streamEvents(b, e, events)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(events)), "ns/event")
}

// BenchmarkAnswerStreamEnds measures what a guarded chat stream costs
// once, whatever its length, through a pii guard: the stream taken, the
// chunk that opens the answer, one word, the chunks that end it (its
// finish and its usage, in the shapes of OpenAI's stream with the usage
// asked for), its end, its decisions read and its release. The evicted
// case runs it with the core's caches written over before each stream,
// as a busy server does (evicted.Ops).
func BenchmarkAnswerStreamEnds(b *testing.B) {
	const head = `{"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4o-mini","system_fingerprint":"fp_fake",`
	events := [][]byte{
		[]byte(head + `"choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}`),
		[]byte(head + `"choices":[{"index":0,"delta":{"content":" word"},"logprobs":null,"finish_reason":null}],"usage":null}`),
		[]byte(head + `"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}`),
		[]byte(head + `"choices":[],"usage":{"prompt_tokens":19,"completion_tokens":1,"total_tokens":20,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}`),
	}
	e := newEngine(b, Options{}, piiMask)
	ctx := context.Background()
	stream := func() {
		s := e.AnswerStream(Chat, nil)
		sent := 0
		for _, ev := range events {
			out, d := s.Event(ctx, ev)
			if d != nil {
				b.Fatal("blocked")
			}
			sent += len(out)
		}
		out, d := s.End(ctx)
		if d != nil || sent+len(out) != len(events) || len(s.Decisions()) != 1 {
			b.Fatalf("%d events sent of %d, %v", sent+len(out), len(events), d)
		}
		s.Release()
	}
	b.Run("warm", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			stream()
		}
	})
	b.Run("evicted", func(b *testing.B) {
		b.ReportMetric(evicted.Ops(b, stream), "evicted-ns/op")
	})
}

// BenchmarkAnswerStreamCode measures one event of a chat stream of code,
// whose pieces carry escapes (newlines, tabs) in many events, through a
// pii guard: their texts are decoded into the text's queue, not into a
// string each.
func BenchmarkAnswerStreamCode(b *testing.B) {
	e := newEngine(b, Options{}, piiMask)
	code := benchProse[strings.Index(benchProse, "```go"):strings.LastIndex(benchProse, "```")]
	var events [][]byte
	escaped := 0
	for i := 0; i < len(code); i += 5 {
		delta, _ := json.Marshal(code[i:min(i+5, len(code))])
		if strings.Contains(string(delta), `\`) {
			escaped++
		}
		events = append(events, []byte(`{"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{"content":`+string(delta)+`},"logprobs":null,"finish_reason":null}]}`))
	}
	b.ReportAllocs()
	for b.Loop() {
		streamEvents(b, e, events)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(events)), "ns/event")
	b.ReportMetric(float64(escaped)/float64(len(events)), "escaped/event")
}

// BenchmarkAnswerStreamMasked is BenchmarkAnswerStreamWords with an
// e-mail address among the first words: the events after the masked one
// are placed anew (the mask took the space that began the next one) until
// a piece ends where nothing is held, a mark of punctuation; after it they
// leave as they came again (as-they-came: the share of events sent byte
// for byte as they came).
func BenchmarkAnswerStreamMasked(b *testing.B) {
	e := newEngine(b, Options{}, piiMask)
	ctx := context.Background()
	words := strings.Fields(benchText(2 << 10))
	words[2] = "bob@example.com"
	events := wordEvents(words)
	b.ReportAllocs()
	asCame := 0
	for b.Loop() {
		s := e.AnswerStream(Chat, nil)
		asCame = 0
		i := 0
		for _, ev := range events {
			out, d := s.Event(ctx, ev)
			if d != nil {
				b.Fatal("blocked")
			}
			for _, o := range out {
				if bytes.Equal(o, events[i]) {
					asCame++
				}
				i++
			}
		}
		if _, d := s.End(ctx); d != nil {
			b.Fatal("blocked")
		}
		s.Release()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(events)), "ns/event")
	b.ReportMetric(float64(asCame)/float64(len(events)), "as-they-came")
}

// wordEvents are the chunks of a chat stream of words, one a chunk after
// a space, in OpenAI's chunk shape.
func wordEvents(words []string) [][]byte {
	var events [][]byte
	for _, w := range words {
		delta, _ := json.Marshal(" " + w)
		events = append(events, []byte(`{"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_eb9dce56a8","choices":[{"index":0,"delta":{"content":`+string(delta)+`},"logprobs":null,"finish_reason":null}]}`))
	}
	return events
}

// streamEvents runs events, one at a time, through a chat answer stream
// of e, then ends it and gives it back.
func streamEvents(b *testing.B, e *Engine, events [][]byte) {
	ctx := context.Background()
	s := e.AnswerStream(Chat, nil)
	for _, ev := range events {
		if _, d := s.Event(ctx, ev); d != nil {
			b.Fatal("blocked")
		}
	}
	if _, d := s.End(ctx); d != nil {
		b.Fatal("blocked")
	}
	s.Release()
}

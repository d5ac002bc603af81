package openai

import (
	"strings"
	"testing"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/internal/translatortest"
)

// TestRelayStrip reads a chat stream's usage on its way to the client
// and, when the client did not ask for it, takes out the usage chunk and
// the "usage":null fields, however the provider's writes cut the stream.
func TestRelayStrip(t *testing.T) {
	chunk := func(content string) string {
		return `data: {"id":"c","choices":[{"index":0,"delta":{"content":"` + content + `"},"finish_reason":null}],"usage":null}` + "\n\n"
	}
	usage := `data: {"id":"c","choices":[],"usage":{"prompt_tokens":14,"completion_tokens":3,"total_tokens":17}}` + "\n\n"
	stream := chunk("a") + ": keep-alive\n\n" + chunk("b") + `data: {"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}` + "\n\n" + usage + "data: [DONE]\n\n"
	stripped := `data: {"id":"c","choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}]}` + "\n\n: keep-alive\n\n" +
		`data: {"id":"c","choices":[{"index":0,"delta":{"content":"b"},"finish_reason":null}]}` + "\n\n" +
		`data: {"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n"
	want := providers.Used{Prompt: 14, Completion: 3, Known: true}
	for _, includeUsage := range []bool{true, false} {
		for cut := range len(stream) {
			r := NewRelay(includeUsage)
			got := translatortest.RelayWrites(r, stream[:cut], stream[cut:])
			wantOut := stream
			if !includeUsage {
				wantOut = stripped
			}
			if got != wantOut || r.Usage() != want {
				t.Fatalf("include_usage %v, cut at %d:\n got %q (usage %+v)\nwant %q", includeUsage, cut, got, r.Usage(), wantOut)
			}
		}
	}
}

// TestRelayEvent is one event on its way to the client: read for usage
// and, when stripping, without the "usage":null field and the usage chunk.
func TestRelayEvent(t *testing.T) {
	const (
		head  = `data: {"id":"c","object":"chat.completion.chunk","choices":[`
		delta = `{"index":0,"delta":{"content":"a"},"finish_reason":null}]`
		usage = `{"prompt_tokens":14,"completion_tokens":3,"total_tokens":17}`
	)
	read := providers.Used{Prompt: 14, Completion: 3, Known: true}
	for _, tc := range []struct {
		name, ev, stripped string
		usage              providers.Used
	}{
		{name: "no usage", ev: head + delta + "}", stripped: head + delta + "}\n\n"},
		{name: "a comment", ev: ": keep-alive", stripped: ": keep-alive\n\n"},
		{name: "[DONE]", ev: "data: [DONE]", stripped: "data: [DONE]\n\n"},
		{name: "usage null", ev: head + delta + `,"usage":null}`, stripped: head + delta + "}\n\n"},
		// A JSON string cannot hold an unescaped quote: "usage":null in
		// content is \"usage\":null, and stays.
		{name: `"usage":null in content`,
			ev:       head + `{"index":0,"delta":{"content":"x,\"usage\":null \"usage\":{\"prompt_tokens\":9}"},"finish_reason":null}],"usage":null}`,
			stripped: head + `{"index":0,"delta":{"content":"x,\"usage\":null \"usage\":{\"prompt_tokens\":9}"},"finish_reason":null}]}` + "\n\n"},
		{name: `content "usage"`,
			ev:       head + `{"index":0,"delta":{"content":"usage"},"finish_reason":null}],"usage":null}`,
			stripped: head + `{"index":0,"delta":{"content":"usage"},"finish_reason":null}]}` + "\n\n"},
		{name: "usage chunk", ev: head + `],"usage":` + usage + "}", stripped: "", usage: read},
		{name: "usage on a chunk with choices is kept",
			ev:       head + delta + `,"usage":` + usage + "}",
			stripped: head + delta + `,"usage":` + usage + "}\n\n", usage: read},
		{name: "usage first in the chunk",
			ev:       `data: {"usage":null,"id":"c","choices":[` + delta + "}",
			stripped: `data: {"usage":null,"id":"c","choices":[` + delta + "}\n\n"},
	} {
		for _, includeUsage := range []bool{true, false} {
			r := NewRelay(includeUsage)
			const earlier = "data: earlier\n\n" // what the client already has
			got, err := r.Event([]byte(earlier), []byte(tc.ev))
			want := earlier + tc.ev + "\n\n"
			if !includeUsage {
				want = earlier + tc.stripped
			}
			if err != nil || string(got) != want {
				t.Errorf("%s, include_usage %v:\n got %q (%v)\nwant %q", tc.name, includeUsage, got, err, want)
			}
			if r.Usage() != tc.usage {
				t.Errorf("%s, include_usage %v: usage %+v, want %+v", tc.name, includeUsage, r.Usage(), tc.usage)
			}
		}
	}
}

// TestRelayPasses: whole events with "\n" line ends and nothing to read go
// to the client as they are; usage to read, usage to strip, a "\r" or a
// partial event are relayed event by event.
func TestRelayPasses(t *testing.T) {
	const chunk = `data: {"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}],"usage":null}` + "\n\n"
	for _, tc := range []struct {
		name, seg    string
		includeUsage bool
		passes       bool
	}{
		{"chunks with usage null", chunk + chunk, true, true},
		{"a keep-alive", ": keep-alive\n\n", true, true},
		{"the usage chunk", `data: {"choices":[],"usage":{"prompt_tokens":1}}` + "\n\n", true, false},
		{"two usage keys in one event", `data: {"usage":null,"x":1,"usage":null}` + "\n\n", true, false},
		{"usage to strip", chunk, false, false},
		{"CRLF", "data: [DONE]\r\n\r\n", true, false},
		{"a partial event", "data: [DONE]\n", true, false},
	} {
		if got := NewRelay(tc.includeUsage).Passes([]byte(tc.seg)); got != tc.passes {
			t.Errorf("%s: Passes = %v, want %v", tc.name, got, tc.passes)
		}
	}
}

// TestRelayEnd: a stream the provider closes cleanly before its last event
// gets the error event that says so, however the provider's writes cut
// it; one that ended, or carried an error, gets nothing more.
func TestRelayEnd(t *testing.T) {
	const chunk = `data: {"choices":[{"index":0,"delta":{"content":"a"}}]}` + "\n\n"
	const finish = `data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n"
	const nullFinish = `data: {"choices":[{"index":0,"delta":{"content":"b"},"finish_reason":null}]}` + "\n\n"
	const usageChunk = `data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}` + "\n\n"
	for _, tc := range []struct {
		name, stream, wantError string
	}{
		{"ended", chunk + "data: [DONE]\n\n", ""},
		{"ended, a keep-alive after", chunk + "data: [DONE]\n\n: keep-alive\n\n", ""},
		{"ended by an error", chunk + `data: {"error":{"message":"overloaded"}}` + "\n\n", ""},
		{"cut", chunk + chunk, `data: {"error":{"message":"the provider's stream ended before the answer was complete"`},
		{"cut, a keep-alive after", chunk + ": keep-alive\n\n", `"code":"stream_incomplete"`},
		{"a chunk after the end", chunk + "data: [DONE]\n\n" + chunk, ""},
		{"ended, a stray line end", chunk + "data: [DONE]\n\n\n", ""},
		{"ended, a stray line end and a keep-alive", chunk + "data: [DONE]\n\n\n: ping\n\n", ""},
		{"ended, an id line", chunk + "data: [DONE]\nid: 9\n\n", ""},
		{"ended, a retry event", chunk + "data: [DONE]\n\nretry: 3000\n\n", ""},
		{"ended by a named error event", chunk + "event: error\ndata: {\"message\":\"overloaded\"}\n\n", ""},
		// Some OpenAI-compatible servers never send [DONE]: the answer
		// is whole once a choice's finish_reason came.
		{"finished without [DONE]", chunk + finish + usageChunk, ""},
		{"finished without [DONE], spaced JSON", chunk + `data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}` + "\n\n", ""},
		{"cut, finish_reason null", chunk + nullFinish, `"code":"stream_incomplete"`},
		{"cut after the usage chunk", chunk + usageChunk, `"code":"stream_incomplete"`},
	} {
		for cut := range len(tc.stream) {
			r := NewRelay(true)
			got := translatortest.RelayWrites(r, tc.stream[:cut], tc.stream[cut:])
			// The stream's events, then what the relay added (a write cut
			// inside a stray line end is framed, which drops it).
			rest, ok := strings.CutPrefix(got, strings.TrimRight(tc.stream, "\n"))
			rest = strings.TrimLeft(rest, "\n")
			if !ok || tc.wantError == "" && rest != "" || tc.wantError != "" && (!strings.Contains(rest, tc.wantError) || strings.Count(rest, "\n\n") != 1) {
				t.Fatalf("%s, cut at %d: the client got %q after the stream, want %q", tc.name, cut, rest, tc.wantError)
			}
			if r.Ended() != (tc.wantError == "") {
				t.Fatalf("%s, cut at %d: Ended %v", tc.name, cut, r.Ended())
			}
		}
	}
}

// BenchmarkRelayEvent is one chat stream event on its way to the client
// through the relay: passed on as it is, or with the usage the gateway
// asked for and the client did not taken out; and the last chunk, which
// carries the usage.
func BenchmarkRelayEvent(b *testing.B) {
	content := []byte(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1795448284,"model":"gpt-4o-mini","system_fingerprint":"fp_fake","choices":[{"index":0,"delta":{"content":" word"},"logprobs":null,"finish_reason":null}],"usage":null}`)
	usage := []byte(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1795448284,"model":"gpt-4o-mini","system_fingerprint":"fp_fake","choices":[],"usage":{"prompt_tokens":14,"completion_tokens":10,"total_tokens":24,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}`)
	for _, bc := range []struct {
		name  string
		ev    []byte
		strip bool
	}{
		{"content", content, false},
		{"content_stripped", content, true},
		{"usage", usage, false},
		{"usage_stripped", usage, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			r := NewRelay(!bc.strip)
			var out []byte
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if out, err = r.Event(out[:0], bc.ev); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

package messages

import (
	"path/filepath"
	"strconv"
	"testing"

	"github.com/modelgate/modelgate/providers/internal/translatortest"
	"github.com/modelgate/modelgate/providers/sse"
)

// BenchmarkToChat translates the Claude Code fixture: system blocks,
// three tools, thinking and a two-turn tool loop (about 5 KB).
func BenchmarkToChat(b *testing.B) {
	body := translatortest.ReadFile(b, filepath.Join(requestDir, "claude_code.messages.json"))
	if _, err := Validate(body); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ToChat(body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkValidate checks the same request as the gateway does first.
func BenchmarkValidate(b *testing.B) {
	body := translatortest.ReadFile(b, filepath.Join(requestDir, "claude_code.messages.json"))
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Validate(body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFromChat translates an answer with a signed thinking block,
// text and a tool call.
func BenchmarkFromChat(b *testing.B) {
	body := translatortest.ReadFile(b, filepath.Join(responseDir, "thinking_tools.chat.json"))
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := FromChat(body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStreamEvent translates one text chunk, the stream's common case.
func BenchmarkStreamEvent(b *testing.B) {
	ev := []byte(`data: {"id":"chatcmpl-Bx7text01","object":"chat.completion.chunk","created":1750000000,"model":"gpt-5.1","choices":[{"index":0,"delta":{"content":"word and a few more"},"logprobs":null,"finish_reason":null}],"usage":null}`)
	s := NewStream("")
	out, _ := s.Event(nil, ev) // message_start and the block's start
	b.SetBytes(int64(len(ev)))
	b.ReportAllocs()
	for b.Loop() {
		out, _ = s.Event(out[:0], ev)
	}
}

// BenchmarkStream translates a 200-event text stream with usage.
func BenchmarkStream(b *testing.B) {
	var hub []byte
	head := `data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1750000000,"model":"gpt-5.1","choices":[{"index":0,"delta":`
	hub = append(hub, head+`{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"usage":null}`+"\n\n"...)
	for i := range 196 {
		hub = append(hub, head+`{"content":"word `...)
		hub = strconv.AppendInt(hub, int64(i), 10)
		hub = append(hub, ` and a few more"},"logprobs":null,"finish_reason":null}],"usage":null}`+"\n\n"...)
	}
	hub = append(hub, head+`{},"logprobs":null,"finish_reason":"stop"}],"usage":null}`+"\n\n"...)
	hub = append(hub, `data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1750000000,"model":"gpt-5.1","choices":[],"usage":{"prompt_tokens":25,"completion_tokens":600,"total_tokens":625}}`+"\n\n"...)
	hub = append(hub, sse.Done...)
	out := make([]byte, 0, 2*len(hub))
	b.SetBytes(int64(len(hub)))
	b.ReportAllocs()
	for b.Loop() {
		s := NewStream("")
		out = out[:0]
		buf := hub
		for {
			ev, rest, ok := sse.Cut(buf)
			if !ok {
				break
			}
			out, _ = s.Event(out, ev)
			buf = rest
		}
		out = s.Close(out)
	}
}

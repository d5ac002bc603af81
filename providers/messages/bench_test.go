package messages

import (
	"path/filepath"
	"testing"

	"github.com/modelgate/modelgate/providers"
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
	translatortest.BenchBody(b, body, ToChat)
}

// BenchmarkValidate checks the same request as the gateway does first.
func BenchmarkValidate(b *testing.B) {
	translatortest.BenchBody(b, translatortest.ReadFile(b, filepath.Join(requestDir, "claude_code.messages.json")), Validate)
}

// BenchmarkFromChat translates an answer with a signed thinking block,
// text and a tool call.
func BenchmarkFromChat(b *testing.B) {
	translatortest.BenchBody(b, translatortest.ReadFile(b, filepath.Join(responseDir, "thinking_tools.chat.json")), FromChat)
}

// newStream is a new Messages stream translator, for the benchmarks.
func newStream(providers.StreamOptions) providers.StreamTranslator { return NewStream("") }

// BenchmarkStreamEvent translates one text chunk, the stream's common case.
func BenchmarkStreamEvent(b *testing.B) {
	ev := []byte(`data: {"id":"chatcmpl-Bx7text01","object":"chat.completion.chunk","created":1750000000,"model":"gpt-5.1","choices":[{"index":0,"delta":{"content":"word and a few more"},"logprobs":null,"finish_reason":null}],"usage":null}`)
	translatortest.BenchEvent(b, NewStream(""), ev, ev) // the first makes message_start and the block's start
}

// BenchmarkStream translates a 200-event text stream with usage.
func BenchmarkStream(b *testing.B) {
	head := `data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1750000000,"model":"gpt-5.1","choices":[{"index":0,"delta":`
	hub := translatortest.TextStream(head+`{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"usage":null}`+"\n\n",
		196, head+`{"content":"word `, ` and a few more"},"logprobs":null,"finish_reason":null}],"usage":null}`+"\n\n",
		head+`{},"logprobs":null,"finish_reason":"stop"}],"usage":null}`+"\n\n"+
			`data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1750000000,"model":"gpt-5.1","choices":[],"usage":{"prompt_tokens":25,"completion_tokens":600,"total_tokens":625}}`+"\n\n"+
			string(sse.Done))
	translatortest.Replay{New: newStream}.Bench(b, hub)
}

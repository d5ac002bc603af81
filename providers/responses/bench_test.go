package responses

import (
	"path/filepath"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/internal/translatortest"
)

// BenchmarkRequest translates Codex's request (testdata codex, about
// 5 KB: instructions, a replayed turn with encrypted reasoning, four tools
// with the apply_patch grammar), as the gateway does: Validate, then New.
func BenchmarkRequest(b *testing.B) {
	t := Translator{}
	translatortest.BenchBody(b, translatortest.ReadFile(b, filepath.Join(requestDir, "codex.responses.json")), func(body []byte) (*Exchange, error) {
		r, err := Parse(body)
		if err != nil {
			return nil, err
		}
		return t.New(r, nil)
	})
}

// BenchmarkResponse translates an answer with reasoning, thinking blocks,
// text and two tool calls (one custom) into the Response.
func BenchmarkResponse(b *testing.B) {
	in := gjson.ParseBytes(translatortest.ReadFile(b, filepath.Join(responseDir, "reasoning_tools.in.json")))
	req, chat := []byte(in.Get("request").Raw), []byte(in.Get("chat").Raw)
	t := Translator{}
	x, err := newX(t, req, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(chat)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := x.Response(chat); err != nil {
			b.Fatal(err)
		}
	}
}

// benchHub is a 200-event hub stream of text, then usage and [DONE].
func benchHub() []byte {
	head := `data: {"id":"chatcmpl-b","object":"chat.completion.chunk","created":1750000000,"model":"m","choices":[`
	return translatortest.TextStream(head+`{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"usage":null}`+"\n\n",
		196, head+`{"index":0,"delta":{"content":"word `, ` and a few more"},"logprobs":null,"finish_reason":null}],"usage":null}`+"\n\n",
		head+`{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}`+"\n\n"+
			head+`],"usage":{"prompt_tokens":25,"completion_tokens":600,"total_tokens":625}}`+"\n\n"+
			"data: [DONE]\n\n")
}

// BenchmarkStream translates a 200-event text stream; ns/op divided by
// 200 is the cost of one event.
func BenchmarkStream(b *testing.B) {
	x, err := newX(Translator{}, []byte(`{"model":"m","input":"Tell me a story.","stream":true}`), nil)
	if err != nil {
		b.Fatal(err)
	}
	translatortest.Replay{New: func(providers.StreamOptions) providers.StreamTranslator { return x.Stream() }}.Bench(b, benchHub())
}

// BenchmarkStreamCustomTool streams an apply_patch call's arguments in
// 11-byte fragments (the codex transcript), decoding its input as it
// comes.
func BenchmarkStreamCustomTool(b *testing.B) {
	request, hub, _ := readTranscript(b, filepath.Join(sseDir, "codex.txt"))
	x, err := newX(Translator{}, request, nil)
	if err != nil {
		b.Fatal(err)
	}
	out := make([]byte, 0, 8*len(hub))
	b.SetBytes(int64(len(hub)))
	b.ReportAllocs()
	for b.Loop() {
		s := x.Stream()
		out = s.Events(out[:0], hub)
		out = s.Close(out)
	}
}

package responses

import (
	"path/filepath"
	"strconv"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers/internal/translatortest"
	"github.com/modelgate/modelgate/providers/sse"
)

// BenchmarkRequest translates Codex's request (testdata codex, about
// 5 KB: instructions, a replayed turn with encrypted reasoning, four tools
// with the apply_patch grammar), as the gateway does: Validate, then New.
func BenchmarkRequest(b *testing.B) {
	body := translatortest.ReadFile(b, filepath.Join(requestDir, "codex.responses.json"))
	t := Translator{}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		r, err := Parse(body)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := t.New(r, nil); err != nil {
			b.Fatal(err)
		}
	}
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
	b := []byte(`data: {"id":"chatcmpl-b","object":"chat.completion.chunk","created":1750000000,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n")
	for i := range 196 {
		b = append(b, `data: {"id":"chatcmpl-b","object":"chat.completion.chunk","created":1750000000,"model":"m","choices":[{"index":0,"delta":{"content":"word `...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, ` and a few more"},"logprobs":null,"finish_reason":null}],"usage":null}`+"\n\n"...)
	}
	b = append(b, `data: {"id":"chatcmpl-b","object":"chat.completion.chunk","created":1750000000,"model":"m","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}`+"\n\n"...)
	b = append(b, `data: {"id":"chatcmpl-b","object":"chat.completion.chunk","created":1750000000,"model":"m","choices":[],"usage":{"prompt_tokens":25,"completion_tokens":600,"total_tokens":625}}`+"\n\n"...)
	return append(b, "data: [DONE]\n\n"...)
}

// BenchmarkStream translates a 200-event text stream; ns/op divided by
// 200 is the cost of one event.
func BenchmarkStream(b *testing.B) {
	hub := benchHub()
	x, err := newX(Translator{}, []byte(`{"model":"m","input":"Tell me a story.","stream":true}`), nil)
	if err != nil {
		b.Fatal(err)
	}
	out := make([]byte, 0, 4*len(hub))
	b.SetBytes(int64(len(hub)))
	b.ReportAllocs()
	for b.Loop() {
		s := x.Stream()
		out = out[:0]
		buf := hub
		for {
			event, rest, ok := sse.Cut(buf)
			if !ok {
				break
			}
			out, _ = s.Event(out, event)
			buf = rest
		}
		out = s.Close(out)
	}
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

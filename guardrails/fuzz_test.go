package guardrails

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers/providertest/streamtexts"
)

// FuzzRequest: whatever the body, a request's or an answer's, the engine
// never panics, a body it lets through masked is valid JSON when the input
// was, and holds nothing more to mask: no match it found is left in it.
func FuzzRequest(f *testing.F) {
	for _, s := range []string{
		`{"messages":[{"role":"user","content":"mail bob@example.com"}]}`,
		`{"messages":[{"content":[{"type":"text","text":"\u00e9 4111 1111 1111 1111"}]}]}`,
		`{"input":["a","+44 20 7946 0958"],"model":"m"}`,
		`{"messages":[{"tool_calls":[{"function":{"arguments":"{\"a\":\"10.0.0.1\"}"}}]}]}`,
		`{"choices":[{"index":0,"message":{"role":"assistant","content":"call +1 202 555 0173"}}]}`,
		`{"type":"message","content":[{"type":"text","text":"ssn 321-54-9876"}]}`,
	} {
		f.Add(s, uint8(0), uint8(0))
		f.Add(s, uint8(0), uint8(1))
	}
	e := newEngine(f, Options{}, piiMask)
	f.Fuzz(func(t *testing.T, body string, api, dir uint8) {
		check := e.Request
		if dir%2 == 1 {
			check = e.Answer
		}
		r := check(context.Background(), API(api%5), []byte(body), nil)
		if r.Verdict != Allowed || !r.Masked {
			return
		}
		if json.Valid([]byte(body)) && !json.Valid(r.Body) {
			t.Fatalf("masked %q into invalid JSON %q", body, r.Body)
		}
		if again := check(context.Background(), API(api%5), r.Body, nil); again.Verdict != Allowed || again.Masked {
			t.Fatalf("%q masked into %q, in which the guard masks %q again", body, r.Body, again.Body)
		}
	})
}

// FuzzStream: a text streamed in two pieces cut anywhere is released as
// the whole text is masked.
func FuzzStream(f *testing.F) {
	f.Add("write to bob@example.com or +1 202 555 0173.", 9)
	f.Add("key sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789AbCdEfGhIjAA ok", 20)
	e := newEngine(f, Options{}, piiMask)
	f.Fuzz(func(t *testing.T, text string, cut int) {
		if cut < 0 || cut > len(text) || strings.ContainsRune(text, 0) {
			return
		}
		vals := []string{text}
		e.run(context.Background(), &input{dir: Response}, vals, nil)
		got, d := streamText(t, e, []string{text[:cut], text[cut:]})
		if d != nil || got != vals[0] {
			t.Fatalf("%q cut at %d: got %q, want %q", text, cut, got, vals[0])
		}
	})
}

// FuzzAnswerStream: a chat answer streamed in chunks cut anywhere, and
// flushed after any number of them (given in a buffer the caller
// overwrites), keeps its chunks, and their contents joined are the whole
// text masked.
func FuzzAnswerStream(f *testing.F) {
	f.Add("write to bob@example.com or +1 202 555 0173.", uint64(0x0907050301))
	f.Add("a \\n b\\\" c \u00e9 carol@example.org", uint64(0x0302010101))
	f.Add("word1 word2 word3 word4 ", uint64(0x0606060606))
	e := newEngine(f, Options{}, piiMask)
	f.Fuzz(func(t *testing.T, text string, cuts uint64) {
		if !utf8.ValidString(text) || strings.ContainsRune(text, 0) {
			return
		}
		vals := []string{text}
		e.run(context.Background(), &input{dir: Response}, vals, nil)
		// Each byte of cuts is the length of the next piece (0: the rest).
		var events [][]byte
		for rest := text; rest != ""; cuts >>= 8 {
			n := int(cuts & 0xff)
			if n == 0 || n > len(rest) {
				n = len(rest)
			}
			for n < len(rest) && !utf8.RuneStart(rest[n]) {
				n++ // a chunk's content is whole characters
			}
			events = append(events, chatChunk(rest[:n]))
			rest = rest[n:]
		}
		// Flushed after every event, after every two, …, or once.
		for batch := 1; batch <= len(events); batch++ {
			sent, d := runBatches(t, e.AnswerStream(Chat, nil), events, batch, true)
			if d != nil {
				t.Fatal(d)
			}
			if len(sent) != len(events) {
				t.Fatalf("%d a flush: %d events sent of %d", batch, len(sent), len(events))
			}
			var got strings.Builder
			for _, ev := range sent {
				got.WriteString(gjson.GetBytes(ev, "choices.0.delta.content").Str)
			}
			if got.String() != vals[0] {
				t.Fatalf("%q, %d a flush: got %q, want %q", text, batch, got.String(), vals[0])
			}
		}
	})
}

// FuzzAnswerStreamEvents: whatever a provider's stream holds (events of
// any API, cut anywhere, JSON or not, flushed after any number of them),
// the answer stream never panics, and a stream that nothing stopped sends
// every event it was given once it has ended.
func FuzzAnswerStreamEvents(f *testing.F) {
	for _, s := range []string{
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"bad \x escape"}}` + "\n" + `{"type":"content_block_stop","index":0}`,
		`{"type":"response.output_text.delta","output_index":0,"content_index":0,"delta":"call +1 202 "}` + "\n" + `{"type":"response.output_text.done","output_index":0,"content_index":0,"text":"call +1 202 555"}`,
		`{"choices":[{"index":0,"delta":{"content":"a\u0040b.c","content":"om"}}]}` + "\n" + `{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
		"not json\n{}\n{\"type\":\"message_stop\"}",
	} {
		f.Add(s, uint8(0), uint8(1))
		f.Add(s, uint8(1), uint8(2))
		f.Add(s, uint8(2), uint8(3))
	}
	f.Add("{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n{\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n{\"choices\":[{\"index\":0,\"delta\":{\"content\":\" after the end\"}}]}", uint8(0), uint8(0))
	f.Add("{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"mail bob@exa\"}}]}\n{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"mple.com now\"},\"finish_reason\":\"stop\"}]}", uint8(0), uint8(0))
	// Text, tool calls that end it, and text after them: a text of its own.
	f.Add("{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"mail bob@exa\"}}]}\n{\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"n\\\":12\"}}]}}]}\n{\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"}\"}}]}}]}\n{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"mple.com\"}}]}", uint8(0), uint8(0))
	f.Add("{\"type\":\"response.output_text.delta\",\"output_index\":0,\"content_index\":0,\"delta\":\"mail bob@exa\"}\n{\"type\":\"response.output_text.delta\",\"output_index\":0,\"content_index\":0,\"delta\":\"mple.com\"}\n{\"type\":\"response.output_text.done\",\"output_index\":0,\"content_index\":0,\"text\":\"mail bob@example.com\"}\n{\"type\":\"response.completed\",\"response\":{\"output\":[{\"type\":\"message\",\"content\":[{\"type\":\"output_text\",\"text\":\"mail bob@example.com\"}]}]}}", uint8(1), uint8(0))
	f.Add("{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"ssn 321-54-\"}}\n{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"9876 ok\"}}\n{\"type\":\"content_block_stop\",\"index\":0}", uint8(2), uint8(1))
	e := newEngine(f, Options{}, piiMask)
	// A guard that only logs changes no text: what the client gets of
	// each text is then what the provider sent of it, however the events
	// carry it.
	logs := newEngine(f, Options{}, GuardConfig{Name: "audit", Type: "pii", Action: "log"})
	f.Fuzz(func(t *testing.T, stream string, api, batch uint8) {
		var events [][]byte
		for ev := range strings.SplitSeq(stream, "\n") {
			if ev != "" {
				events = append(events, []byte(ev))
			}
		}
		a := []API{Chat, Responses, Messages}[api%3]
		s := e.AnswerStream(a, nil)
		defer s.Release()
		masked, d := feed(s, events, int(batch%4)+1, true)
		if d == nil && len(masked) != len(events) {
			t.Fatalf("%d events sent of %d", len(masked), len(events))
		}
		l := logs.AnswerStream(a, nil)
		defer l.Release()
		sent, d := feed(l, events, int(batch%4)+1, true)
		if d != nil || len(sent) != len(events) {
			t.Fatalf("a guard that logs: %d events sent of %d, %v", len(sent), len(events), d)
		}
		if !streamtexts.Readable(events) {
			return
		}
		want, got := streamtexts.Texts(a.String(), events), streamtexts.Texts(a.String(), sent)
		if k, differ := streamtexts.Differ(want, got); differ {
			t.Fatalf("text %s: sent %q, want %q", k, got[k], want[k])
		}
		// Masked, each text is the whole text masked, as a body's is: a
		// stream is no way around a guard. (A text that goes on after
		// its end is two texts to the guard.)
		if streamtexts.Reopened(a.String(), events) {
			return
		}
		got = streamtexts.Texts(a.String(), masked)
		for k, w := range want {
			if strings.ContainsAny(w, "\x00\uFFFD") {
				continue // as FuzzStream: not UTF-8, or a NUL
			}
			if m := maskWhole(e, w); got[k] != m {
				t.Fatalf("text %s masked: sent %q, want %q", k, got[k], m)
			}
		}
		// The events that repeat a whole text (Responses' .done, item and
		// completed events, which SDKs read the answer from) carry it
		// masked as a whole.
		if a != Responses {
			return
		}
		in, out := streamtexts.Repeats(events), streamtexts.Repeats(masked)
		if len(in) != len(out) {
			t.Fatalf("%d whole texts sent of %d", len(out), len(in))
		}
		for i, r := range in {
			if strings.ContainsAny(r.Text, "\x00\uFFFD") {
				continue
			}
			if m := maskWhole(e, r.Text); out[i].Text != m {
				t.Fatalf("text %s repeated whole: sent %q, want %q", r.Key, out[i].Text, m)
			}
		}
	})
}

// maskWhole is text masked by e's guards as a whole.
func maskWhole(e *Engine, text string) string {
	vals := []string{text}
	e.run(context.Background(), &input{dir: Response}, vals, nil)
	return vals[0]
}

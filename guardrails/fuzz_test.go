package guardrails

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// FuzzRequest: whatever the body, the engine never panics, a body it lets
// through masked is valid JSON when the input was, and no e-mail address
// it found is left in it.
func FuzzRequest(f *testing.F) {
	for _, s := range []string{
		`{"messages":[{"role":"user","content":"mail bob@example.com"}]}`,
		`{"messages":[{"content":[{"type":"text","text":"\u00e9 4111 1111 1111 1111"}]}]}`,
		`{"input":["a","+44 20 7946 0958"],"model":"m"}`,
		`{"messages":[{"tool_calls":[{"function":{"arguments":"{\"a\":\"10.0.0.1\"}"}}]}]}`,
	} {
		f.Add(s, uint8(0))
	}
	e := newEngine(f, Options{}, piiMask)
	f.Fuzz(func(t *testing.T, body string, api uint8) {
		r := e.Request(context.Background(), API(api%5), []byte(body), nil)
		if r.Verdict != Allowed || !r.Masked {
			return
		}
		if json.Valid([]byte(body)) && !json.Valid(r.Body) {
			t.Fatalf("masked %q into invalid JSON %q", body, r.Body)
		}
		again := e.Request(context.Background(), API(api%5), r.Body, nil)
		if again.Verdict != Allowed {
			t.Fatalf("the masked body is refused: %+v", again)
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
		e.run(context.Background(), &input{dir: Response}, vals)
		got, d := streamText(t, e, []string{text[:cut], text[cut:]})
		if d != nil || got != vals[0] {
			t.Fatalf("%q cut at %d: got %q, want %q", text, cut, got, vals[0])
		}
	})
}

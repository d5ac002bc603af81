package messages

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/internal/translatortest"
	"github.com/modelgate/modelgate/providers/providerkit"
)

// FuzzToChat checks that every body Validate accepts either translates
// into a hub request that the hub's validation accepts, or fails with a
// 400 *providers.Error; and that CountTokens never panics on it.
func FuzzToChat(f *testing.F) {
	translatortest.SeedFiles(f, requestDir, ".messages.json")
	f.Add([]byte(`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","is_error":true,"content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"A\u0041"}},{"type":"document","source":{"type":"text","data":"x"}}]}]}]}`))
	f.Add([]byte(`{"model":"m","max_tokens":1,"messages":[{"role":"system","content":[{"type":"text","text":"s"}]},{"role":"assistant","content":[{"type":"thinking","thinking":"","signature":""}]}]}`))

	f.Fuzz(func(t *testing.T, body []byte) {
		if _, err := Validate(body); err != nil {
			if _, err := ValidateCountTokens(body); err != nil {
				return
			}
		}
		hub, err := ToChat(body)
		if err != nil {
			var e *providers.Error
			if !errors.As(err, &e) || e.Status != 400 || !json.Valid(ErrorBody(e)) {
				t.Fatalf("ToChat error %v is not a 400 *providers.Error", err)
			}
			return
		}
		if !json.Valid(hub) {
			t.Fatalf("invalid JSON for %s:\n%s", body, hub)
		}
		if _, err := providers.ValidateChat(hub); err != nil {
			t.Fatalf("the hub refuses the translation of %s: %v\n%s", body, err, hub)
		}
		if out, err := CountTokens(body); err != nil || !json.Valid(out) {
			t.Fatalf("CountTokens: %s, %v", out, err)
		}
	})
}

// FuzzFromChat checks that any provider answer either translates into a
// Message that anthropic-sdk-go decodes or is refused with an error.
func FuzzFromChat(f *testing.F) {
	translatortest.SeedFiles(f, responseDir, ".chat.json")
	f.Add([]byte(`{"choices":[{"message":{"content":[{"type":"refusal","refusal":"no"}],"tool_calls":[{"function":{"arguments":"{\"a\":1} "}},{"type":"custom"}]},"stop_reason":"\n"}],"usage":{"prompt_tokens":1,"prompt_tokens_details":{"cached_tokens":5}}}`))

	f.Fuzz(func(t *testing.T, body []byte) {
		out, err := FromChat(body)
		if providerkit.CheckFuzzedBody(t, body, out, err); err != nil {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("invalid JSON for %s:\n%s", body, out)
		}
		decodeMessage(t, out)
	})
}

// FuzzStream feeds arbitrary bytes, framed by sse.Cut, through a stream
// translator and checks that what comes out is a well-formed Messages
// stream, complete or ended by an error event.
func FuzzStream(f *testing.F) {
	for _, path := range translatortest.Transcripts(f, sseDir, ".txt") {
		hub, _, _ := translatortest.ReadTranscript(f, path)
		f.Add(hub)
	}
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":3,\"function\":{\"arguments\":\"x\"}},{\"index\":-1,\"id\":7}],\"thinking_blocks\":[{\"type\":\"thinking\",\"thinking\":\"\\u00e9\"}]}}]}\n\ndata: {\"choices\":[{\"delta\":{\"reasoning\":\"ab\",\"thinking_blocks\":[{\"type\":\"thinking\",\"thinking\":\"a\\u00e9\",\"signature\":\"s\"}]}}]}\n\n"))

	f.Fuzz(func(t *testing.T, hub []byte) {
		out := translate(NewStream(""), hub, nil)
		if msg := checkStream(out, true); msg != "" {
			t.Fatalf("%s\nhub: %q\nmessages:\n%s", msg, hub, out)
		}
		// The SDK reads it to its end: a message, or an API error.
		if _, _, err := accumulate(t, out); err != nil {
			var apiErr *anthropic.Error
			if !asAPIError(err, &apiErr) {
				t.Fatalf("the SDK fails on the stream: %v\n%s", err, out)
			}
		}
	})
}

package anthropic

import (
	"encoding/json"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/internal/translatortest"
	"github.com/modelgate/modelgate/providers/providerkit"
)

// FuzzChatRequest checks that every body ValidateChat accepts either
// translates into valid JSON or fails with a 4xx *providers.Error.
func FuzzChatRequest(f *testing.F) {
	translatortest.SeedFiles(f, requestDir, ".unified.json")
	f.Add([]byte(`{"model":"m","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"a","function":{"name":"f","arguments":"{\"a\":[1,{}]}"}}]}]}`))
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AA"}}]}],"tools":[{"type":"function","function":{"name":"f","parameters":{ }}}],"tool_choice":"required"}`))

	f.Add([]byte(`{"model":"m","reasoning_effort":"high","response_format":{"type":"json_schema","json_schema":{"schema":{"type":"object","properties":{"a":{"oneOf":[{"type":"string","format":"x"}],"minItems":3}},"$defs":{"d":{"$ref":"#"}}}}},"messages":[{"role":"assistant","content":"a","thinking_blocks":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"redacted_thinking","data":"d"}]}]}`))

	providerkit.FuzzChatRequest(f, func(body []byte) (providers.Request, error) {
		// The model the request names picks the features, so both
		// structured-output paths and both thinking forms are reached.
		model := "claude-\"x\""
		if m := gjson.GetBytes(body, "model").Str; len(m)%3 == 1 {
			model = "claude-sonnet-4-5"
		} else if len(m)%3 == 2 {
			model = "claude-opus-4-7"
		}
		return Chat{}.ChatRequest(body, model)
	})
}

// FuzzChatResponse checks that any answer either translates into a valid
// chat.completion object or fails with an error.
func FuzzChatResponse(f *testing.F) {
	translatortest.SeedFiles(f, responseDir, ".anthropic.json")
	f.Add([]byte(`{"content":[{"type":"thinking","thinking":7,"signature":null},{"type":"tool_use","name":"json_tool_call","input":[1]},{"type":"redacted_thinking"}],"usage":{"output_tokens_details":{"thinking_tokens":"x"}}}`))

	f.Fuzz(func(t *testing.T, body []byte) {
		out, used, err := Chat{}.ChatResponse(body)
		if providerkit.CheckFuzzedBody(t, body, out, err); err != nil {
			return
		}
		providerkit.CheckAnswerUsage(t, out, used)
		if !json.Valid(out) || !gjson.GetBytes(out, "choices.0.message").IsObject() {
			t.Fatalf("invalid answer for %s:\n%s", body, out)
		}
	})
}

// FuzzError checks that any error answer maps to a unified error with a
// status and a message, as valid JSON.
func FuzzError(f *testing.F) {
	f.Add(529, []byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`))
	f.Add(400, []byte(`{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 1 tokens > 0 maximum"}}`))
	f.Add(413, []byte(`<html>413</html>`))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		if status < 400 || status > 599 {
			return
		}
		e := Chat{}.Error(status, nil, body)
		if e.Status < 400 || e.Message == "" || e.Type == "" || !json.Valid(e.JSON()) {
			t.Fatalf("Error(%d, %q) = %+v", status, body, e)
		}
	})
}

// FuzzStream feeds arbitrary bytes, framed by sse.Cut, through a stream
// translator and checks that what comes out is a well-formed unified stream.
func FuzzStream(f *testing.F) {
	translatortest.SeedTranscripts(f, sseDir)
	f.Add([]byte("data: {\"type\":\"content_block_start\",\"index\":-1,\"content_block\":{\"type\":\"tool_use\",\"id\":7,\"name\":null}}\n\n"), false)
	translatortest.Replay{New: Chat{}.ChatStream}.Fuzz(f)
}

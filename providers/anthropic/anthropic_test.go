package anthropic

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/internal/translatortest"
	"github.com/modelgate/modelgate/providers/providerkit"
)

const (
	requestDir  = "../../testdata/providers/anthropic"
	responseDir = "../../testdata/providers/anthropic/response"

	// testModel is the provider's model name the tests translate for; the
	// unified inputs use the gateway alias "my-claude".
	testModel = "claude-sonnet-4-5-20250929"
)

var testChat = Chat{Now: translatortest.Now}

func TestChatRequestGolden(t *testing.T) {
	translatortest.Golden(t, requestDir, ".unified.json", ".anthropic.json", func(t *testing.T, _ string, in []byte) []byte {
		if _, err := providers.ValidateChat(in); err != nil {
			t.Fatalf("the input does not pass ValidateChat: %v", err)
		}
		req, err := testChat.ChatRequest(in, providerModel(in))
		if err != nil {
			t.Fatalf("ChatRequest: %v", err)
		}
		if req.Path != "/v1/messages" {
			t.Errorf("Path = %q, want /v1/messages", req.Path)
		}
		if v := req.Header.Get("anthropic-version"); v != "2023-06-01" {
			t.Errorf("anthropic-version = %q, want 2023-06-01", v)
		}
		return req.Body
	})
}

// providerModel is the provider's model name a golden input is translated
// for: testModel for the gateway alias "my-claude", else the input's model
// (the tests of features that depend on the model name the model).
func providerModel(in []byte) string {
	if m := gjson.GetBytes(in, "model").Str; m != "my-claude" {
		return m
	}
	return testModel
}

func TestChatRequestSettings(t *testing.T) {
	in := []byte(`{"model":"m","messages":[{"role":"user","content":"Hi"}]}`)
	req, err := Chat{MaxTokens: 1024, Version: "2099-01-01"}.ChatRequest(in, "claude")
	if err != nil {
		t.Fatal(err)
	}
	want := `{"model":"claude","max_tokens":1024,"messages":[{"role":"user","content":"Hi"}]}`
	if string(req.Body) != want {
		t.Errorf("body = %s, want %s", req.Body, want)
	}
	if v := req.Header.Get("anthropic-version"); v != "2099-01-01" {
		t.Errorf("anthropic-version = %q, want 2099-01-01", v)
	}
}

func TestChatRequestErrors(t *testing.T) {
	const user = `{"role":"user","content":"Hi"}`
	tools := `"tools":[{"type":"function","function":{"name":"f"}}]`
	tests := []struct {
		name, body string
		param      string
		code       string
	}{
		{"input_audio part",
			`{"model":"m","messages":[` + user + `,{"role":"user","content":[{"type":"text","text":"listen"},{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}}]}]}`,
			"messages[1].content[1].type", "unsupported_parameter"},
		{"file part",
			`{"model":"m","messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"file-1"}}]}]}`,
			"messages[0].content[0].type", "unsupported_parameter"},
		{"data URL not base64",
			`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png,rawbytes"}}]}]}`,
			"messages[0].content[0].image_url.url", "invalid_value"},
		{"data URL without media type",
			`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:;base64,AAAA"}}]}]}`,
			"messages[0].content[0].image_url.url", "invalid_value"},
		{"n", `{"model":"m","messages":[` + user + `],"n":2}`, "n", "unsupported_parameter"},
		{"logprobs", `{"model":"m","messages":[` + user + `],"logprobs":true}`, "logprobs", "unsupported_parameter"},
		{"response_format grammar", `{"model":"m","messages":[` + user + `],"response_format":{"type":"grammar","grammar":"x"}}`,
			"response_format", "unsupported_parameter"},
		{"json_schema without json_schema", `{"model":"m","messages":[` + user + `],"response_format":{"type":"json_schema"}}`,
			"response_format.json_schema", "invalid_value"},
		{"json_schema schema not an object", `{"model":"m","messages":[` + user + `],"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":[1]}}}`,
			"response_format.json_schema.schema", "invalid_value"},
		{"json_schema array root through a tool", `{"model":"claude-opus-4-1","messages":[` + user + `],"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"array"}}}}`,
			"response_format.json_schema.schema", "invalid_value"},
		{"tool with the reserved name", `{"model":"m","messages":[` + user + `],"tools":[{"type":"function","function":{"name":"f"}},{"type":"function","function":{"name":"json_tool_call"}}]}`,
			"tools[1].function.name", "invalid_value"},
		{"unknown reasoning_effort", `{"model":"m","messages":[` + user + `],"reasoning_effort":"extreme"}`,
			"reasoning_effort", "invalid_value"},
		{"prompt_cache_retention", `{"model":"m","messages":[` + user + `],"prompt_cache_retention":"forever"}`,
			"prompt_cache_retention", "invalid_value"},
		{"thinking_blocks not an array", `{"model":"m","messages":[` + user + `,{"role":"assistant","content":"a","thinking_blocks":{"type":"thinking"}}]}`,
			"messages[1].thinking_blocks", "invalid_value"},
		{"thinking block without signature", `{"model":"m","messages":[` + user + `,{"role":"assistant","content":"a","thinking_blocks":[{"type":"thinking","thinking":"t"}]}]}`,
			"messages[1].thinking_blocks[0]", "invalid_value"},
		{"redacted block without data", `{"model":"m","messages":[` + user + `,{"role":"assistant","content":"a","thinking_blocks":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"redacted_thinking"}]}]}`,
			"messages[1].thinking_blocks[1]", "invalid_value"},
		{"thinking block of unknown type", `{"model":"m","messages":[` + user + `,{"role":"assistant","content":"a","thinking_blocks":[{"type":"reasoning","text":"t"}]}]}`,
			"messages[1].thinking_blocks[0].type", "invalid_value"},
		{"allowed_tools choice", `{"model":"m","messages":[` + user + `],` + tools + `,"tool_choice":{"type":"allowed_tools","allowed_tools":{"mode":"auto","tools":[]}}}`,
			"tool_choice", "unsupported_parameter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			providerkit.ChatRequestError(t, testChat, tt.body, gjson.Get(tt.body, "model").Str, tt.param, tt.code)
		})
	}
	providerkit.BadToolArguments(t, testChat, "m")
	providerkit.CommonRequestErrors(t, testChat, "m")
}

func TestChatResponseGolden(t *testing.T) {
	translatortest.ChatResponseGolden(t, responseDir, ".anthropic.json", testChat.ChatResponse)
}

func TestChatResponseMalformed(t *testing.T) {
	for _, body := range []string{
		``,
		`<html>502 Bad Gateway</html>`,
		`{"id":"msg_1","content":[`,
		`[]`,
		`"message"`,
		`{"id":"msg_1","type":"message"}`,
		`{"id":"msg_1","content":{"type":"text"}}`,
	} {
		if got, _, err := testChat.ChatResponse([]byte(body)); err == nil {
			t.Errorf("ChatResponse(%q) = %s, want an error", body, got)
		}
	}
}

func TestError(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		want   providers.Error
	}{
		{"invalid request", 400, `{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: Field required"},"request_id":"req_1"}`,
			providers.Error{Status: 400, Type: "invalid_request_error", Code: "invalid_request_error", Message: "max_tokens: Field required"}},
		{"authentication", 401, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`,
			providers.Error{Status: 401, Type: "authentication_error", Code: "authentication_error", Message: "invalid x-api-key"}},
		{"billing", 402, `{"type":"error","error":{"type":"billing_error","message":"Your credit balance is too low"}}`,
			providers.Error{Status: 402, Type: "invalid_request_error", Code: "billing_error", Message: "Your credit balance is too low"}},
		{"permission", 403, `{"type":"error","error":{"type":"permission_error","message":"no access"}}`,
			providers.Error{Status: 403, Type: "permission_error", Code: "permission_error", Message: "no access"}},
		{"not found", 404, `{"type":"error","error":{"type":"not_found_error","message":"model: claude-x"}}`,
			providers.Error{Status: 404, Type: "not_found_error", Code: "not_found_error", Message: "model: claude-x"}},
		{"too large", 413, `{"type":"error","error":{"type":"request_too_large","message":"Request exceeds the maximum allowed number of bytes."}}`,
			providers.Error{Status: 413, Type: "invalid_request_error", Code: "request_too_large", Message: "Request exceeds the maximum allowed number of bytes."}},
		{"rate limit", 429, `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`,
			providers.Error{Status: 429, Type: "rate_limit_error", Code: "rate_limit_exceeded", Message: "Number of request tokens has exceeded your per-minute rate limit"}},
		{"api error", 500, `{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`,
			providers.Error{Status: 500, Type: "server_error", Code: "api_error", Message: "Internal server error"}},
		{"timeout", 504, `{"type":"error","error":{"type":"timeout_error","message":"Request timed out"}}`,
			providers.Error{Status: 504, Type: "server_error", Code: "timeout", Message: "Request timed out"}},
		{"overloaded 529", 529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
			providers.Error{Status: 503, Type: "server_error", Code: "overloaded", Message: "Overloaded"}},
		{"529 without body", 529, ``,
			providers.Error{Status: 503, Type: "server_error", Code: "overloaded", Message: "the provider answered 529 Overloaded"}},
		{"html 502", 502, `<html><head><title>502 Bad Gateway</title></head><body>cloudflare</body></html>`,
			providers.Error{Status: 502, Type: "server_error", Message: "the provider answered 502 Bad Gateway"}},
		{"html 403", 403, `<!DOCTYPE html><html>Access denied</html>`,
			providers.Error{Status: 403, Type: "permission_error", Message: "the provider answered 403 Forbidden"}},
		{"json without message", 500, `{"type":"error","error":{"type":"api_error"}}`,
			providers.Error{Status: 500, Type: "server_error", Code: "api_error", Message: "the provider answered 500 Internal Server Error"}},
		{"unknown type", 418, `{"type":"error","error":{"type":"teapot_error","message":"short and stout"}}`,
			providers.Error{Status: 418, Type: "invalid_request_error", Code: "teapot_error", Message: "short and stout"}},
		{"plain message", 503, `{"message":"upstream connect error"}`,
			providers.Error{Status: 503, Type: "server_error", Message: "upstream connect error"}},
		{"error string", 400, `{"error":"bad thing"}`,
			providers.Error{Status: 400, Type: "invalid_request_error", Message: "bad thing"}},
		{"prompt too long", 400, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"}}`,
			providers.Error{Status: 400, Type: "invalid_request_error", Code: "context_length_exceeded", Message: "prompt is too long: 208310 tokens > 200000 maximum"}},
		{"input and max_tokens exceed the context", 400, "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"input length and `max_tokens` exceed context limit: 187254 + 20000 > 200000, decrease input length or `max_tokens` and try again\"}}",
			providers.Error{Status: 400, Type: "invalid_request_error", Code: "context_length_exceeded", Message: "input length and `max_tokens` exceed context limit: 187254 + 20000 > 200000, decrease input length or `max_tokens` and try again"}},
		{"too large from cloudflare", 413, `<html><head><title>413 Request Entity Too Large</title></head><body>cloudflare</body></html>`,
			providers.Error{Status: 413, Type: "invalid_request_error", Code: "request_too_large", Message: "the provider answered 413 Request Entity Too Large"}},
		{"unknown status", 599, `oops`,
			providers.Error{Status: 599, Type: "server_error", Message: "the provider answered status 599"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The host passes retry-after on; the mapping keeps the status
			// the SDKs retry on.
			h := http.Header{"Retry-After": {"7"}}
			got := testChat.Error(tt.status, h, []byte(tt.body))
			if *got != tt.want {
				t.Errorf("got  %+v\nwant %+v", *got, tt.want)
			}
		})
	}
}

// TestChatRequestDuplicateKeys checks that a message's duplicate keys are
// read as ValidateChat read them: the first one counts.
func TestChatRequestDuplicateKeys(t *testing.T) {
	in := []byte(`{"model":"m","messages":[{"role":"user","content":"a","role":"tool","content":[]}]}`)
	if _, err := providers.ValidateChat(in); err != nil {
		t.Fatal(err)
	}
	req, err := testChat.ChatRequest(in, "claude")
	if err != nil {
		t.Fatal(err)
	}
	want := `{"model":"claude","max_tokens":4096,"messages":[{"role":"user","content":"a"}]}`
	if string(req.Body) != want {
		t.Errorf("body = %s, want %s", req.Body, want)
	}
}

// TestChatResponseDuplicateKeys checks that an answer's duplicate keys,
// in the message and in its blocks, are read as gjson's Get reads them:
// the first one counts.
func TestChatResponseDuplicateKeys(t *testing.T) {
	in := []byte(`{"id":"msg_1","model":"claude-x","id":"msg_2","stop_reason":"tool_use","stop_reason":"end_turn",` +
		`"content":[{"type":"text","text":"a","type":"thinking","text":"b"},{"type":"tool_use","id":"t1","name":"f","input":{"x":1},"name":"g","input":{}}],` +
		`"content":[],"usage":{"input_tokens":3,"output_tokens":2},"usage":{"input_tokens":9}}`)
	got, _, err := testChat.ChatResponse(in)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"msg_1","object":"chat.completion","created":` + strconv.FormatInt(testChat.now().Unix(), 10) + `,"model":"claude-x",` +
		`"choices":[{"index":0,"message":{"role":"assistant","content":"a","refusal":null,` +
		`"tool_calls":[{"id":"t1","type":"function","function":{"name":"f","arguments":"{\"x\":1}"}}]},"logprobs":null,"finish_reason":"tool_calls"}],` +
		`"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

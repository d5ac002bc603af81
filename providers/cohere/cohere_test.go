package cohere

import (
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/internal/translatortest"
	"github.com/modelgate/modelgate/providers/providerkit"
)

const (
	requestDir  = "../../testdata/providers/cohere"
	responseDir = "../../testdata/providers/cohere/response"

	// testModel is the provider's model name the tests translate for; the
	// unified inputs use the gateway alias "my-command".
	testModel = "command-a-03-2025"
)

var testChat = Chat{Now: translatortest.Now}

// translateGolden translates the unified request of a golden case.
func translateGolden(t testing.TB, name string) providers.Request {
	t.Helper()
	in := translatortest.ReadFile(t, filepath.Join(requestDir, name+".unified.json"))
	if _, err := providers.ValidateChat(in); err != nil {
		t.Fatalf("the input does not pass ValidateChat: %v", err)
	}
	req, err := testChat.ChatRequest(in, testModel)
	if err != nil {
		t.Fatalf("ChatRequest: %v", err)
	}
	return req
}

func TestChatRequestGolden(t *testing.T) {
	translatortest.Golden(t, requestDir, ".unified.json", ".cohere.json", func(t *testing.T, name string, _ []byte) []byte {
		req := translateGolden(t, name)
		if req.Path != "/v2/chat" || req.Query != "" || req.Framing != nil || len(req.Header) != 0 {
			t.Errorf("request = %+v, want path /v2/chat and nothing else", req)
		}
		return req.Body
	})
}

// TestChatRequestMapping states the points of the mapping one by one, so
// that a golden file rewritten by mistake cannot hide a regression.
func TestChatRequestMapping(t *testing.T) {
	tests := []struct {
		name, body string
		want       map[string]string // gjson path → raw JSON; "" means absent
	}{
		{"max_completion_tokens wins", `{"max_tokens":5,"max_completion_tokens":9}`,
			map[string]string{"max_tokens": "9"}},
		{"max_tokens", `{"max_tokens":5}`, map[string]string{"max_tokens": "5"}},
		{"top_p 1 is Cohere's 0.99", `{"top_p":1}`, map[string]string{"p": "0.99"}},
		{"top_p 0 is Cohere's 0.01", `{"top_p":0}`, map[string]string{"p": "0.01"}},
		{"top_p inside", `{"top_p":0.5}`, map[string]string{"p": "0.5"}},
		{"top_k", `{"top_k":0}`, map[string]string{"k": "0"}},
		{"temperature passes", `{"temperature":1.7}`, map[string]string{"temperature": "1.7"}},
		{"negative temperature", `{"temperature":-1}`, map[string]string{"temperature": "0"}},
		{"penalties clamp", `{"frequency_penalty":2,"presence_penalty":0.25}`,
			map[string]string{"frequency_penalty": "1", "presence_penalty": "0.25"}},
		{"negative penalty dropped", `{"frequency_penalty":-2}`, map[string]string{"frequency_penalty": ""}},
		{"seed", `{"seed":42}`, map[string]string{"seed": "42"}},
		{"stop string", `{"stop":"END"}`, map[string]string{"stop_sequences": `["END"]`}},
		{"stop empty", `{"stop":[""]}`, map[string]string{"stop_sequences": ""}},
		{"logprobs", `{"logprobs":true,"top_logprobs":0}`, map[string]string{"logprobs": "true"}},
		{"logprobs false", `{"logprobs":false}`, map[string]string{"logprobs": ""}},
		{"n 1", `{"n":1}`, map[string]string{"n": ""}},
		{"stream", `{"stream":true}`, map[string]string{"stream": "true"}},
		{"no stream", `{}`, map[string]string{"stream": "false"}},
		{"reasoning none", `{"reasoning_effort":"none"}`, map[string]string{"thinking": `{"type":"disabled"}`}},
		{"reasoning minimal", `{"reasoning_effort":"minimal"}`, map[string]string{"thinking": `{"type":"enabled","token_budget":1024}`}},
		{"reasoning low", `{"reasoning_effort":"low"}`, map[string]string{"thinking": `{"type":"enabled","token_budget":2048}`}},
		{"reasoning medium", `{"reasoning_effort":"medium"}`, map[string]string{"thinking": `{"type":"enabled","token_budget":8192}`}},
		{"reasoning high", `{"reasoning_effort":"high"}`, map[string]string{"thinking": `{"type":"enabled"}`}},
		{"no reasoning_effort", `{}`, map[string]string{"thinking": ""}},
		{"json_object", `{"response_format":{"type":"json_object"}}`,
			map[string]string{"response_format": `{"type":"json_object"}`}},
		{"json_schema", `{"response_format":{"type":"json_schema","json_schema":{"name":"n","strict":true,"schema":{"type":"object"}}}}`,
			map[string]string{"response_format": `{"type":"json_object","json_schema":{"type":"object"}}`}},
		{"text format", `{"response_format":{"type":"text"}}`, map[string]string{"response_format": ""}},
		{"tool_choice auto", `{"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"auto"}`,
			map[string]string{"tool_choice": "", "tools.#": "1", "tools.0.function.parameters": `{"type":"object","properties":{}}`}},
		{"tool_choice required", `{"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"required"}`,
			map[string]string{"tool_choice": `"REQUIRED"`}},
		{"tool_choice none", `{"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"none"}`,
			map[string]string{"tool_choice": `"NONE"`, "tools.#": "1"}},
		{"tool_choice named", `{"tools":[{"type":"function","function":{"name":"f"}},{"type":"function","function":{"name":"g"}}],"tool_choice":{"type":"function","function":{"name":"g"}}}`,
			map[string]string{"tool_choice": `"REQUIRED"`, "tools.#": "1", "tools.0.function.name": `"g"`}},
		{"allowed_tools auto", `{"tools":[{"type":"function","function":{"name":"f"}},{"type":"function","function":{"name":"g"}}],"tool_choice":{"type":"allowed_tools","allowed_tools":{"mode":"auto","tools":[{"type":"function","function":{"name":"f"}}]}}}`,
			map[string]string{"tool_choice": "", "tools.#": "1", "tools.0.function.name": `"f"`}},
		{"strict", `{"tools":[{"type":"function","function":{"name":"f","strict":true}},{"type":"function","function":{"name":"g"}}]}`,
			map[string]string{"strict_tools": "true"}},
		{"not strict", `{"tools":[{"type":"function","function":{"name":"f","strict":false}}]}`,
			map[string]string{"strict_tools": ""}},
		{"none without tools", `{"tool_choice":"none"}`, map[string]string{"tool_choice": "", "tools": ""}},
		{"parallel_tool_calls dropped", `{"tools":[{"type":"function","function":{"name":"f"}}],"parallel_tool_calls":false}`,
			map[string]string{"parallel_tool_calls": "", "tool_choice": ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := `{"model":"m","messages":[{"role":"user","content":"Hi"}]`
			if inner := strings.TrimSpace(tt.body[1 : len(tt.body)-1]); inner != "" {
				body += "," + inner
			}
			body += "}"
			if _, err := providers.ValidateChat([]byte(body)); err != nil {
				t.Fatalf("the input does not pass ValidateChat: %v", err)
			}
			req, err := testChat.ChatRequest([]byte(body), testModel)
			if err != nil {
				t.Fatal(err)
			}
			if !json.Valid(req.Body) {
				t.Fatalf("invalid JSON: %s", req.Body)
			}
			for path, want := range tt.want {
				if got := gjson.GetBytes(req.Body, path).Raw; got != want {
					t.Errorf("%s = %s, want %s\nbody: %s", path, got, want, req.Body)
				}
			}
		})
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
		{"data URL not an image",
			`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:text/plain;base64,AAAA"}}]}]}`,
			"messages[0].content[0].image_url.url", "invalid_value"},
		{"data URL without data",
			`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,"}}]}]}`,
			"messages[0].content[0].image_url.url", "invalid_value"},
		{"file URL",
			`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"file:///etc/passwd"}}]}]}`,
			"messages[0].content[0].image_url.url", "invalid_value"},
		{"bad detail",
			`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/y.png","detail":"ultra"}}]}]}`,
			"messages[0].content[0].image_url.detail", "invalid_value"},
		{"n", `{"model":"m","messages":[` + user + `],"n":2}`, "n", "unsupported_parameter"},
		{"top_logprobs", `{"model":"m","messages":[` + user + `],"logprobs":true,"top_logprobs":3}`, "top_logprobs", "unsupported_parameter"},
		{"top_k fraction", `{"model":"m","messages":[` + user + `],"top_k":1.5}`, "top_k", "invalid_value"},
		{"top_k too large", `{"model":"m","messages":[` + user + `],"top_k":501}`, "top_k", "invalid_value"},
		{"top_k string", `{"model":"m","messages":[` + user + `],"top_k":"5"}`, "top_k", "invalid_value"},
		{"custom choice", `{"model":"m","messages":[` + user + `],` + tools + `,"tool_choice":{"type":"custom","custom":{"name":"g"}}}`,
			"tool_choice", "unsupported_parameter"},
		{"allowed_tools bad mode", `{"model":"m","messages":[` + user + `],` + tools + `,"tool_choice":{"type":"allowed_tools","allowed_tools":{"mode":"maybe","tools":[]}}}`,
			"tool_choice.allowed_tools.mode", "invalid_value"},
		{"named tool missing", `{"model":"m","messages":[` + user + `],` + tools + `,"tool_choice":{"type":"function","function":{"name":"g"}}}`,
			"tool_choice", "invalid_value"},
		{"response_format grammar", `{"model":"m","messages":[` + user + `],"response_format":{"type":"grammar","grammar":"x"}}`,
			"response_format", "unsupported_parameter"},
		{"reasoning_effort unknown", `{"model":"m","messages":[` + user + `],"reasoning_effort":"max"}`, "reasoning_effort", "invalid_value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			providerkit.ChatRequestError(t, testChat, tt.body, testModel, tt.param, tt.code)
		})
	}
	providerkit.CommonRequestErrors(t, testChat, testModel)
	providerkit.RefusesWebSearch(t, testChat, testModel)
}

// TestChatRequestDuplicateKeys checks that a message's duplicate keys are
// read as ValidateChat read them: the first one counts.
func TestChatRequestDuplicateKeys(t *testing.T) {
	in := []byte(`{"model":"m","messages":[{"role":"user","content":"a","role":"tool","content":[]}],"top_p":0.5,"top_p":1}`)
	if _, err := providers.ValidateChat(in); err != nil {
		t.Fatal(err)
	}
	req, err := testChat.ChatRequest(in, "command-r")
	if err != nil {
		t.Fatal(err)
	}
	want := `{"model":"command-r","messages":[{"role":"user","content":"a"}],"stream":false,"p":0.5}`
	if string(req.Body) != want {
		t.Errorf("body = %s, want %s", req.Body, want)
	}
}

func TestChatResponseGolden(t *testing.T) {
	translatortest.ChatResponseGolden(t, responseDir, ".cohere.json", testChat.ChatResponse)
}

// TestChatResponseMapping states the answer's mapping point by point.
func TestChatResponseMapping(t *testing.T) {
	tests := []struct {
		name, body string
		want       map[string]string
	}{
		{"tool plan is content", `{"id":"x","finish_reason":"TOOL_CALL","message":{"tool_plan":"I will look.","tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}}]}}`,
			map[string]string{"choices.0.message.content": `"I will look."`, "choices.0.finish_reason": `"tool_calls"`,
				"choices.0.message.tool_calls.0.id": `"a"`, "choices.0.message.reasoning_content": ""}},
		{"plan then text", `{"id":"x","finish_reason":"COMPLETE","message":{"tool_plan":"Plan. ","content":[{"type":"text","text":"A"},{"type":"text","text":"B"}]}}`,
			map[string]string{"choices.0.message.content": `"Plan. AB"`}},
		{"no text is null", `{"id":"x","finish_reason":"COMPLETE","message":{"content":[]}}`,
			map[string]string{"choices.0.message.content": "null", "choices.0.message.tool_calls": ""}},
		{"thinking", `{"id":"x","finish_reason":"COMPLETE","message":{"content":[{"type":"thinking","thinking":"t1"},{"type":"thinking","thinking":"t2"},{"type":"text","text":"a"}]}}`,
			map[string]string{"choices.0.message.reasoning_content": `"t1t2"`, "choices.0.message.content": `"a"`}},
		{"stop sequence", `{"id":"x","finish_reason":"STOP_SEQUENCE","message":{}}`,
			map[string]string{"choices.0.finish_reason": `"stop"`}},
		{"max tokens", `{"id":"x","finish_reason":"MAX_TOKENS","message":{}}`,
			map[string]string{"choices.0.finish_reason": `"length"`}},
		{"unknown reason", `{"id":"x","finish_reason":"SOMETHING_NEW","message":{}}`,
			map[string]string{"choices.0.finish_reason": `"stop"`}},
		{"tokens over billed units", `{"id":"x","finish_reason":"COMPLETE","message":{},"usage":{"billed_units":{"input_tokens":1,"output_tokens":2},"tokens":{"input_tokens":10,"output_tokens":20}}}`,
			map[string]string{"usage": `{"prompt_tokens":10,"completion_tokens":20,"total_tokens":30}`}},
		{"billed units alone", `{"id":"x","finish_reason":"COMPLETE","message":{},"usage":{"billed_units":{"input_tokens":1.0,"output_tokens":2.0}}}`,
			map[string]string{"usage": `{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}`}},
		{"cached tokens", `{"id":"x","finish_reason":"COMPLETE","message":{},"usage":{"tokens":{"input_tokens":10,"output_tokens":2},"cached_tokens":8}}`,
			map[string]string{"usage": `{"prompt_tokens":10,"completion_tokens":2,"total_tokens":12,"prompt_tokens_details":{"cached_tokens":8}}`}},
		{"no usage", `{"id":"x","finish_reason":"COMPLETE","message":{}}`,
			map[string]string{"usage": `{"prompt_tokens":0,"completion_tokens":0,"total_tokens":0}`}},
		{"no logprobs", `{"id":"x","finish_reason":"COMPLETE","message":{}}`,
			map[string]string{"choices.0.logprobs": "null"}},
		{"empty arguments", `{"id":"x","finish_reason":"TOOL_CALL","message":{"tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":""}}]}}`,
			map[string]string{"choices.0.message.tool_calls.0.function.arguments": `"{}"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, err := testChat.ChatResponse([]byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if !json.Valid(got) {
				t.Fatalf("invalid JSON: %s", got)
			}
			for path, want := range tt.want {
				if g := gjson.GetBytes(got, path).Raw; g != want {
					t.Errorf("%s = %s, want %s\nanswer: %s", path, g, want, got)
				}
			}
		})
	}
}

// TestChatResponseGeneratedCallID checks that a tool call without an id
// gets one in OpenAI's form.
func TestChatResponseGeneratedCallID(t *testing.T) {
	body := `{"id":"x","finish_reason":"TOOL_CALL","message":{"tool_calls":[{"type":"function","function":{"name":"ping"}},{"id":"","function":{"name":"pong"}}]}}`
	seen := map[string]bool{}
	for range 3 {
		got, _, err := testChat.ChatResponse([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		for _, call := range gjson.GetBytes(got, "choices.0.message.tool_calls").Array() {
			id := call.Get("id").Str
			if len(id) != len("call_")+24 || !strings.HasPrefix(id, "call_") || strings.Trim(id[5:], base62) != "" {
				t.Errorf("generated id %q, want call_ and 24 base62 characters", id)
			}
			seen[id] = true
		}
	}
	if len(seen) != 6 {
		t.Errorf("generated ids repeat: %v", seen)
	}
}

func TestChatResponseMalformed(t *testing.T) {
	for _, body := range []string{
		``,
		`<html>502 Bad Gateway</html>`,
		`{"id":"x","message":{`,
		`[]`,
		`"message"`,
		`{"id":"x","finish_reason":"COMPLETE"}`,
		`{"id":"x","message":"hi"}`,
	} {
		if got, _, err := testChat.ChatResponse([]byte(body)); err == nil {
			t.Errorf("ChatResponse(%q) = %s, want an error", body, got)
		}
	}
}

// TestChatResponseGenerationError checks that ERROR and TIMEOUT answers are
// errors, not silently complete answers.
func TestChatResponseGenerationError(t *testing.T) {
	tests := []struct {
		reason string
		status int
		code   string
	}{
		{"ERROR", http.StatusBadGateway, "generation_error"},
		{"TIMEOUT", http.StatusGatewayTimeout, "timeout"},
	}
	for _, tt := range tests {
		body := `{"id":"x","finish_reason":"` + tt.reason + `","message":{"content":[{"type":"text","text":"partial"}]}}`
		_, _, err := testChat.ChatResponse([]byte(body))
		var e *providers.Error
		if !errors.As(err, &e) || e.Status != tt.status || e.Type != "server_error" || e.Code != tt.code {
			t.Errorf("%s: err = %v, want status %d code %s", tt.reason, err, tt.status, tt.code)
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
		{"invalid request", 400, `{"id":"3f1c","message":"invalid request: message must be at least 1 token long or tool results must be specified."}`,
			providers.Error{Status: 400, Type: "invalid_request_error", Message: "invalid request: message must be at least 1 token long or tool results must be specified."}},
		{"too many tokens", 400, `{"message":"too many tokens: total number of tokens in the prompt cannot exceed 128000 - received 131072. Try using a shorter prompt, or enabling prompt truncating."}`,
			providers.Error{Status: 400, Type: "invalid_request_error", Code: "context_length_exceeded", Message: "too many tokens: total number of tokens in the prompt cannot exceed 128000 - received 131072. Try using a shorter prompt, or enabling prompt truncating."}},
		{"too many tokens 422", 422, `{"message":"too many tokens: size limit exceeded by 1204 tokens."}`,
			providers.Error{Status: 400, Type: "invalid_request_error", Code: "context_length_exceeded", Message: "too many tokens: size limit exceeded by 1204 tokens."}},
		{"unprocessable", 422, `{"message":"invalid request: tool_choice is not supported for this model"}`,
			providers.Error{Status: 422, Type: "invalid_request_error", Message: "invalid request: tool_choice is not supported for this model"}},
		{"unauthorized", 401, `{"message":"invalid api token"}`,
			providers.Error{Status: 401, Type: "authentication_error", Code: "invalid_api_key", Message: "invalid api token"}},
		{"invalid token 498", 498, `{"message":"invalid api token: co-abc…"}`,
			providers.Error{Status: 502, Type: "server_error", Code: "upstream_auth_failed", Message: "the provider rejected the gateway's credentials (498 Invalid Token)"}},
		{"payment", 402, `{"message":"Please add a payment method to continue."}`,
			providers.Error{Status: 402, Type: "insufficient_quota", Code: "insufficient_quota", Message: "Please add a payment method to continue."}},
		{"forbidden", 403, `{"message":"access denied"}`,
			providers.Error{Status: 403, Type: "permission_error", Message: "access denied"}},
		{"model not found", 404, `{"message":"model 'command-x' not found, make sure the correct model ID was used and that you have access to the model."}`,
			providers.Error{Status: 404, Type: "not_found_error", Code: "model_not_found", Message: "model 'command-x' not found, make sure the correct model ID was used and that you have access to the model."}},
		{"not found", 404, `{"message":"not found"}`,
			providers.Error{Status: 404, Type: "not_found_error", Message: "not found"}},
		{"rate limit", 429, `{"message":"You are using a Trial key, which is limited to 20 API calls / minute."}`,
			providers.Error{Status: 429, Type: "rate_limit_error", Code: "rate_limit_exceeded", Message: "You are using a Trial key, which is limited to 20 API calls / minute."}},
		{"rate limit without tokens word", 429, `{"message":"too many tokens per minute"}`,
			providers.Error{Status: 429, Type: "rate_limit_error", Code: "rate_limit_exceeded", Message: "too many tokens per minute"}},
		{"cancelled 499", 499, `{"message":"request cancelled"}`,
			providers.Error{Status: 499, Type: "server_error", Code: "request_cancelled", Message: "request cancelled"}},
		{"internal", 500, `{"message":"internal server error, this has been reported to our developers"}`,
			providers.Error{Status: 500, Type: "server_error", Message: "internal server error, this has been reported to our developers"}},
		{"not implemented", 501, `{"message":"not implemented"}`,
			providers.Error{Status: 501, Type: "server_error", Code: "not_implemented", Message: "not implemented"}},
		{"unavailable", 503, `{"message":"service unavailable"}`,
			providers.Error{Status: 503, Type: "server_error", Code: "service_unavailable", Message: "service unavailable"}},
		{"gateway timeout", 504, `{"message":"gateway timeout"}`,
			providers.Error{Status: 504, Type: "server_error", Code: "timeout", Message: "gateway timeout"}},
		{"too large", 413, `{"message":"request entity too large"}`,
			providers.Error{Status: 413, Type: "invalid_request_error", Code: "request_too_large", Message: "request entity too large"}},
		{"html 502", 502, `<html><head><title>502 Bad Gateway</title></head><body>cloudflare</body></html>`,
			providers.Error{Status: 502, Type: "server_error", Message: "the provider answered 502 Bad Gateway"}},
		{"empty 498", 498, ``,
			providers.Error{Status: 502, Type: "server_error", Code: "upstream_auth_failed", Message: "the provider rejected the gateway's credentials (498 Invalid Token)"}},
		{"empty 499", 499, ``,
			providers.Error{Status: 499, Type: "server_error", Code: "request_cancelled", Message: "the provider answered 499 Client Closed Request"}},
		{"openai shape", 400, `{"error":{"message":"bad thing","type":"x"}}`,
			providers.Error{Status: 400, Type: "invalid_request_error", Message: "bad thing"}},
		{"error string", 500, `{"error":"boom"}`,
			providers.Error{Status: 500, Type: "server_error", Message: "boom"}},
		{"unknown status", 599, `oops`,
			providers.Error{Status: 599, Type: "server_error", Message: "the provider answered status 599"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := testChat.Error(tt.status, nil, []byte(tt.body))
			if *got != tt.want {
				t.Errorf("got  %+v\nwant %+v", *got, tt.want)
			}
		})
	}
}

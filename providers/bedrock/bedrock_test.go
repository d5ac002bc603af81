package bedrock

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/internal/translatortest"
	"github.com/modelgate/modelgate/providers/providerkit"
)

const (
	requestDir  = "../../testdata/providers/bedrock"
	responseDir = "../../testdata/providers/bedrock/response"

	// testModel is the model the request goldens translate for unless a
	// case's .options.json names another.
	testModel = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
)

func fixedID() string { return "chatcmpl-bedrock0test" }

var testChat = Chat{Now: translatortest.Now, NewID: fixedID}

// caseOptions are a request golden's settings, from <name>.options.json.
type caseOptions struct {
	Model            string            `json:"model"`
	StructuredOutput string            `json:"structured_output"`
	BaseModels       map[string]string `json:"base_models"`
}

func readOptions(t testing.TB, name string) (Chat, string) {
	t.Helper()
	c, model := testChat, testModel
	data, err := os.ReadFile(filepath.Join(requestDir, name+".options.json"))
	if errors.Is(err, os.ErrNotExist) {
		return c, model
	}
	if err != nil {
		t.Fatal(err)
	}
	var o caseOptions
	if err := json.Unmarshal(data, &o); err != nil {
		t.Fatal(err)
	}
	if o.Model != "" {
		model = o.Model
	}
	c.StructuredOutput = o.StructuredOutput
	c.BaseModels = o.BaseModels
	return c, model
}

func TestChatRequestGolden(t *testing.T) {
	translatortest.Golden(t, requestDir, ".unified.json", ".bedrock.json", func(t *testing.T, name string, in []byte) []byte {
		info, err := providers.ValidateChat(in)
		if err != nil {
			t.Fatalf("the input does not pass ValidateChat: %v", err)
		}
		c, model := readOptions(t, name)
		req, err := c.ChatRequest(in, model)
		if err != nil {
			t.Fatalf("ChatRequest: %v", err)
		}
		wantPath, _ := Path(model, info.Stream)
		if req.Path != wantPath {
			t.Errorf("Path = %q, want %q", req.Path, wantPath)
		}
		if info.Stream != (req.Framing == EventStream) {
			t.Errorf("stream %v but Framing %v", info.Stream, req.Framing)
		}
		return req.Body
	})
}

func TestPath(t *testing.T) {
	tests := []struct {
		model  string
		stream bool
		want   string
	}{
		{"anthropic.claude-3-haiku-20240307-v1:0", false, "/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse"},
		{"us.anthropic.claude-sonnet-4-5-20250929-v1:0", true, "/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse-stream"},
		{"amazon.nova-2-lite-v1:0:256k", false, "/model/amazon.nova-2-lite-v1%3A0%3A256k/converse"},
		{"arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-opus-4-6-v1", false,
			"/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Ainference-profile%2Fus.anthropic.claude-opus-4-6-v1/converse"},
		{"arn:aws:bedrock:eu-west-1:123456789012:application-inference-profile/a1b2c3d4e5", true,
			"/model/arn%3Aaws%3Abedrock%3Aeu-west-1%3A123456789012%3Aapplication-inference-profile%2Fa1b2c3d4e5/converse-stream"},
		// Nothing a client picks can leave the label: no new segment, no
		// query, no fragment, no escape that a server would undo twice.
		{"../../other/converse?x=1#f", false, "/model/..%2F..%2Fother%2Fconverse%3Fx%3D1%23f/converse"},
		{"a/../b", false, "/model/a%2F..%2Fb/converse"},
		{"%2e%2e", false, "/model/%252e%252e/converse"},
		{"m\\..\\x", false, "/model/m%5C..%5Cx/converse"},
		{"sp ace+plus~tilde", false, "/model/sp%20ace%2Bplus~tilde/converse"},
		{"ünï\x00\n", false, "/model/%C3%BCn%C3%AF%00%0A/converse"},
		{"...", false, "/model/.../converse"},
	}
	for _, tt := range tests {
		got, err := Path(tt.model, tt.stream)
		if err != nil || got != tt.want {
			t.Errorf("Path(%q) = %q, %v; want %q", tt.model, got, err, tt.want)
		}
		// The escaped path is what a URL parser sees as the path, with the
		// model in one segment.
		segs := strings.Split(got, "/")
		if len(segs) != 4 || segs[1] != "model" || strings.ContainsAny(got, "?#") {
			t.Errorf("Path(%q) = %q: the model does not stay one segment", tt.model, got)
		}
	}
	for _, bad := range []string{"", ".", "..", strings.Repeat("a", maxModelID+1)} {
		_, err := Path(bad, false)
		var e *providers.Error
		if !errors.As(err, &e) || e.Status != 400 || e.Param != "model" {
			t.Errorf("Path(%.20q) = %v, want a 400 about model", bad, err)
		}
	}
	// ChatRequest refuses them too.
	if _, err := testChat.ChatRequest([]byte(`{"model":"x","messages":[{"role":"user","content":"hi"}]}`), ".."); err == nil {
		t.Error(`ChatRequest(model "..") succeeded`)
	}
}

func TestChatRequestHeaders(t *testing.T) {
	for _, stream := range []bool{false, true} {
		body := `{"model":"m","messages":[{"role":"user","content":"Hi"}],"stream":` + map[bool]string{false: "false", true: "true"}[stream] + `}`
		req, err := testChat.ChatRequest([]byte(body), testModel)
		if err != nil {
			t.Fatal(err)
		}
		wantAccept := "application/json"
		if stream {
			wantAccept = EventStreamContentType
		}
		if got := req.Header.Get("Accept"); got != wantAccept {
			t.Errorf("stream %v: Accept = %q, want %q", stream, got, wantAccept)
		}
		if stream && (req.Framing == nil || !req.Framing.IsStream("application/vnd.amazon.eventstream")) {
			t.Errorf("stream: Framing %v does not take the event stream", req.Framing)
		}
		if !stream && req.Framing != nil {
			t.Errorf("no stream: Framing = %v, want nil", req.Framing)
		}
		want := `{"messages":[{"role":"user","content":[{"text":"Hi"}]}]}`
		if string(req.Body) != want {
			t.Errorf("body = %s, want %s", req.Body, want)
		}
	}
}

func TestChatRequestErrors(t *testing.T) {
	const user = `{"role":"user","content":"Hi"}`
	tools := `"tools":[{"type":"function","function":{"name":"f"}}]`
	image := func(url string) string {
		return `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"see"},{"type":"image_url","image_url":{"url":"` + url + `"}}]}]}`
	}
	tests := []struct {
		name, body string
		param      string
		code       string
	}{
		{"http image", image("https://example.com/cat.png"), "messages[0].content[1].image_url.url", "unsupported_parameter"},
		{"plain http image", image("http://example.com/cat.png"), "messages[0].content[1].image_url.url", "unsupported_parameter"},
		{"ftp image", image("ftp://example.com/cat.png"), "messages[0].content[1].image_url.url", "invalid_value"},
		{"data URL not base64", image("data:image/png,rawbytes"), "messages[0].content[1].image_url.url", "invalid_value"},
		{"data URL without media type", image("data:;base64,AAAA"), "messages[0].content[1].image_url.url", "invalid_value"},
		{"data URL of svg", image("data:image/svg+xml;base64,AAAA"), "messages[0].content[1].image_url.url", "invalid_value"},
		{"s3 URL without extension", image("s3://bucket/key"), "messages[0].content[1].image_url.url", "invalid_value"},
		{"audio format", `{"model":"m","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"AAAA","format":"xyz"}}]}]}`,
			"messages[0].content[0].input_audio.format", "invalid_value"},
		{"audio without data", `{"model":"m","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"format":"wav"}}]}]}`,
			"messages[0].content[0].input_audio.data", "invalid_value"},
		{"file id", `{"model":"m","messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"file-1"}}]}]}`,
			"messages[0].content[0].file.file_id", "unsupported_parameter"},
		{"file of unknown format", `{"model":"m","messages":[{"role":"user","content":[{"type":"file","file":{"file_data":"AAAA","filename":"x.bin"}}]}]}`,
			"messages[0].content[0].file", "invalid_value"},
		{"n", `{"model":"m","messages":[` + user + `],"n":2}`, "n", "unsupported_parameter"},
		{"logprobs", `{"model":"m","messages":[` + user + `],"logprobs":true}`, "logprobs", "unsupported_parameter"},
		{"reserved tool name", `{"model":"m","messages":[` + user + `],"tools":[{"type":"function","function":{"name":"json_tool_call"}}]}`,
			"tools[0].function.name", "invalid_value"},
		{"allowed_tools choice", `{"model":"m","messages":[` + user + `],` + tools + `,"tool_choice":{"type":"allowed_tools","allowed_tools":{"mode":"auto","tools":[]}}}`,
			"tool_choice", "unsupported_parameter"},
		{"response_format type", `{"model":"m","messages":[` + user + `],"response_format":{"type":"xml"}}`, "response_format.type", "unsupported_parameter"},
		{"json_schema not an object", `{"model":"m","messages":[` + user + `],"response_format":{"type":"json_schema","json_schema":"x"}}`,
			"response_format.json_schema", "invalid_value"},
		{"schema not an object", `{"model":"m","messages":[` + user + `],"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":[1]}}}`,
			"response_format.json_schema.schema", "invalid_value"},
		{"reasoning_effort value", `{"model":"m","messages":[` + user + `],"reasoning_effort":"extreme"}`, "reasoning_effort", "invalid_value"},
		{"thinking budget above max tokens", `{"model":"m","messages":[` + user + `],"reasoning_effort":"low","max_tokens":1000}`,
			"max_completion_tokens", "invalid_value"},
		{"thinking_blocks not an array", `{"model":"m","messages":[` + user + `,{"role":"assistant","content":"x","thinking_blocks":{}}]}`,
			"messages[1].thinking_blocks", "invalid_value"},
		{"thinking block type", `{"model":"m","messages":[` + user + `,{"role":"assistant","content":"x","thinking_blocks":[{"type":"summary","text":"x"}]}]}`,
			"messages[1].thinking_blocks[0].type", "invalid_value"},
		{"thinking block text", `{"model":"m","messages":[` + user + `,{"role":"assistant","content":"x","thinking_blocks":[{"type":"thinking","signature":"s"}]}]}`,
			"messages[1].thinking_blocks[0].thinking", "invalid_value"},
		{"thinking block signature", `{"model":"m","messages":[` + user + `,{"role":"assistant","content":"x","thinking_blocks":[{"type":"thinking","thinking":"t","signature":7}]}]}`,
			"messages[1].thinking_blocks[0].signature", "invalid_value"},
		{"redacted block data", `{"model":"m","messages":[` + user + `,{"role":"assistant","content":"x","thinking_blocks":[{"type":"redacted_thinking"}]}]}`,
			"messages[1].thinking_blocks[0].data", "invalid_value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			providerkit.ChatRequestError(t, testChat, tt.body, testModel, tt.param, tt.code)
		})
	}
	providerkit.BadToolArguments(t, testChat, testModel)
	providerkit.DeepToolArguments(t, testChat, testModel, 1200)
	providerkit.CommonRequestErrors(t, testChat, testModel)
	providerkit.RefusesWebSearch(t, testChat, testModel)
}

// TestHTTPImageMessage checks that the refusal of an http image URL says
// what to do instead.
func TestHTTPImageMessage(t *testing.T) {
	body := `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/y.png"}}]}]}`
	_, err := testChat.ChatRequest([]byte(body), testModel)
	if err == nil || !strings.Contains(err.Error(), "data: URL") || !strings.Contains(err.Error(), "cannot fetch") {
		t.Errorf("err = %v, want a message naming data: URLs", err)
	}
}

func TestFamily(t *testing.T) {
	tests := []struct{ model, provider, name string }{
		{"anthropic.claude-3-7-sonnet-20250219-v1:0", "anthropic", "claude-3-7-sonnet-20250219-v1:0"},
		{"us.anthropic.claude-opus-4-6-v1", "anthropic", "claude-opus-4-6-v1"},
		{"global.anthropic.claude-sonnet-4-6", "anthropic", "claude-sonnet-4-6"},
		{"us-gov.anthropic.claude-sonnet-4-5-20250929-v1:0", "anthropic", "claude-sonnet-4-5-20250929-v1:0"},
		{"apac.amazon.nova-2-lite-v1:0", "amazon", "nova-2-lite-v1:0"},
		{"openai.gpt-oss-120b-1:0", "openai", "gpt-oss-120b-1:0"},
		{"arn:aws:bedrock:us-east-1::foundation-model/anthropic.claude-3-5-haiku-20241022-v1:0", "anthropic", "claude-3-5-haiku-20241022-v1:0"},
		{"arn:aws:bedrock:us-east-1:123456789012:inference-profile/eu.meta.llama3-2-3b-instruct-v1:0", "meta", "llama3-2-3b-instruct-v1:0"},
		{"arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/a1b2c3d4e5", "", ""},
		{"arn:aws:bedrock:us-east-1:123456789012:provisioned-model/xyz", "", ""},
		{"my-model", "", ""},
		{"foo.bar.baz", "", ""},
	}
	for _, tt := range tests {
		if got := familyOf(tt.model); got.provider != tt.provider || got.name != tt.name {
			t.Errorf("familyOf(%q) = %+v, want {%s %s}", tt.model, got, tt.provider, tt.name)
		}
	}
}

func TestClaudeAdaptive(t *testing.T) {
	for name, want := range map[string]bool{
		"claude-opus-4-6-v1":              true,
		"claude-sonnet-4-6":               true,
		"claude-opus-4-7":                 true,
		"claude-sonnet-5":                 true,
		"claude-opus-5-1-v1:0":            true,
		"claude-mythos-preview":           true,
		"claude-fable-5-1":                true,
		"claude-sonnet-4-5-20250929-v1:0": false,
		"claude-haiku-4-5-20251001-v1:0":  false,
		"claude-opus-4-20250514-v1:0":     false,
		"claude-opus-4-1-20250805-v1:0":   false,
		"claude-3-7-sonnet-20250219-v1:0": false,
		"claude-3-5-haiku-20241022-v1:0":  false,
		"claude-instant-v1":               false,
		"llama3-70b":                      false,
	} {
		if got := claudeAdaptive(name); got != want {
			t.Errorf("claudeAdaptive(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestReasoning checks reasoning_effort for each model family: the
// additionalModelRequestFields, outputConfig.effort and the max tokens sent.
func TestReasoning(t *testing.T) {
	tests := []struct {
		model, effort, maxTokens string
		wantFields, wantEffort   string
		wantMax                  string
	}{
		{testModel, "medium", "", `{"thinking":{"type":"enabled","budget_tokens":2048}}`, "", "6144"},
		{testModel, "minimal", "", `{"thinking":{"type":"enabled","budget_tokens":1024}}`, "", "5120"},
		{testModel, "high", "8000", `{"thinking":{"type":"enabled","budget_tokens":4096}}`, "", "8000"},
		{testModel, "high", "3000", `{"thinking":{"type":"enabled","budget_tokens":2999}}`, "", "3000"},
		{"anthropic.claude-3-7-sonnet-20250219-v1:0", "low", "", `{"thinking":{"type":"enabled","budget_tokens":1024}}`, "", "5120"},
		{"us.anthropic.claude-opus-4-6-v1", "high", "", `{"thinking":{"type":"adaptive"}}`, "high", ""},
		{"global.anthropic.claude-opus-4-7", "minimal", "2000", `{"thinking":{"type":"adaptive"}}`, "low", "2000"},
		{"anthropic.claude-sonnet-5", "xhigh", "", `{"thinking":{"type":"adaptive"}}`, "xhigh", ""},
		{"us.amazon.nova-2-lite-v1:0", "minimal", "", `{"reasoningConfig":{"type":"enabled","maxReasoningEffort":"low"}}`, "", ""},
		{"amazon.nova-2-lite-v1:0", "xhigh", "", `{"reasoningConfig":{"type":"enabled","maxReasoningEffort":"high"}}`, "", ""},
		{"openai.gpt-oss-120b-1:0", "medium", "", `{"reasoning_effort":"medium"}`, "", ""},
		{"amazon.nova-pro-v1:0", "high", "", "", "", ""},
		{"us.deepseek.r1-v1:0", "high", "", "", "", ""},
		{"arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/abc", "high", "", "", "", ""},
		{testModel, "none", "", "", "", ""},
	}
	for _, tt := range tests {
		body := `{"model":"m","messages":[{"role":"user","content":"Hi"}],"reasoning_effort":"` + tt.effort + `"`
		if tt.maxTokens != "" {
			body += `,"max_completion_tokens":` + tt.maxTokens
		}
		body += "}"
		req, err := testChat.ChatRequest([]byte(body), tt.model)
		if err != nil {
			t.Errorf("%s %s: %v", tt.model, tt.effort, err)
			continue
		}
		var got struct {
			Fields          json.RawMessage `json:"additionalModelRequestFields"`
			InferenceConfig struct {
				MaxTokens json.RawMessage `json:"maxTokens"`
			} `json:"inferenceConfig"`
			OutputConfig struct {
				Effort string `json:"effort"`
			} `json:"outputConfig"`
		}
		if err := json.Unmarshal(req.Body, &got); err != nil {
			t.Fatalf("%s: %v", req.Body, err)
		}
		if string(got.Fields) != tt.wantFields || got.OutputConfig.Effort != tt.wantEffort ||
			string(got.InferenceConfig.MaxTokens) != tt.wantMax {
			t.Errorf("%s %s max %s: fields %s, effort %q, maxTokens %s; want %s, %q, %s",
				tt.model, tt.effort, tt.maxTokens, got.Fields, got.OutputConfig.Effort, got.InferenceConfig.MaxTokens,
				tt.wantFields, tt.wantEffort, tt.wantMax)
		}
	}
}

func TestChatResponseGolden(t *testing.T) {
	translatortest.ChatResponseGolden(t, responseDir, ".bedrock.json", testChat.ChatResponse)
}

func TestChatResponseMalformed(t *testing.T) {
	for _, body := range []string{
		``, `not json`, `[]`, `{}`, `{"output":{}}`, `{"output":{"message":{"content":{}}}}`,
		strings.Repeat("[", 2000),
	} {
		if out, _, err := testChat.ChatResponse([]byte(body)); err == nil {
			t.Errorf("ChatResponse(%.30q) = %s, want an error", body, out)
		}
	}
}

// TestChatResponseIDs checks that answers get fresh, distinct ids by
// default.
func TestChatResponseIDs(t *testing.T) {
	body := []byte(`{"output":{"message":{"role":"assistant","content":[{"text":"hi"}]}},"stopReason":"end_turn","usage":{"inputTokens":1,"outputTokens":1,"totalTokens":2}}`)
	var c Chat
	a, _, _ := c.ChatResponse(body)
	b, _, _ := c.ChatResponse(body)
	var ra, rb struct{ ID string }
	_ = json.Unmarshal(a, &ra)
	_ = json.Unmarshal(b, &rb)
	if !strings.HasPrefix(ra.ID, "chatcmpl-") || len(ra.ID) != len("chatcmpl-")+24 || ra.ID == rb.ID {
		t.Errorf("ids %q and %q", ra.ID, rb.ID)
	}
}

func TestError(t *testing.T) {
	tests := []struct {
		name             string
		status           int
		errorType        string // x-amzn-ErrorType
		body             string
		wantStatus       int
		wantType, wantCd string
		wantMsg          string
	}{
		{"throttling", 429, "ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/",
			`{"message":"Too many requests, please wait before trying again."}`,
			429, "rate_limit_error", "rate_limit_exceeded", "Too many requests, please wait before trying again."},
		{"quota", 400, "ServiceQuotaExceededException:http://internal.amazon.com/coral/com.amazon.bedrock/",
			`{"message":"Your request exceeds the service quota for your account."}`,
			429, "rate_limit_error", "quota_exceeded", "Your request exceeds the service quota for your account."},
		{"context length", 400, "ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/",
			`{"message":"Input is too long for requested model."}`,
			400, "invalid_request_error", "context_length_exceeded", "Input is too long for requested model."},
		{"prompt too long", 400, "ValidationException",
			`{"message":"The model returned the following errors: prompt is too long: 210012 tokens > 200000 maximum"}`,
			400, "invalid_request_error", "context_length_exceeded", "The model returned the following errors: prompt is too long: 210012 tokens > 200000 maximum"},
		{"validation", 400, "ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/",
			`{"message":"The provided model identifier is invalid."}`,
			400, "invalid_request_error", "", "The provided model identifier is invalid."},
		{"model timeout", 408, "ModelTimeoutException", `{"message":"Model has timed out in processing the request."}`,
			504, "server_error", "timeout", "Model has timed out in processing the request."},
		{"unavailable", 503, "ServiceUnavailableException", `{"message":"Bedrock is unable to process your request."}`,
			503, "server_error", "service_unavailable", "Bedrock is unable to process your request."},
		{"model not ready", 429, "ModelNotReadyException", `{"message":"Model is not ready for inference."}`,
			503, "server_error", "model_not_ready", "Model is not ready for inference."},
		{"model error", 424, "ModelErrorException", `{"message":"The model failed.","originalStatusCode":500}`,
			502, "server_error", "model_error", "The model failed."},
		{"internal", 500, "InternalServerException", `{"message":"Internal failure"}`,
			500, "server_error", "internal_server_error", "Internal failure"},
		{"not found", 404, "ResourceNotFoundException:http://internal.amazon.com/coral/com.amazon.bedrock/",
			`{"message":"Model not found."}`, 404, "invalid_request_error", "model_not_found", "Model not found."},
		{"access denied", 403, "AccessDeniedException:http://internal.amazon.com/coral/com.amazon.bedrock/",
			`{"message":"You don't have access to the model with the specified model ID."}`,
			403, "permission_error", "access_denied", "You don't have access to the model with the specified model ID."},
		{"bad signature", 403, "InvalidSignatureException:http://internal.amazon.com/coral/com.amazon.coral.service/",
			`{"message":"The request signature we calculated does not match the signature you provided."}`,
			403, "permission_error", "", "The request signature we calculated does not match the signature you provided."},
		{"type in body", 403, "", `{"__type":"com.amazon.coral.service#UnrecognizedClientException","message":"The security token included in the request is invalid."}`,
			403, "permission_error", "", "The security token included in the request is invalid."},
		{"type in code", 429, "", `{"code":"ThrottlingException","Message":"Rate exceeded"}`,
			429, "rate_limit_error", "rate_limit_exceeded", "Rate exceeded"},
		{"html", 502, "", `<html><body>Bad Gateway</body></html>`, 502, "server_error", "", "the provider answered 502 Bad Gateway"},
		{"unknown type", 409, "SomethingNewException", `{"message":"new"}`, 409, "invalid_request_error", "", "new"},
	}
	for _, tt := range tests {
		h := http.Header{}
		if tt.errorType != "" {
			h.Set("x-amzn-ErrorType", tt.errorType)
		}
		e := testChat.Error(tt.status, h, []byte(tt.body))
		if e.Status != tt.wantStatus || e.Type != tt.wantType || e.Code != tt.wantCd || e.Message != tt.wantMsg {
			t.Errorf("%s: got %d %s", tt.name, e.Status, e.JSON())
		}
	}
}

func TestFinalFinish(t *testing.T) {
	tests := []struct {
		stop             string
		calls, jsonCalls int
		want             string
	}{
		{"end_turn", 0, 0, "stop"},
		{"stop_sequence", 0, 0, "stop"},
		{"end_turn", 2, 0, "tool_calls"},
		{"tool_use", 1, 0, "tool_calls"},
		{"tool_use", 0, 1, "stop"},
		{"tool_use", 1, 1, "tool_calls"},
		{"max_tokens", 1, 0, "length"},
		{"model_context_window_exceeded", 0, 0, "length"},
		{"guardrail_intervened", 0, 0, "content_filter"},
		{"content_filtered", 0, 0, "content_filter"},
		{"malformed_tool_use", 0, 0, "stop"},
		{"", 0, 0, "stop"},
	}
	for _, tt := range tests {
		if got := finalFinish(finishReason(tt.stop), tt.calls, tt.jsonCalls); got != tt.want {
			t.Errorf("%s with %d calls, %d json: %s, want %s", tt.stop, tt.calls, tt.jsonCalls, got, tt.want)
		}
	}
}

func TestToolUseID(t *testing.T) {
	for _, id := range []string{"call_abc123", "tooluse_AbC-09_x", strings.Repeat("a", 64)} {
		if got := toolUseID(id); got != id {
			t.Errorf("toolUseID(%q) = %q, want it unchanged", id, got)
		}
	}
	for _, id := range []string{"", "call:1", "toolu_01A/B", strings.Repeat("a", 65), "ünicode"} {
		got := toolUseID(id)
		if got == id || len(got) == 0 || len(got) > 64 || toolUseID(got) != got || toolUseID(id) != got {
			t.Errorf("toolUseID(%q) = %q: not a stable valid id", id, got)
		}
	}
	if toolUseID("a:b") == toolUseID("a;b") {
		t.Error("different ids map to one")
	}
}

// TestThinkingBlocksOnlyForClaude: signed reasoning goes back to Claude
// models (and to ids that do not say what they are); other families never
// gave any, so a thinking block in their history came from elsewhere and
// is left out rather than refused.
func TestThinkingBlocksOnlyForClaude(t *testing.T) {
	body := `{"model":"m","messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello",` +
		`"thinking_blocks":[{"type":"thinking","thinking":"t","signature":"s"}]},{"role":"user","content":"Again"}]}`
	for model, want := range map[string]bool{
		testModel: true,
		"arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/x": true,
		"us.amazon.nova-2-lite-v1:0":         false,
		"openai.gpt-oss-120b-1:0":            false,
		"us.meta.llama3-3-70b-instruct-v1:0": false,
	} {
		req, err := testChat.ChatRequest([]byte(body), model)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(string(req.Body), `"reasoningContent"`); got != want {
			t.Errorf("%s: reasoning sent %v, want %v: %s", model, got, want, req.Body)
		}
	}
}

package gemini

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/providerkit"
)

func TestPath(t *testing.T) {
	tests := []struct {
		chat          Chat
		model         string
		stream        bool
		want, wantErr string
	}{
		{Chat{}, "gemini-2.5-flash", false, "/models/gemini-2.5-flash:generateContent", ""},
		{Chat{}, "gemini-2.5-flash", true, "/models/gemini-2.5-flash:streamGenerateContent", ""},
		{Chat{}, "models/gemini-3-pro-preview", false, "/models/gemini-3-pro-preview:generateContent", ""},
		{Chat{}, "tunedModels/my-model-7x2", false, "/tunedModels/my-model-7x2:generateContent", ""},
		{Chat{Vertex: true, Project: "my-proj", Location: "europe-west4"}, "gemini-2.5-pro", false,
			"/projects/my-proj/locations/europe-west4/publishers/google/models/gemini-2.5-pro:generateContent", ""},
		{Chat{Vertex: true, Project: "my-proj"}, "gemini-3-pro-preview", true,
			"/projects/my-proj/locations/global/publishers/google/models/gemini-3-pro-preview:streamGenerateContent", ""},
		{Chat{Vertex: true, Project: "p", Location: "us"}, "models/gemini-2.5-flash", false,
			"/projects/p/locations/us/publishers/google/models/gemini-2.5-flash:generateContent", ""},
		{Chat{Vertex: true, Project: "p", Location: "us-central1"}, "publishers/google/models/gemini-2.0-flash-001", false,
			"/projects/p/locations/us-central1/publishers/google/models/gemini-2.0-flash-001:generateContent", ""},
		{Chat{Vertex: true, Project: "p", Location: "us-central1"}, "endpoints/1234567890", false,
			"/projects/p/locations/us-central1/endpoints/1234567890:generateContent", ""},
		{Chat{Vertex: true}, "gemini-2.5-flash", false, "/publishers/google/models/gemini-2.5-flash:generateContent", ""}, // express mode
		{Chat{Vertex: true, Project: "a/b?c"}, "m", false, "/projects/a%2Fb%3Fc/locations/global/publishers/google/models/m:generateContent", ""},
		// A client-chosen model name never leaves its resource.
		{Chat{}, "../files", false, "", "cannot be sent"},
		{Chat{}, "models/../../files", false, "", "cannot be sent"},
		{Chat{}, "gemini?alt=json", false, "", "cannot be sent"},
		{Chat{}, "gemini#x", false, "", "cannot be sent"},
		{Chat{}, "gemini%2F..%2Ffiles", false, "", "cannot be sent"},
		{Chat{}, "gemini 2", false, "", "cannot be sent"},
		{Chat{}, "gemini:countTokens", false, "", "cannot be sent"},
		{Chat{}, "", false, "", "cannot be sent"},
		{Chat{}, "models/", false, "", "cannot be sent"},
		{Chat{}, "cachedContents/x", false, "", "not a Gemini model"},
		{Chat{}, "a/b/c", false, "", "not a Gemini model"},
		{Chat{Vertex: true, Project: "p"}, "publishers/google/models", false, "", "not a Vertex AI model"},
		{Chat{Vertex: true, Project: "p"}, "tunedModels/x", false, "", "not a Vertex AI model"},
	}
	for _, tt := range tests {
		got, err := tt.chat.path(tt.model, tt.stream)
		if tt.wantErr != "" {
			var e *providers.Error
			if !errors.As(err, &e) || e.Status != 400 || e.Param != "model" || !strings.Contains(e.Message, tt.wantErr) {
				t.Errorf("path(%q) = %q, %v; want a 400 on model saying %q", tt.model, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("path(%q) = %q, %v; want %q", tt.model, got, err, tt.want)
		}
	}
}

func TestVertexBaseURL(t *testing.T) {
	for loc, want := range map[string]string{
		"":             "https://aiplatform.googleapis.com/v1",
		"global":       "https://aiplatform.googleapis.com/v1",
		"us":           "https://aiplatform.us.rep.googleapis.com/v1",
		"eu":           "https://aiplatform.eu.rep.googleapis.com/v1",
		"us-central1":  "https://us-central1-aiplatform.googleapis.com/v1",
		"europe-west4": "https://europe-west4-aiplatform.googleapis.com/v1",
	} {
		if got := VertexBaseURL(loc); got != want {
			t.Errorf("VertexBaseURL(%q) = %q, want %q", loc, got, want)
		}
	}
}

func TestFamilyOf(t *testing.T) {
	for model, want := range map[string]family{
		"gemini-2.5-flash":                        {},
		"gemini-2.5-pro":                          {pro: true},
		"gemini-2.5-flash-lite-preview-09-2025":   {},
		"models/gemini-2.0-flash":                 {},
		"publishers/google/models/gemini-2.5-pro": {pro: true},
		"gemini-1.5-pro-002":                      {pro: true},
		"gemini-3-pro-preview":                    {levels: true, pro: true},
		"gemini-3-flash-preview":                  {levels: true},
		"gemini-3.1-pro":                          {levels: true, pro: true},
		"Gemini-3.8-Flash":                        {levels: true},
		"gemini-flash-latest":                     {levels: true},
		"gemini-pro-latest":                       {levels: true, pro: true},
		"gemini-4-ultra":                          {levels: true},
		"gemini-20-flash":                         {levels: true},
	} {
		if got := familyOf(model); got != want {
			t.Errorf("familyOf(%q) = %+v, want %+v", model, got, want)
		}
	}
}

// TestThinking: reasoning_effort becomes thinkingLevel on Gemini 3 (with
// only LOW and HIGH on Pro) and thinkingBudget on Gemini 2.5, with thought
// summaries asked for unless the effort is none.
func TestThinking(t *testing.T) {
	tests := []struct{ model, effort, want string }{
		{"gemini-3-flash-preview", "none", `{"includeThoughts":false,"thinkingLevel":"MINIMAL"}`},
		{"gemini-3-flash-preview", "minimal", `{"includeThoughts":true,"thinkingLevel":"MINIMAL"}`},
		{"gemini-3-flash-preview", "low", `{"includeThoughts":true,"thinkingLevel":"LOW"}`},
		{"gemini-3-flash-preview", "medium", `{"includeThoughts":true,"thinkingLevel":"MEDIUM"}`},
		{"gemini-3-flash-preview", "high", `{"includeThoughts":true,"thinkingLevel":"HIGH"}`},
		{"gemini-3-flash-preview", "xhigh", `{"includeThoughts":true,"thinkingLevel":"HIGH"}`},
		{"gemini-3-pro-preview", "none", `{"includeThoughts":false,"thinkingLevel":"LOW"}`},
		{"gemini-3-pro-preview", "minimal", `{"includeThoughts":true,"thinkingLevel":"LOW"}`},
		{"gemini-3-pro-preview", "medium", `{"includeThoughts":true,"thinkingLevel":"HIGH"}`},
		{"gemini-2.5-flash", "none", `{"includeThoughts":false,"thinkingBudget":0}`},
		{"gemini-2.5-flash", "minimal", `{"includeThoughts":true,"thinkingBudget":512}`},
		{"gemini-2.5-flash", "low", `{"includeThoughts":true,"thinkingBudget":1024}`},
		{"gemini-2.5-flash", "medium", `{"includeThoughts":true,"thinkingBudget":8192}`},
		{"gemini-2.5-flash-lite", "high", `{"includeThoughts":true,"thinkingBudget":24576}`},
		{"gemini-2.5-flash", "xhigh", `{"includeThoughts":true,"thinkingBudget":24576}`},
		{"gemini-2.5-pro", "none", `{"includeThoughts":false,"thinkingBudget":128}`},
		{"gemini-2.5-pro", "xhigh", `{"includeThoughts":true,"thinkingBudget":32768}`},
		{"gemini-2.5-pro", "", ``},
	}
	for _, tt := range tests {
		body := `{"model":"m","messages":[{"role":"user","content":"hi"}]`
		if tt.effort != "" {
			body += `,"reasoning_effort":"` + tt.effort + `"`
		}
		req, err := testChat().ChatRequest([]byte(body+"}"), tt.model)
		if err != nil {
			t.Fatal(err)
		}
		if got := gjson.GetBytes(req.Body, "generationConfig.thinkingConfig").Raw; got != tt.want {
			t.Errorf("%s %q: thinkingConfig %s, want %s", tt.model, tt.effort, got, tt.want)
		}
	}
}

func TestChatRequestErrors(t *testing.T) {
	const user = `{"role":"user","content":"Hi"}`
	tools := `"tools":[{"type":"function","function":{"name":"f"}}]`
	image := func(url string) string {
		return `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"` + url + `"}}]}]}`
	}
	tests := []struct {
		name, body string
		param      string
		code       string
	}{
		{"image URL without extension", image("https://example.com/cat"), "messages[0].content[0].image_url.url", "unsupported_parameter"},
		{"image URL of unknown type", image("https://example.com/cat.bmp?x=.png"), "messages[0].content[0].image_url.url", "unsupported_parameter"},
		{"image ftp URL", image("ftp://example.com/cat.png"), "messages[0].content[0].image_url.url", "invalid_value"},
		{"data URL not base64", image("data:image/png,rawbytes"), "messages[0].content[0].image_url.url", "invalid_value"},
		{"data URL without media type", image("data:;base64,AAAA"), "messages[0].content[0].image_url.url", "invalid_value"},
		{"audio format", `{"model":"m","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"AAAA","format":"opus"}}]}]}`,
			"messages[0].content[0].input_audio.format", "unsupported_parameter"},
		{"audio without data", `{"model":"m","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"format":"wav"}}]}]}`,
			"messages[0].content[0].input_audio.data", "invalid_value"},
		{"file_id", `{"model":"m","messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"file-1"}}]}]}`,
			"messages[0].content[0].file.file_id", "unsupported_parameter"},
		{"file data without type", `{"model":"m","messages":[{"role":"user","content":[{"type":"file","file":{"file_data":"AAAA","filename":"x.bin"}}]}]}`,
			"messages[0].content[0].file.file_data", "invalid_value"},
		{"json response format unknown", `{"model":"m","messages":[` + user + `],"response_format":{"type":"grammar"}}`, "response_format", "unsupported_parameter"},
		{"reasoning effort", `{"model":"m","messages":[` + user + `],"reasoning_effort":"max"}`, "reasoning_effort", "invalid_value"},
		{"custom choice", `{"model":"m","messages":[` + user + `],` + tools + `,"tool_choice":{"type":"custom","custom":{"name":"g"}}}`,
			"tool_choice", "unsupported_parameter"},
		{"allowed_tools mode", `{"model":"m","messages":[` + user + `],` + tools + `,"tool_choice":{"type":"allowed_tools","allowed_tools":{"mode":"none","tools":[]}}}`,
			"tool_choice.allowed_tools.mode", "invalid_value"},
		{"allowed_tools none found", `{"model":"m","messages":[` + user + `],` + tools + `,"tool_choice":{"type":"allowed_tools","allowed_tools":{"mode":"required","tools":[{"type":"function","function":{"name":"zz"}}]}}}`,
			"tool_choice.allowed_tools.tools", "invalid_value"},
		{"function choice not a tool", `{"model":"m","messages":[` + user + `],` + tools + `,"tool_choice":{"type":"function","function":{"name":"g"}}}`,
			"tool_choice.function.name", "invalid_value"},
		{"tool result without its call", `{"model":"m","messages":[` + user + `,{"role":"tool","tool_call_id":"nope","content":"x"}]}`,
			"messages[1].tool_call_id", "invalid_value"},
		{"system only", `{"model":"m","messages":[{"role":"system","content":"x"},{"role":"user","content":""}]}`, "messages", "invalid_value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			providerkit.ChatRequestError(t, testChat(), tt.body, testModel, tt.param, tt.code)
		})
	}
	// The Vertex translator names its own provider type.
	_, err := Chat{Vertex: true, Project: "p"}.ChatRequest([]byte(`{"model":"m","messages":[`+user+`],"audio":{}}`), "m")
	if err == nil || !strings.Contains(err.Error(), "vertex") {
		t.Errorf("vertex: %v", err)
	}
	providerkit.BadToolArguments(t, testChat(), testModel)
	providerkit.DeepToolArguments(t, testChat(), testModel, 2000)
	providerkit.CommonRequestErrors(t, testChat(), testModel)
}

// TestToolCallIDs: a signature carried in a tool call id comes back as the
// bytes Gemini sent; generated ids never reach Gemini, Gemini's own do.
func TestToolCallIDs(t *testing.T) {
	sig := base64.StdEncoding.EncodeToString([]byte{0xfb, 0xff, 0xfe, 1, 2, 3, 4, 0x3e, 0x3f, 0xbf})
	for _, tt := range []struct{ id, sig string }{
		{"", sig}, {"", ""}, {"fc-7f3a", sig}, {"fc-7f3a", ""}, {"a_b-c", sig}, {"with \"quotes\"", sig},
	} {
		full := string(appendCallID([]byte("x"), tt.id, tt.sig, seqIDs())[1:])
		if tt.sig != "" && strings.ContainsAny(strings.TrimPrefix(full, tt.id), "+/=") {
			t.Errorf("id %q is not URL-safe after the id", full)
		}
		id, gotSig := splitCallID(full)
		if id != tt.id || gotSig != tt.sig {
			t.Errorf("splitCallID(%q) = %q, %q; want %q, %q", full, id, gotSig, tt.id, tt.sig)
		}
		if dec, err := base64.StdEncoding.DecodeString(gotSig); tt.sig != "" && (err != nil || base64.StdEncoding.EncodeToString(dec) != sig) {
			t.Errorf("signature %q does not decode to the original bytes", gotSig)
		}
	}
	// LiteLLM's ids hold the signature in standard base64; that works too.
	if id, s := splitCallID("call_abc__thought__" + sig); id != "call_abc" || s != sig {
		t.Errorf("LiteLLM id: %q %q", id, s)
	}
	for id, generated := range map[string]bool{
		"call_" + strings.Repeat("A", 24): true, "call_" + strings.Repeat("A", 23): false,
		"call_" + strings.Repeat("-", 24): false, "toolu_01" + strings.Repeat("A", 21): false,
	} {
		if isGenerated(id) != generated {
			t.Errorf("isGenerated(%q) = %v", id, !generated)
		}
	}
	if r := randomID(); len(r) != 24 || !isGenerated("call_"+r) || r == randomID() {
		t.Errorf("randomID() = %q", r)
	}
}

func TestError(t *testing.T) {
	retry := `{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED","details":[` +
		`{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests"}]},` +
		`{"@type":"type.googleapis.com/google.rpc.Help","links":[{"description":"Learn more","url":"https://ai.google.dev/gemini-api/docs/rate-limits"}]},` +
		`{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"21.5s"}]}}`
	tests := []struct {
		name   string
		status int
		body   string
		want   providers.Error
	}{
		{"rate limit with retry info", 429, retry,
			providers.Error{Status: 429, Type: "rate_limit_error", Code: "rate_limit_exceeded", Message: "Resource has been exhausted (e.g. check quota).", RetryAfter: 21500 * time.Millisecond}},
		{"retry delay capped", 429, `{"error":{"code":429,"message":"slow down","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"3600s"}]}}`,
			providers.Error{Status: 429, Type: "rate_limit_error", Code: "rate_limit_exceeded", Message: "slow down", RetryAfter: 2 * time.Minute}},
		{"retry delay as an object", 429, `{"error":{"code":429,"message":"m","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":{"seconds":"2","nanos":500000000}}]}}`,
			providers.Error{Status: 429, Type: "rate_limit_error", Code: "rate_limit_exceeded", Message: "m", RetryAfter: 2500 * time.Millisecond}},
		{"context length", 400, `{"error":{"code":400,"message":"The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}`,
			providers.Error{Status: 400, Type: "invalid_request_error", Code: "context_length_exceeded", Param: "messages",
				Message: "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576)."}},
		{"invalid argument", 400, `{"error":{"code":400,"message":"* GenerateContentRequest.contents: contents is not specified\n","status":"INVALID_ARGUMENT"}}`,
			providers.Error{Status: 400, Type: "invalid_request_error", Code: "invalid_argument", Message: "* GenerateContentRequest.contents: contents is not specified\n"}},
		{"API key invalid", 400, `{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com"}]}}`,
			providers.Error{Status: 502, Type: "server_error", Code: "upstream_auth_failed", Message: "the provider rejected the gateway's API key (API_KEY_INVALID)"}},
		{"failed precondition", 400, `{"error":{"code":400,"message":"User location is not supported for the API use.","status":"FAILED_PRECONDITION"}}`,
			providers.Error{Status: 400, Type: "invalid_request_error", Code: "failed_precondition", Message: "User location is not supported for the API use."}},
		{"unauthenticated", 401, `{"error":{"code":401,"message":"Request had invalid authentication credentials.","status":"UNAUTHENTICATED"}}`,
			providers.Error{Status: 401, Type: "authentication_error", Code: "unauthenticated", Message: "Request had invalid authentication credentials."}},
		{"permission denied", 403, `{"error":{"code":403,"message":"Permission denied on resource project p.","status":"PERMISSION_DENIED"}}`,
			providers.Error{Status: 403, Type: "permission_error", Code: "permission_denied", Message: "Permission denied on resource project p."}},
		{"not found", 404, `{"error":{"code":404,"message":"models/gemini-9 is not found for API version v1beta, or is not supported for generateContent.","status":"NOT_FOUND"}}`,
			providers.Error{Status: 404, Type: "not_found_error", Code: "model_not_found", Message: "models/gemini-9 is not found for API version v1beta, or is not supported for generateContent."}},
		{"internal", 500, `{"error":{"code":500,"message":"An internal error has occurred.","status":"INTERNAL"}}`,
			providers.Error{Status: 500, Type: "server_error", Code: "internal", Message: "An internal error has occurred."}},
		{"unavailable", 503, `{"error":{"code":503,"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}}`,
			providers.Error{Status: 503, Type: "server_error", Code: "service_unavailable", Message: "The model is overloaded. Please try again later."}},
		{"deadline", 504, `{"error":{"code":504,"message":"Deadline expired before operation could complete.","status":"DEADLINE_EXCEEDED"}}`,
			providers.Error{Status: 504, Type: "server_error", Code: "timeout", Message: "Deadline expired before operation could complete."}},
		{"cancelled", 499, `{"error":{"code":499,"message":"The operation was cancelled.","status":"CANCELLED"}}`,
			providers.Error{Status: 502, Type: "server_error", Code: "cancelled", Message: "The operation was cancelled."}},
		{"wrapped in an array", 429, `[{"error":{"code":429,"message":"Quota exceeded","status":"RESOURCE_EXHAUSTED"}}]`,
			providers.Error{Status: 429, Type: "rate_limit_error", Code: "rate_limit_exceeded", Message: "Quota exceeded"}},
		{"html", 502, `<html><body>502 Bad Gateway secret-host</body></html>`,
			providers.Error{Status: 502, Type: "server_error", Message: "the provider answered 502 Bad Gateway"}},
		{"empty", 503, ``, providers.Error{Status: 503, Type: "server_error", Message: "the provider answered 503 Service Unavailable"}},
		{"plain message", 400, `{"message":"bad"}`, providers.Error{Status: 400, Type: "invalid_request_error", Message: "bad"}},
		{"odd status", 302, `{"error":{"code":302,"message":"moved"}}`, providers.Error{Status: 502, Type: "server_error", Message: "moved"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := testChat().Error(tt.status, nil, []byte(tt.body))
			if *got != tt.want {
				t.Errorf("got  %+v\nwant %+v", *got, tt.want)
			}
		})
	}
}

func TestFraming(t *testing.T) {
	bare := "{\n  \"error\": {\n    \"code\": 503,\n    \"message\": \"a } in \\\" a string\",\n    \"status\": \"UNAVAILABLE\"\n  }\n}\n"
	tests := []struct {
		name, buf, event, rest string
		ok                     bool
	}{
		{"sse event", "data: {}\r\n\r\ndata: x", "data: {}", "data: x", true},
		{"bare JSON", bare + "data: x", strings.TrimSuffix(bare, "\n"), "\ndata: x", true},
		{"bare JSON after newlines", "\r\n" + bare, strings.TrimSuffix(bare, "\n"), "\n", true},
		{"bare array", `[{"error":{}}]`, `[{"error":{}}]`, "", true},
		{"bare JSON unfinished", bare[:20], "", bare[:20], false},
		{"sse unfinished", "data: {}\r\n", "", "data: {}\r\n", false},
	}
	for _, tt := range tests {
		ev, rest, ok, err := Framing.Cut([]byte(tt.buf))
		if err != nil || ok != tt.ok || string(ev) != tt.event || string(rest) != tt.rest {
			t.Errorf("%s: Cut = %q, %q, %v, %v", tt.name, ev, rest, ok, err)
		}
	}
	if _, _, _, err := Framing.Cut([]byte("{" + strings.Repeat(" ", maxBareJSON))); err == nil {
		t.Error("an endless bare JSON value is not an error")
	}
	if !Framing.IsStream("text/event-stream; charset=utf-8") || Framing.IsStream("application/json") {
		t.Error("IsStream")
	}
}

func TestStreamMalformedEvent(t *testing.T) {
	testReplay.Refuses(t, `data: {"candidates":[`, "data: 42", `data: "text"`, `{"error":`)
}

func TestStreamEmptyEvents(t *testing.T) {
	testReplay.Ignores(t, "", ": comment", "event: ping", "id: 7\nretry: 100", "data: [DONE]")
}

// TestStreamAfterError: after an error event, nothing more comes out.
func TestStreamAfterError(t *testing.T) {
	tr := testChat().ChatStream(providers.StreamOptions{IncludeUsage: true})
	out, err := tr.Event(nil, []byte(`data: {"error":{"code":500,"message":"boom","status":"INTERNAL"}}`))
	if err != nil {
		t.Fatal(err)
	}
	out, _ = tr.Event(out, []byte(`data: {"candidates":[{"content":{"parts":[{"text":"late"}]},"finishReason":"STOP"}]}`))
	out = tr.Close(out)
	want := `data: {"error":{"message":"boom","type":"server_error","param":null,"code":"internal"}}` + "\n\n"
	if string(out) != want {
		t.Errorf("got %q, want %q", out, want)
	}
}

func TestChatResponseMalformed(t *testing.T) {
	for _, body := range []string{
		``,
		`<html>502 Bad Gateway</html>`,
		`{"candidates":[`,
		`[]`,
		`"text"`,
		`{"usageMetadata":{}}`,
		`{"candidates":{}}`,
		`{"candidates":[],"usageMetadata":{"promptTokenCount":3}}`,
		`{"candidates":{},"promptFeedback":{"blockReason":"SAFETY"}}`,
		`{"error":{"code":500}}`,
	} {
		if got, _, err := testChat().ChatResponse([]byte(body)); err == nil {
			t.Errorf("ChatResponse(%q) = %s, want an error", body, got)
		}
	}
}

// TestChatRequestDuplicateKeys checks that a message's duplicate keys are
// read as ValidateChat read them: the first one counts.
func TestChatRequestDuplicateKeys(t *testing.T) {
	in := []byte(`{"model":"m","messages":[{"role":"user","content":"a","role":"tool","content":[]}]}`)
	if _, err := providers.ValidateChat(in); err != nil {
		t.Fatal(err)
	}
	req, err := testChat().ChatRequest(in, "gemini-2.5-flash")
	if err != nil {
		t.Fatal(err)
	}
	want := `{"contents":[{"role":"user","parts":[{"text":"a"}]}]}`
	if string(req.Body) != want {
		t.Errorf("body = %s, want %s", req.Body, want)
	}
}

// TestDummySignature: in the turn Gemini 3 validates, the first function
// call of each model content that lost its signature gets Google's dummy
// value; earlier turns and Gemini 2.5 get none.
func TestDummySignature(t *testing.T) {
	calls := func(ids ...string) string {
		var b strings.Builder
		for i, id := range ids {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`{"id":"` + id + `","type":"function","function":{"name":"f","arguments":"{}"}}`)
		}
		return `{"role":"assistant","content":null,"tool_calls":[` + b.String() + `]}`
	}
	result := func(id string) string { return `{"role":"tool","tool_call_id":"` + id + `","content":"ok"}` }
	body := `{"model":"m","messages":[{"role":"user","content":"one"},` + calls("a1", "a2") + `,` + result("a1") + `,` + result("a2") +
		`,{"role":"assistant","content":"done"},{"role":"user","content":"two"},` + calls("b1") + `,` + result("b1") + `,` +
		calls("c1__thought__U0lH", "c2") + `,` + result("c1__thought__U0lH") + `,` + result("c2") + `]}`
	for model, want := range map[string][]string{
		"gemini-3-flash-preview": {"", "", "skip_thought_signature_validator", "U0lH", ""},
		"gemini-2.5-flash":       {"", "", "", "U0lH", ""},
	} {
		req, err := testChat().ChatRequest([]byte(body), model)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		gjson.GetBytes(req.Body, "contents.#.parts").ForEach(func(_, parts gjson.Result) bool {
			parts.ForEach(func(_, p gjson.Result) bool {
				if p.Get("functionCall").Exists() {
					got = append(got, p.Get("thoughtSignature").Str)
				}
				return true
			})
			return true
		})
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("%s: signatures %q, want %q", model, got, want)
		}
	}
}

// TestNoAliasing: bodies are read in place, but nothing the translator
// returns may point into them: the caller reuses its buffers.
func TestNoAliasing(t *testing.T) {
	scribble := func(b []byte) {
		for i := range b {
			b[i] = 'X'
		}
	}
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"audio":{"voice":"alloy","format":"mp3"}}`)
	_, err := testChat().ChatRequest(body, "gemini-2.5-flash")
	reqErr, ok := errors.AsType[*providers.Error](err)
	if !ok {
		t.Fatalf("error %v, want a *providers.Error", err)
	}
	want := reqErr.JSON()
	scribble(body)
	if got := reqErr.JSON(); string(got) != string(want) {
		t.Errorf("request error changed with the body: %s, was %s", got, want)
	}
	ebody := []byte(`{"error":{"code":429,"message":"slow down","status":"RESOURCE_EXHAUSTED"}}`)
	e := testChat().Error(429, nil, ebody)
	want = e.JSON()
	scribble(ebody)
	if got := e.JSON(); string(got) != string(want) {
		t.Errorf("mapped error changed with the body: %s, was %s", got, want)
	}
	answer := []byte(`{"candidates":[{"content":{"parts":[{"text":"hello"}]},"finishReason":"STOP"}],"responseId":"r1"}`)
	out, _, err := testChat().ChatResponse(answer)
	if err != nil {
		t.Fatal(err)
	}
	want = append([]byte(nil), out...)
	scribble(answer)
	if string(out) != string(want) {
		t.Errorf("answer changed with the body")
	}
}

package providerkit

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/jsonw"
)

// ChatRequestError checks that body passes providers.ValidateChat and that
// c refuses it for model with a 400 invalid_request_error naming param
// and code, and saying why.
func ChatRequestError(t testing.TB, c providers.Chat, body, model, param, code string) {
	t.Helper()
	if _, err := providers.ValidateChat([]byte(body)); err != nil {
		t.Fatalf("the input does not pass ValidateChat: %v", err)
	}
	_, err := c.ChatRequest([]byte(body), model)
	var e *providers.Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %v, want a *providers.Error", err)
	}
	if e.Status != http.StatusBadRequest || e.Type != "invalid_request_error" ||
		e.Param != param || e.Code != code || e.Message == "" {
		t.Errorf("got %s (status %d), want status 400, param %q, code %q", e.JSON(), e.Status, param, code)
	}
}

// BadToolArguments checks that c refuses, for model, a request whose
// assistant message's second tool call has arguments that are not a JSON
// object (not JSON, cut off, an array, a string, null, two values): a 400
// invalid_value naming messages[1].tool_calls[1].function.arguments.
func BadToolArguments(t *testing.T, c providers.Chat, model string) {
	t.Helper()
	for _, tt := range []struct{ name, args string }{
		{"not JSON", "not json"},
		{"truncated", `{"city":"Par`},
		{"array", `[1,2]`},
		{"string", `"{}"`},
		{"null", `null`},
		{"trailing garbage", `{} {}`},
	} {
		t.Run("arguments "+tt.name, func(t *testing.T) {
			toolArgumentsError(t, c, model, tt.args)
		})
	}
}

// DeepToolArguments checks that c refuses, for model, tool call arguments
// that nest levels deep (more than providers.MaxDepth), as BadToolArguments
// does other arguments.
func DeepToolArguments(t *testing.T, c providers.Chat, model string, levels int) {
	t.Helper()
	t.Run("arguments too deep", func(t *testing.T) {
		toolArgumentsError(t, c, model, strings.Repeat(`{"a":`, levels)+"1"+strings.Repeat("}", levels))
	})
}

func toolArgumentsError(t *testing.T, c providers.Chat, model, args string) {
	t.Helper()
	a, _ := json.Marshal(args)
	body := `{"model":"m","messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":null,"tool_calls":[` +
		`{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}},` +
		`{"id":"b","type":"function","function":{"name":"f","arguments":` + string(a) + `}}]}]}`
	ChatRequestError(t, c, body, model, "messages[1].tool_calls[1].function.arguments", "invalid_value")
}

// RefusesWebSearch checks that c, the translator of a provider without a
// web search of its own, refuses web_search_options with a 400
// unsupported_parameter naming it: the Responses translation reads that
// answer to apply its built-in tool policy.
func RefusesWebSearch(t *testing.T, c providers.Chat, model string) {
	t.Helper()
	ChatRequestError(t, c, `{"model":"m","messages":[{"role":"user","content":"Hi"}],"web_search_options":{}}`, model,
		"web_search_options", "unsupported_parameter")
}

// CommonRequestErrors checks that c refuses, for model, what no provider
// behind a chat translator expresses, each with a 400 naming the field:
// audio output, the deprecated functions and function_call,
// custom tools (unsupported_parameter), and a tool_choice that requires
// tools when there are none (invalid_value).
func CommonRequestErrors(t *testing.T, c providers.Chat, model string) {
	t.Helper()
	const req = `{"model":"m","messages":[{"role":"user","content":"Hi"}]`
	for _, tt := range []struct{ name, extra, param, code string }{
		{"audio", `"audio":{"voice":"alloy","format":"mp3"}`, "audio", "unsupported_parameter"},
		{"modalities", `"modalities":["text","audio"]`, "modalities", "unsupported_parameter"},
		{"functions", `"functions":[{"name":"f"}]`, "functions", "unsupported_parameter"},
		{"function_call", `"function_call":"auto"`, "function_call", "unsupported_parameter"},
		{"custom tool", `"tools":[{"type":"function","function":{"name":"f"}},{"type":"custom","custom":{"name":"g"}}]`,
			"tools[1].type", "unsupported_parameter"},
		{"required without tools", `"tool_choice":"required"`, "tool_choice", "invalid_value"},
		{"function choice without tools", `"tool_choice":{"type":"function","function":{"name":"f"}}`, "tool_choice", "invalid_value"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ChatRequestError(t, c, req+","+tt.extra+"}", model, tt.param, tt.code)
		})
	}
}

// FuzzChatRequest fuzzes request, a translator's ChatRequest for the
// provider's model, with bodies: every body providers.ValidateChat
// accepts translates into valid JSON or fails with a 4xx
// *providers.Error (see CheckFuzzedRequest).
func FuzzChatRequest(f *testing.F, request func(body []byte) (providers.Request, error)) {
	f.Fuzz(func(t *testing.T, body []byte) {
		if _, err := providers.ValidateChat(body); err != nil {
			return
		}
		req, err := request(body)
		CheckFuzzedRequest(t, body, req, err)
	})
}

// CheckFuzzedRequest checks what a translator made of a body
// providers.ValidateChat accepted: a request whose body is valid JSON, or
// a 4xx *providers.Error. It reports whether there is a request.
func CheckFuzzedRequest(t testing.TB, body []byte, req providers.Request, err error) bool {
	t.Helper()
	if err != nil {
		var e *providers.Error
		if !errors.As(err, &e) || e.Status < 400 || e.Status >= 500 {
			t.Fatalf("ChatRequest error %v is not a 4xx *providers.Error", err)
		}
		return false
	}
	if !gjson.ValidBytes(req.Body) || !json.Valid(req.Body) {
		t.Fatalf("invalid JSON for %s:\n%s", body, req.Body)
	}
	return true
}

// FuzzChatResponse fuzzes response, a translator's ChatResponse: any
// answer body translates into valid JSON, with the usage it carries, or
// fails with an error, never a panic.
func FuzzChatResponse(f *testing.F, response func(body []byte) ([]byte, providers.Used, error)) {
	f.Fuzz(func(t *testing.T, body []byte) {
		out, used, err := response(body)
		CheckFuzzedBody(t, body, out, err)
		if err == nil {
			CheckAnswerUsage(t, out, used)
		}
	})
}

// CheckAnswerUsage checks that used, what a translator's ChatResponse
// returned, is the usage its unified answer carries.
func CheckAnswerUsage(t testing.TB, answer []byte, used providers.Used) {
	t.Helper()
	if want := providers.ReadAnswerUsage(answer); used != want {
		t.Errorf("ChatResponse returned the usage %+v; the answer carries %+v:\n%s", used, want, answer)
	}
}

// CheckFuzzedBody checks what a translator made of a fuzzed input: valid
// JSON, or an error other than a misuse of the JSON writer (a bug of the
// translator, whatever the input).
func CheckFuzzedBody(t testing.TB, in, out []byte, err error) {
	t.Helper()
	switch {
	case errors.Is(err, jsonw.ErrMisuse):
		t.Fatalf("the translator misused the JSON writer on %q: %v", in, err)
	case err == nil && !json.Valid(out):
		t.Fatalf("invalid JSON for %s:\n%s", in, out)
	}
}

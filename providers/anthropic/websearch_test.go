package anthropic

import (
	"testing"

	"github.com/tidwall/gjson"
)

// TestWebSearchOptions checks that web_search_options becomes Anthropic's
// web search server tool beside the client's tools, with its location and
// domains, and that a client tool cannot take its name.
func TestWebSearchOptions(t *testing.T) {
	body := `{"model":"m","messages":[{"role":"user","content":"news?"}],
		"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],
		"web_search_options":{"search_context_size":"low","allowed_domains":["example.com"],
			"user_location":{"type":"approximate","approximate":{"country":"FR","city":"Paris"}}}}`
	req, err := testChat.ChatRequest([]byte(body), "claude-sonnet-4-6")
	if err != nil {
		t.Fatal(err)
	}
	tools := gjson.GetBytes(req.Body, "tools")
	ws := tools.Get("1")
	if tools.Get("0.name").Str != "f" || ws.Get("type").Str != "web_search_20250305" || ws.Get("name").Str != "web_search" ||
		ws.Get("user_location.country").Str != "FR" || ws.Get("user_location.city").Str != "Paris" ||
		ws.Get("user_location.type").Str != "approximate" || ws.Get("allowed_domains.0").Str != "example.com" {
		t.Errorf("tools = %s", tools.Raw)
	}

	req, err = testChat.ChatRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"news?"}],"web_search_options":{}}`), "claude-sonnet-4-6")
	if err != nil || gjson.GetBytes(req.Body, "tools.#").Int() != 1 || gjson.GetBytes(req.Body, "tools.0.user_location").Exists() {
		t.Errorf("search alone: %v %s", err, req.Body)
	}

	taken := `{"model":"m","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"web_search"}}],"web_search_options":{}}`
	ChatRequestErrorParam(t, taken, "tools[0].function.name")
}

// ChatRequestErrorParam checks that body is refused with a 400 naming
// param.
func ChatRequestErrorParam(t *testing.T, body, param string) {
	t.Helper()
	_, err := testChat.ChatRequest([]byte(body), "claude-sonnet-4-6")
	if e, ok := err.(interface{ JSON() []byte }); !ok || gjson.GetBytes(e.JSON(), "error.param").Str != param {
		t.Errorf("error = %v, want one naming %s", err, param)
	}
}

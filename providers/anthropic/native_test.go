package anthropic

import (
	"net/http"
	"testing"
)

func TestNative(t *testing.T) {
	body := []byte(`{"model":"claude-sonnet-4-5","max_tokens":9,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]}]}`)
	h := http.Header{"Anthropic-Version": {"2023-06-01"}, "Anthropic-Beta": {"interleaved-thinking-2025-05-14", "context-1m-2025-08-07"}, "Authorization": {"Bearer gateway-key"}}
	req, err := Native{}.NativeRequest("/messages", body, "claude-sonnet-4-5-20250929", h)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"model":"claude-sonnet-4-5-20250929","max_tokens":9,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]}]}`
	if req.Path != "/v1/messages" || string(req.Body) != want {
		t.Errorf("%s %s", req.Path, req.Body)
	}
	if got := req.Header.Values("Anthropic-Beta"); len(got) != 2 || req.Header.Get("Anthropic-Version") != "2023-06-01" || req.Header.Get("Authorization") != "" {
		t.Errorf("headers %v", req.Header)
	}
	req, _ = Native{Version: "2099-01-01"}.NativeRequest("/messages/count_tokens", body, "m", http.Header{})
	if req.Path != "/v1/messages/count_tokens" || req.Header.Get("Anthropic-Version") != "2099-01-01" || req.Header.Get("Anthropic-Beta") != "" {
		t.Errorf("%s %v", req.Path, req.Header)
	}
}

// TestChatRequestVersion checks the anthropic-version header of a chat
// request: the default one (a map shared by every such request) or the
// configured one.
func TestChatRequestVersion(t *testing.T) {
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	for _, tc := range []struct{ version, want string }{{"", DefaultVersion}, {DefaultVersion, DefaultVersion}, {"2099-01-01", "2099-01-01"}} {
		for range 2 {
			req, err := Chat{Version: tc.version}.ChatRequest(body, "claude-sonnet-4-5")
			if err != nil {
				t.Fatal(err)
			}
			if len(req.Header) != 1 || req.Header.Get("Anthropic-Version") != tc.want {
				t.Errorf("version %q: headers %v, want anthropic-version %s", tc.version, req.Header, tc.want)
			}
		}
	}
}

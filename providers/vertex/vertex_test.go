package vertex

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/anthropic"
	"github.com/modelgate/modelgate/providers/gemini"
)

var testChat = Chat{
	Google: gemini.Chat{Vertex: true, Project: "p", Location: "us-east5"},
	Claude: anthropic.Vertex{Project: "p", Location: "us-east5"},
}

const claudePath = "/projects/p/locations/us-east5/publishers/anthropic/models/claude-sonnet-4-5@20250929"

// TestMessagesPassThrough checks the rawPredict request of a Messages
// request: the body as sent but for model and anthropic_version, the
// stream's method, anthropic-beta and nothing else of the headers;
// count_tokens keeps the model; Gemini's models are not native.
func TestMessagesPassThrough(t *testing.T) {
	m := Messages{Claude: testChat.Claude}
	body := `{"model":"x","anthropic_version":"2023-06-01","max_tokens":10,"stream":true,"thinking":{"type":"adaptive"},"messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]}]}`
	h := http.Header{"Anthropic-Beta": {"context-management-2025-06-27"}, "Anthropic-Version": {"2023-06-01"}, "X-Api-Key": {"secret"}}
	for _, model := range []string{"claude-sonnet-4-5@20250929", "publishers/anthropic/models/claude-sonnet-4-5@20250929"} {
		req, err := m.NativeRequest("/messages", []byte(body), model, h)
		if err != nil {
			t.Fatal(err)
		}
		got := gjson.ParseBytes(req.Body)
		if req.Path != claudePath+":streamRawPredict" || got.Get("model").Exists() || got.Get("anthropic_version").Str != anthropic.VertexVersion ||
			got.Get("stream").Type != gjson.True || got.Get("messages").Raw != gjson.Get(body, "messages").Raw ||
			len(req.Header) != 1 || req.Header.Get("Anthropic-Beta") != "context-management-2025-06-27" {
			t.Errorf("%s: %s %s %v", model, req.Path, req.Body, req.Header)
		}
	}
	req, err := m.NativeRequest("/messages/count_tokens", []byte(`{"model":"x","messages":[]}`), "claude-sonnet-4-5@20250929", nil)
	if err != nil || req.Path != "/projects/p/locations/us-east5/publishers/anthropic/models/count-tokens:rawPredict" ||
		gjson.GetBytes(req.Body, "model").Str != "claude-sonnet-4-5@20250929" || gjson.GetBytes(req.Body, "anthropic_version").Str != anthropic.VertexVersion {
		t.Errorf("count: %v %s %s", err, req.Path, req.Body)
	}
	if _, err := m.NativeRequest("/messages", []byte(body), "gemini-2.5-pro", h); !errors.Is(err, providers.ErrNotNative) {
		t.Errorf("gemini: %v", err)
	}
	if _, err := m.NativeRequest("/messages", []byte(body), "claude-x/../y", h); err == nil {
		t.Error("a model that climbs out of its resource was taken")
	}
	if _, err := (Messages{}).NativeRequest("/messages", []byte(body), "claude-sonnet-4-5", h); err == nil {
		t.Error("express mode took a Claude model")
	}
}

// TestChatByPublisher checks that chat goes to the model's publisher and
// its answers, streams and errors back through the right translator.
func TestChatByPublisher(t *testing.T) {
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	req, err := testChat.ChatRequest(body, "claude-sonnet-4-5@20250929")
	if err != nil || req.Path != claudePath+":rawPredict" || gjson.GetBytes(req.Body, "anthropic_version").Str != anthropic.VertexVersion ||
		gjson.GetBytes(req.Body, "model").Exists() || req.Header.Get("Anthropic-Version") != "" {
		t.Errorf("claude: %v %s %s %v", err, req.Path, req.Body, req.Header)
	}
	req, err = testChat.ChatRequest(body, "gemini-2.5-pro")
	if err != nil || req.Path != "/projects/p/locations/us-east5/publishers/google/models/gemini-2.5-pro:generateContent" {
		t.Errorf("gemini: %v %s", err, req.Path)
	}
	out, used, err := testChat.ChatResponse([]byte(`{"id":"msg_1","type":"message","role":"assistant","model":"claude","content":[{"type":"text","text":"hello"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`))
	if err != nil || gjson.GetBytes(out, "choices.0.message.content").Str != "hello" || !used.Known || used.Prompt != 1 || used.Completion != 1 {
		t.Errorf("claude answer: %v %s (usage %+v)", err, out, used)
	}
	out, _, err = testChat.ChatResponse([]byte(`{"candidates":[{"content":{"parts":[{"text":"hola"}]},"finishReason":"STOP"}],"responseId":"r1"}`))
	if err != nil || gjson.GetBytes(out, "choices.0.message.content").Str != "hola" {
		t.Errorf("gemini answer: %v %s", err, out)
	}
	if e := testChat.Error(429, nil, []byte(`{"type":"error","error":{"type":"rate_limit_error","message":"slow"}}`)); e.Status != 429 || e.Message != "slow" {
		t.Errorf("claude error: %+v", e)
	}
	if e := testChat.Error(403, nil, []byte(`{"error":{"code":403,"message":"denied","status":"PERMISSION_DENIED"}}`)); e.Message != "denied" {
		t.Errorf("google error: %+v", e)
	}
	if _, err := (Chat{}).ChatRequest(body, "claude-sonnet-4-5"); err == nil {
		t.Error("express mode took a Claude model")
	}
}

// FuzzNativeRequest checks that any model and body either fail with a
// 4xx or make a request whose body is JSON and whose path keeps the model
// in its one segment of Anthropic's resources.
func FuzzNativeRequest(f *testing.F) {
	f.Add("claude-sonnet-4-5@20250929", []byte(`{"model":"x","max_tokens":1,"stream":true,"messages":[]}`), false)
	f.Add("publishers/anthropic/models/claude-x", []byte(`{"messages":[{"role":"user","content":"hi"}]}`), true)
	f.Add("claude-a/../b?c", []byte(`{}`), false)
	f.Fuzz(func(t *testing.T, model string, body []byte, count bool) {
		if !providers.ValidJSON(body) || !gjson.ParseBytes(body).IsObject() {
			return // the Messages API's validation refuses it first
		}
		path := "/messages"
		if count {
			path += "/count_tokens"
		}
		req, err := Messages{Claude: testChat.Claude}.NativeRequest(path, body, model, nil)
		if err != nil {
			var pe *providers.Error
			if !errors.Is(err, providers.ErrNotNative) && (!errors.As(err, &pe) || pe.Status >= 500) {
				t.Fatalf("error %v", err)
			}
			return
		}
		if !providers.ValidJSON(req.Body) {
			t.Fatalf("body %q", req.Body)
		}
		rest, ok := strings.CutPrefix(req.Path, "/projects/p/locations/us-east5/publishers/anthropic/models/")
		if !ok || strings.ContainsAny(rest, "/?#") {
			t.Fatalf("path %q", req.Path)
		}
	})
}

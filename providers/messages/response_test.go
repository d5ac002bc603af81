package messages

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/modelgate/modelgate/providers/internal/translatortest"
	"github.com/tidwall/gjson"
)

// decodeMessage decodes a Message with anthropic-sdk-go and checks what
// the SDK's types require of it.
func decodeMessage(t testing.TB, data []byte) anthropic.Message {
	t.Helper()
	var m anthropic.Message
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("anthropic.Message cannot decode %s: %v", data, err)
	}
	if !strings.HasPrefix(m.ID, "msg_") || m.Type != "message" || m.Role != "assistant" {
		t.Errorf("id %q, type %q, role %q", m.ID, m.Type, m.Role)
	}
	for i, b := range m.Content {
		if b.AsAny() == nil {
			t.Errorf("content[%d] is of no type the SDK knows: %s", i, b.RawJSON())
		}
		if b.Type == "tool_use" {
			var input map[string]any
			if err := json.Unmarshal(b.Input, &input); err != nil {
				t.Errorf("content[%d].input is not an object: %s", i, b.Input)
			}
		}
	}
	return m
}

func TestFromChatGolden(t *testing.T) {
	translatortest.Golden(t, responseDir, ".chat.json", ".messages.json", func(t *testing.T, _ string, in []byte) []byte {
		got, err := FromChat(in)
		if err != nil {
			t.Fatalf("FromChat: %v", err)
		}
		decodeMessage(t, got)
		// What the Message carries is the usage Chat's ChatResponse
		// returns, as the relay of a passed-through Message reads it.
		if _, used, err := fromChat(in); err != nil || used != AnswerUsage(got) {
			t.Errorf("fromChat returned the usage %+v (%v); the Message carries %+v", used, err, AnswerUsage(got))
		}
		return got
	})
}

func TestFromChatGeneratedIDs(t *testing.T) {
	hub := `{"object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,` +
		`"tool_calls":[{"type":"function","function":{"name":"f","arguments":"{\"a\":"}}]},"finish_reason":"stop"}]}`
	got, err := FromChat([]byte(hub))
	if err != nil {
		t.Fatal(err)
	}
	m := decodeMessage(t, got)
	if !regexp.MustCompile(`^msg_[0-9A-Za-z]{24}$`).MatchString(m.ID) {
		t.Errorf("generated message id %q", m.ID)
	}
	if len(m.Content) != 1 || !regexp.MustCompile(`^toolu_[0-9A-Za-z]{24}$`).MatchString(m.Content[0].ID) {
		t.Fatalf("content %s", got)
	}
	if string(m.Content[0].Input) != "{}" {
		t.Errorf("cut-off arguments gave input %s, want {}", m.Content[0].Input)
	}
	if m.StopReason != "tool_use" {
		t.Errorf("a stop with tool calls gave %q, want tool_use", m.StopReason)
	}
	again, _ := FromChat([]byte(hub))
	if decodeMessage(t, again).ID == m.ID {
		t.Error("two answers without ids got the same generated id")
	}
}

func TestFromChatErrors(t *testing.T) {
	for _, body := range []string{``, `[]`, `{"choices":[]}`, `{"choices":[{"message":"x"}]}`, `{"error":{"message":"x"}}`, `{"a":`} {
		if got, err := FromChat([]byte(body)); err == nil {
			t.Errorf("FromChat(%s) = %s, want an error", body, got)
		}
	}
}

func TestMapStop(t *testing.T) {
	tests := []struct {
		finish, stopReason string
		calls, refusal     bool
		want, seq          string
	}{
		{"stop", "", false, false, "end_turn", ""},
		{"stop", `"###"`, false, false, "stop_sequence", `"###"`},
		{"stop", `151643`, false, false, "end_turn", ""}, // vLLM: a stop token id, not a sequence
		{"stop", "", true, false, "tool_use", ""},
		{"length", "", true, false, "max_tokens", ""},
		{"tool_calls", "", true, false, "tool_use", ""},
		{"function_call", "", false, false, "tool_use", ""},
		{"content_filter", "", false, false, "refusal", ""},
		{"stop", "", false, true, "refusal", ""},
		{"", "", false, false, "end_turn", ""},
		{"something_new", "", false, false, "end_turn", ""},
	}
	for _, tt := range tests {
		var sr gjson.Result
		if tt.stopReason != "" {
			sr = gjson.Parse(tt.stopReason)
		}
		got, seq := mapStop(tt.finish, sr, tt.calls, tt.refusal)
		if got != tt.want || seq.Raw != tt.seq {
			t.Errorf("mapStop(%q, %s, %v, %v) = %q, %q; want %q, %q", tt.finish, tt.stopReason, tt.calls, tt.refusal, got, seq.Raw, tt.want, tt.seq)
		}
	}
}

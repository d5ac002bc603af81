package messages

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/internal/translatortest"
)

const (
	requestDir  = "../../testdata/providers/messages/request"
	responseDir = "../../testdata/providers/messages/response"
	sseDir      = "../../testdata/sse/messages"
)

// asError returns err as a *providers.Error or fails.
func asError(t *testing.T, err error) *providers.Error {
	t.Helper()
	var e *providers.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not a *providers.Error", err, err)
	}
	return e
}

// TestToChatGolden translates every Messages request fixture and compares
// the hub request with its golden. Each fixture is a request
// anthropic-sdk-go's BetaMessageNewParams (or, without max_tokens,
// BetaMessageCountTokensParams) accepts, and each output passes the hub's
// own validation, as a provider's translator requires.
func TestToChatGolden(t *testing.T) {
	translatortest.Golden(t, requestDir, ".messages.json", ".chat.json", func(t *testing.T, name string, in []byte) []byte {
		count := strings.HasPrefix(name, "count_tokens")
		if count {
			var p anthropic.BetaMessageCountTokensParams
			if err := json.Unmarshal(in, &p); err != nil {
				t.Fatalf("the fixture is not a count_tokens request: %v", err)
			}
			if _, err := ValidateCountTokens(in); err != nil {
				t.Fatalf("ValidateCountTokens: %v", err)
			}
		} else {
			var p anthropic.BetaMessageNewParams
			if err := json.Unmarshal(in, &p); err != nil {
				t.Fatalf("the fixture is not a Messages request: %v", err)
			}
			if _, err := Validate(in); err != nil {
				t.Fatalf("Validate: %v", err)
			}
		}
		got, err := ToChat(in)
		if err != nil {
			t.Fatalf("ToChat: %v", err)
		}
		info, err := providers.ValidateChat(got)
		if err != nil {
			t.Fatalf("the hub request does not pass ValidateChat: %v\n%s", err, translatortest.Indent(t, got))
		}
		if info.Stream && !info.IncludeUsage {
			t.Errorf("a streamed hub request must ask for usage")
		}
		return got
	})
}

func TestValidate(t *testing.T) {
	ok := `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`
	info, err := Validate([]byte(`{"model":"claude-x","max_tokens":0,"stream":true,"messages":[{"role":"user","content":[{"type":"brand_new_block"}]}]}`))
	if err != nil {
		t.Fatalf("a request Anthropic would take (a block type the gateway does not know, max_tokens 0) was refused: %v", err)
	}
	if info.Model != "claude-x" || !info.Stream {
		t.Errorf("info = %+v", info)
	}
	if info, err := Validate([]byte(ok)); err != nil || info.Stream {
		t.Errorf("Validate(%s) = %+v, %v", ok, info, err)
	}

	tests := []struct {
		name, body, param string
	}{
		{"not JSON", `{"model":`, ""},
		{"too deep", strings.Repeat("[", 1200), ""},
		{"array", `[]`, ""},
		{"no model", `{"max_tokens":1,"messages":[{"role":"user","content":"x"}]}`, "model"},
		{"empty model", `{"model":"","max_tokens":1,"messages":[{"role":"user","content":"x"}]}`, "model"},
		{"two models", `{"model":"a","model":"b","max_tokens":1,"messages":[{"role":"user","content":"x"}]}`, "model"},
		{"two streams", `{"model":"a","stream":false,"stream":true,"max_tokens":1,"messages":[{"role":"user","content":"x"}]}`, "stream"},
		{"no max_tokens", `{"model":"a","messages":[{"role":"user","content":"x"}]}`, "max_tokens"},
		{"float max_tokens", `{"model":"a","max_tokens":1.5,"messages":[{"role":"user","content":"x"}]}`, "max_tokens"},
		{"negative max_tokens", `{"model":"a","max_tokens":-1,"messages":[{"role":"user","content":"x"}]}`, "max_tokens"},
		{"stream string", `{"model":"a","max_tokens":1,"stream":"yes","messages":[{"role":"user","content":"x"}]}`, "stream"},
		{"no messages", `{"model":"a","max_tokens":1}`, "messages"},
		{"messages object", `{"model":"a","max_tokens":1,"messages":{}}`, "messages"},
		{"empty messages", `{"model":"a","max_tokens":1,"messages":[]}`, "messages"},
		{"message string", `{"model":"a","max_tokens":1,"messages":["hi"]}`, "messages.0"},
		{"bad role", `{"model":"a","max_tokens":1,"messages":[{"role":"tool","content":"x"}]}`, "messages.0.role"},
		{"no role", `{"model":"a","max_tokens":1,"messages":[{"content":"x"}]}`, "messages.0.role"},
		{"no content", `{"model":"a","max_tokens":1,"messages":[{"role":"user"}]}`, "messages.0.content"},
		{"content number", `{"model":"a","max_tokens":1,"messages":[{"role":"user","content":1}]}`, "messages.0.content"},
		{"block without type", `{"model":"a","max_tokens":1,"messages":[{"role":"user","content":"x"},{"role":"assistant","content":[{"text":"x"}]}]}`, "messages.1.content.0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Validate([]byte(tt.body))
			if err == nil {
				t.Fatal("accepted")
			}
			e := asError(t, err)
			if e.Status != 400 || e.Type != "invalid_request_error" || e.Param != tt.param {
				t.Errorf("error = %+v, want 400 invalid_request_error about %q", e, tt.param)
			}
			if tt.param != "" && !strings.HasPrefix(e.Message, tt.param+": ") {
				t.Errorf("message %q does not start with the param", e.Message)
			}
			body := ErrorBody(e)
			var env struct {
				Type  string `json:"type"`
				Error struct{ Type, Message string }
			}
			if err := json.Unmarshal(body, &env); err != nil || env.Type != "error" || env.Error.Type != "invalid_request_error" || env.Error.Message != e.Message {
				t.Errorf("ErrorBody = %s (%v)", body, err)
			}
		})
	}

	if _, err := ValidateCountTokens([]byte(`{"model":"a","messages":[{"role":"user","content":"x"}]}`)); err != nil {
		t.Errorf("count_tokens without max_tokens: %v", err)
	}
	if _, err := ValidateCountTokens([]byte(`{"model":"a","messages":[]}`)); err == nil {
		t.Errorf("count_tokens without messages was accepted")
	}
}

// TestToChatErrors covers what the hub cannot carry and what is malformed
// below the level Validate checks.
func TestToChatErrors(t *testing.T) {
	req := func(extra, content string) string {
		return `{"model":"m","max_tokens":100` + extra + `,"messages":[{"role":"user","content":` + content + `}]}`
	}
	tests := []struct {
		name, body, param, code string
	}{
		{"server tool", req(`,"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":3}]`, `"x"`), "tools.0.type", "unsupported_parameter"},
		{"bash tool", req(`,"tools":[{"name":"f","input_schema":{"type":"object"}},{"type":"bash_20250124","name":"bash"}]`, `"x"`), "tools.1.type", "unsupported_parameter"},
		{"tool without schema", req(`,"tools":[{"name":"f"}]`, `"x"`), "tools.0.input_schema", "invalid_value"},
		{"tool without name", req(`,"tools":[{"input_schema":{"type":"object"}}]`, `"x"`), "tools.0.name", "invalid_value"},
		{"mcp servers", req(`,"mcp_servers":[{"type":"url","url":"https://x","name":"x"}]`, `"x"`), "mcp_servers", "unsupported_parameter"},
		{"compaction", req(`,"compaction":{"type":"enabled"}`, `"x"`), "compaction", "unsupported_parameter"},
		{"max_tokens 0", req(``, `"x"`)[:0] + `{"model":"m","max_tokens":0,"messages":[{"role":"user","content":"x"}]}`, "max_tokens", "unsupported_parameter"},
		{"tool_choice any without tools", req(`,"tool_choice":{"type":"any"}`, `"x"`), "tool_choice", "invalid_value"},
		{"tool_choice bad type", req(`,"tools":[{"name":"f","input_schema":{}}],"tool_choice":{"type":"sometimes"}`, `"x"`), "tool_choice.type", "invalid_value"},
		{"tool_choice tool without name", req(`,"tools":[{"name":"f","input_schema":{}}],"tool_choice":{"type":"tool"}`, `"x"`), "tool_choice.name", "invalid_value"},
		{"thinking bad type", req(`,"thinking":{"type":"sometimes"}`, `"x"`), "thinking.type", "invalid_value"},
		{"thinking without budget", req(`,"thinking":{"type":"enabled"}`, `"x"`), "thinking.budget_tokens", "invalid_value"},
		{"bad effort", req(`,"output_config":{"effort":"extreme"}`, `"x"`), "output_config.effort", "invalid_value"},
		{"bad output format", req(`,"output_config":{"format":{"type":"xml"}}`, `"x"`), "output_config.format.type", "invalid_value"},
		{"output format without schema", req(`,"output_format":{"type":"json_schema"}`, `"x"`), "output_format.schema", "invalid_value"},
		{"stop_sequences string", req(`,"stop_sequences":"END"`, `"x"`), "stop_sequences", "invalid_value"},
		{"temperature string", req(`,"temperature":"hot"`, `"x"`), "temperature", "invalid_value"},
		{"system number", req(`,"system":5`, `"x"`), "system", "invalid_value"},
		{"system image block", req(`,"system":[{"type":"image","source":{}}]`, `"x"`), "system.0", "invalid_value"},
		{"image file source", req(``, `[{"type":"image","source":{"type":"file","file_id":"file_01"}}]`), "messages.0.content.0.source", "unsupported_parameter"},
		{"image without data", req(``, `[{"type":"image","source":{"type":"base64","media_type":"image/png"}}]`), "messages.0.content.0.source", "invalid_value"},
		{"image bad media type", req(``, `[{"type":"image","source":{"type":"base64","media_type":"image/png\"","data":"AA"}}]`), "messages.0.content.0.source.media_type", "invalid_value"},
		{"image bad source", req(``, `[{"type":"image","source":{"type":"ftp"}}]`), "messages.0.content.0.source.type", "invalid_value"},
		{"pdf url", req(``, `[{"type":"document","source":{"type":"url","url":"https://x/a.pdf"}}]`), "messages.0.content.0.source", "unsupported_parameter"},
		{"document file", req(``, `[{"type":"document","source":{"type":"file","file_id":"file_01"}}]`), "messages.0.content.0.source", "unsupported_parameter"},
		{"document not pdf", req(``, `[{"type":"document","source":{"type":"base64","media_type":"application/msword","data":"AA"}}]`), "messages.0.content.0.source.media_type", "unsupported_parameter"},
		{"server tool result in history", req(``, `[{"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":[]}]`), "messages.0.content.0.type", "unsupported_parameter"},
		{"unknown block", req(``, `[{"type":"hologram"}]`), "messages.0.content.0.type", "unsupported_parameter"},
		{"tool_use in user turn", req(``, `[{"type":"tool_use","id":"a","name":"f","input":{}}]`), "messages.0.content.0.type", "invalid_value"},
		{"text without text", req(``, `[{"type":"text"}]`), "messages.0.content.0.text", "invalid_value"},
		{"tool_result without id", req(``, `[{"type":"tool_result","content":"x"}]`), "messages.0.content.0.tool_use_id", "invalid_value"},
		{"tool_result bad content", req(``, `[{"type":"tool_result","tool_use_id":"a","content":5}]`), "messages.0.content.0.content", "invalid_value"},
		{"tool_result with server block", req(``, `[{"type":"tool_result","tool_use_id":"a","content":[{"type":"tool_reference","tool_name":"x"}]}]`), "messages.0.content.0.content.0.type", "unsupported_parameter"},
	}
	assistant := func(blocks string) string {
		return `{"model":"m","max_tokens":100,"messages":[{"role":"user","content":"x"},{"role":"assistant","content":` + blocks + `}]}`
	}
	tests = append(tests, []struct{ name, body, param, code string }{
		{"tool_use without id", assistant(`[{"type":"tool_use","name":"f","input":{}}]`), "messages.1.content.0.id", "invalid_value"},
		{"tool_use without name", assistant(`[{"type":"tool_use","id":"a","input":{}}]`), "messages.1.content.0.name", "invalid_value"},
		{"tool_use input array", assistant(`[{"type":"tool_use","id":"a","name":"f","input":[1]}]`), "messages.1.content.0.input", "invalid_value"},
		{"thinking without text", assistant(`[{"type":"thinking","signature":"x"}]`), "messages.1.content.0.thinking", "invalid_value"},
		{"redacted without data", assistant(`[{"type":"redacted_thinking"}]`), "messages.1.content.0.data", "invalid_value"},
		{"image in assistant", assistant(`[{"type":"image","source":{"type":"url","url":"https://x"}}]`), "messages.1.content.0.type", "invalid_value"},
		{"server_tool_use in assistant", assistant(`[{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{}}]`), "messages.1.content.0.type", "unsupported_parameter"},
	}...)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Validate([]byte(tt.body)); err != nil {
				t.Fatalf("Validate refused the body, which should reach ToChat: %v", err)
			}
			_, err := ToChat([]byte(tt.body))
			if err == nil {
				t.Fatal("accepted")
			}
			e := asError(t, err)
			if e.Status != 400 || e.Param != tt.param || e.Code != tt.code {
				t.Errorf("error = %+v, want 400 %s about %q", e, tt.code, tt.param)
			}
			if ErrorType(e) != "invalid_request_error" {
				t.Errorf("Anthropic type %q, want invalid_request_error", ErrorType(e))
			}
		})
	}
}

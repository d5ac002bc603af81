package anthropic

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/providerkit"
)

func TestFeaturesFor(t *testing.T) {
	native := Features{StructuredOutputs: true}
	adaptive := Features{StructuredOutputs: true, Thinking: ThinkingAdaptive}
	tests := map[string]Features{
		"claude-3-5-haiku-latest":                    {},
		"claude-3-7-sonnet-20250219":                 {},
		"claude-sonnet-4-20250514":                   {},
		"claude-opus-4-0":                            {},
		"claude-opus-4-1":                            {},
		"claude-opus-4-1-20250805":                   {},
		"claude-haiku-4-5":                           native,
		"claude-haiku-4-5-20251001":                  native,
		"claude-sonnet-4-5-20250929":                 native,
		"claude-opus-4-5-20251101":                   native,
		"claude-sonnet-4-6":                          adaptive,
		"claude-opus-4-6":                            adaptive,
		"claude-opus-4-7":                            adaptive,
		"claude-opus-4-8":                            adaptive,
		"claude-sonnet-5":                            adaptive,
		"claude-fable-5":                             adaptive,
		"claude-mythos-5":                            adaptive,
		"claude-mythos-preview":                      adaptive,
		"anthropic.claude-sonnet-4-5-20250929-v1:0":  native,
		"us.anthropic.claude-opus-4-1-20250805-v1:0": {},
		"anthropic/claude-opus-4.6":                  adaptive,
		"Claude-Sonnet-4-5":                          native,
		"claude-instant-1.2":                         {},
		"claude-2.1":                                 {},
		"claude":                                     {},
		"deepseek-chat":                              {},
		"kimi-k2-0905-preview":                       {},
		"":                                           {},
	}
	for model, want := range tests {
		if got := FeaturesFor(model); got != want {
			t.Errorf("FeaturesFor(%q) = %+v, want %+v", model, got, want)
		}
	}
}

// TestChatModels checks that Chat.Models overrides what the name says.
func TestChatModels(t *testing.T) {
	in := []byte(`{"model":"m","messages":[{"role":"user","content":"Hi"}],"reasoning_effort":"high",` +
		`"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object","properties":{"a":{"type":"string"}}}}}}`)
	c := Chat{Models: map[string]Features{
		"my-deployment":     {StructuredOutputs: true, Thinking: ThinkingAdaptive},
		"claude-sonnet-4-6": {},
	}}
	req, err := c.ChatRequest(in, "my-deployment")
	if err != nil {
		t.Fatal(err)
	}
	body := gjson.ParseBytes(req.Body)
	if body.Get("thinking.type").Str != "adaptive" || body.Get("output_config.effort").Str != "high" ||
		!body.Get("output_config.format.schema").IsObject() || body.Get("tools").Exists() {
		t.Errorf("Models entry not used: %s", req.Body)
	}
	req, err = c.ChatRequest(in, "claude-sonnet-4-6")
	if err != nil {
		t.Fatal(err)
	}
	body = gjson.ParseBytes(req.Body)
	if body.Get("thinking.budget_tokens").Int() != budgetHigh || body.Get("output_config").Exists() ||
		body.Get("tools.0.name").Str != jsonToolName || body.Get("tool_choice.type").Str != "auto" {
		t.Errorf("Models entry not used over the name: %s", req.Body)
	}
}

func TestReasoningEffort(t *testing.T) {
	tests := []struct {
		model, effort string
		maxTokens     string // the client's max_completion_tokens, or ""
		want          string // thinking, output_config and max_tokens as sent
	}{
		{"claude-sonnet-4-5", "minimal", "", `{"type":"enabled","budget_tokens":1024} null 4096`},
		{"claude-sonnet-4-5", "low", "", `{"type":"enabled","budget_tokens":1024} null 4096`},
		{"claude-sonnet-4-5", "medium", "", `{"type":"enabled","budget_tokens":2048} null 4096`},
		{"claude-sonnet-4-5", "high", "", `{"type":"enabled","budget_tokens":4096} null 8192`},
		{"claude-sonnet-4-5", "xhigh", "", `{"type":"enabled","budget_tokens":8192} null 12288`},
		{"claude-sonnet-4-5", "max", "20000", `{"type":"enabled","budget_tokens":16384} null 20000`},
		{"claude-sonnet-4-5", "high", "4097", `{"type":"enabled","budget_tokens":4096} null 4097`},
		{"claude-sonnet-4-5", "high", "100", `{"type":"enabled","budget_tokens":4096} null 4196`},
		{"claude-sonnet-4-5", "none", "", `null null 4096`},
		{"claude-opus-4-6", "minimal", "", `{"type":"adaptive"} {"effort":"low"} 4096`},
		{"claude-opus-4-6", "medium", "", `{"type":"adaptive"} {"effort":"medium"} 4096`},
		{"claude-opus-4-7", "xhigh", "100", `{"type":"adaptive"} {"effort":"xhigh"} 100`},
		{"claude-sonnet-5", "max", "", `{"type":"adaptive"} {"effort":"max"} 4096`},
		{"claude-sonnet-5", "none", "", `null null 4096`},
	}
	for _, tt := range tests {
		in := `{"model":"m","messages":[{"role":"user","content":"Hi"}],"reasoning_effort":"` + tt.effort + `"`
		if tt.maxTokens != "" {
			in += `,"max_completion_tokens":` + tt.maxTokens
		}
		in += `,"temperature":0.7}`
		if _, err := providers.ValidateChat([]byte(in)); err != nil {
			t.Fatal(err)
		}
		req, err := testChat.ChatRequest([]byte(in), tt.model)
		if err != nil {
			t.Fatalf("%s %s: %v", tt.model, tt.effort, err)
		}
		body := gjson.ParseBytes(req.Body)
		got := orNull(body.Get("thinking")) + " " + orNull(body.Get("output_config")) + " " + body.Get("max_tokens").Raw
		if got != tt.want {
			t.Errorf("%s %s (max %q): got %s, want %s", tt.model, tt.effort, tt.maxTokens, got, tt.want)
		}
		// A temperature goes only without thinking, which refuses it.
		if temp := body.Get("temperature"); temp.Exists() == body.Get("thinking").Exists() {
			t.Errorf("%s %s: temperature %s with thinking %s", tt.model, tt.effort, temp.Raw, body.Get("thinking").Raw)
		}
	}
}

func orNull(v gjson.Result) string {
	if !v.Exists() {
		return "null"
	}
	return v.Raw
}

// TestThinkingBlocksExact checks that thinking blocks sent back come out as
// the client encoded them, in order, before the turn's text and tool_use
// blocks, and that reasoning_content and reasoning never reach Anthropic.
func TestThinkingBlocksExact(t *testing.T) {
	const text = `"Two calls \u2014 \"Paris\" then \\Tokyo\/.\n"`
	const sig = `"EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxB+/=="`
	const data = `"EmwKAhgBEgy3va3pzix/Laf=="`
	in := []byte(`{"model":"m","reasoning_effort":"low","messages":[` +
		`{"role":"user","content":"Weather?"},` +
		`{"role":"assistant","content":"Checking.","reasoning_content":"SECRET-TEXT","reasoning":"OTHER-TEXT",` +
		`"thinking_blocks":[{"type":"thinking","thinking":` + text + `,"signature":` + sig + `,"extra":1},` +
		`{"type":"redacted_thinking","data":` + data + `}],` +
		`"tool_calls":[{"id":"toolu_1","type":"function","function":{"name":"w","arguments":"{}"}}]},` +
		`{"role":"tool","tool_call_id":"toolu_1","content":"sunny"}],` +
		`"tools":[{"type":"function","function":{"name":"w"}}]}`)
	if _, err := providers.ValidateChat(in); err != nil {
		t.Fatal(err)
	}
	req, err := testChat.ChatRequest(in, testModel)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"role":"assistant","content":[` +
		`{"type":"thinking","thinking":` + text + `,"signature":` + sig + `},` +
		`{"type":"redacted_thinking","data":` + data + `},` +
		`{"type":"text","text":"Checking."},` +
		`{"type":"tool_use","id":"toolu_1","name":"w","input":{}}]}`
	if !bytes.Contains(req.Body, []byte(want)) {
		t.Errorf("the assistant turn is not restored exactly\ngot:  %s\nwant: …%s…", req.Body, want)
	}
	for _, s := range []string{"SECRET-TEXT", "OTHER-TEXT", "reasoning", "extra"} {
		if bytes.Contains(req.Body, []byte(s)) {
			t.Errorf("%q reached Anthropic: %s", s, req.Body)
		}
	}
}

// TestStreamJSONToolWithCalls checks a stream where the model calls a
// client tool beside the response_format tool (tool_choice auto): the
// response_format tool's input is content, the other call a tool call on
// index 0, and the finish reason tool_calls; and that the answer agrees.
func TestStreamJSONToolWithCalls(t *testing.T) {
	upstream := `event: message_start
data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4","content":[],"stop_reason":null,"usage":{"input_tokens":9,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_j","name":"json_tool_call","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"steps\": []}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_w","name":"get_weather","input":{}}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":20}}

event: message_stop
data: {"type":"message_stop"}

`
	out, err := testReplay.Translate(providers.StreamOptions{}, []byte(upstream), nil)
	if err != nil {
		t.Fatal(err)
	}
	providerkit.CheckUnifiedStream(t, out, providers.StreamOptions{})
	got := providerkit.Accumulate(t, out).Answer().Choices[0]
	if got.Content != `{"steps":[]}` || len(got.ToolCalls) != 1 || got.ToolCalls[0].ID != "toolu_w" ||
		got.FinishReason != "tool_calls" {
		t.Errorf("got %+v", got)
	}
	if !strings.Contains(string(out), `"tool_calls":[{"index":0,"id":"toolu_w"`) {
		t.Errorf("the client's tool call is not on index 0:\n%s", out)
	}

	answer := `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4","content":[` +
		`{"type":"tool_use","id":"toolu_j","name":"json_tool_call","input":{"steps": []}},` +
		`{"type":"tool_use","id":"toolu_w","name":"get_weather","input":{}}],"stop_reason":"tool_use","usage":{"input_tokens":9,"output_tokens":20}}`
	unified, _, err := testChat.ChatResponse([]byte(answer))
	if err != nil {
		t.Fatal(err)
	}
	var msg struct {
		Choices []struct {
			Message struct {
				Content   string
				ToolCalls []json.RawMessage `json:"tool_calls"`
			}
			FinishReason string `json:"finish_reason"`
		}
	}
	if err := json.Unmarshal(unified, &msg); err != nil {
		t.Fatal(err)
	}
	c := msg.Choices[0]
	if c.Message.Content != got.Content || len(c.Message.ToolCalls) != 1 || c.FinishReason != "tool_calls" {
		t.Errorf("answer %s disagrees with the stream", unified)
	}
}

func TestStreamErrorContextLength(t *testing.T) {
	tr := testChat.ChatStream(providers.StreamOptions{})
	out, err := tr.Event(nil, []byte(`event: error`+"\n"+
		`data: {"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 200001 tokens > 200000 maximum"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if out = tr.Close(out); !bytes.Contains(out, []byte(`"code":"context_length_exceeded"`)) || bytes.Contains(out, []byte("[DONE]")) {
		t.Errorf("got %s", out)
	}
}

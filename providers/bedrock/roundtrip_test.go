package bedrock

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/internal/translatortest"
)

// TestThinkingToolLoop plays a tool loop with thinking on: Bedrock answers
// with signed reasoning, redacted reasoning, text and tool calls; the
// client sends that assistant message back (as the OpenAI SDKs do, with
// the thinking_blocks it got) together with the tool results; the next
// Converse request must hold the assistant turn exactly as Bedrock gave
// it, reasoning first, with the same text, signatures and redacted bytes,
// which is what Claude checks before it continues a turn with thinking.
// The assistant message comes once from the answer and once from the
// stream, accumulated as a client accumulates it.
func TestThinkingToolLoop(t *testing.T) {
	for _, name := range []string{"reasoning_tool", "redacted"} {
		body := translatortest.ReadFile(t, filepath.Join(responseDir, name+".bedrock.json"))
		bedrockTurn := gjson.GetBytes(body, "output.message.content").Raw

		answer, _, err := testChat.ChatResponse(body)
		if err != nil {
			t.Fatal(err)
		}
		fromAnswer := gjson.GetBytes(answer, "choices.0.message").Raw

		var fromStream string
		for _, tr := range readTranscripts(t) {
			if tr.name != name+"_include_usage" {
				continue
			}
			out, err := testReplay.Translate(tr.opts, tr.upstream, nil)
			if err != nil {
				t.Fatal(err)
			}
			fromStream = streamedMessage(t, out)
		}
		if fromStream == "" {
			t.Fatalf("no stream transcript for %s", name)
		}

		for source, msg := range map[string]string{"answer": fromAnswer, "stream": fromStream} {
			t.Run(name+"/"+source, func(t *testing.T) {
				next := `{"model":"m","reasoning_effort":"low","max_completion_tokens":4000,` +
					`"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}],` +
					`"messages":[{"role":"user","content":"What's the weather in Paris?"},` + msg
				for _, c := range gjson.Get(msg, "tool_calls").Array() {
					next += `,{"role":"tool","tool_call_id":` + c.Get("id").Raw + `,"content":"{\"temp\":14}"}`
				}
				next += `]}`
				if _, err := providers.ValidateChat([]byte(next)); err != nil {
					t.Fatalf("the client's next request does not validate: %v\n%s", err, next)
				}
				req, err := testChat.ChatRequest([]byte(next), testModel)
				if err != nil {
					t.Fatal(err)
				}
				sent := gjson.GetBytes(req.Body, "messages.1")
				if sent.Get("role").Str != "assistant" {
					t.Fatalf("second turn is %s", sent.Raw)
				}
				if !reflect.DeepEqual(translatortest.Canonical(t, "sent", []byte(sent.Get("content").Raw)), translatortest.Canonical(t, "bedrock", []byte(bedrockTurn))) {
					t.Errorf("the assistant turn changed on its way back:\nsent:    %s\nbedrock: %s", sent.Get("content").Raw, bedrockTurn)
				}
				// The tool results follow in a user turn and pair with the calls.
				for i, c := range gjson.Get(msg, "tool_calls").Array() {
					if id := gjson.GetBytes(req.Body, "messages.2.content."+strconv.Itoa(i)+".toolResult.toolUseId").Str; id != c.Get("id").Str {
						t.Errorf("tool result %d answers %q, want %q", i, id, c.Get("id").Str)
					}
				}
			})
		}
	}
}

// streamedMessage builds the assistant message a client accumulates from
// a unified stream: content, reasoning_content, thinking_blocks and
// tool_calls.
func streamedMessage(t *testing.T, out []byte) string {
	t.Helper()
	a := accumulateStream(t, out)
	m := a.completion.Choices[0].Message
	msg := map[string]any{"role": "assistant", "content": m.Content}
	if m.Content == "" {
		msg["content"] = nil
	}
	if a.reasoning != "" {
		msg["reasoning_content"] = a.reasoning
	}
	if len(a.thinking) > 0 {
		msg["thinking_blocks"] = a.thinking
	}
	var calls []map[string]any
	for _, c := range m.ToolCalls {
		calls = append(calls, map[string]any{"id": c.ID, "type": "function",
			"function": map[string]any{"name": c.Function.Name, "arguments": c.Function.Arguments}})
	}
	if calls != nil {
		msg["tool_calls"] = calls
	}
	b, err := json.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

package anthropic

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/providerkit"
	"github.com/modelgate/modelgate/providers/providertest"
)

// exchange translates a unified request for model, sends it to the fake
// Anthropic and translates what comes back: the unified answer (for a
// stream, the unified chunks), or the unified error.
func exchange(t *testing.T, s *providertest.Server, unified, model string) (string, *providers.Error) {
	t.Helper()
	if _, err := providers.ValidateChat([]byte(unified)); err != nil {
		t.Fatalf("ValidateChat: %v", err)
	}
	req, err := testChat.ChatRequest([]byte(unified), model)
	if err != nil {
		t.Fatalf("ChatRequest: %v", err)
	}
	res, body := providertest.Send(t, http.MethodPost, s.URL+req.Path, string(req.Body),
		"X-Api-Key", "k", "Anthropic-Version", req.Header.Get("Anthropic-Version"))
	if res.StatusCode != 200 {
		return "", testChat.Error(res.StatusCode, res.Header, []byte(body))
	}
	if gjson.Get(unified, "stream").Bool() {
		out, err := testReplay.Translate(providers.StreamOptions{IncludeUsage: true}, []byte(body), nil)
		if err != nil {
			t.Fatal(err)
		}
		providerkit.CheckUnifiedStream(t, out, providers.StreamOptions{IncludeUsage: true})
		return string(out), nil
	}
	out, _, err := testChat.ChatResponse([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return string(out), nil
}

const weatherTool = `"tools":[{"type":"function","function":{"name":"weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]`

// TestFakeThinkingToolLoop runs a multi-turn tool loop with thinking on
// against the fake, which signs its thinking blocks and refuses, as
// Anthropic does, a tool result whose assistant turn lost them: the
// thinking_blocks the client got back restore the turn exactly.
func TestFakeThinkingToolLoop(t *testing.T) {
	s := providertest.Start(t, providertest.Options{})
	const model = "claude-sonnet-4-5-redacted" // the fake adds a redacted_thinking block
	first, e := exchange(t, s, `{"model":"m","reasoning_effort":"low",`+weatherTool+`,"messages":[{"role":"user","content":"Paris"}]}`, model)
	if e != nil {
		t.Fatal(e)
	}
	msg := gjson.Get(first, "choices.0.message")
	if msg.Get("reasoning_content").Str != "Thinking about: Paris" || msg.Get("thinking_blocks.#").Int() != 2 ||
		msg.Get("tool_calls.0.function.name").Str != "weather" || gjson.Get(first, "choices.0.finish_reason").Str != "tool_calls" ||
		gjson.Get(first, "usage.completion_tokens_details.reasoning_tokens").Int() != 3 {
		t.Fatalf("first turn %s", first)
	}

	// The client sends the assistant message back as it got it (the SDKs
	// keep unknown fields), and the tool's result.
	second := func(assistant string) (string, *providers.Error) {
		return exchange(t, s, `{"model":"m","reasoning_effort":"low",`+weatherTool+`,"messages":[{"role":"user","content":"Paris"},`+
			assistant+`,{"role":"tool","tool_call_id":`+msg.Get("tool_calls.0.id").Raw+`,"content":"sunny"}]}`, model)
	}
	out, e := second(msg.Raw)
	if e != nil || gjson.Get(out, "choices.0.message.content").Str != "tool said: sunny" {
		t.Fatalf("the loop with thinking_blocks: %s %v", out, e)
	}

	// Without them (a client that keeps only content and tool_calls) the
	// provider refuses, and the refusal reaches the client as a 400.
	lost, _ := sjson.Delete(msg.Raw, "thinking_blocks")
	if _, e := second(lost); e == nil || e.Status != 400 || e.Type != "invalid_request_error" || !strings.Contains(e.Message, "Expected `thinking`") {
		t.Errorf("the loop without thinking_blocks: %+v", e)
	}
	// A changed thinking text is refused by its signature.
	changed, _ := sjson.Set(msg.Raw, "thinking_blocks.0.thinking", "something else")
	if _, e := second(changed); e == nil || e.Status != 400 || !strings.Contains(e.Message, "signature") {
		t.Errorf("the loop with changed thinking: %+v", e)
	}
}

// TestFakeStructuredOutput asks the fake for structured output through
// each path and parses the content, as the OpenAI SDKs' parse helpers do.
func TestFakeStructuredOutput(t *testing.T) {
	s := providertest.Start(t, providertest.Options{})
	const schema = `{"type":"object","properties":{"name":{"type":"string","minLength":1},"count":{"type":"integer"}},"required":["name","count"],"additionalProperties":false}`
	type event struct {
		Name  string `json:"name"`
		Count int    `json:"count"`
	}
	// The fake's JSON outputs fill strings with its answer text ("echo:
	// …") and integers with its word count; its tool calls fill them with
	// the question and its word count.
	native, tool := event{"echo: a science fair", 4}, event{"a science fair", 3}
	for _, tc := range []struct {
		name, model, extra string
		want               event
	}{
		{"native", "claude-sonnet-4-5", "", native},
		{"native with adaptive thinking", "claude-opus-4-7", `,"reasoning_effort":"medium"`, native},
		{"forced tool", "claude-opus-4-1", "", tool},
		{"tool with thinking", "claude-opus-4-1", `,"reasoning_effort":"low","max_completion_tokens":3000`, tool},
	} {
		for _, stream := range []bool{false, true} {
			body := `{"model":"m","messages":[{"role":"user","content":"a science fair"}],"stream":` + map[bool]string{false: "false", true: "true"}[stream] +
				`,"response_format":{"type":"json_schema","json_schema":{"name":"Event","strict":true,"schema":` + schema + `}}` + tc.extra + `}`
			out, e := exchange(t, s, body, tc.model)
			if e != nil {
				t.Fatalf("%s: %v", tc.name, e)
			}
			content, finish := gjson.Get(out, "choices.0.message.content").Str, gjson.Get(out, "choices.0.finish_reason").Str
			if stream {
				a := providerkit.Accumulate(t, []byte(out)).Answer()
				content, finish = a.Choices[0].Content, a.Choices[0].FinishReason
			}
			var ev event
			if err := json.Unmarshal([]byte(content), &ev); err != nil || ev != tc.want || finish != "stop" {
				t.Errorf("%s (stream %v): content %q (%v), finish %s", tc.name, stream, content, err, finish)
			}
		}
	}

	// json_object: any JSON object.
	out, e := exchange(t, s, `{"model":"m","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_object"}}`, "claude-sonnet-4-5")
	if e != nil || !gjson.Valid(gjson.Get(out, "choices.0.message.content").Str) ||
		!gjson.Parse(gjson.Get(out, "choices.0.message.content").Str).IsObject() {
		t.Errorf("json_object: %s %v", out, e)
	}
}

// TestFakeStreamMatchesAnswer sends the same request to the fake streamed
// and not and checks that the accumulated stream equals the answer.
func TestFakeStreamMatchesAnswer(t *testing.T) {
	s := providertest.Start(t, providertest.Options{})
	for _, body := range []string{
		`{"model":"m","reasoning_effort":"high",` + weatherTool + `,"messages":[{"role":"user","content":"Paris in May"}]}`,
		`{"model":"m","reasoning_effort":"low","messages":[{"role":"user","content":"hello there"}]}`,
		`{"model":"m","response_format":{"type":"json_object"},"messages":[{"role":"user","content":"x y"}]}`,
	} {
		whole, e := exchange(t, s, body, "claude-sonnet-4-5-redacted")
		if e != nil {
			t.Fatal(e)
		}
		streamBody, _ := sjson.Set(body, "stream", true)
		streamed, e := exchange(t, s, streamBody, "claude-sonnet-4-5-redacted")
		if e != nil {
			t.Fatal(e)
		}
		a := providerkit.Accumulate(t, []byte(streamed)).Answer()
		w := providerkit.AnswerOf(t, []byte(whole))
		// The fake numbers its messages and calls: ids differ.
		a.ID, w.ID = "", ""
		for i := range a.Choices[0].ToolCalls {
			a.Choices[0].ToolCalls[i].ID, w.Choices[0].ToolCalls[i].ID = "", ""
		}
		if !reflect.DeepEqual(a, w) {
			t.Errorf("stream and answer differ for %s\nstreamed: %+v\nanswer:   %+v", body, a, w)
		}
	}
}

// TestFakeCache marks the system prompt for caching and finds the second
// request reading it from the cache.
func TestFakeCache(t *testing.T) {
	s := providertest.Start(t, providertest.Options{})
	body := `{"model":"m","messages":[{"role":"system","content":[{"type":"text","text":"a long stable prompt","cache_control":{"type":"ephemeral"}}]},{"role":"user","content":"hi"}]}`
	first, e := exchange(t, s, body, "claude-haiku-4-5")
	if e != nil {
		t.Fatal(e)
	}
	second, e := exchange(t, s, body, "claude-haiku-4-5")
	if e != nil {
		t.Fatal(e)
	}
	if u := gjson.Get(first, "usage"); u.Get("prompt_tokens").Int() != 5 || u.Get("prompt_tokens_details.cached_tokens").Int() != 0 {
		t.Errorf("first usage %s", u.Raw)
	}
	if u := gjson.Get(second, "usage"); u.Get("prompt_tokens").Int() != 5 || u.Get("prompt_tokens_details.cached_tokens").Int() != 4 {
		t.Errorf("second usage %s", u.Raw)
	}
}

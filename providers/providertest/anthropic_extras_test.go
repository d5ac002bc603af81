package providertest

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

const anThinkOn = `"thinking":{"type":"enabled","budget_tokens":1024}`

// anWeatherTool is a tool, and a question that makes the fake call it.
const anWeatherTool = `"tools":[{"name":"weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}}]`

func TestAnthropicThinking(t *testing.T) {
	s := newFake(t)
	r := answerOf(t, s, anPath, `{"model":"claude-x","max_tokens":2000,`+anThinkOn+`,"messages":[{"role":"user","content":"hi there"}]}`, "Request-Id")
	th := r.Get("content.0")
	if th.Get("type").Str != "thinking" || th.Get("thinking").Str != "Thinking about: hi there" ||
		th.Get("signature").Str != thinkingSignature("Thinking about: hi there") || r.Get("content.1.text").Str != "echo: hi there" {
		t.Fatalf("content %s", r.Get("content").Raw)
	}
	// Three words of answer, four of thinking.
	if u := r.Get("usage"); u.Get("output_tokens").Int() != 7 || u.Get("output_tokens_details.thinking_tokens").Int() != 4 {
		t.Errorf("usage %s", u.Raw)
	}

	// The adaptive form thinks too; a "redacted" model adds a
	// redacted_thinking block.
	r = answerOf(t, s, anPath, `{"model":"claude-redacted","max_tokens":20,"thinking":{"type":"adaptive"},"output_config":{"effort":"low"},"messages":[{"role":"user","content":"q"}]}`, "Request-Id")
	if r.Get("content.0.type").Str != "thinking" || r.Get("content.1.type").Str != "redacted_thinking" ||
		!redactedOK(r.Get("content.1.data").Str) || r.Get("content.2.text").Str != "echo: q" {
		t.Fatalf("content %s", r.Get("content").Raw)
	}
}

// TestAnthropicThinkingToolLoop runs a tool loop with thinking on: the
// blocks the fake gave out are taken back, changed or missing ones are
// refused as Anthropic refuses them.
func TestAnthropicThinkingToolLoop(t *testing.T) {
	s := newFake(t)
	first := answerOf(t, s, anPath, `{"model":"claude-redacted","max_tokens":2000,`+anThinkOn+`,`+anWeatherTool+
		`,"messages":[{"role":"user","content":"Paris"}]}`, "Request-Id")
	content := first.Get("content")
	if content.Get("#").Int() != 3 || content.Get("2.type").Str != "tool_use" || content.Get("2.input").Raw != `{"city":"Paris"}` {
		t.Fatalf("content %s", content.Raw)
	}
	loop := func(assistant string) (int, string) {
		body := `{"model":"claude-redacted","max_tokens":2000,` + anThinkOn + `,` + anWeatherTool + `,"messages":[` +
			`{"role":"user","content":"Paris"},{"role":"assistant","content":` + assistant + `},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":` + content.Get("2.id").Raw + `,"content":"sunny"}]}]}`
		res, got := post(t, s, anPath, body, anAuth...)
		return res.StatusCode, got
	}
	if status, got := loop(content.Raw); status != 200 || gjson.Get(got, "content.2.text").Str != "tool said: sunny" ||
		gjson.Get(got, "content.0.thinking").Str != "The tools said: sunny" {
		t.Fatalf("the loop with its blocks: %d %s", status, got)
	}

	changed, _ := sjson.Set(content.Raw, "0.thinking", "I changed my mind")
	noSig, _ := sjson.Set(content.Raw, "0.signature", "")
	badData, _ := sjson.Set(content.Raw, "1.data", "AAAA")
	lost, _ := sjson.Delete(content.Raw, "0")
	lost, _ = sjson.Delete(lost, "0")
	for _, tc := range []struct{ name, assistant, want string }{
		{"changed text", changed, "Invalid `signature`"},
		{"no signature", noSig, "Invalid `signature`"},
		{"made-up redacted data", badData, "Invalid `data`"},
		{"thinking lost", lost, "Expected `thinking` or `redacted_thinking`, but found `tool_use`"},
	} {
		status, got := loop(tc.assistant)
		if status != 400 || gjson.Get(got, "error.type").Str != "invalid_request_error" || !strings.Contains(got, tc.want) {
			t.Errorf("%s: %d %s", tc.name, status, got)
		}
	}
}

func TestAnthropicThinkingRules(t *testing.T) {
	s := newFake(t)
	const msgs = `"messages":[{"role":"user","content":"q"}]`
	for _, tc := range []struct{ name, body, want string }{
		{"budget too small", `"max_tokens":2000,"thinking":{"type":"enabled","budget_tokens":1000}`, "budget_tokens"},
		{"budget not below max_tokens", `"max_tokens":1024,"thinking":{"type":"enabled","budget_tokens":1024}`, "`max_tokens` must be greater"},
		{"temperature", `"max_tokens":2000,` + anThinkOn + `,"temperature":0.5`, "`temperature` may only be set to 1"},
		{"top_p", `"max_tokens":2000,` + anThinkOn + `,"top_p":0.9`, "`top_p` must be greater than or equal to 0.95"},
		{"top_k", `"max_tokens":2000,"thinking":{"type":"adaptive"},"top_k":5`, "`top_k` must be unset"},
		{"forced tool", `"max_tokens":2000,` + anThinkOn + `,` + anWeatherTool + `,"tool_choice":{"type":"tool","name":"weather"}`, "tool_choice forces tool use"},
		{"unknown thinking type", `"max_tokens":2000,"thinking":{"type":"on"}`, "thinking.type"},
		{"unknown effort", `"max_tokens":20,"output_config":{"effort":"huge"}`, "output_config.effort"},
		{"output_config field", `"max_tokens":20,"output_config":{"verbosity":"low"}`, "output_config.verbosity"},
		{"open object", `"max_tokens":20,"output_config":{"format":{"type":"json_schema","schema":{"type":"object","properties":{"a":{"type":"string"}}}}}`, "additionalProperties"},
		{"unsupported keyword", `"max_tokens":20,"output_config":{"format":{"type":"json_schema","schema":{"type":"object","properties":{"a":{"type":"integer","minimum":1}},"additionalProperties":false}}}`, "keyword \\\"minimum"},
		{"cache ttl", `"max_tokens":20,"cache_control":{"type":"ephemeral","ttl":"2h"}`, "cache_control.ttl"},
		{"cache type", `"max_tokens":20,"system":[{"type":"text","text":"s","cache_control":{"type":"persistent"}}]`, "cache_control.type"},
		{"five breakpoints", `"max_tokens":20,"system":[` + strings.Repeat(`{"type":"text","text":"s","cache_control":{"type":"ephemeral"}},`, 4) +
			`{"type":"text","text":"s","cache_control":{"type":"ephemeral"}}]`, "A maximum of 4 blocks"},
	} {
		res, got := post(t, s, anPath, `{"model":"claude-x",`+tc.body+`,`+msgs+`}`, anAuth...)
		if res.StatusCode != 400 || !strings.Contains(got, tc.want) {
			t.Errorf("%s: %d %s", tc.name, res.StatusCode, got)
		}
	}
	// Allowed with thinking: temperature 1, top_p 0.95, tool_choice auto.
	answerOf(t, s, anPath, `{"model":"claude-x","max_tokens":2000,`+anThinkOn+`,"temperature":1,"top_p":0.95,`+anWeatherTool+
		`,"tool_choice":{"type":"auto"},`+msgs+`}`, "Request-Id")
}

func TestAnthropicStructured(t *testing.T) {
	s := newFake(t)
	const schema = `{"type":"object","properties":{"name":{"type":"string"},"n":{"type":"integer"},"tags":{"type":"array","items":{"type":"string"}}},"required":["name","n","tags"],"additionalProperties":false}`
	r := answerOf(t, s, anPath, `{"model":"claude-x","max_tokens":100,"output_config":{"format":{"type":"json_schema","schema":`+schema+`}},"messages":[{"role":"user","content":"a b"}]}`, "Request-Id")
	if text := r.Get("content.0.text").Str; text != `{"name":"echo: a b","n":3,"tags":["echo: a b"]}` {
		t.Errorf("JSON output %q", text)
	}
	// A tool call's input is an instance of the tool's input schema.
	r = answerOf(t, s, anPath, `{"model":"claude-x","max_tokens":100,"tools":[{"name":"json_tool_call","input_schema":`+schema+`}],`+
		`"tool_choice":{"type":"tool","name":"json_tool_call"},"messages":[{"role":"user","content":"a b"}]}`, "Request-Id")
	if in := r.Get("content.0.input").Raw; in != `{"name":"a b","n":2,"tags":["a b"]}` || r.Get("stop_reason").Str != "tool_use" {
		t.Errorf("forced tool %s", r.Raw)
	}
}

func TestAnthropicCache(t *testing.T) {
	s := newFake(t)
	body := func(question string) string {
		return `{"model":"claude-x","max_tokens":100,"system":[{"type":"text","text":"one two three four","cache_control":{"type":"ephemeral"}}],` +
			`"messages":[{"role":"user","content":"` + question + `"}]}`
	}
	usage := func(b string) string {
		u := answerOf(t, s, anPath, b, "Request-Id").Get("usage")
		return u.Get("input_tokens").Raw + " " + u.Get("cache_creation_input_tokens").Raw + " " + u.Get("cache_read_input_tokens").Raw
	}
	if got := usage(body("hi")); got != "1 4 0" {
		t.Errorf("first request: input, written, read = %s, want 1 4 0", got)
	}
	if got := usage(body("hi there")); got != "2 0 4" {
		t.Errorf("second request: input, written, read = %s, want 2 0 4", got)
	}
	// The top-level marker caches the whole prompt.
	top := `{"model":"claude-x","max_tokens":100,"cache_control":{"type":"ephemeral","ttl":"1h"},"system":"s t","messages":[{"role":"user","content":"u v w"}]}`
	if got := usage(top); got != "0 5 0" {
		t.Errorf("top-level marker: %s, want 0 5 0", got)
	}
	if got := usage(top); got != "0 0 5" {
		t.Errorf("top-level marker again: %s, want 0 0 5", got)
	}
	// No marker, no cache.
	if got := usage(`{"model":"claude-x","max_tokens":100,"messages":[{"role":"user","content":"u v w"}]}`); got != "3 0 0" {
		t.Errorf("no marker: %s", got)
	}
}

// TestAnthropicThinkingStream checks the stream of a thinking answer: the
// thinking block word by word with its signature, then the text at the
// next index, and the thinking tokens in the final usage.
func TestAnthropicThinkingStream(t *testing.T) {
	s := newFake(t)
	res, got := post(t, s, anPath, `{"model":"claude-redacted","stream":true,"max_tokens":2000,`+anThinkOn+`,"messages":[{"role":"user","content":"hi there"}]}`, anAuth...)
	if res.StatusCode != 200 {
		t.Fatalf("%d %s", res.StatusCode, got)
	}
	var thinking, sig, text strings.Builder
	var order []string
	for _, ev := range strings.Split(got, "\n\n") {
		_, data, ok := strings.Cut(ev, "data: ")
		if !ok {
			continue
		}
		v := gjson.Parse(data)
		d := v.Get("delta")
		switch v.Get("type").Str {
		case "content_block_start":
			order = append(order, v.Get("index").Raw+":"+v.Get("content_block.type").Str)
		case "content_block_delta":
			thinking.WriteString(d.Get("thinking").Str)
			sig.WriteString(d.Get("signature").Str)
			text.WriteString(d.Get("text").Str)
		case "message_delta":
			if v.Get("usage.output_tokens_details.thinking_tokens").Int() != 4 {
				t.Errorf("usage %s", v.Get("usage").Raw)
			}
		}
	}
	if strings.Join(order, ",") != "0:thinking,1:redacted_thinking,2:text" || thinking.String() != "Thinking about: hi there" ||
		sig.String() != thinkingSignature(thinking.String()) || text.String() != "echo: hi there" {
		t.Errorf("blocks %v, thinking %q, text %q", order, thinking.String(), text.String())
	}
}

// TestAnthropicThinkingOmitted checks display "omitted", as Claude Code
// asks for it: thinking blocks come with no text (a stream sends only the
// signature), the thinking is still counted, and the block as it came
// is taken back in the tool loop that follows.
func TestAnthropicThinkingOmitted(t *testing.T) {
	s := newFake(t)
	const omitted = `"thinking":{"type":"enabled","budget_tokens":1024,"display":"omitted"}`
	for _, stream := range []bool{false, true} {
		req := `{"model":"claude-x","max_tokens":2000,"stream":` + map[bool]string{false: "false", true: "true"}[stream] + `,` + omitted + `,` + anWeatherTool +
			`,"messages":[{"role":"user","content":"Paris"}]}`
		res, got := post(t, s, anPath, req, anAuth...)
		if res.StatusCode != 200 {
			t.Fatalf("stream %v: %d %s", stream, res.StatusCode, got)
		}
		var thinkingText, sig, toolID string
		thinkingTokens := int64(-1)
		if stream {
			for _, ev := range strings.Split(got, "\n\n") {
				_, data, _ := strings.Cut(ev, "data: ")
				v := gjson.Parse(data)
				switch v.Get("type").Str {
				case "content_block_start":
					if v.Get("content_block.type").Str == "tool_use" {
						toolID = v.Get("content_block.id").Str
					}
				case "content_block_delta":
					if d := v.Get("delta"); d.Get("type").Str == "thinking_delta" {
						t.Errorf("an omitted thinking streams a thinking_delta: %s", data)
					}
					sig += v.Get("delta.signature").Str
				case "message_delta":
					thinkingTokens = v.Get("usage.output_tokens_details.thinking_tokens").Int()
				}
			}
		} else {
			r := gjson.Parse(got)
			if r.Get("content.0.type").Str != "thinking" || !r.Get("content.0.thinking").Exists() {
				t.Fatalf("content %s", r.Get("content").Raw)
			}
			thinkingText, sig, toolID = r.Get("content.0.thinking").Str, r.Get("content.0.signature").Str, r.Get("content.1.id").Str
			thinkingTokens = r.Get("usage.output_tokens_details.thinking_tokens").Int()
		}
		if thinkingText != "" || sig == "" || toolID == "" || thinkingTokens != 3 {
			t.Fatalf("stream %v: thinking %q, signature %q, tool %q, thinking tokens %d: %s", stream, thinkingText, sig, toolID, thinkingTokens, got)
		}
		assistant := `[{"type":"thinking","thinking":"","signature":` + string(appendString(nil, sig)) + `},` +
			`{"type":"tool_use","id":"` + toolID + `","name":"weather","input":{"city":"Paris"}}]`
		body := `{"model":"claude-x","max_tokens":2000,` + omitted + `,` + anWeatherTool + `,"messages":[` +
			`{"role":"user","content":"Paris"},{"role":"assistant","content":` + assistant + `},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"` + toolID + `","content":"sunny"}]}]}`
		if res, got := post(t, s, anPath, body, anAuth...); res.StatusCode != 200 || gjson.Get(got, "content.1.text").Str != "tool said: sunny" {
			t.Errorf("stream %v: the loop with the omitted block: %d %s", stream, res.StatusCode, got)
		}
	}
}

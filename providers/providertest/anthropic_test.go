package providertest

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

const anTools = `[{"name":"search","description":"web search","input_schema":{"type":"object","properties":{"query":{"type":"string"}}}},` +
	`{"name":"lookup","input_schema":{"type":"object"}}]`

// anToolTurns is a user question, the assistant's tool_use and the user's
// tool_result.
const anToolTurns = `{"role":"user","content":"weather?"},` +
	`{"role":"assistant","content":[{"type":"text","text":"let me look"},{"type":"tool_use","id":"toolu_1","name":"search","input":{"query":"weather?"}}]},` +
	`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"sunny"}]}]}`

// anCases are Anthropic requests and what the fake answers them.
var anCases = []struct {
	name, body string
	text       string // the answer text, when it is text
	tool       string // the tool called, when it is a call
	query      string
	stop       string
	input      int64
	output     int64
}{
	{name: "echo", body: `{"model":"claude-x","max_tokens":100,"system":"be brief","messages":[{"role":"user","content":"hi there"}]}`,
		text: "echo: hi there", stop: "end_turn", input: 4, output: 3},
	{name: "blocks", body: `{"model":"claude-x","max_tokens":100,"system":[{"type":"text","text":"sys"}],"messages":[{"role":"user","content":[{"type":"text","text":"a b"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA=="}},{"type":"text","text":"c"}]}]}`,
		text: "echo: c", stop: "end_turn", input: 4, output: 2},
	{name: "tool offered", body: `{"model":"claude-x","max_tokens":100,"tools":` + anTools + `,"messages":[{"role":"user","content":"find \"this\""}]}`,
		tool: "search", query: `find "this"`, stop: "tool_use", input: 2, output: 1},
	{name: "tool_choice tool", body: `{"model":"claude-x","max_tokens":100,"tools":` + anTools + `,"tool_choice":{"type":"tool","name":"lookup"},"messages":[{"role":"user","content":"q"}]}`,
		tool: "lookup", query: "q", stop: "tool_use", input: 1, output: 1},
	{name: "tool_choice any", body: `{"model":"claude-x","max_tokens":100,"tools":` + anTools + `,"tool_choice":{"type":"any"},"messages":[{"role":"user","content":"q"}]}`,
		tool: "search", query: "q", stop: "tool_use", input: 1, output: 1},
	{name: "tool_choice none", body: `{"model":"claude-x","max_tokens":100,"tools":` + anTools + `,"tool_choice":{"type":"none"},"messages":[{"role":"user","content":"q"}]}`,
		text: "echo: q", stop: "end_turn", input: 1, output: 2},
	{name: "non-ASCII tool query", body: `{"model":"claude-x","max_tokens":100,"tools":` + anTools + `,"messages":[{"role":"user","content":"Grüße aus Köln ☂ 北京"}]}`,
		tool: "search", query: "Grüße aus Köln ☂ 北京", stop: "tool_use", input: 5, output: 1},
	{name: "tool result", body: `{"model":"claude-x","max_tokens":100,"tools":` + anTools + `,"messages":[` + anToolTurns + `]}`,
		text: "tool said: sunny", stop: "end_turn", input: 5, output: 3},
	{name: "max_tokens", body: `{"model":"claude-x","max_tokens":2,"messages":[{"role":"user","content":"one two three"}]}`,
		text: "echo: one", stop: "max_tokens", input: 3, output: 2},
	{name: "everything optional", body: `{"model":"claude-x","max_tokens":100,"temperature":1,"top_p":0.9,"top_k":5,"stop_sequences":["END"],"metadata":{"user_id":"u"},"service_tier":"auto","thinking":{"type":"disabled"},"messages":[{"role":"user","content":"ok"}]}`,
		text: "echo: ok", stop: "end_turn", input: 1, output: 2},
}

func TestAnthropicAnswer(t *testing.T) {
	s := newFake(t)
	for _, tc := range anCases {
		t.Run(tc.name, func(t *testing.T) {
			r := answerOf(t, s, anPath, tc.body, "Request-Id")
			if !strings.HasPrefix(r.Get("id").Str, "msg_") || r.Get("type").Str != "message" || r.Get("role").Str != "assistant" ||
				r.Get("model").Str != "claude-x" {
				t.Errorf("message %s", r.Raw)
			}
			if ss := r.Get("stop_sequence"); !ss.Exists() || ss.Type != gjson.Null {
				t.Errorf("stop_sequence %q", ss.Raw)
			}
			if r.Get("stop_reason").Str != tc.stop {
				t.Errorf("stop_reason %s, want %s", r.Get("stop_reason").Raw, tc.stop)
			}
			blocks := r.Get("content").Array()
			if len(blocks) != 1 {
				t.Fatalf("content %s", r.Get("content").Raw)
			}
			b := blocks[0]
			if tc.tool == "" {
				if b.Get("type").Str != "text" || b.Get("text").Type != gjson.String || b.Get("text").Str != tc.text {
					t.Errorf("block %s, want text %q", b.Raw, tc.text)
				}
			} else if b.Get("type").Str != "tool_use" || !strings.HasPrefix(b.Get("id").Str, "toolu_") || b.Get("name").Str != tc.tool ||
				!b.Get("input").IsObject() || b.Get("input.query").Str != tc.query {
				t.Errorf("block %s, want tool_use %s with query %q", b.Raw, tc.tool, tc.query)
			}
			u := r.Get("usage")
			if u.Get("input_tokens").Type != gjson.Number || u.Get("output_tokens").Type != gjson.Number ||
				u.Get("input_tokens").Int() != tc.input || u.Get("output_tokens").Int() != tc.output {
				t.Errorf("usage %s, want %d in, %d out", u.Raw, tc.input, tc.output)
			}
		})
	}
}

func TestAnthropicStream(t *testing.T) {
	s := newFake(t)
	for _, tc := range anCases {
		t.Run(tc.name, func(t *testing.T) {
			_, plain := post(t, s, anPath, tc.body, anAuth...)
			want := gjson.Parse(plain)
			res, got := post(t, s, anPath, streamed(t, tc.body), anAuth...)
			if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
				t.Fatalf("%d %s %s", res.StatusCode, res.Header.Get("Content-Type"), got)
			}
			evs := parseSSE(t, got)
			var names []string
			var text, partial strings.Builder
			for _, ev := range evs {
				d := gjson.Parse(ev.data)
				if ev.name == "" || d.Get("type").Str != ev.name {
					t.Errorf("event %q carries type %q", ev.name, d.Get("type").Str)
				}
				if ev.data == "[DONE]" {
					t.Error("[DONE] in an Anthropic stream")
				}
				names = append(names, ev.name)
				switch ev.name {
				case "message_start":
					m := d.Get("message")
					if !strings.HasPrefix(m.Get("id").Str, "msg_") || m.Get("type").Str != "message" ||
						m.Get("role").Str != "assistant" || m.Get("model").Str != "claude-x" || m.Get("content").Raw != "[]" ||
						m.Get("stop_reason").Type != gjson.Null || m.Get("usage.input_tokens").Int() != tc.input {
						t.Errorf("message_start %s", ev.data)
					}
				case "content_block_start":
					cb := d.Get("content_block")
					if d.Get("index").Int() != 0 || !d.Get("index").Exists() {
						t.Errorf("block index %s", ev.data)
					}
					if tc.tool == "" && (cb.Get("type").Str != "text" || cb.Get("text").Raw != `""`) {
						t.Errorf("text block start %s", ev.data)
					}
					if tc.tool != "" && (cb.Get("type").Str != "tool_use" || cb.Get("name").Str != tc.tool ||
						!strings.HasPrefix(cb.Get("id").Str, "toolu_") || cb.Get("input").Raw != "{}") {
						t.Errorf("tool_use block start %s", ev.data)
					}
				case "content_block_delta":
					delta := d.Get("delta")
					if d.Get("index").Int() != 0 || !d.Get("index").Exists() {
						t.Errorf("delta index %s", ev.data)
					}
					if tc.tool == "" && delta.Get("type").Str != "text_delta" || tc.tool != "" && delta.Get("type").Str != "input_json_delta" {
						t.Errorf("delta %s", ev.data)
					}
					text.WriteString(delta.Get("text").Str)
					partial.WriteString(delta.Get("partial_json").Str)
				case "content_block_stop":
					if d.Get("index").Int() != 0 || !d.Get("index").Exists() {
						t.Errorf("stop index %s", ev.data)
					}
				case "message_delta":
					if d.Get("delta.stop_reason").Str != tc.stop || !d.Get("delta.stop_sequence").Exists() ||
						d.Get("usage.output_tokens").Int() != want.Get("usage.output_tokens").Int() {
						t.Errorf("message_delta %s, want stop %s, %d out", ev.data, tc.stop, want.Get("usage.output_tokens").Int())
					}
				}
			}

			// message_start, ping, content_block_start, content_block_delta…,
			// content_block_stop, message_delta, message_stop.
			deltas := 0
			for len(names) > 3+deltas && names[3+deltas] == "content_block_delta" {
				deltas++
			}
			wantNames := []string{"message_start", "ping", "content_block_start"}
			for range deltas {
				wantNames = append(wantNames, "content_block_delta")
			}
			wantNames = append(wantNames, "content_block_stop", "message_delta", "message_stop")
			if deltas == 0 || strings.Join(names, ",") != strings.Join(wantNames, ",") {
				t.Errorf("events %v", names)
			}

			if tc.tool == "" {
				if text.String() != tc.text || text.String() != want.Get("content.0.text").Str {
					t.Errorf("streamed text %q, want %q", text.String(), tc.text)
				}
				if deltas != len(strings.Fields(tc.text)) {
					t.Errorf("%d text deltas for %q", deltas, tc.text)
				}
				return
			}
			p := partial.String()
			if !gjson.Valid(p) || !gjson.Parse(p).IsObject() || gjson.Get(p, "query").Str != tc.query ||
				gjson.Parse(p).Raw != want.Get("content.0.input").Raw {
				t.Errorf("partial_json adds up to %q, want %s", p, want.Get("content.0.input").Raw)
			}
			if deltas < 2 {
				t.Errorf("input in %d fragments, want it split", deltas)
			}
		})
	}
}

func TestAnthropicStrictness(t *testing.T) {
	s := newFake(t)
	const msgs = `"messages":[{"role":"user","content":"hi there"}]`
	const anMin = `"model":"claude","max_tokens":100,` + msgs
	for _, tc := range []struct{ name, body, want string }{
		{"no max_tokens", `{"model":"claude",` + msgs + `}`, "max_tokens"},
		{"max_tokens zero", `{"model":"claude","max_tokens":0,` + msgs + `}`, "max_tokens"},
		{"max_tokens fraction", `{"model":"claude","max_tokens":1.5,` + msgs + `}`, "max_tokens"},
		{"max_tokens string", `{"model":"claude","max_tokens":"100",` + msgs + `}`, "max_tokens"},
		{"no model", `{"max_tokens":100,` + msgs + `}`, "model"},
		{"system role", `{"model":"claude","max_tokens":100,"messages":[{"role":"system","content":"s"},{"role":"user","content":"hi"}]}`, "messages.0.role"},
		{"tool role", `{"model":"claude","max_tokens":100,"messages":[{"role":"user","content":"hi"},{"role":"tool","content":"x"}]}`, "messages.1.role"},
		{"temperature 1.5", `{` + anMin + `,"temperature":1.5}`, "temperature"},
		{"temperature negative", `{` + anMin + `,"temperature":-0.1}`, "temperature"},
		{"openai n", `{` + anMin + `,"n":1}`, "n: Extra inputs"},
		{"openai stop", `{` + anMin + `,"stop":["x"]}`, "stop: Extra inputs"},
		{"openai max_completion_tokens", `{` + anMin + `,"max_completion_tokens":5}`, "max_completion_tokens: Extra inputs"},
		{"openai stream_options", `{` + anMin + `,"stream":true,"stream_options":{"include_usage":true}}`, "stream_options: Extra inputs"},
		{"openai response_format", `{` + anMin + `,"response_format":{"type":"json_object"}}`, "response_format: Extra inputs"},
		{"openai parallel_tool_calls", `{` + anMin + `,"parallel_tool_calls":false}`, "parallel_tool_calls: Extra inputs"},
		{"openai user", `{` + anMin + `,"user":"u1"}`, "user: Extra inputs"},
		{"empty text block", `{"model":"claude","max_tokens":100,"messages":[{"role":"user","content":[{"type":"text","text":""}]}]}`, "non-empty"},
		{"empty string content", `{"model":"claude","max_tokens":100,"messages":[{"role":"user","content":""}]}`, "non-empty"},
		{"empty system block", `{` + anMin + `,"system":[{"type":"text","text":""}]}`, "non-empty"},
		{"content null", `{"model":"claude","max_tokens":100,"messages":[{"role":"user","content":null}]}`, "messages.0.content"},
		{"no messages", `{"model":"claude","max_tokens":100,"messages":[]}`, "messages"},
		{"orphan tool_result", `{"model":"claude","max_tokens":100,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"x"}]}]}`, "tool_result"},
		{"tool_result for another id", `{"model":"claude","max_tokens":100,"messages":[{"role":"user","content":"q"},` +
			`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"f","input":{}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_2","content":"x"}]}]}`, "tool_result"},
		{"tool_use input a string", `{"model":"claude","max_tokens":100,"messages":[{"role":"user","content":"q"},` +
			`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"f","input":"{\"a\":1}"}]}]}`, "tool_use"},
		{"tool without input_schema", `{` + anMin + `,"tools":[{"name":"f"}]}`, "input_schema"},
		{"tool schema not an object", `{` + anMin + `,"tools":[{"name":"f","input_schema":{"type":"string"}}]}`, "input_schema"},
		{"openai-shaped tool", `{` + anMin + `,"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]}`, "tools.0"},
		{"bad tool_choice type", `{` + anMin + `,"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"required"}}`, "tool_choice.type"},
		{"openai tool_choice string", `{` + anMin + `,"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":"auto"}`, "tool_choice"},
		{"tool_choice tool without name", `{` + anMin + `,"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"tool"}}`, "tool_choice.name"},
		{"openai image_url part", `{"model":"claude","max_tokens":100,"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/y.png"}}]}]}`, "image_url"},
		{"image in assistant", `{"model":"claude","max_tokens":100,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"image","source":{"type":"url","url":"u"}}]}]}`, "not allowed"},
		{"image without data", `{"model":"claude","max_tokens":100,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png"}}]}]}`, "source"},
		{"stop_sequences string", `{` + anMin + `,"stop_sequences":"END"}`, "stop_sequences"},
		{"non-JSON", `max_tokens=5`, "JSON"},
		{"JSON array", `[{"model":"claude"}]`, "JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, body := post(t, s, anPath, tc.body, anAuth...)
			if res.StatusCode != 400 {
				t.Fatalf("%d %s, want 400", res.StatusCode, body)
			}
			checkAnthropicError(t, body, "invalid_request_error")
			if !strings.Contains(gjson.Get(body, "error.message").Str, tc.want) {
				t.Errorf("message %q does not mention %q", gjson.Get(body, "error.message").Str, tc.want)
			}
		})
	}

	body := `{` + anMin + `}`
	for _, tc := range []struct {
		name   string
		header []string
		want   string
	}{
		{"authorization header", []string{"X-Api-Key", "ak", "Anthropic-Version", "2023-06-01", "Authorization", "Bearer ak"}, "Authorization"},
		{"gateway authorization header", []string{"X-Api-Key", "ak", "Anthropic-Version", "2023-06-01", "Authorization", "Bearer gateway-key"}, "Authorization"},
		{"no anthropic-version", []string{"X-Api-Key", "ak"}, "anthropic-version"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, got := post(t, s, anPath, body, tc.header...)
			if res.StatusCode != 400 {
				t.Fatalf("%d %s, want 400", res.StatusCode, got)
			}
			checkAnthropicError(t, got, "invalid_request_error")
			if !strings.Contains(gjson.Get(got, "error.message").Str, tc.want) {
				t.Errorf("message %q does not mention %q", gjson.Get(got, "error.message").Str, tc.want)
			}
		})
	}
}

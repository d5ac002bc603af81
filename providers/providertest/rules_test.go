package providertest

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
)

// oaToolTurn is a user question and the assistant's call of search with id
// call_1, to be answered by a tool message.
const oaToolTurn = `{"role":"user","content":"weather?"},` +
	`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"search","arguments":"{}"}}]}`

// TestOpenAIRules checks each request rule of the OpenAI route: a 400
// invalid_request_error that names the offending parameter.
func TestOpenAIRules(t *testing.T) {
	s := newFake(t)
	const msgs = `"messages":[{"role":"user","content":"hi"}]`
	const min = `"model":"gpt",` + msgs
	tools := `"tools":` + oaTools
	for _, tc := range []struct{ name, body, param string }{
		{"invalid UTF-8", "{\"model\":\"gpt\",\"messages\":[{\"role\":\"user\",\"content\":\"\xff\"}]}", ""},
		{"messages an object", `{"model":"gpt","messages":{"role":"user","content":"hi"}}`, "messages"},
		{"message not an object", `{"model":"gpt","messages":["hi"]}`, "messages[0]"},
		{"model empty", `{"model":"",` + msgs + `}`, "model"},
		{"anthropic system field", `{` + min + `,"system":"be brief"}`, "system"},
		{"anthropic stop_sequences", `{` + min + `,"stop_sequences":["x"]}`, "stop_sequences"},
		{"user content missing", `{"model":"gpt","messages":[{"role":"user"}]}`, "messages[0].content"},
		{"user content number", `{"model":"gpt","messages":[{"role":"user","content":5}]}`, "messages[0].content"},
		{"anthropic image block", `{"model":"gpt","messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"u"}}]}]}`, "messages[0].content[0].type"},
		{"anthropic tool_result block", `{"model":"gpt","messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"call_1","content":"x"}]}]}`, "messages[0].content[0].type"},
		{"tool_result instead of tool message", `{"model":"gpt","messages":[` + oaToolTurn + `,{"role":"user","content":[{"type":"tool_result","tool_use_id":"call_1","content":"x"}]}]}`, "messages"},
		{"text part without text", `{"model":"gpt","messages":[{"role":"user","content":[{"type":"text"}]}]}`, "messages[0].content[0].text"},
		{"image_url without url", `{"model":"gpt","messages":[{"role":"user","content":[{"type":"image_url","image_url":{}}]}]}`, "messages[0].content[0].image_url.url"},
		{"image_url in system", `{"model":"gpt","messages":[{"role":"system","content":[{"type":"image_url","image_url":{"url":"u"}}]},{"role":"user","content":"hi"}]}`, "messages[0].content[0].type"},
		{"assistant without content", `{"model":"gpt","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null},{"role":"user","content":"again"}]}`, "messages[1].content"},
		{"tool without tool_call_id", `{"model":"gpt",` + tools + `,"messages":[` + oaToolTurn + `,{"role":"tool","content":"sunny"}]}`, "messages[2].tool_call_id"},
		{"tool without a call", `{"model":"gpt","messages":[{"role":"user","content":"hi"},{"role":"tool","tool_call_id":"call_1","content":"sunny"}]}`, "messages[1].role"},
		{"tool answers another id", `{"model":"gpt","messages":[` + oaToolTurn + `,{"role":"tool","tool_call_id":"call_2","content":"sunny"}]}`, "messages[2].role"},
		{"tool after a later turn", `{"model":"gpt","messages":[` + oaToolTurn + `,{"role":"tool","tool_call_id":"call_1","content":"a"},{"role":"user","content":"b"},{"role":"tool","tool_call_id":"call_1","content":"c"}]}`, "messages[4].role"},
		{"call left unanswered", `{"model":"gpt","messages":[` + oaToolTurn + `,{"role":"user","content":"and?"}]}`, "messages"},
		{"one of two calls answered", `{"model":"gpt","messages":[{"role":"user","content":"q"},` +
			`{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"c2","type":"function","function":{"name":"f","arguments":"{}"}}]},` +
			`{"role":"tool","tool_call_id":"c2","content":"x"}]}`, "messages"},
		{"arguments an object", `{"model":"gpt","messages":[{"role":"user","content":"q"},{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":{}}}]},{"role":"tool","tool_call_id":"c1","content":"x"}]}`, "messages[1].tool_calls[0].function.arguments"},
		{"tool call without id", `{"model":"gpt","messages":[{"role":"user","content":"q"},{"role":"assistant","tool_calls":[{"type":"function","function":{"name":"f","arguments":"{}"}}]}]}`, "messages[1].tool_calls[0].id"},
		{"stream a string", `{` + min + `,"stream":"true"}`, "stream"},
		{"stream_options without stream", `{` + min + `,"stream_options":{"include_usage":true}}`, "stream_options"},
		{"temperature 2.5", `{` + min + `,"temperature":2.5}`, "temperature"},
		{"top_p 1.5", `{` + min + `,"top_p":1.5}`, "top_p"},
		{"presence_penalty 3", `{` + min + `,"presence_penalty":3}`, "presence_penalty"},
		{"max_tokens 0", `{` + min + `,"max_tokens":0}`, "max_tokens"},
		{"max_completion_tokens fraction", `{` + min + `,"max_completion_tokens":1.5}`, "max_completion_tokens"},
		{"n 0", `{` + min + `,"n":0}`, "n"},
		{"five stops", `{` + min + `,"stop":["a","b","c","d","e"]}`, "stop"},
		{"stop a number", `{` + min + `,"stop":5}`, "stop"},
		{"response_format unknown", `{` + min + `,"response_format":{"type":"xml"}}`, "response_format.type"},
		{"json_schema without name", `{` + min + `,"response_format":{"type":"json_schema","json_schema":{"schema":{}}}}`, "response_format.json_schema.name"},
		{"tools an object", `{` + min + `,"tools":{"type":"function","function":{"name":"f"}}}`, "tools"},
		{"anthropic-shaped tool", `{` + min + `,"tools":[{"name":"f","input_schema":{"type":"object"}}]}`, "tools[0].type"},
		{"tool without name", `{` + min + `,"tools":[{"type":"function","function":{"parameters":{}}}]}`, "tools[0].function.name"},
		{"parameters a string", `{` + min + `,"tools":[{"type":"function","function":{"name":"f","parameters":"{}"}}]}`, "tools[0].function.parameters"},
		{"tool_choice without tools", `{` + min + `,"tool_choice":"auto"}`, "tool_choice"},
		{"tool_choice with empty tools", `{` + min + `,"tools":[],"tool_choice":"auto"}`, "tool_choice"},
		{"parallel_tool_calls without tools", `{` + min + `,"parallel_tool_calls":false}`, "parallel_tool_calls"},
		{"tool_choice any", `{` + min + `,` + tools + `,"tool_choice":"any"}`, "tool_choice"},
		{"anthropic tool_choice", `{` + min + `,` + tools + `,"tool_choice":{"type":"tool","name":"search"}}`, "tool_choice"},
		{"tool_choice function without name", `{` + min + `,` + tools + `,"tool_choice":{"type":"function","function":{}}}`, "tool_choice.function.name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, body := post(t, s, oaPath, tc.body, oaAuth...)
			if res.StatusCode != http.StatusBadRequest {
				t.Fatalf("%d %s, want 400", res.StatusCode, body)
			}
			checkOpenAIError(t, body, "invalid_request_error")
			if p := gjson.Get(body, "error.param"); (tc.param == "" && p.Type != gjson.Null) || p.Str != tc.param {
				t.Errorf("param %s, want %q: %s", p.Raw, tc.param, body)
			}
		})
	}
}

// TestOpenAIAccepts checks that valid requests the rules must not refuse
// get answers.
func TestOpenAIAccepts(t *testing.T) {
	const msgs = `"messages":[{"role":"user","content":"hi"}]`
	wantAnswered(t, oaPath, []namedBody{
		{"every optional field", `{"model":"gpt","temperature":2,"top_p":0,"n":1,"stop":"x","max_tokens":null,"seed":1,"user":"u",` +
			`"frequency_penalty":-2,"presence_penalty":2,"logprobs":false,"metadata":{"k":"v"},"store":false,"service_tier":"auto",` +
			`"response_format":{"type":"json_schema","json_schema":{"name":"r","schema":{"type":"object"}}},"stream":false,` + msgs + `}`},
		{"stream_options with stream", `{"model":"gpt","stream":true,"stream_options":{"include_usage":false},` + msgs + `}`},
		{"stream_options null", `{"model":"gpt","stream_options":null,` + msgs + `}`},
		{"tool_choice null without tools", `{"model":"gpt","tool_choice":null,` + msgs + `}`},
		{"tools and their options", `{"model":"gpt","tools":` + oaTools + `,"tool_choice":"auto","parallel_tool_calls":false,` + msgs + `}`},
		{"vLLM extras", `{"model":"gpt","top_k":5,"repetition_penalty":1.1,` + msgs + `}`},
		{"assistant refusal", `{"model":"gpt","messages":[{"role":"user","content":"a"},{"role":"assistant","content":null,"refusal":"no"},{"role":"user","content":"b"}]}`},
		{"assistant parts", `{"model":"gpt","messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"text","text":"x"},{"type":"refusal","refusal":"y"}]},{"role":"user","content":"b"}]}`},
		{"audio and file parts", `{"model":"gpt","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"AA==","format":"wav"}},{"type":"file","file":{"file_id":"f"}},{"type":"text","text":"b"}]}]}`},
		{"assistant prefill", `{"model":"gpt","messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"}]}`},
		{"calls answered, then more turns", `{"model":"gpt","messages":[` + oaToolTurn + `,{"role":"tool","tool_call_id":"call_1","content":"x"},{"role":"assistant","content":"ok"},{"role":"user","content":"c"}]}`},
	})
}

// namedBody is a request body and the name of its test.
type namedBody struct{ name, body string }

// wantAnswered checks that each body gets a 200 at path.
func wantAnswered(t *testing.T, path string, cases []namedBody) {
	t.Helper()
	s := newFake(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if res, body := post(t, s, path, tc.body, authFor(path)...); res.StatusCode != http.StatusOK {
				t.Fatalf("%d %s", res.StatusCode, body)
			}
		})
	}
}

// TestAnthropicRules checks the Messages rules beyond TestAnthropicStrictness.
func TestAnthropicRules(t *testing.T) {
	s := newFake(t)
	const msgs = `"messages":[{"role":"user","content":"hi"}]`
	const min = `"model":"claude","max_tokens":100,` + msgs
	const tool = `{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"f","input":{}}]}`
	const result = `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"x"}]}`
	const anTool = `"tools":[{"name":"f","input_schema":{"type":"object"}}]`
	for _, tc := range []struct{ name, body, want string }{
		{"invalid UTF-8", "{\"model\":\"claude\",\"max_tokens\":5,\"messages\":[{\"role\":\"user\",\"content\":\"\xff\"}]}", "JSON"},
		{"top_p 1.5", `{` + min + `,"top_p":1.5}`, "top_p"},
		{"top_k negative", `{` + min + `,"top_k":-1}`, "top_k"},
		{"top_k fraction", `{` + min + `,"top_k":1.5}`, "top_k"},
		{"stream a string", `{` + min + `,"stream":"true"}`, "stream"},
		{"metadata a string", `{` + min + `,"metadata":"u"}`, "metadata"},
		{"tools an object", `{` + min + `,"tools":{"name":"f","input_schema":{"type":"object"}}}`, "tools"},
		{"message not an object", `{"model":"claude","max_tokens":5,"messages":["hi"]}`, "messages.0.role"},
		{"tool_result two turns late", `{"model":"claude","max_tokens":5,"messages":[{"role":"user","content":"q"},` + tool + `,` + result + `,` +
			`{"role":"assistant","content":"ok"},` + result + `]}`, "tool_use_id"},
		{"tool_use unanswered", `{"model":"claude","max_tokens":5,"messages":[{"role":"user","content":"q"},` + tool + `,{"role":"user","content":"and?"}]}`, "toolu_1"},
		{"one of two tool_uses answered", `{"model":"claude","max_tokens":5,"messages":[{"role":"user","content":"q"},` +
			`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"f","input":{}},{"type":"tool_use","id":"toolu_2","name":"f","input":{}}]},` +
			result + `]}`, "toolu_2"},
		{"tool results split over two turns", `{"model":"claude","max_tokens":5,"messages":[{"role":"user","content":"q"},` +
			`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"f","input":{}},{"type":"tool_use","id":"toolu_2","name":"f","input":{}}]},` +
			result + `,{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_2","content":"y"}]}]}`, "toolu_2"},
		{"tool_result content with tool_use", `{"model":"claude","max_tokens":5,"messages":[{"role":"user","content":"q"},` + tool + `,` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"tool_use","id":"x","name":"f","input":{}}]}]}]}`, "tool_result content"},
		{"is_error a string", `{"model":"claude","max_tokens":5,"messages":[{"role":"user","content":"q"},` + tool + `,` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"x","is_error":"yes"}]}]}`, "is_error"},
		{"document without source", `{"model":"claude","max_tokens":5,"messages":[{"role":"user","content":[{"type":"document"},{"type":"text","text":"q"}]}]}`, "source.type"},
		{"document in assistant", `{"model":"claude","max_tokens":5,"messages":[{"role":"user","content":"q"},{"role":"assistant","content":[{"type":"document","source":{"type":"url","url":"u"}}]}]}`, "not allowed"},
		{"thinking in user", `{"model":"claude","max_tokens":5,"messages":[{"role":"user","content":[{"type":"thinking","thinking":"x","signature":"s"}]}]}`, "not allowed"},
		{"tool_choice names an unknown tool", `{` + min + `,` + anTool + `,"tool_choice":{"type":"tool","name":"g"}}`, "tool_choice.name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, body := post(t, s, anPath, tc.body, anAuth...)
			if res.StatusCode != http.StatusBadRequest {
				t.Fatalf("%d %s, want 400", res.StatusCode, body)
			}
			checkAnthropicError(t, body, "invalid_request_error")
			if !strings.Contains(gjson.Get(body, "error.message").Str, tc.want) {
				t.Errorf("message %q does not mention %q", gjson.Get(body, "error.message").Str, tc.want)
			}
			if rid := res.Header.Get("Request-Id"); !strings.HasPrefix(rid, "req_") || gjson.Get(body, "request_id").Str != rid {
				t.Errorf("request-id header %q, body %s", rid, body)
			}
		})
	}

	// Anthropic takes any date as a version, as newer SDKs and Claude Code
	// send newer ones; it refuses what is not a date.
	t.Run("anthropic-version", func(t *testing.T) {
		for _, v := range []string{"2023-06-01", "2023-01-01", "2024-01-01", "2026-10-21", "2031-02-28"} {
			if res, body := post(t, s, anPath, `{`+min+`}`, "X-Api-Key", "ak", "Anthropic-Version", v); res.StatusCode != 200 {
				t.Errorf("%s: %d %s", v, res.StatusCode, body)
			}
		}
		for _, v := range []string{"latest", "2023-6-1", "2023-06-01T00:00:00Z", "2023-13-01", "2023-02-30", "20230601"} {
			res, body := post(t, s, anPath, `{`+min+`}`, "X-Api-Key", "ak", "Anthropic-Version", v)
			if res.StatusCode != 400 || !strings.Contains(gjson.Get(body, "error.message").Str, "anthropic-version") {
				t.Errorf("%q: %d %s", v, res.StatusCode, body)
			}
			checkAnthropicError(t, body, "invalid_request_error")
		}
	})
}

// TestAnthropicAccepts checks that valid requests the rules must not refuse
// get answers.
func TestAnthropicAccepts(t *testing.T) {
	wantAnswered(t, anPath, []namedBody{
		{"documents", `{"model":"c","max_tokens":5,"messages":[{"role":"user","content":[` +
			`{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"AA=="}},` +
			`{"type":"document","source":{"type":"text","media_type":"text/plain","data":"doc"}},` +
			`{"type":"document","source":{"type":"url","url":"https://x/y.pdf"}},{"type":"text","text":"q"}]}]}`},
		{"rich tool result", `{"model":"c","max_tokens":5,"messages":[{"role":"user","content":"q"},` +
			`{"role":"assistant","content":[{"type":"thinking","thinking":"hm","signature":"` + thinkingSignature("hm") + `"},{"type":"tool_use","id":"t1","name":"f","input":{"a":1}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","is_error":true,"content":[{"type":"text","text":"x"},{"type":"image","source":{"type":"url","url":"u"}}]},{"type":"text","text":"go on"}]}]}`},
		{"tool_result without content", `{"model":"c","max_tokens":5,"messages":[{"role":"user","content":"q"},` +
			`{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1"}]}]}`},
		{"tool_use as the last turn", `{"model":"c","max_tokens":5,"messages":[{"role":"user","content":"q"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{}}]}]}`},
		{"newer fields", `{"model":"c","max_tokens":5,"top_k":0,"top_p":1,"stream":false,"inference_geo":"us","messages":[{"role":"user","content":"q"}]}`},
	})
}

// TestConversationEnds checks how both formats answer the ends of a
// conversation that the main answer tables do not cover: several tool
// results (all quoted, in order) and an assistant prefill (the last user
// text is echoed, and no tool is called).
func TestConversationEnds(t *testing.T) {
	s := newFake(t)
	for _, tc := range []struct {
		name, path, body, text string
		prompt                 int64
	}{
		{"openai parallel results", oaPath, `{"model":"m","tools":` + oaTools + `,"messages":[{"role":"user","content":"two things"},` +
			`{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"search","arguments":"{}"}},{"id":"c2","type":"function","function":{"name":"lookup","arguments":"{}"}}]},` +
			`{"role":"tool","tool_call_id":"c1","content":"rain"},{"role":"tool","tool_call_id":"c2","content":"cold wind"}]}`,
			"tool said: rain cold wind", 5},
		{"anthropic parallel results", anPath, `{"model":"m","max_tokens":50,"tools":` + anTools + `,"messages":[{"role":"user","content":"two things"},` +
			`{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"search","input":{}},{"type":"tool_use","id":"t2","name":"lookup","input":{}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"rain"},{"type":"tool_result","tool_use_id":"t2","content":[{"type":"text","text":"cold wind"}]}]}]}`,
			"tool said: rain cold wind", 5},
		{"openai prefill", oaPath, `{"model":"m","tools":` + oaTools + `,"messages":[{"role":"user","content":"first"},{"role":"assistant","content":"sure:"}]}`,
			"echo: first", 2},
		{"anthropic prefill", anPath, `{"model":"m","max_tokens":50,"tools":` + anTools + `,"messages":[{"role":"user","content":"first"},{"role":"assistant","content":"sure:"}]}`,
			"echo: first", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, body := post(t, s, tc.path, tc.body, authFor(tc.path)...)
			if res.StatusCode != 200 {
				t.Fatalf("%d %s", res.StatusCode, body)
			}
			text, prompt := gjson.Get(body, "choices.0.message.content").Str, gjson.Get(body, "usage.prompt_tokens").Int()
			if tc.path == anPath {
				text, prompt = gjson.Get(body, "content.0.text").Str, gjson.Get(body, "usage.input_tokens").Int()
			}
			if text != tc.text || prompt != tc.prompt {
				t.Errorf("answer %q with %d prompt tokens, want %q with %d: %s", text, prompt, tc.text, tc.prompt, body)
			}
		})
	}
}

func TestRateLimitCode(t *testing.T) {
	s := newFake(t)
	res, body := post(t, s, oaPath, `{"model":"fail-429","messages":[{"role":"user","content":"hi"}]}`, oaAuth...)
	if res.StatusCode != 429 || gjson.Get(body, "error.code").Str != "rate_limit_exceeded" {
		t.Errorf("%d %s", res.StatusCode, body)
	}
}

func TestBodyTooLarge(t *testing.T) {
	if testing.Short() {
		t.Skip("sends two 32 MB bodies")
	}
	s := newFake(t)
	big := `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"` + strings.Repeat("a", MaxBody) + `"}]}`
	for _, path := range []string{oaPath, anPath} {
		res, body := post(t, s, path, big, authFor(path)...)
		if res.StatusCode != http.StatusRequestEntityTooLarge {
			t.Fatalf("%s: %d %.200s", path, res.StatusCode, body)
		}
		if path == anPath {
			checkAnthropicError(t, body, "request_too_large")
		} else {
			checkOpenAIError(t, body, "invalid_request_error")
		}
	}
}

func TestSlowDelay(t *testing.T) {
	for _, tc := range []struct {
		model string
		want  time.Duration
		ok    bool
	}{
		{"slow-50ms", 50 * time.Millisecond, true},
		{"oa/slow-5ms", 5 * time.Millisecond, true},
		{"slow-20ms-gated", 20 * time.Millisecond, true},
		{"gpt-slow-0ms", 0, true},
		{"slow-ms", 0, false},
		{"slow-5", 0, false},
		{"slow-5s", 0, false},
		{"slowly", 0, false},
		{"gpt-4o", 0, false},
	} {
		if d, ok := slowDelay(tc.model); d != tc.want || ok != tc.ok {
			t.Errorf("slowDelay(%q) = %v, %t, want %v, %t", tc.model, d, ok, tc.want, tc.ok)
		}
	}

	// A client that gives up ends the wait (else the server's cleanup
	// would wait the 5 s out).
	s := newFake(t)
	client := &http.Client{Timeout: 50 * time.Millisecond}
	req, _ := http.NewRequest(http.MethodPost, s.URL+oaPath, strings.NewReader(`{"model":"slow-5000ms","messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer ok")
	start := time.Now()
	if res, err := client.Do(req); err == nil {
		res.Body.Close()
		t.Fatalf("slow-5000ms answered %d within the client's 50 ms timeout", res.StatusCode)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("the client waited %v", d)
	}
}

// TestDeepJSON checks that a body nested deeper than gjson's validator can
// recurse is a 400, not a crash of the whole process.
func TestDeepJSON(t *testing.T) {
	if testing.Short() {
		t.Skip("sends 16 MB bodies")
	}
	s := newFake(t)
	deep := `{"model":"m","max_tokens":5,"messages":` + strings.Repeat("[", 16<<20)
	for _, path := range []string{oaPath, anPath, "/cohere/v2/rerank"} {
		res, body := post(t, s, path, deep, authFor(path)...)
		if res.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: %d %.200s", path, res.StatusCode, body)
		}
	}
	nested := `{"model":"m","max_tokens":5,"metadata":` + strings.Repeat(`{"a":`, providers.MaxDepth-2) + `1` + strings.Repeat("}", providers.MaxDepth-2) +
		`,"messages":[{"role":"user","content":"ok"}]}`
	if res, body := post(t, s, anPath, nested, anAuth...); res.StatusCode != 200 {
		t.Errorf("%d levels: %d %.200s", providers.MaxDepth-1, res.StatusCode, body)
	}
}

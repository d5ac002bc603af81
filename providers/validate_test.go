package providers

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// user is a valid messages array for the cases about other fields.
const user = `[{"role":"user","content":"hi"}]`

// withUser is a request for model m with one user message and the extra
// top-level fields (a JSON fragment, without the braces).
func withUser(extra string) string {
	return `{"model":"m",` + extra + `,"messages":` + user + `}`
}

// msgs is a request for model m with the given messages array.
func msgs(messages string) string { return `{"model":"m","messages":` + messages + `}` }

func TestValidateChatAccepts(t *testing.T) {
	tests := []struct {
		name, body   string
		model        string
		stream       bool
		includeUsage bool
	}{
		{"minimal", msgs(user), "m", false, false},
		{"whitespace around", " \n\t" + msgs(user) + "\r\n ", "m", false, false},
		{"model with slash", `{"model":"oa/gpt-4o","messages":` + user + `}`, "oa/gpt-4o", false, false},
		{"model escaped", `{"model":"oa\/gpt\u002d4o","messages":` + user + `}`, "oa/gpt-4o", false, false},
		{"key escaped", `{"mod\u0065l":"m","messages":` + user + `}`, "m", false, false},
		{"multimodal user", msgs(`[{"role":"user","content":[{"type":"text","text":"what is this"},` +
			`{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA","detail":"low"}},` +
			`{"type":"input_audio","input_audio":{"data":"UklGRg==","format":"wav"}},` +
			`{"type":"file","file":{"file_id":"file-1"}}]}]`), "m", false, false},
		{"empty content string", msgs(`[{"role":"user","content":""}]`), "m", false, false},
		{"assistant tool_calls, null content", msgs(`[{"role":"user","content":"hi"},` +
			`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},` +
			`{"role":"tool","tool_call_id":"c1","content":"42"}]`), "m", false, false},
		{"assistant tool_calls, no content", msgs(`[{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":""}}]}]`), "m", false, false},
		{"assistant content and null tool_calls", msgs(`[{"role":"assistant","content":"ok","tool_calls":null}]`), "m", false, false},
		{"assistant content and empty tool_calls", msgs(`[{"role":"assistant","content":"ok","tool_calls":[]}]`), "m", false, false},
		{"assistant text and refusal parts", msgs(`[{"role":"assistant","content":[{"type":"text","text":"a"},{"type":"refusal","refusal":"no"}]}]`), "m", false, false},
		{"assistant tool call without arguments", msgs(`[{"role":"assistant","tool_calls":[{"id":"c1","function":{"name":"f"}}]}]`), "m", false, false},
		{"tool message with parts", msgs(`[{"role":"tool","tool_call_id":"c1","content":[{"type":"text","text":"42"}]}]`), "m", false, false},
		{"system and developer", msgs(`[{"role":"system","content":"s"},{"role":"developer","content":[{"type":"text","text":"d"}]},{"role":"user","content":"hi","name":"bob"}]`), "m", false, false},
		{"stream", withUser(`"stream":true`), "m", true, false},
		{"stream false", withUser(`"stream":false`), "m", false, false},
		{"stream null", withUser(`"stream":null`), "m", false, false},
		{"stream with usage", `{"model":"p/m","stream":true,"stream_options":{"include_usage":true},"messages":` + user + `}`, "p/m", true, true},
		{"stream usage false", withUser(`"stream":true,"stream_options":{"include_usage":false}`), "m", true, false},
		{"stream options without usage", withUser(`"stream":true,"stream_options":{"include_obfuscation":false}`), "m", true, false},
		{"stream null options", withUser(`"stream":true,"stream_options":null`), "m", true, false},
		{"function tool", withUser(`"tools":[{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object"},"strict":true}}]`), "m", false, false},
		{"function tool without parameters", withUser(`"tools":[{"type":"function","function":{"name":"f"}}]`), "m", false, false},
		{"function tool null parameters", withUser(`"tools":[{"type":"function","function":{"name":"f","parameters":null}}]`), "m", false, false},
		{"custom tool", withUser(`"tools":[{"type":"custom","custom":{"name":"c"}}]`), "m", false, false},
		{"tools null", withUser(`"tools":null`), "m", false, false},
		{"tool_choice none", withUser(`"tool_choice":"none"`), "m", false, false},
		{"tool_choice auto", withUser(`"tool_choice":"auto"`), "m", false, false},
		{"tool_choice required", withUser(`"tool_choice":"required"`), "m", false, false},
		{"tool_choice function", withUser(`"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"f"}}`), "m", false, false},
		{"tool_choice allowed_tools", withUser(`"tool_choice":{"type":"allowed_tools","allowed_tools":{"mode":"auto","tools":[]}}`), "m", false, false},
		{"tool_choice null", withUser(`"tool_choice":null`), "m", false, false},
		{"parallel_tool_calls", withUser(`"parallel_tool_calls":false`), "m", false, false},
		{"numbers", withUser(`"temperature":0.5,"top_p":1,"frequency_penalty":-2,"presence_penalty":1e-1,"max_tokens":10,"max_completion_tokens":4096,"n":2,"seed":-3,"top_logprobs":0`), "m", false, false},
		{"nulls", withUser(`"temperature":null,"top_p":null,"max_tokens":null,"max_completion_tokens":null,"n":null,"seed":null,"stop":null,"response_format":null,"user":null,"metadata":null,"logit_bias":null,"logprobs":null,"store":null`), "m", false, false},
		{"stop string", withUser(`"stop":"\n"`), "m", false, false},
		{"stop array", withUser(`"stop":["a","b"]`), "m", false, false},
		{"response_format json_schema", withUser(`"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object"}}}`), "m", false, false},
		{"strings", withUser(`"user":"u","safety_identifier":"s","prompt_cache_key":"k","reasoning_effort":"low","service_tier":"auto"`), "m", false, false},
		{"objects", withUser(`"metadata":{"k":"v"},"logit_bias":{"50256":-100}`), "m", false, false},
		{"booleans", withUser(`"logprobs":true,"store":false`), "m", false, false},
		{"unknown fields pass", withUser(`"future_option":{"x":[1,2,{"y":null}]}`), "m", false, false},
		{"as deep as allowed", withUser(`"x":` + strings.Repeat("[", MaxDepth-1) + strings.Repeat("]", MaxDepth-1)), "m", false, false},
		{"brackets in strings do not nest", withUser(`"x":"` + strings.Repeat("[{", 2*MaxDepth) + `\"[["`), "m", false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			info, err := ValidateChat([]byte(tc.body))
			if err != nil {
				t.Fatalf("%s: %v", tc.body, err)
			}
			want := ChatInfo{Model: tc.model, Stream: tc.stream, IncludeUsage: tc.includeUsage}
			if info != want {
				t.Errorf("info %+v, want %+v", info, want)
			}
		})
	}
}

func TestValidateChatRejects(t *testing.T) {
	const iv = "invalid_value"
	tests := []struct {
		name, body, param, code string
	}{
		// The body.
		{"invalid json", `{"model":`, "", "invalid_json"},
		{"trailing garbage", msgs(user) + `x`, "", "invalid_json"},
		{"empty body", ``, "", "invalid_json"},
		{"control char in string", "{\"model\":\"a\x01\",\"messages\":" + user + "}", "", "invalid_json"},
		{"array body", `["model"]`, "", "invalid_json"},
		{"string body", `"model"`, "", "invalid_json"},
		{"null body", `null`, "", "invalid_json"},
		{"too deep", withUser(`"x":` + strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth)), "", "invalid_json"},
		// 16 MB, the default max_request_body, of "[" overflowed the stack
		// in gjson.ValidBytes: a fatal error, not a panic.
		{"too deep and unterminated", strings.Repeat("[", 16<<20), "", "invalid_json"},

		// model.
		{"no model", `{"messages":` + user + `}`, "model", iv},
		{"empty model", `{"model":"","messages":` + user + `}`, "model", iv},
		{"model number", `{"model":1,"messages":` + user + `}`, "model", iv},
		{"model null", `{"model":null,"messages":` + user + `}`, "model", iv},
		{"model array", `{"model":["m"],"messages":` + user + `}`, "model", iv},
		{"model twice", `{"model":"a","messages":` + user + `,"model":"b"}`, "model", iv},
		{"model twice, escaped", `{"model":"a","messages":` + user + `,"mod\u0065l":"b"}`, "model", iv},
		{"stream twice", `{"model":"a","stream":false,"messages":` + user + `,"stream":true}`, "stream", iv},
		{"stream_options twice", `{"model":"a","stream":true,"stream_options":{},"messages":` + user + `,"stream_options":{"include_usage":true}}`, "stream_options", iv},

		// messages.
		{"no messages", `{"model":"m"}`, "messages", iv},
		{"messages object", msgs(`{}`), "messages", iv},
		{"messages string", msgs(`"hi"`), "messages", iv},
		{"messages null", msgs(`null`), "messages", iv},
		{"empty messages", msgs(`[]`), "messages", iv},
		{"message string", msgs(`["hi"]`), "messages[0]", iv},
		{"message null", msgs(`[{"role":"user","content":"a"},null]`), "messages[1]", iv},
		{"message array", msgs(`[[]]`), "messages[0]", iv},
		{"no role", msgs(`[{"content":"hi"}]`), "messages[0].role", iv},
		{"role number", msgs(`[{"role":1,"content":"hi"}]`), "messages[0].role", iv},
		{"unknown role", msgs(`[{"role":"user","content":"a"},{"role":"robot","content":"b"}]`), "messages[1].role", iv},
		{"role in capitals", msgs(`[{"role":"User","content":"a"}]`), "messages[0].role", iv},
		{"legacy function role", msgs(`[{"role":"function","name":"f","content":"a"}]`), "messages[0].role", iv},

		// content.
		{"no content", msgs(`[{"role":"user"}]`), "messages[0].content", iv},
		{"null user content", msgs(`[{"role":"user","content":null}]`), "messages[0].content", iv},
		{"null system content", msgs(`[{"role":"system","content":null}]`), "messages[0].content", iv},
		{"content number", msgs(`[{"role":"user","content":5}]`), "messages[0].content", iv},
		{"content object", msgs(`[{"role":"developer","content":{"type":"text","text":"x"}}]`), "messages[0].content", iv},
		{"content boolean", msgs(`[{"role":"user","content":"a"},{"role":"assistant","content":true}]`), "messages[1].content", iv},
		{"tool content missing", msgs(`[{"role":"tool","tool_call_id":"c"}]`), "messages[0].content", iv},

		// content parts.
		{"part string", msgs(`[{"role":"user","content":["hi"]}]`), "messages[0].content[0]", iv},
		{"part without type", msgs(`[{"role":"user","content":[{"text":"x"}]}]`), "messages[0].content[0]", iv},
		{"part type number", msgs(`[{"role":"user","content":[{"type":1}]}]`), "messages[0].content[0]", iv},
		{"unknown part type", msgs(`[{"role":"user","content":[{"type":"video"}]}]`), "messages[0].content[0].type", iv},
		{"unknown part type later", msgs(`[{"role":"user","content":"a"},{"role":"user","content":[{"type":"text","text":"x"},{"type":"video"}]}]`), "messages[1].content[1].type", iv},
		{"text part without text", msgs(`[{"role":"user","content":[{"type":"text"}]}]`), "messages[0].content[0].text", iv},
		{"text part text number", msgs(`[{"role":"system","content":[{"type":"text","text":1}]}]`), "messages[0].content[0].text", iv},
		{"refusal part without refusal", msgs(`[{"role":"assistant","content":[{"type":"refusal"}]}]`), "messages[0].content[0].refusal", iv},
		{"image without url", msgs(`[{"role":"user","content":[{"type":"image_url","image_url":{}}]}]`), "messages[0].content[0].image_url.url", iv},
		{"image url as string", msgs(`[{"role":"user","content":[{"type":"image_url","image_url":"https://x"}]}]`), "messages[0].content[0].image_url.url", iv},
		{"image in system", msgs(`[{"role":"system","content":[{"type":"image_url","image_url":{"url":"x"}}]}]`), "messages[0].content[0].type", iv},
		{"image in developer", msgs(`[{"role":"developer","content":[{"type":"image_url","image_url":{"url":"x"}}]}]`), "messages[0].content[0].type", iv},
		{"image in assistant", msgs(`[{"role":"assistant","content":[{"type":"image_url","image_url":{"url":"x"}}]}]`), "messages[0].content[0].type", iv},
		{"image in tool", msgs(`[{"role":"tool","tool_call_id":"c","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"x"}}]}]`), "messages[0].content[1].type", iv},
		{"audio in system", msgs(`[{"role":"system","content":[{"type":"input_audio","input_audio":{}}]}]`), "messages[0].content[0].type", iv},
		{"file in assistant", msgs(`[{"role":"assistant","content":[{"type":"file","file":{}}]}]`), "messages[0].content[0].type", iv},

		// tool and assistant messages.
		{"tool without tool_call_id", msgs(`[{"role":"tool","content":"x"}]`), "messages[0].tool_call_id", iv},
		{"tool_call_id number", msgs(`[{"role":"tool","tool_call_id":7,"content":"x"}]`), "messages[0].tool_call_id", iv},
		{"assistant without content and tool_calls", msgs(`[{"role":"assistant"}]`), "messages[0].content", iv},
		{"assistant null content, no tool_calls", msgs(`[{"role":"assistant","content":null}]`), "messages[0].content", iv},
		{"assistant null content, null tool_calls", msgs(`[{"role":"assistant","content":null,"tool_calls":null}]`), "messages[0].content", iv},
		{"assistant null content, empty tool_calls", msgs(`[{"role":"assistant","content":null,"tool_calls":[ ]}]`), "messages[0].content", iv},
		{"tool_calls object", msgs(`[{"role":"assistant","tool_calls":{}}]`), "messages[0].tool_calls", iv},
		{"tool_calls string with content", msgs(`[{"role":"assistant","content":"a","tool_calls":"x"}]`), "messages[0].tool_calls", iv},
		{"tool call without id", msgs(`[{"role":"assistant","tool_calls":[{"function":{"name":"f"}}]}]`), "messages[0].tool_calls[0].id", iv},
		{"tool call not object", msgs(`[{"role":"assistant","tool_calls":[1]}]`), "messages[0].tool_calls[0].id", iv},
		{"tool call without name", msgs(`[{"role":"assistant","tool_calls":[{"id":"a","function":{"name":"f"}},{"id":"b","function":{}}]}]`), "messages[0].tool_calls[1].function.name", iv},
		{"arguments object", msgs(`[{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":{}}}]}]`), "messages[0].tool_calls[0].function.arguments", iv},
		{"arguments null", msgs(`[{"role":"user","content":"a"},{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":null}}]}]`), "messages[1].tool_calls[0].function.arguments", iv},

		// stream.
		{"stream string", withUser(`"stream":"yes"`), "stream", iv},
		{"stream number", withUser(`"stream":1`), "stream", iv},
		{"stream_options array", withUser(`"stream_options":[]`), "stream_options", iv},
		{"stream_options boolean", withUser(`"stream_options":true`), "stream_options", iv},
		{"include_usage string", withUser(`"stream_options":{"include_usage":"y"}`), "stream_options.include_usage", iv},
		{"include_usage null", withUser(`"stream_options":{"include_usage":null}`), "stream_options.include_usage", iv},

		// numbers.
		{"temperature string", withUser(`"temperature":"hot"`), "temperature", iv},
		{"temperature boolean", withUser(`"temperature":true`), "temperature", iv},
		{"top_p string", withUser(`"top_p":"1"`), "top_p", iv},
		{"frequency_penalty object", withUser(`"frequency_penalty":{}`), "frequency_penalty", iv},
		{"presence_penalty array", withUser(`"presence_penalty":[0]`), "presence_penalty", iv},
		{"max_tokens float", withUser(`"max_tokens":1.5`), "max_tokens", iv},
		{"max_tokens float zero fraction", withUser(`"max_tokens":10.0`), "max_tokens", iv},
		{"max_tokens exponent", withUser(`"max_tokens":1e3`), "max_tokens", iv},
		{"max_tokens string", withUser(`"max_tokens":"10"`), "max_tokens", iv},
		{"max_tokens zero", withUser(`"max_tokens":0`), "max_tokens", iv},
		{"max_tokens negative", withUser(`"max_tokens":-5`), "max_tokens", iv},
		{"max_completion_tokens zero", withUser(`"max_completion_tokens":0`), "max_completion_tokens", iv},
		{"max_completion_tokens float", withUser(`"max_completion_tokens":2.5`), "max_completion_tokens", iv},
		{"n zero", withUser(`"n":0`), "n", iv},
		{"n string", withUser(`"n":"2"`), "n", iv},
		{"n float", withUser(`"n":1.5`), "n", iv},
		{"seed float", withUser(`"seed":1.5`), "seed", iv},
		{"seed string", withUser(`"seed":"1"`), "seed", iv},
		{"top_logprobs negative", withUser(`"top_logprobs":-1`), "top_logprobs", iv},
		{"top_logprobs float", withUser(`"top_logprobs":0.5`), "top_logprobs", iv},

		// stop.
		{"stop number", withUser(`"stop":5`), "stop", iv},
		{"stop object", withUser(`"stop":{}`), "stop", iv},
		{"stop element", withUser(`"stop":["a",1]`), "stop[1]", iv},
		{"stop null element", withUser(`"stop":[null]`), "stop[0]", iv},

		// tools.
		{"tools object", withUser(`"tools":{}`), "tools", iv},
		{"tools string", withUser(`"tools":"f"`), "tools", iv},
		{"tool not object", withUser(`"tools":[1]`), "tools[0]", iv},
		{"tool without type", withUser(`"tools":[{"type":"function","function":{"name":"f"}},{"function":{"name":"g"}}]`), "tools[1].type", iv},
		{"tool without function", withUser(`"tools":[{"type":"function"}]`), "tools[0].function.name", iv},
		{"tool without name", withUser(`"tools":[{"type":"function","function":{}}]`), "tools[0].function.name", iv},
		{"tool empty name", withUser(`"tools":[{"type":"function","function":{"name":""}}]`), "tools[0].function.name", iv},
		{"tool parameters array", withUser(`"tools":[{"type":"function","function":{"name":"f","parameters":[]}}]`), "tools[0].function.parameters", iv},
		{"tool parameters string", withUser(`"tools":[{"type":"function","function":{"name":"f","parameters":"{}"}}]`), "tools[0].function.parameters", iv},

		// tool_choice.
		{"tool_choice unknown string", withUser(`"tool_choice":"always"`), "tool_choice", iv},
		{"tool_choice number", withUser(`"tool_choice":1`), "tool_choice", iv},
		{"tool_choice array", withUser(`"tool_choice":["auto"]`), "tool_choice", iv},
		{"tool_choice function without name", withUser(`"tool_choice":{"type":"function","function":{}}`), "tool_choice.function.name", iv},
		{"tool_choice function name number", withUser(`"tool_choice":{"type":"function","function":{"name":1}}`), "tool_choice.function.name", iv},

		// booleans, objects and strings.
		{"parallel_tool_calls string", withUser(`"parallel_tool_calls":"no"`), "parallel_tool_calls", iv},
		{"parallel_tool_calls number", withUser(`"parallel_tool_calls":0`), "parallel_tool_calls", iv},
		{"logprobs string", withUser(`"logprobs":"true"`), "logprobs", iv},
		{"store number", withUser(`"store":1`), "store", iv},
		{"response_format string", withUser(`"response_format":"json"`), "response_format", iv},
		{"response_format without type", withUser(`"response_format":{}`), "response_format", iv},
		{"response_format type number", withUser(`"response_format":{"type":1}`), "response_format", iv},
		{"user number", withUser(`"user":7`), "user", iv},
		{"safety_identifier object", withUser(`"safety_identifier":{}`), "safety_identifier", iv},
		{"prompt_cache_key number", withUser(`"prompt_cache_key":1`), "prompt_cache_key", iv},
		{"reasoning_effort boolean", withUser(`"reasoning_effort":true`), "reasoning_effort", iv},
		{"service_tier array", withUser(`"service_tier":[]`), "service_tier", iv},
		{"metadata array", withUser(`"metadata":[]`), "metadata", iv},
		{"metadata string", withUser(`"metadata":"k=v"`), "metadata", iv},
		{"logit_bias array", withUser(`"logit_bias":[1]`), "logit_bias", iv},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ValidateChat([]byte(tc.body))
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v, want *Error", err)
			}
			if e.Status != 400 || e.Type != "invalid_request_error" || e.Param != tc.param || e.Code != tc.code || e.Message == "" {
				t.Errorf("got %+v, want param %q code %q", e, tc.param, tc.code)
			}
			// The client gets OpenAI's shape with this param.
			var got struct {
				Error struct {
					Type  string  `json:"type"`
					Param *string `json:"param"`
				} `json:"error"`
			}
			if err := json.Unmarshal(e.JSON(), &got); err != nil {
				t.Fatalf("%s: %v", e.JSON(), err)
			}
			if p := got.Error.Param; got.Error.Type != "invalid_request_error" || (p == nil) != (tc.param == "") || p != nil && *p != tc.param {
				t.Errorf("body %s, want param %q", e.JSON(), tc.param)
			}
		})
	}
}

// TestValidateChatFirstError checks that the first offending field, in the
// body's order, is the one reported.
func TestValidateChatFirstError(t *testing.T) {
	body := `{"temperature":"x","model":1,"messages":[]}`
	_, err := ValidateChat([]byte(body))
	var e *Error
	if !errors.As(err, &e) || e.Param != "temperature" {
		t.Fatalf("got %v, want the temperature error", err)
	}
}

func BenchmarkValidateChat(b *testing.B) {
	body := []byte(`{"model":"oa/gpt-4o","temperature":0.3,"max_tokens":256,"stream":true,"stream_options":{"include_usage":true},` +
		`"tools":[{"type":"function","function":{"name":"search","description":"search the web","parameters":{"type":"object","properties":{"q":{"type":"string"}}}}}],` +
		`"messages":[{"role":"system","content":"You are helpful."},{"role":"user","content":"Find the weather in Paris and in Berlin, then compare them."},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"search","arguments":"{\"q\":\"Paris weather\"}"}}]},` +
		`{"role":"tool","tool_call_id":"c1","content":"Sunny, 21 C"},{"role":"user","content":[{"type":"text","text":"And Berlin?"}]}]}`)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := ValidateChat(body); err != nil {
			b.Fatal(err)
		}
	}
}

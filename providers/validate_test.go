package providers

import (
	"errors"
	"testing"
)

func TestValidateChatAccepts(t *testing.T) {
	for _, tc := range []struct {
		name, body          string
		model               string
		stream, includeUsge bool
	}{
		{"minimal", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, "m", false, false},
		{"multimodal", `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"what is this"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA","detail":"low"}}]}]}`, "m", false, false},
		{"assistant tool call, null content", `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"42"}]}`, "m", false, false},
		{"system and developer", `{"model":"m","messages":[{"role":"system","content":"s"},{"role":"developer","content":[{"type":"text","text":"d"}]},{"role":"user","content":"hi","name":"bob"}]}`, "m", false, false},
		{"stream with usage", `{"model":"p/m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`, "p/m", true, true},
		{"stream null options", `{"model":"m","stream":true,"stream_options":null,"messages":[{"role":"user","content":"hi"}]}`, "m", true, false},
		{"tools", `{"model":"m","tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":{"type":"function","function":{"name":"f"}},"parallel_tool_calls":false,"messages":[{"role":"user","content":"hi"}]}`, "m", false, false},
		{"tool_choice string", `{"model":"m","tool_choice":"required","messages":[{"role":"user","content":"hi"}]}`, "m", false, false},
		{"numbers and nulls", `{"model":"m","temperature":0.5,"top_p":null,"max_tokens":10,"max_completion_tokens":null,"n":1,"seed":-3,"stop":["a","b"],"user":"u","metadata":{"k":"v"},"response_format":{"type":"json_object"},"messages":[{"role":"user","content":"hi"}]}`, "m", false, false},
		{"unknown fields pass", `{"model":"m","future_option":{"x":1},"messages":[{"role":"user","content":"hi"}]}`, "m", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			info, err := ValidateChat([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if info.Model != tc.model || info.Stream != tc.stream || info.IncludeUsage != tc.includeUsge {
				t.Errorf("info %+v", info)
			}
		})
	}
}

func TestValidateChatRejects(t *testing.T) {
	const user = `[{"role":"user","content":"hi"}]`
	for _, tc := range []struct {
		name, body, param, code string
	}{
		{"invalid json", `{"model":`, "", "invalid_json"},
		{"not an object", `["model"]`, "", "invalid_json"},
		{"no model", `{"messages":` + user + `}`, "model", "invalid_value"},
		{"empty model", `{"model":"","messages":` + user + `}`, "model", "invalid_value"},
		{"model not string", `{"model":1,"messages":` + user + `}`, "model", "invalid_value"},
		{"no messages", `{"model":"m"}`, "messages", "invalid_value"},
		{"messages not array", `{"model":"m","messages":{}}`, "messages", "invalid_value"},
		{"empty messages", `{"model":"m","messages":[]}`, "messages", "invalid_value"},
		{"message not object", `{"model":"m","messages":["hi"]}`, "messages[0]", "invalid_value"},
		{"no role", `{"model":"m","messages":[{"content":"hi"}]}`, "messages[0].role", "invalid_value"},
		{"unknown role", `{"model":"m","messages":[{"role":"user","content":"a"},{"role":"robot","content":"b"}]}`, "messages[1].role", "invalid_value"},
		{"no content", `{"model":"m","messages":[{"role":"user"}]}`, "messages[0].content", "invalid_value"},
		{"content number", `{"model":"m","messages":[{"role":"user","content":5}]}`, "messages[0].content", "invalid_value"},
		{"unknown part", `{"model":"m","messages":[{"role":"user","content":[{"type":"video"}]}]}`, "messages[0].content[0].type", "invalid_value"},
		{"part without type", `{"model":"m","messages":[{"role":"user","content":[{"text":"x"}]}]}`, "messages[0].content[0]", "invalid_value"},
		{"text part without text", `{"model":"m","messages":[{"role":"user","content":[{"type":"text"}]}]}`, "messages[0].content[0].text", "invalid_value"},
		{"image without url", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{}}]}]}`, "messages[0].content[0].image_url.url", "invalid_value"},
		{"image in system", `{"model":"m","messages":[{"role":"system","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`, "messages[0].content[0].type", "invalid_value"},
		{"image in assistant", `{"model":"m","messages":[{"role":"assistant","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`, "messages[0].content[0].type", "invalid_value"},
		{"tool without id", `{"model":"m","messages":[{"role":"tool","content":"x"}]}`, "messages[0].tool_call_id", "invalid_value"},
		{"assistant empty", `{"model":"m","messages":[{"role":"assistant"}]}`, "messages[0].content", "invalid_value"},
		{"tool_calls not array", `{"model":"m","messages":[{"role":"assistant","tool_calls":{}}]}`, "messages[0].tool_calls", "invalid_value"},
		{"tool call without id", `{"model":"m","messages":[{"role":"assistant","tool_calls":[{"function":{"name":"f"}}]}]}`, "messages[0].tool_calls[0].id", "invalid_value"},
		{"arguments object", `{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":{}}}]}]}`, "messages[0].tool_calls[0].function.arguments", "invalid_value"},
		{"stream string", `{"model":"m","stream":"yes","messages":` + user + `}`, "stream", "invalid_value"},
		{"stream_options array", `{"model":"m","stream_options":[],"messages":` + user + `}`, "stream_options", "invalid_value"},
		{"include_usage string", `{"model":"m","stream_options":{"include_usage":"y"},"messages":` + user + `}`, "stream_options.include_usage", "invalid_value"},
		{"temperature string", `{"model":"m","temperature":"hot","messages":` + user + `}`, "temperature", "invalid_value"},
		{"max_tokens float", `{"model":"m","max_tokens":1.5,"messages":` + user + `}`, "max_tokens", "invalid_value"},
		{"max_tokens string", `{"model":"m","max_tokens":"10","messages":` + user + `}`, "max_tokens", "invalid_value"},
		{"max_tokens zero", `{"model":"m","max_tokens":0,"messages":` + user + `}`, "max_tokens", "invalid_value"},
		{"n zero", `{"model":"m","n":0,"messages":` + user + `}`, "n", "invalid_value"},
		{"top_logprobs negative", `{"model":"m","top_logprobs":-1,"messages":` + user + `}`, "top_logprobs", "invalid_value"},
		{"stop number", `{"model":"m","stop":5,"messages":` + user + `}`, "stop", "invalid_value"},
		{"stop element", `{"model":"m","stop":["a",1],"messages":` + user + `}`, "stop[1]", "invalid_value"},
		{"tools object", `{"model":"m","tools":{},"messages":` + user + `}`, "tools", "invalid_value"},
		{"tool not object", `{"model":"m","tools":[1],"messages":` + user + `}`, "tools[0]", "invalid_value"},
		{"tool without name", `{"model":"m","tools":[{"type":"function","function":{}}],"messages":` + user + `}`, "tools[0].function.name", "invalid_value"},
		{"tool parameters array", `{"model":"m","tools":[{"type":"function","function":{"name":"f","parameters":[]}}],"messages":` + user + `}`, "tools[0].function.parameters", "invalid_value"},
		{"tool_choice unknown", `{"model":"m","tool_choice":"always","messages":` + user + `}`, "tool_choice", "invalid_value"},
		{"tool_choice number", `{"model":"m","tool_choice":1,"messages":` + user + `}`, "tool_choice", "invalid_value"},
		{"tool_choice no name", `{"model":"m","tool_choice":{"type":"function","function":{}},"messages":` + user + `}`, "tool_choice.function.name", "invalid_value"},
		{"parallel string", `{"model":"m","parallel_tool_calls":"no","messages":` + user + `}`, "parallel_tool_calls", "invalid_value"},
		{"response_format string", `{"model":"m","response_format":"json","messages":` + user + `}`, "response_format", "invalid_value"},
		{"user number", `{"model":"m","user":7,"messages":` + user + `}`, "user", "invalid_value"},
		{"metadata array", `{"model":"m","metadata":[],"messages":` + user + `}`, "metadata", "invalid_value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ValidateChat([]byte(tc.body))
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v, want *Error", err)
			}
			if e.Status != 400 || e.Type != "invalid_request_error" || e.Param != tc.param || e.Code != tc.code || e.Message == "" {
				t.Errorf("got %+v, want param %q code %q", e, tc.param, tc.code)
			}
		})
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

package providertest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/respjson"
	"github.com/tidwall/gjson"
)

const oaTools = `[{"type":"function","function":{"name":"search","parameters":{"type":"object","properties":{"query":{"type":"string"}}}}},` +
	`{"type":"function","function":{"name":"lookup","parameters":{"type":"object"}}}]`

// oaCases are OpenAI requests and what the fake answers them.
var oaCases = []struct {
	name, body string
	text       string // the answer text, when it is text
	tool       string // the tool called, when it is a call
	query      string // the call's query argument
	finish     string
	prompt     int64
	completion int64
}{
	{name: "echo", body: `{"model":"gpt-4o","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hello there world"}]}`,
		text: "echo: hello there world", finish: "stop", prompt: 5, completion: 4},
	{name: "developer and parts", body: `{"model":"gpt-4o","messages":[{"role":"developer","content":[{"type":"text","text":"rules"}]},{"role":"user","content":[{"type":"text","text":"part one"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AA=="}},{"type":"text","text":"part two"}]}]}`,
		text: "echo: part one part two", finish: "stop", prompt: 5, completion: 5},
	{name: "last user turn", body: `{"model":"gpt-4o","messages":[{"role":"user","content":"old"},{"role":"assistant","content":"echo: old"},{"role":"user","content":"new"}]}`,
		text: "echo: new", finish: "stop", prompt: 4, completion: 2},
	{name: "tool offered", body: `{"model":"gpt-4o","tools":` + oaTools + `,"messages":[{"role":"user","content":"weather in \"Paris\""}]}`,
		tool: "search", query: `weather in "Paris"`, finish: "tool_calls", prompt: 3, completion: 1},
	{name: "tool_choice names a tool", body: `{"model":"gpt-4o","tools":` + oaTools + `,"tool_choice":{"type":"function","function":{"name":"lookup"}},"messages":[{"role":"user","content":"q"}]}`,
		tool: "lookup", query: "q", finish: "tool_calls", prompt: 1, completion: 1},
	{name: "tool_choice required", body: `{"model":"gpt-4o","tools":` + oaTools + `,"tool_choice":"required","messages":[{"role":"user","content":"q"}]}`,
		tool: "search", query: "q", finish: "tool_calls", prompt: 1, completion: 1},
	{name: "tool_choice none", body: `{"model":"gpt-4o","tools":` + oaTools + `,"tool_choice":"none","messages":[{"role":"user","content":"no tools"}]}`,
		text: "echo: no tools", finish: "stop", prompt: 2, completion: 3},
	{name: "non-ASCII tool query", body: `{"model":"gpt-4o","tools":` + oaTools + `,"messages":[{"role":"user","content":"東京東京東京東京東京 crème"}]}`,
		tool: "search", query: "東京東京東京東京東京 crème", finish: "tool_calls", prompt: 2, completion: 1},
	{name: "tool result", body: `{"model":"gpt-4o","tools":` + oaTools + `,"messages":[{"role":"user","content":"weather?"},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"search","arguments":"{\"query\":\"weather?\"}"}}]},` +
		`{"role":"tool","tool_call_id":"call_1","content":"sunny and 20C"}]}`,
		text: "tool said: sunny and 20C", finish: "stop", prompt: 4, completion: 5},
	{name: "max_tokens", body: `{"model":"gpt-4o","max_tokens":2,"messages":[{"role":"user","content":"one two three four"}]}`,
		text: "echo: one", finish: "length", prompt: 4, completion: 2},
	{name: "max_completion_tokens", body: `{"model":"gpt-4o","max_completion_tokens":3,"messages":[{"role":"user","content":"one two three four"}]}`,
		text: "echo: one two", finish: "length", prompt: 4, completion: 3},
	{name: "max_tokens not reached", body: `{"model":"gpt-4o","max_tokens":3,"messages":[{"role":"user","content":"one two"}]}`,
		text: "echo: one two", finish: "stop", prompt: 2, completion: 3},
}

func TestOpenAIAnswer(t *testing.T) {
	s := newFake(t)
	for _, tc := range oaCases {
		t.Run(tc.name, func(t *testing.T) {
			before := time.Now().Unix()
			r := answerOf(t, s, oaPath, tc.body, "X-Request-Id")
			// The required fields of a chat.completion (A.1).
			if id := r.Get("id"); id.Type != gjson.String || !strings.HasPrefix(id.Str, "chatcmpl-") {
				t.Errorf("id %s", id.Raw)
			}
			if r.Get("object").Str != "chat.completion" {
				t.Errorf("object %s", r.Get("object").Raw)
			}
			if c := r.Get("created"); c.Type != gjson.Number || c.Int() < before || c.Int() > time.Now().Unix()+1 {
				t.Errorf("created %s", c.Raw)
			}
			if r.Get("model").Str != gjson.Get(tc.body, "model").Str {
				t.Errorf("model %s", r.Get("model").Raw)
			}
			if n := len(r.Get("choices").Array()); n != 1 {
				t.Fatalf("%d choices", n)
			}
			c := r.Get("choices.0")
			if i := c.Get("index"); i.Type != gjson.Number || i.Int() != 0 {
				t.Errorf("index %s", i.Raw)
			}
			if lp := c.Get("logprobs"); !lp.Exists() || lp.Type != gjson.Null {
				t.Errorf("logprobs %q", lp.Raw)
			}
			if c.Get("finish_reason").Str != tc.finish {
				t.Errorf("finish_reason %s, want %s", c.Get("finish_reason").Raw, tc.finish)
			}
			m := c.Get("message")
			if m.Get("role").Str != "assistant" {
				t.Errorf("role %s", m.Get("role").Raw)
			}
			if rf := m.Get("refusal"); !rf.Exists() || rf.Type != gjson.Null {
				t.Errorf("refusal %q", rf.Raw)
			}
			content := m.Get("content")
			if tc.tool == "" {
				if content.Type != gjson.String || content.Str != tc.text {
					t.Errorf("content %s, want %q", content.Raw, tc.text)
				}
				if m.Get("tool_calls").Exists() {
					t.Errorf("tool_calls in a text answer: %s", m.Raw)
				}
			} else {
				if !content.Exists() || content.Type != gjson.Null {
					t.Errorf("content %q, want null beside tool_calls", content.Raw)
				}
				calls := m.Get("tool_calls").Array()
				if len(calls) != 1 {
					t.Fatalf("tool_calls %s", m.Get("tool_calls").Raw)
				}
				call := calls[0]
				args := call.Get("function.arguments")
				if call.Get("id").Str == "" || call.Get("type").Str != "function" || call.Get("function.name").Str != tc.tool {
					t.Errorf("tool call %s", call.Raw)
				}
				// arguments is a JSON-encoded string, not an object.
				if args.Type != gjson.String || !gjson.Valid(args.Str) || gjson.Get(args.Str, "query").Str != tc.query {
					t.Errorf("arguments %s, want a JSON string with query %q", args.Raw, tc.query)
				}
			}
			u := r.Get("usage")
			pt, ct, tt := u.Get("prompt_tokens"), u.Get("completion_tokens"), u.Get("total_tokens")
			if pt.Type != gjson.Number || ct.Type != gjson.Number || tt.Type != gjson.Number || tt.Int() != pt.Int()+ct.Int() {
				t.Errorf("usage %s", u.Raw)
			}
			if pt.Int() != tc.prompt || ct.Int() != tc.completion {
				t.Errorf("usage %d+%d, want %d+%d", pt.Int(), ct.Int(), tc.prompt, tc.completion)
			}
		})
	}
}

// oaStream is what an OpenAI stream adds up to.
type oaStream struct {
	chunks               []gjson.Result // every chunk but [DONE]
	done                 bool
	content, args        string
	toolName, toolID     string
	finish               string
	finishes             int
	usage                gjson.Result // from the choices:[] usage chunk
	usageChunks          int
	nullUsage, noUsage   int // chunks with "usage":null, without usage
	firstRole, toolFrags int
}

// readOpenAIStream parses an OpenAI stream strictly: data-only events,
// chunks sharing id and created, and nothing after [DONE].
func readOpenAIStream(t *testing.T, body string) *oaStream {
	t.Helper()
	st := &oaStream{}
	evs := parseSSE(t, body)
	for i, ev := range evs {
		if ev.name != "" {
			t.Errorf("OpenAI event with a name: %q", ev.name)
		}
		if st.done {
			t.Errorf("event after [DONE]: %s", ev.data)
		}
		if ev.data == "[DONE]" {
			st.done = true
			continue
		}
		c := gjson.Parse(ev.data)
		if c.Get("object").Str != "chat.completion.chunk" || !strings.HasPrefix(c.Get("id").Str, "chatcmpl-") ||
			c.Get("created").Type != gjson.Number || c.Get("model").Str == "" {
			t.Errorf("chunk %d: %s", i, ev.data)
		}
		if len(st.chunks) > 0 && (c.Get("id").Str != st.chunks[0].Get("id").Str || c.Get("created").Int() != st.chunks[0].Get("created").Int()) {
			t.Errorf("chunk %d has another id or created: %s", i, ev.data)
		}
		st.chunks = append(st.chunks, c)
		switch u := c.Get("usage"); {
		case !u.Exists():
			st.noUsage++
		case u.Type == gjson.Null:
			st.nullUsage++
		default:
			st.usageChunks++
			st.usage = u
			if !c.Get("choices").IsArray() || len(c.Get("choices").Array()) != 0 {
				t.Errorf("usage chunk with choices: %s", ev.data)
			}
			continue
		}
		choices := c.Get("choices").Array()
		if len(choices) != 1 || choices[0].Get("index").Int() != 0 || !choices[0].Get("delta").IsObject() {
			t.Errorf("chunk %d choices: %s", i, ev.data)
			continue
		}
		ch := choices[0]
		if len(st.chunks) == 1 && ch.Get("delta.role").Str == "assistant" {
			st.firstRole++
		}
		if f := ch.Get("finish_reason"); f.Type != gjson.Null {
			st.finishes++
			st.finish = f.Str
			if ch.Get("delta").Raw != "{}" {
				t.Errorf("finish chunk with a delta: %s", ev.data)
			}
		}
		st.content += ch.Get("delta.content").Str
		for _, tc := range ch.Get("delta.tool_calls").Array() {
			if !tc.Get("index").Exists() || tc.Get("index").Int() != 0 {
				t.Errorf("tool call fragment without index 0: %s", tc.Raw)
			}
			if id := tc.Get("id").Str; id != "" {
				if st.toolID != "" || tc.Get("type").Str != "function" || tc.Get("function.name").Str == "" {
					t.Errorf("bad first tool call fragment: %s", tc.Raw)
				}
				st.toolID, st.toolName = id, tc.Get("function.name").Str
			} else if st.toolID == "" || tc.Get("function.name").Exists() {
				t.Errorf("tool call fragment before or besides the first: %s", tc.Raw)
			}
			st.args += tc.Get("function.arguments").Str
			st.toolFrags++
		}
	}
	return st
}

func TestOpenAIStream(t *testing.T) {
	s := newFake(t)
	for _, tc := range oaCases {
		for _, includeUsage := range []bool{false, true} {
			name := tc.name
			if includeUsage {
				name += " include_usage"
			}
			t.Run(name, func(t *testing.T) {
				_, plain := post(t, s, oaPath, tc.body, oaAuth...)
				want := gjson.Parse(plain)
				body := streamed(t, tc.body)
				if includeUsage {
					body = streamed(t, tc.body, "stream_options.include_usage", true)
				}
				res, got := post(t, s, oaPath, body, oaAuth...)
				if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
					t.Fatalf("%d %s %s", res.StatusCode, res.Header.Get("Content-Type"), got)
				}
				st := readOpenAIStream(t, got)
				if !st.done {
					t.Errorf("no [DONE]: %s", got)
				}
				if st.firstRole != 1 {
					t.Errorf("the first chunk does not carry role assistant: %s", got)
				}
				if st.finishes != 1 || st.finish != tc.finish {
					t.Errorf("%d finish chunks, finish %q, want one %q", st.finishes, st.finish, tc.finish)
				}
				if st.content != want.Get("choices.0.message.content").Str || (tc.tool == "" && st.content != tc.text) {
					t.Errorf("streamed content %q, want %q", st.content, tc.text)
				}
				if tc.tool != "" {
					call := want.Get("choices.0.message.tool_calls.0")
					if st.toolName != tc.tool || st.toolID == "" || st.args != call.Get("function.arguments").Str ||
						!gjson.Valid(st.args) || gjson.Get(st.args, "query").Str != tc.query {
						t.Errorf("streamed call %s(%s) id %q, want %s(%s)", st.toolName, st.args, st.toolID, tc.tool, call.Get("function.arguments").Str)
					}
					if st.toolFrags < 3 {
						t.Errorf("arguments in %d fragments, want them split", st.toolFrags)
					}
				}
				if !includeUsage {
					if st.usageChunks != 0 || st.nullUsage != 0 {
						t.Errorf("usage without include_usage: %s", got)
					}
					return
				}
				if st.usageChunks != 1 || st.noUsage != 0 || st.nullUsage != len(st.chunks)-1 {
					t.Errorf("usage chunks %d, null %d, missing %d of %d", st.usageChunks, st.nullUsage, st.noUsage, len(st.chunks))
				}
				if last := st.chunks[len(st.chunks)-1]; last.Get("usage").Type == gjson.Null {
					t.Error("the usage chunk is not the last before [DONE]")
				}
				for _, k := range []string{"prompt_tokens", "completion_tokens", "total_tokens"} {
					if st.usage.Get(k).Int() != want.Get("usage."+k).Int() {
						t.Errorf("streamed usage %s, want %s", st.usage.Raw, want.Get("usage").Raw)
					}
				}
			})
		}
	}
}

func TestOpenAIStrictness(t *testing.T) {
	s := newFake(t)
	for _, tc := range []struct{ name, body string }{
		{"empty messages", `{"model":"gpt","messages":[]}`},
		{"no messages", `{"model":"gpt"}`},
		{"messages not an array", `{"model":"gpt","messages":"hi"}`},
		{"unknown role", `{"model":"gpt","messages":[{"role":"robot","content":"hi"}]}`},
		{"no role", `{"model":"gpt","messages":[{"content":"hi"}]}`},
		{"unknown role later", `{"model":"gpt","messages":[{"role":"user","content":"hi"},{"role":"model","content":"x"}]}`},
		{"non-JSON", `model=gpt&messages=hi`},
		{"truncated JSON", `{"model":"gpt","messages":[{"role":"user","content":"hi"}]`},
		{"JSON array", `[{"model":"gpt"}]`},
		{"empty body", ``},
		{"no model", `{"messages":[{"role":"user","content":"hi"}]}`},
		{"model not a string", `{"model":4,"messages":[{"role":"user","content":"hi"}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, body := post(t, s, oaPath, tc.body, oaAuth...)
			if res.StatusCode != 400 || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
				t.Fatalf("%d %s, want 400", res.StatusCode, body)
			}
			checkOpenAIError(t, body, "invalid_request_error")
		})
	}
}

// TestOpenAISDK drives the OpenAI route with the official Go SDK.
func TestOpenAISDK(t *testing.T) {
	s := newFake(t)
	ctx := context.Background()
	client := openai.NewClient(option.WithBaseURL(s.URL+"/v1/"), option.WithAPIKey("ok"), option.WithMaxRetries(0))

	t.Run("text", func(t *testing.T) {
		params := openai.ChatCompletionNewParams{
			Model:    "gpt-4o",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("be brief"), openai.UserMessage("hello sdk")},
		}
		res, err := client.Chat.Completions.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		msg := res.Choices[0].Message
		if res.ID == "" || res.Object != "chat.completion" || res.Model != "gpt-4o" || res.Created == 0 ||
			msg.Content != "echo: hello sdk" || res.Choices[0].FinishReason != "stop" ||
			res.Usage.PromptTokens != 4 || res.Usage.CompletionTokens != 3 || res.Usage.TotalTokens != 7 {
			t.Errorf("%s", res.RawJSON())
		}
		// The SDK saw every required field, and refusal as an explicit null.
		if !res.JSON.ID.Valid() || !res.JSON.Object.Valid() || !res.JSON.Created.Valid() || !res.JSON.Model.Valid() ||
			!res.JSON.Choices.Valid() || !res.Choices[0].JSON.Index.Valid() || !res.Choices[0].JSON.FinishReason.Valid() ||
			res.Choices[0].JSON.Logprobs.Raw() != respjson.Null || !msg.JSON.Role.Valid() || !msg.JSON.Content.Valid() ||
			msg.JSON.Refusal.Raw() != respjson.Null || !res.JSON.Usage.Valid() {
			t.Errorf("fields missing for the SDK: %s", res.RawJSON())
		}

		params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		stream := client.Chat.Completions.NewStreaming(ctx, params)
		var acc openai.ChatCompletionAccumulator
		finished := false
		for stream.Next() {
			if !acc.AddChunk(stream.Current()) {
				t.Fatalf("the accumulator refused %s", stream.Current().RawJSON())
			}
			if content, ok := acc.JustFinishedContent(); ok {
				finished = content == "echo: hello sdk"
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(acc.ID, "chatcmpl-") || acc.Object != "chat.completion" || acc.Model != "gpt-4o" || len(acc.Choices) != 1 ||
			acc.Choices[0].Message.Content != msg.Content || acc.Choices[0].FinishReason != "stop" ||
			acc.Usage.TotalTokens != res.Usage.TotalTokens || acc.Usage.PromptTokens != res.Usage.PromptTokens {
			t.Errorf("accumulated %+v usage %+v", acc.Choices, acc.Usage)
		}
		if !finished {
			t.Error("JustFinishedContent never reported the content")
		}
	})

	t.Run("tool call", func(t *testing.T) {
		params := openai.ChatCompletionNewParams{
			Model:    "gpt-4o",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("météo à Genève ☔☔")},
			Tools: []openai.ChatCompletionToolUnionParam{
				openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{Name: "search"}),
				openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{Name: "lookup"}),
			},
			ToolChoice: openai.ToolChoiceOptionFunctionToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: "lookup"}),
		}
		res, err := client.Chat.Completions.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		calls := res.Choices[0].Message.ToolCalls
		if len(calls) != 1 || calls[0].Function.Name != "lookup" || gjson.Get(calls[0].Function.Arguments, "query").Str != "météo à Genève ☔☔" ||
			res.Choices[0].FinishReason != "tool_calls" {
			t.Errorf("%s", res.RawJSON())
		}

		stream := client.Chat.Completions.NewStreaming(ctx, params)
		var acc openai.ChatCompletionAccumulator
		var justFinished string
		for stream.Next() {
			if !acc.AddChunk(stream.Current()) {
				t.Fatalf("the accumulator refused %s", stream.Current().RawJSON())
			}
			if tc, ok := acc.JustFinishedToolCall(); ok {
				justFinished = tc.Arguments
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		got := acc.Choices[0].Message.ToolCalls
		if len(got) != 1 || !strings.HasPrefix(got[0].ID, "call_") || got[0].Function.Name != "lookup" ||
			got[0].Function.Arguments != calls[0].Function.Arguments || acc.Choices[0].FinishReason != "tool_calls" {
			t.Errorf("accumulated %+v, want %+v", got, calls)
		}
		if justFinished != calls[0].Function.Arguments {
			t.Errorf("JustFinishedToolCall arguments %q", justFinished)
		}
	})

	t.Run("tool result", func(t *testing.T) {
		params := openai.ChatCompletionNewParams{
			Model: "gpt-4o",
			Messages: []openai.ChatCompletionMessageParamUnion{
				openai.UserMessage("weather?"),
				{OfAssistant: &openai.ChatCompletionAssistantMessageParam{
					ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{{
						OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
							ID:       "call_1",
							Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "search", Arguments: `{"query":"weather?"}`},
						},
					}},
				}},
				openai.ToolMessage("rain", "call_1"),
			},
		}
		res, err := client.Chat.Completions.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		if res.Choices[0].Message.Content != "tool said: rain" {
			t.Errorf("%s", res.RawJSON())
		}
	})

	t.Run("errors", func(t *testing.T) {
		params := openai.ChatCompletionNewParams{Model: "gpt-4o", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}
		wrong := openai.NewClient(option.WithBaseURL(s.URL+"/v1/"), option.WithAPIKey("bad"), option.WithMaxRetries(0))
		_, err := wrong.Chat.Completions.New(ctx, params)
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 401 || apiErr.Code != "invalid_api_key" ||
			apiErr.Type != "invalid_request_error" || apiErr.Message == "" {
			t.Errorf("wrong key: %v", err)
		}

		params.Model = "fail-429"
		_, err = client.Chat.Completions.New(ctx, params)
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 || apiErr.Response.Header.Get("Retry-After") != "1" {
			t.Errorf("fail-429: %v", err)
		}

		params.Model = "midstream-error"
		stream := client.Chat.Completions.NewStreaming(ctx, params)
		n := 0
		for stream.Next() {
			n++
		}
		if err := stream.Err(); err == nil || !strings.Contains(err.Error(), "server_error") || n == 0 {
			t.Errorf("midstream-error after %d chunks: %v", n, err)
		}
	})
}

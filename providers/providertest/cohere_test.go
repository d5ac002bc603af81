package providertest

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	cohere "github.com/cohere-ai/cohere-go/v2"
	cohereclient "github.com/cohere-ai/cohere-go/v2/client"
	cohereoption "github.com/cohere-ai/cohere-go/v2/option"
	"github.com/tidwall/gjson"
)

const coTools = `[{"type":"function","function":{"name":"search","description":"web search","parameters":{"type":"object","properties":{"query":{"type":"string"}}}}},` +
	`{"type":"function","function":{"name":"lookup","parameters":{"type":"object","properties":{}}}}]`

// coToolTurns is a user question, the assistant's call of search and its
// result.
const coToolTurns = `{"role":"user","content":"weather?"},` +
	`{"role":"assistant","tool_plan":"I will search.","tool_calls":[{"id":"search_1","type":"function","function":{"name":"search","arguments":"{\"query\":\"weather?\"}"}}]},` +
	`{"role":"tool","tool_call_id":"search_1","content":[{"type":"text","text":"sunny"},{"type":"document","document":{"data":{"temp":"24"}}}]}`

// coCases are Cohere chat requests and what the fake answers them.
var coCases = []struct {
	name, body string
	text       string // the answer text, when it is text
	tool, plan string // the tool called and the plan, when it is a call
	thinking   string
	finish     string
	input      int
	output     int
}{
	{name: "echo", body: `{"model":"command-a","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi there"}]}`,
		text: "echo: hi there", finish: "COMPLETE", input: 4, output: 3},
	{name: "content items", body: `{"model":"command-a","messages":[{"role":"system","content":[{"type":"text","text":"sys"}]},{"role":"user","content":[{"type":"text","text":"a b"},` +
		`{"type":"image_url","image_url":{"url":"data:image/png;base64,AA==","detail":"low"}},{"type":"image_url","image_url":{"url":"https://x/y.png"}},{"type":"text","text":"c"}]}]}`,
		text: "echo: a b c", finish: "COMPLETE", input: 4, output: 4},
	{name: "tool offered", body: `{"model":"command-a","tools":` + coTools + `,"messages":[{"role":"user","content":"find \"this\""}]}`,
		tool: "search", plan: "I will call search.", finish: "TOOL_CALL", input: 2, output: 5},
	{name: "tool_choice REQUIRED", body: `{"model":"command-a","tools":` + coTools + `,"tool_choice":"REQUIRED","messages":[{"role":"user","content":"q"}]}`,
		tool: "search", plan: "I will call search.", finish: "TOOL_CALL", input: 1, output: 5},
	{name: "tool_choice NONE", body: `{"model":"command-a","tools":` + coTools + `,"tool_choice":"NONE","messages":[{"role":"user","content":"q"}]}`,
		text: "echo: q", finish: "COMPLETE", input: 1, output: 2},
	{name: "tool result", body: `{"model":"command-a","tools":` + coTools + `,"messages":[` + coToolTurns + `]}`,
		text: `tool said: sunny {"temp":"24"}`, finish: "COMPLETE", input: 3, output: 4},
	{name: "max_tokens", body: `{"model":"command-a","max_tokens":2,"messages":[{"role":"user","content":"one two three"}]}`,
		text: "echo: one", finish: "MAX_TOKENS", input: 3, output: 2},
	{name: "stop sequence", body: `{"model":"command-a","stop_sequences":["zz","two"],"messages":[{"role":"user","content":"one two three"}]}`,
		text: "echo: one", finish: "STOP_SEQUENCE", input: 3, output: 2},
	{name: "reasoning", body: `{"model":"command-a-reasoning-08-2025","messages":[{"role":"user","content":"why so"}]}`,
		thinking: "Thinking about: why so", text: "echo: why so", finish: "COMPLETE", input: 2, output: 7},
	{name: "reasoning budget", body: `{"model":"command-a-reasoning","thinking":{"type":"enabled","token_budget":2},"messages":[{"role":"user","content":"why so"}]}`,
		thinking: "Thinking about:", text: "echo: why so", finish: "COMPLETE", input: 2, output: 5},
	{name: "reasoning disabled", body: `{"model":"command-a-reasoning","thinking":{"type":"disabled"},"messages":[{"role":"user","content":"why so"}]}`,
		text: "echo: why so", finish: "COMPLETE", input: 2, output: 3},
	{name: "reasoning tool call", body: `{"model":"command-a-reasoning","tools":` + coTools + `,"messages":[{"role":"user","content":"q"}]}`,
		thinking: "Thinking about: q", tool: "search", finish: "TOOL_CALL", input: 1, output: 4},
	{name: "everything optional", body: `{"model":"command-a","stream":false,"temperature":0.3,"p":0.75,"k":0,"seed":7,"frequency_penalty":0.5,"presence_penalty":1,` +
		`"max_tokens":100,"safety_mode":"CONTEXTUAL","strict_tools":true,"priority":0,"messages":[{"role":"user","content":"ok"}]}`,
		text: "echo: ok", finish: "COMPLETE", input: 1, output: 2},
}

// coClient is cohere-go's client for the fake's Cohere routes.
func coClient(s *Server) *cohereclient.Client {
	return cohereclient.NewClient(cohereoption.WithBaseURL(s.URL+"/cohere"), cohereoption.WithToken("ok"))
}

// coRequest decodes a request body as cohere-go's stream request.
func coStreamRequest(t *testing.T, body string) *cohere.V2ChatStreamRequest {
	t.Helper()
	var req cohere.V2ChatStreamRequest
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		t.Fatal(err)
	}
	return &req
}

// TestCohereAnswer reads the fake's answers with cohere-go's client, as a
// Cohere user would.
func TestCohereAnswer(t *testing.T) {
	s := newFake(t)
	client := coClient(s)
	for _, tc := range coCases {
		t.Run(tc.name, func(t *testing.T) {
			var req cohere.V2ChatRequest
			if err := json.Unmarshal([]byte(tc.body), &req); err != nil {
				t.Fatal(err)
			}
			res, err := client.V2.Chat(context.Background(), &req)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Id) != 36 || string(res.FinishReason) != tc.finish || res.Message == nil {
				t.Fatalf("answer %s", res)
			}
			var text, thinking []string
			for _, item := range res.Message.Content {
				switch item.Type {
				case "text":
					text = append(text, item.Text.Text)
				case "thinking":
					thinking = append(thinking, item.Thinking.Thinking)
				}
			}
			if strings.Join(text, "") != tc.text || strings.Join(thinking, "") != tc.thinking {
				t.Errorf("text %q thinking %q, want %q %q", text, thinking, tc.text, tc.thinking)
			}
			if tc.tool == "" {
				if len(res.Message.ToolCalls) != 0 || res.Message.ToolPlan != nil {
					t.Errorf("tool calls %v", res.Message)
				}
			} else {
				calls := res.Message.ToolCalls
				if len(calls) != 1 || *calls[0].Function.Name != tc.tool || !strings.HasPrefix(calls[0].Id, tc.tool+"_") ||
					gjson.Get(*calls[0].Function.Arguments, "query").Str != gjson.Get(tc.body, "messages.@reverse.0.content").Str {
					t.Errorf("tool calls %s", res.Message)
				}
				if plan := res.Message.GetToolPlan(); (plan == nil && tc.plan != "") || (plan != nil && *plan != tc.plan) {
					t.Errorf("tool plan %v, want %q", plan, tc.plan)
				}
			}
			u := res.Usage
			if *u.Tokens.InputTokens != float64(tc.input) || *u.Tokens.OutputTokens != float64(tc.output) ||
				*u.BilledUnits.InputTokens != float64(tc.input) || *u.BilledUnits.OutputTokens != float64(tc.output) {
				t.Errorf("usage %s, want %d in %d out", u, tc.input, tc.output)
			}
		})
	}
}

// TestCohereStream reads the fake's streams with cohere-go's client: the
// events come in Cohere's order and add up to the non-streamed answer.
func TestCohereStream(t *testing.T) {
	s := newFake(t)
	client := coClient(s)
	for _, tc := range coCases {
		t.Run(tc.name, func(t *testing.T) {
			stream, err := client.V2.ChatStream(context.Background(), coStreamRequest(t, tc.body))
			if err != nil {
				t.Fatal(err)
			}
			defer stream.Close()
			var types []string
			var text, thinking, plan, args strings.Builder
			var id, callID, tool, finish string
			var usage *cohere.Usage
			for finish == "" {
				ev, err := stream.Recv()
				if err != nil {
					t.Fatalf("after %v: %v", types, err)
				}
				types = append(types, ev.Type)
				switch ev.Type {
				case "message-start":
					id = *ev.MessageStart.Id
				case "content-start":
					if typ := *ev.ContentStart.Delta.Message.Content.Type; typ != "text" && typ != "thinking" {
						t.Errorf("content-start of type %s", typ)
					}
				case "content-delta":
					c := ev.ContentDelta.Delta.Message.Content
					if c.Text != nil {
						text.WriteString(*c.Text)
					}
					if c.Thinking != nil {
						thinking.WriteString(*c.Thinking)
					}
				case "tool-plan-delta":
					plan.WriteString(*ev.ToolPlanDelta.Delta.Message.ToolPlan)
				case "tool-call-start":
					call := ev.ToolCallStart.Delta.Message.ToolCalls
					callID, tool = call.Id, *call.Function.Name
					if *ev.ToolCallStart.Index != 0 {
						t.Errorf("tool call index %d", *ev.ToolCallStart.Index)
					}
				case "tool-call-delta":
					args.WriteString(*ev.ToolCallDelta.Delta.Message.ToolCalls.Function.Arguments)
				case "message-end":
					finish = string(*ev.MessageEnd.Delta.FinishReason)
					usage = ev.MessageEnd.Delta.Usage
				}
			}
			if types[0] != "message-start" || len(id) != 36 {
				t.Errorf("events %v, id %q", types, id)
			}
			if text.String() != tc.text || thinking.String() != tc.thinking || plan.String() != tc.plan || tool != tc.tool || finish != tc.finish {
				t.Errorf("text %q thinking %q plan %q tool %q finish %s; events %v", text.String(), thinking.String(), plan.String(), tool, finish, types)
			}
			if tc.tool != "" && (!strings.HasPrefix(callID, tc.tool+"_") || !json.Valid([]byte(args.String()))) {
				t.Errorf("tool call %q arguments %q", callID, args.String())
			}
			if *usage.Tokens.InputTokens != float64(tc.input) || *usage.Tokens.OutputTokens != float64(tc.output) {
				t.Errorf("usage %s", usage)
			}
		})
	}

	t.Run("framing", func(t *testing.T) {
		res, body := post(t, s, cohereChatPath, `{"model":"command-a","stream":true,"messages":[{"role":"user","content":"hi"}]}`, oaAuth...)
		if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
			t.Fatalf("%d %s", res.StatusCode, body)
		}
		evs := parseSSE(t, body)
		last := evs[len(evs)-1]
		if last.name != "" || last.data != "[DONE]" || evs[len(evs)-2].name != "message-end" {
			t.Errorf("the stream does not end with message-end and data: [DONE]: %s", body)
		}
		for _, ev := range evs[:len(evs)-1] {
			if ev.name == "" || gjson.Get(ev.data, "type").Str != ev.name {
				t.Errorf("event %q with data %s", ev.name, ev.data)
			}
		}
	})
}

// TestCohereLogprobs checks logprobs in the answer and in stream deltas.
func TestCohereLogprobs(t *testing.T) {
	s := newFake(t)
	body := `{"model":"command-a","logprobs":true,"messages":[{"role":"user","content":"hi"}]}`
	res, got := post(t, s, cohereChatPath, body, oaAuth...)
	lps := gjson.Get(got, "logprobs").Array()
	if res.StatusCode != 200 || len(lps) != 2 || lps[0].Get("text").Str != "echo:" || lps[1].Get("text").Str != " hi" ||
		len(lps[1].Get("token_ids").Array()) != 3 || lps[1].Get("logprobs.0").Num != -0.5 {
		t.Errorf("%d %s", res.StatusCode, got)
	}
	res, got = post(t, s, cohereChatPath, streamed(t, body), oaAuth...)
	n := 0
	for _, ev := range parseSSE(t, got) {
		if ev.name == "content-delta" {
			n++
			if gjson.Get(ev.data, "logprobs.text").Str != gjson.Get(ev.data, "delta.message.content.text").Str {
				t.Errorf("delta %s", ev.data)
			}
		}
	}
	if res.StatusCode != 200 || n != 2 {
		t.Errorf("%d %s", res.StatusCode, got)
	}
}

// TestCohereStructuredOutput checks that a json_object answer is an
// instance of the schema asked for.
func TestCohereStructuredOutput(t *testing.T) {
	s := newFake(t)
	schema := `{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},"required":["name","age"]}`
	res, got := post(t, s, cohereChatPath, `{"model":"command-a","response_format":{"type":"json_object","json_schema":`+schema+`},`+
		`"messages":[{"role":"user","content":"Alice is 31"}]}`, oaAuth...)
	text := gjson.Get(got, "message.content.0.text").Str
	if res.StatusCode != 200 || text != string(SchemaInstance(schema, "echo: Alice is 31")) {
		t.Errorf("%d %s", res.StatusCode, got)
	}
	res, got = post(t, s, cohereChatPath, `{"model":"command-a","response_format":{"type":"json_object"},"messages":[{"role":"user","content":"hi"}]}`, oaAuth...)
	if text := gjson.Get(got, "message.content.0.text").Str; res.StatusCode != 200 || gjson.Get(text, "text").Str != "echo: hi" {
		t.Errorf("%d %s", res.StatusCode, got)
	}
}

// TestCohereMidstream checks midstream-error (message-end with ERROR, which
// cohere-go reads) and cutoff (the end after one content event).
func TestCohereMidstream(t *testing.T) {
	s := newFake(t)
	client := coClient(s)
	for _, body := range []string{
		`{"model":"midstream-error","messages":[{"role":"user","content":"alpha beta gamma"}]}`,
		`{"model":"midstream-error","tools":` + coTools + `,"messages":[{"role":"user","content":"alpha"}]}`,
		`{"model":"midstream-error-reasoning","messages":[{"role":"user","content":"alpha"}]}`,
	} {
		stream, err := client.V2.ChatStream(context.Background(), coStreamRequest(t, body))
		if err != nil {
			t.Fatal(err)
		}
		var types []string
		var last cohere.V2ChatStreamResponse
		for {
			ev, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			types, last = append(types, ev.Type), ev
		}
		stream.Close()
		deltas := 0
		for _, typ := range types {
			if strings.HasSuffix(typ, "-delta") {
				deltas++
			}
		}
		if last.Type != "message-end" || *last.MessageEnd.Delta.FinishReason != "ERROR" || last.MessageEnd.Delta.GetError() == nil || deltas != 1 {
			t.Errorf("%s: events %v, last %s", body, types, last.MessageEnd)
		}
	}
	res, got := post(t, s, cohereChatPath, `{"model":"cutoff","stream":true,"messages":[{"role":"user","content":"alpha beta"}]}`, oaAuth...)
	evs := parseSSE(t, got)
	if res.StatusCode != 200 || len(evs) != 3 || evs[2].name != "content-delta" {
		t.Errorf("cutoff: %d %s", res.StatusCode, got)
	}
}

// TestCohereRules checks each request rule of the Cohere chat route: a 400
// in Cohere's shape whose message says what is wrong.
func TestCohereRules(t *testing.T) {
	s := newFake(t)
	const msgs = `"messages":[{"role":"user","content":"hi"}]`
	const min = `"model":"command-a",` + msgs
	const call = `{"role":"user","content":"q"},{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}`
	const tools = `"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]`
	for _, tc := range []struct{ name, body, want string }{
		{"not JSON", `{"model":`, "JSON object"},
		{"invalid UTF-8", "{\"model\":\"c\",\"messages\":[{\"role\":\"user\",\"content\":\"\xff\"}]}", "JSON object"},
		{"no model", `{` + msgs + `}`, "model"},
		{"no messages", `{"model":"command-a"}`, "messages"},
		{"empty messages", `{"model":"command-a","messages":[]}`, "at least one"},
		{"OpenAI top_p", `{` + min + `,"top_p":0.5}`, "top_p"},
		{"OpenAI max_completion_tokens", `{` + min + `,"max_completion_tokens":5}`, "max_completion_tokens"},
		{"OpenAI stop", `{` + min + `,"stop":["x"]}`, "stop"},
		{"OpenAI stream_options", `{` + min + `,"stream":true,"stream_options":{"include_usage":true}}`, "stream_options"},
		{"OpenAI reasoning_effort", `{` + min + `,"reasoning_effort":"low"}`, "reasoning_effort"},
		{"OpenAI user", `{` + min + `,"user":"u"}`, "user"},
		{"stream a string", `{` + min + `,"stream":"true"}`, "stream"},
		{"p 1", `{` + min + `,"p":1}`, "p must"},
		{"p 0", `{` + min + `,"p":0}`, "p must"},
		{"k 501", `{` + min + `,"k":501}`, "k must"},
		{"k fraction", `{` + min + `,"k":1.5}`, "k must"},
		{"negative temperature", `{` + min + `,"temperature":-0.1}`, "temperature"},
		{"frequency_penalty 2", `{` + min + `,"frequency_penalty":2}`, "frequency_penalty"},
		{"presence_penalty negative", `{` + min + `,"presence_penalty":-1}`, "presence_penalty"},
		{"max_tokens 0", `{` + min + `,"max_tokens":0}`, "max_tokens"},
		{"six stop sequences", `{` + min + `,"stop_sequences":["a","b","c","d","e","f"]}`, "stop_sequences"},
		{"stop_sequences a string", `{` + min + `,"stop_sequences":"x"}`, "stop_sequences"},
		{"safety_mode lower case", `{` + min + `,"safety_mode":"strict"}`, "safety_mode"},
		{"thinking budget_tokens", `{` + min + `,"thinking":{"type":"enabled","budget_tokens":5}}`, "thinking"},
		{"thinking type", `{` + min + `,"thinking":{"type":"on"}}`, "thinking.type"},
		{"thinking budget 0", `{` + min + `,"thinking":{"type":"enabled","token_budget":0}}`, "token_budget"},
		{"response_format json_schema type", `{` + min + `,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{}}}}`, "response_format.type"},
		{"response_format schema with text", `{` + min + `,"response_format":{"type":"text","json_schema":{}}}`, "json_schema"},
		{"response_format with tools", `{` + min + `,` + tools + `,"response_format":{"type":"json_object"}}`, "not supported with tools"},
		{"response_format strict", `{` + min + `,"response_format":{"type":"json_object","strict":true}}`, "response_format"},
		{"tool_choice lower case", `{` + min + `,` + tools + `,"tool_choice":"required"}`, "tool_choice"},
		{"tool_choice auto", `{` + min + `,` + tools + `,"tool_choice":"auto"}`, "tool_choice"},
		{"tool_choice object", `{` + min + `,` + tools + `,"tool_choice":{"type":"function","function":{"name":"f"}}}`, "tool_choice"},
		{"tool_choice without tools", `{` + min + `,"tool_choice":"REQUIRED"}`, "requires tools"},
		{"tool strict", `{` + min + `,"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"},"strict":true}}]}`, "strict"},
		{"tool without parameters", `{` + min + `,"tools":[{"type":"function","function":{"name":"f"}}]}`, "parameters"},
		{"Anthropic tool", `{` + min + `,"tools":[{"name":"f","input_schema":{"type":"object"}}]}`, "name"},
		{"tools an object", `{` + min + `,"tools":{}}`, "tools must"},
		{"developer role", `{"model":"c","messages":[{"role":"developer","content":"x"},{"role":"user","content":"hi"}]}`, "role"},
		{"name on a message", `{"model":"c","messages":[{"role":"user","content":"hi","name":"al"}]}`, "name"},
		{"reasoning_content on a message", `{"model":"c","messages":[{"role":"user","content":"q"},{"role":"assistant","content":"a","reasoning_content":"r"},{"role":"user","content":"hi"}]}`, "reasoning_content"},
		{"content a number", `{"model":"c","messages":[{"role":"user","content":5}]}`, "content"},
		{"OpenAI refusal part", `{"model":"c","messages":[{"role":"user","content":"q"},{"role":"assistant","content":[{"type":"refusal","refusal":"no"}]},{"role":"user","content":"hi"}]}`, "refusal"},
		{"Anthropic image block", `{"model":"c","messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"u"}}]}]}`, "image"},
		{"image_url a file URL", `{"model":"c","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"file:///x.png"}}]}]}`, "image_url.url"},
		{"image_url detail ultra", `{"model":"c","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/y.png","detail":"ultra"}}]}]}`, "detail"},
		{"image in system", `{"model":"c","messages":[{"role":"system","content":[{"type":"image_url","image_url":{"url":"https://x/y.png"}}]},{"role":"user","content":"hi"}]}`, "not allowed"},
		{"thinking in user", `{"model":"c","messages":[{"role":"user","content":[{"type":"thinking","thinking":"x"}]}]}`, "not allowed"},
		{"assistant without content", `{"model":"c","messages":[{"role":"user","content":"q"},{"role":"assistant"},{"role":"user","content":"hi"}]}`, "content or tool_calls"},
		{"arguments an object", `{"model":"c","messages":[{"role":"user","content":"q"},{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":{}}}]},{"role":"tool","tool_call_id":"c1","content":"x"}]}`, "arguments"},
		{"arguments not JSON", `{"model":"c","messages":[{"role":"user","content":"q"},{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{"}}]},{"role":"tool","tool_call_id":"c1","content":"x"}]}`, "arguments"},
		{"tool call without type", `{"model":"c","messages":[{"role":"user","content":"q"},{"role":"assistant","tool_calls":[{"id":"c1","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"x"}]}`, "type must be function"},
		{"tool without type", `{` + min + `,"tools":[{"function":{"name":"f","parameters":{"type":"object"}}}]}`, "type must be function"},
		{"tool call without id", `{"model":"c","messages":[{"role":"user","content":"q"},{"role":"assistant","tool_calls":[{"type":"function","function":{"name":"f","arguments":"{}"}}]}]}`, "id is required"},
		{"call left unanswered", `{"model":"c","messages":[` + call + `,{"role":"user","content":"and?"}]}`, "c1"},
		{"tool without a call", `{"model":"c","messages":[{"role":"user","content":"q"},{"role":"tool","tool_call_id":"c1","content":"x"}]}`, "tool_call_id"},
		{"tool answers another id", `{"model":"c","messages":[` + call + `,{"role":"tool","tool_call_id":"c2","content":"x"}]}`, "tool_call_id"},
		{"tool answers twice", `{"model":"c","messages":[` + call + `,{"role":"tool","tool_call_id":"c1","content":"x"},{"role":"tool","tool_call_id":"c1","content":"y"}]}`, "tool_call_id"},
		{"document data a string", `{"model":"c","messages":[` + call + `,{"role":"tool","tool_call_id":"c1","content":[{"type":"document","document":{"data":"x"}}]}]}`, "document.data"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, body := post(t, s, cohereChatPath, tc.body, oaAuth...)
			if res.StatusCode != http.StatusBadRequest {
				t.Fatalf("%d %s, want 400", res.StatusCode, body)
			}
			msg := gjson.Get(body, "message").Str
			if !strings.HasPrefix(msg, "invalid request: ") || len(gjson.Get(body, "id").Str) != 36 || !strings.Contains(msg, tc.want) {
				t.Errorf("%s does not mention %q", body, tc.want)
			}
		})
	}
}

// TestCohereAccepts checks that valid requests get answers, among them
// every request the gateway's Cohere translator writes in its golden
// files.
func TestCohereAccepts(t *testing.T) {
	cases := []namedBody{
		{"thinking and tool plan back", `{"model":"c","messages":[{"role":"user","content":"q"},` +
			`{"role":"assistant","tool_plan":"p","content":[{"type":"thinking","thinking":"hm"}],"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}},{"id":"c2","type":"function","function":{"name":"g","arguments":"{}"}}]},` +
			`{"role":"tool","tool_call_id":"c2","content":"x"},{"role":"tool","tool_call_id":"c1","content":[{"type":"text","text":"y"}]},` +
			`{"role":"assistant","content":[{"type":"thinking","thinking":"t"},{"type":"text","text":"a"}]},{"role":"user","content":"more"}]}`},
		{"documents and citations", `{"model":"c","documents":["d1"],"citation_options":{"mode":"FAST"},"messages":[{"role":"user","content":"q"}]}`},
	}
	files, err := filepath.Glob("../../testdata/providers/cohere/*.cohere.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden Cohere requests (%v)", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		cases = append(cases, namedBody{filepath.Base(f), string(b)})
	}
	wantAnswered(t, cohereChatPath, cases)
}

// TestCohereKeys checks that the "cohere" key serves chat as it serves
// rerank, and "cohere_chat" chat alone.
func TestCohereKeys(t *testing.T) {
	body := `{"model":"c","messages":[{"role":"user","content":"hi"}]}`
	s := Start(t, Options{OpenAIKey: "oa", Keys: map[string]string{"cohere": "co"}})
	for key, want := range map[string]int{"co": 200, "oa": 401} {
		if res, got := post(t, s, cohereChatPath, body, "Authorization", "Bearer "+key); res.StatusCode != want {
			t.Errorf("key %s: %d %s, want %d", key, res.StatusCode, got, want)
		}
	}
	s = Start(t, Options{OpenAIKey: "oa", Keys: map[string]string{"cohere": "co", "cohere_chat": "chat"}})
	if res, got := post(t, s, cohereChatPath, body, "Authorization", "Bearer chat"); res.StatusCode != 200 {
		t.Errorf("%d %s", res.StatusCode, got)
	}
	if res, got := post(t, s, "/cohere/v1/chat", body, "Authorization", "Bearer chat"); res.StatusCode != 404 || !isCohereError(got) {
		t.Errorf("another path under /cohere: %d %s", res.StatusCode, got)
	}
}

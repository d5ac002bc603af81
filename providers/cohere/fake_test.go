package cohere

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/providerkit"
	"github.com/modelgate/modelgate/providers/providertest"
	"github.com/modelgate/modelgate/providers/sse"
)

// These tests run the translator against the fake Cohere provider, which
// checks requests as strictly as Cohere does and answers in Cohere's wire
// format: a unified request goes out translated, the answer comes back
// translated, as the gateway does it.

// exchange translates a unified request, sends it to the fake and returns
// the status, the translated answer (or the unified error for a failure)
// and, for a stream, the unified stream.
func exchange(t *testing.T, fake *providertest.Server, unified string) (int, []byte) {
	t.Helper()
	info, err := providers.ValidateChat([]byte(unified))
	if err != nil {
		t.Fatalf("the input does not pass ValidateChat: %v", err)
	}
	req, err := testChat.ChatRequest([]byte(unified), info.Model)
	if err != nil {
		t.Fatalf("ChatRequest: %v", err)
	}
	res, body := providertest.Send(t, http.MethodPost, fake.URL+"/cohere"+req.Path, string(req.Body), "Authorization", "Bearer co-key")
	if res.StatusCode >= 400 {
		e := testChat.Error(res.StatusCode, res.Header, []byte(body))
		return e.Status, e.JSON()
	}
	if !info.Stream {
		out, _, err := testChat.ChatResponse([]byte(body))
		if err != nil {
			t.Fatalf("ChatResponse: %v\n%s", err, body)
		}
		return res.StatusCode, out
	}
	if !providers.SSE.IsStream(res.Header.Get("Content-Type")) {
		t.Fatalf("not a stream: %s", res.Header.Get("Content-Type"))
	}
	out, err := testReplay.Translate(providers.StreamOptions{IncludeUsage: info.IncludeUsage}, []byte(body), nil)
	if err != nil {
		t.Fatalf("Event: %v\n%s", err, body)
	}
	providerkit.CheckUnifiedStream(t, out, providers.StreamOptions{IncludeUsage: info.IncludeUsage})
	return res.StatusCode, out
}

func startFake(t *testing.T) *providertest.Server {
	return providertest.Start(t, providertest.Options{Keys: map[string]string{"cohere": "co-key"}})
}

// answer decodes a translated answer with openai-go, as a client does.
func answer(t *testing.T, status int, out []byte) openai.ChatCompletion {
	t.Helper()
	if status != 200 {
		t.Fatalf("status %d: %s", status, out)
	}
	var c openai.ChatCompletion
	if err := json.Unmarshal(out, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// ask sends a unified request that must succeed and decodes the answer.
func ask(t *testing.T, fake *providertest.Server, unified string) openai.ChatCompletion {
	t.Helper()
	status, out := exchange(t, fake, unified)
	return answer(t, status, out)
}

func TestFakeEcho(t *testing.T) {
	fake := startFake(t)
	c := ask(t, fake, `{"model":"command-a","messages":[{"role":"developer","content":"be brief"},{"role":"user","content":"hello there"}],
		"temperature":1.5,"top_p":1,"frequency_penalty":-1,"stop":["\n\n"],"seed":3,"user":"u1","parallel_tool_calls":false}`)
	if c.Choices[0].Message.Content != "echo: hello there" || c.Choices[0].FinishReason != "stop" ||
		c.Usage.PromptTokens != 4 || c.Usage.CompletionTokens != 3 || c.Usage.TotalTokens != 7 {
		t.Errorf("%s", c.RawJSON())
	}
	c = ask(t, fake, `{"model":"command-a","max_completion_tokens":2,"messages":[{"role":"user","content":"one two three"}]}`)
	if c.Choices[0].Message.Content != "echo: one" || c.Choices[0].FinishReason != "length" {
		t.Errorf("%s", c.RawJSON())
	}
}

// TestFakeToolLoop runs a tool loop through openai-go's own types: the
// assistant message the client sends back is the SDK's ToParam of the
// answer, so what clients keep (content and tool_calls) is what reaches
// Cohere again.
func TestFakeToolLoop(t *testing.T) {
	fake := startFake(t)
	tools := `[{"type":"function","function":{"name":"get_weather","description":"Weather.","parameters":{"type":"object","properties":{"query":{"type":"string"}}},"strict":true}},` +
		`{"type":"function","function":{"name":"get_time"}}]`
	for _, stream := range []bool{false, true} {
		first := `{"model":"command-a","stream":` + boolJSON(stream) + `,"tools":` + tools + `,"tool_choice":{"type":"function","function":{"name":"get_time"}},` +
			`"messages":[{"role":"user","content":"Time in Tokyo?"}]}`
		status, out := exchange(t, fake, first)
		var c openai.ChatCompletion
		if stream {
			acc := providerkit.Accumulate(t, out)
			c = acc.ChatCompletion
		} else {
			c = answer(t, status, out)
		}
		msg := c.Choices[0].Message
		if c.Choices[0].FinishReason != "tool_calls" || len(msg.ToolCalls) != 1 || msg.ToolCalls[0].Function.Name != "get_time" ||
			gjson.Get(msg.ToolCalls[0].Function.Arguments, "query").Str != "Time in Tokyo?" || msg.Content != "I will call get_time." ||
			!strings.HasPrefix(msg.ToolCalls[0].ID, "get_time_") {
			t.Fatalf("stream %t: %+v", stream, msg)
		}

		params := openai.ChatCompletionNewParams{
			Model: "command-a",
			Messages: []openai.ChatCompletionMessageParamUnion{
				openai.UserMessage("Time in Tokyo?"),
				msg.ToParam(),
				openai.ToolMessage("21:05", msg.ToolCalls[0].ID),
			},
		}
		next, err := json.Marshal(params)
		if err != nil {
			t.Fatal(err)
		}
		got := ask(t, fake, string(next))
		if got.Choices[0].Message.Content != "tool said: 21:05" {
			t.Errorf("stream %t: %s", stream, got.RawJSON())
		}
		// The plan went back as Cohere's tool_plan.
		reqs := fake.Requests()
		if plan := gjson.GetBytes(reqs[len(reqs)-1].Body, "messages.1.tool_plan").Str; plan != "I will call get_time." {
			t.Errorf("tool_plan sent back: %q", plan)
		}
	}
}

// TestFakeReasoning runs a reasoning model: reasoning_content in the answer
// and the stream, and back to Cohere as a thinking item.
func TestFakeReasoning(t *testing.T) {
	fake := startFake(t)
	status, out := exchange(t, fake, `{"model":"command-a-reasoning","reasoning_effort":"minimal","messages":[{"role":"user","content":"why so"}]}`)
	c := answer(t, status, out)
	reasoning := gjson.GetBytes(out, "choices.0.message.reasoning_content").Str
	if reasoning != "Thinking about: why so" || c.Choices[0].Message.Content != "echo: why so" || c.Usage.CompletionTokens != 7 {
		t.Errorf("%s", out)
	}
	_, streamed := exchange(t, fake, `{"model":"command-a-reasoning","stream":true,"reasoning_effort":"minimal","messages":[{"role":"user","content":"why so"}]}`)
	if acc := providerkit.Accumulate(t, streamed); acc.Reasoning[0] != reasoning || acc.Choices[0].Message.Content != "echo: why so" {
		t.Errorf("streamed %q %q", acc.Reasoning[0], acc.Choices[0].Message.Content)
	}
	_, out = exchange(t, fake, `{"model":"command-a-reasoning","reasoning_effort":"none","messages":[{"role":"user","content":"why so"},`+
		`{"role":"assistant","content":"echo: why so","reasoning_content":"`+reasoning+`"},{"role":"user","content":"and?"}]}`)
	if gjson.GetBytes(out, "choices.0.message.reasoning_content").Exists() || gjson.GetBytes(out, "choices.0.message.content").Str != "echo: and?" {
		t.Errorf("thinking off: %s", out)
	}
	reqs := fake.Requests()
	sent := gjson.GetBytes(reqs[len(reqs)-1].Body, "messages.1.content")
	if sent.Get("0.type").Str != "thinking" || sent.Get("0.thinking").Str != reasoning || sent.Get("1.text").Str != "echo: why so" {
		t.Errorf("assistant sent back as %s", sent.Raw)
	}
}

// TestFakeStructuredOutput checks that json_schema comes back as JSON text
// that decodes into the client's type.
func TestFakeStructuredOutput(t *testing.T) {
	fake := startFake(t)
	schema := `{"type":"object","properties":{"name":{"type":"string"},"words":{"type":"integer"}},"required":["name","words"],"additionalProperties":false}`
	for _, stream := range []bool{false, true} {
		status, out := exchange(t, fake, `{"model":"command-a","stream":`+boolJSON(stream)+`,"response_format":{"type":"json_schema","json_schema":{"name":"p","strict":true,"schema":`+schema+`}},`+
			`"messages":[{"role":"user","content":"Alice is 31"}]}`)
		var content string
		if stream {
			acc := providerkit.Accumulate(t, out)
			content = acc.Choices[0].Message.Content
		} else {
			content = answer(t, status, out).Choices[0].Message.Content
		}
		var p struct {
			Name  string `json:"name"`
			Words int    `json:"words"`
		}
		dec := json.NewDecoder(strings.NewReader(content))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&p); err != nil || p.Name != "echo: Alice is 31" || p.Words != 4 {
			t.Errorf("stream %t: %q → %+v %v", stream, content, p, err)
		}
	}
}

// TestFakeStreamMatchesAnswer asks the fake the same questions streamed and
// not, and compares what the client ends up with.
func TestFakeStreamMatchesAnswer(t *testing.T) {
	fake := startFake(t)
	tools := `"tools":[{"type":"function","function":{"name":"search","parameters":{"type":"object"}}}]`
	for _, body := range []string{
		`"messages":[{"role":"user","content":"a few words here"}]`,
		`"logprobs":true,"messages":[{"role":"user","content":"with logprobs"}]`,
		tools + `,"messages":[{"role":"user","content":"find it"}]`,
		`"model":"command-a-reasoning",` + tools + `,"messages":[{"role":"user","content":"think, then call"}]`,
		`"stop":"two","messages":[{"role":"user","content":"one two three"}]`,
	} {
		model := `"model":"command-a",`
		if strings.Contains(body, `"model"`) {
			model = ""
		}
		_, out := exchange(t, fake, `{`+model+body+`}`)
		want := answer(t, 200, out)
		_, streamed := exchange(t, fake, `{`+model+`"stream":true,"stream_options":{"include_usage":true},`+body+`}`)
		acc := providerkit.Accumulate(t, streamed)
		got, reasoning := acc.ChatCompletion, acc.Reasoning[0]
		g, w := got.Choices[0], want.Choices[0]
		if g.Message.Content != w.Message.Content || g.FinishReason != w.FinishReason || reasoning != gjson.GetBytes(out, "choices.0.message.reasoning_content").Str ||
			got.Usage.TotalTokens != want.Usage.TotalTokens || len(g.Message.ToolCalls) != len(w.Message.ToolCalls) ||
			len(g.Logprobs.Content) != len(w.Logprobs.Content) {
			t.Errorf("%s\nstreamed: %+v\nanswer:   %s", body, got, out)
			continue
		}
		for i, call := range w.Message.ToolCalls {
			if gc := g.Message.ToolCalls[i]; gc.Function.Name != call.Function.Name || gc.Function.Arguments != call.Function.Arguments {
				t.Errorf("%s: call %+v, want %+v", body, gc, call)
			}
		}
	}
}

// TestFakeFailures maps the fake's scripted failures.
func TestFakeFailures(t *testing.T) {
	fake := startFake(t)
	for _, tc := range []struct {
		model  string
		status int
		typ    string
		code   string
	}{
		{"fail-429", 429, "rate_limit_error", "rate_limit_exceeded"},
		{"fail-500", 500, "server_error", ""},
		{"fail-529", 503, "server_error", "service_unavailable"},
		{"fail-html", 502, "server_error", ""},
	} {
		status, out := exchange(t, fake, `{"model":"`+tc.model+`","messages":[{"role":"user","content":"hi"}]}`)
		e := gjson.GetBytes(out, "error")
		if status != tc.status || e.Get("type").Str != tc.typ || e.Get("code").Str != tc.code || strings.Contains(string(out), "secret-internal-host") {
			t.Errorf("%s: %d %s", tc.model, status, out)
		}
	}
	// A request Cohere refuses: a 400 with Cohere's message.
	status, out := exchange(t, fake, `{"model":"command-a","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_object"},`+
		`"tools":[{"type":"function","function":{"name":"f"}}]}`)
	if status != 400 || !strings.Contains(gjson.GetBytes(out, "error.message").Str, "not supported with tools") {
		t.Errorf("refused: %d %s", status, out)
	}

	for model, code := range map[string]string{"midstream-error": "generation_error", "cutoff": "stream_incomplete"} {
		for _, tools := range []string{"", `"tools":[{"type":"function","function":{"name":"f"}}],`} {
			_, out := exchange(t, fake, `{"model":"`+model+`","stream":true,`+tools+`"messages":[{"role":"user","content":"alpha beta gamma"}]}`)
			events := bytes.Split(bytes.TrimSuffix(out, []byte("\n\n")), []byte("\n\n"))
			last := gjson.ParseBytes(bytes.TrimPrefix(events[len(events)-1], []byte("data: ")))
			if last.Get("error.code").Str != code || bytes.Contains(out, sse.Done) {
				t.Errorf("%s %s: %s", model, tools, out)
			}
		}
	}
}

func boolJSON(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

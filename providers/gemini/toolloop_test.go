package gemini

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/internal/translatortest"
	"github.com/modelgate/modelgate/providers/providerkit"
)

// The answers of a Gemini 3 model in a two-step function-calling turn
// followed by a final answer, as the Gemini API sends them: signatures on
// a thought part, on the first function call of each step, and on the last
// part of the final answer.
const (
	loopStep1 = `{"candidates":[{"content":{"role":"model","parts":[` +
		`{"text":"I need the weather first.","thought":true,"thoughtSignature":"EpYBCpMBAR/MhbY="},` +
		`{"text":"Checking."},` +
		`{"functionCall":{"name":"get_weather","args":{"city":"Paris"}},"thoughtSignature":"CiQBf3b+/Yp1Q2kzY3c="},` +
		`{"functionCall":{"name":"get_time","args":{"tz":"Europe/Paris"}}}]},"finishReason":"STOP","index":0}],` +
		`"usageMetadata":{"promptTokenCount":50,"candidatesTokenCount":20,"thoughtsTokenCount":30,"totalTokenCount":100},` +
		`"modelVersion":"gemini-3-pro-preview","responseId":"step1"}`
	loopStep2 = `{"candidates":[{"content":{"role":"model","parts":[` +
		`{"functionCall":{"name":"get_weather","args":{"city":"Lyon"}},"thoughtSignature":"CjIBf3b+Zm9vYmFyYmF6"}]},"finishReason":"STOP","index":0}],` +
		`"usageMetadata":{"promptTokenCount":90,"candidatesTokenCount":8,"totalTokenCount":98},` +
		`"modelVersion":"gemini-3-pro-preview","responseId":"step2"}`
	loopStep3 = `{"candidates":[{"content":{"role":"model","parts":[` +
		`{"text":"Paris: 14°C at 10:00. "},{"text":"Lyon: 17°C.","thoughtSignature":"Ei8KLQFd1c+W"}]},"finishReason":"STOP","index":0}],` +
		`"usageMetadata":{"promptTokenCount":120,"candidatesTokenCount":12,"totalTokenCount":132},` +
		`"modelVersion":"gemini-3-pro-preview","responseId":"step3"}`
)

// asStream turns a non-streamed answer into the stream Gemini would send for
// it: one event per part, the finishReason and usage on the last.
func asStream(t *testing.T, answer string) []byte {
	t.Helper()
	root := gjson.Parse(answer)
	parts := root.Get("candidates.0.content.parts").Array()
	var b bytes.Buffer
	for i, p := range parts {
		b.WriteString(`data: {"candidates":[{"content":{"role":"model","parts":[` + p.Raw + `]}`)
		if i == len(parts)-1 {
			b.WriteString(`,"finishReason":"STOP"`)
		}
		b.WriteString(`,"index":0}]`)
		if i == len(parts)-1 {
			b.WriteString(`,"usageMetadata":` + root.Get("usageMetadata").Raw)
		}
		b.WriteString(`,"modelVersion":"gemini-3-pro-preview","responseId":` + root.Get("responseId").Raw + "}\r\n\r\n")
	}
	return b.Bytes()
}

// answerMessage translates a Gemini answer (streamed or not, as the client
// asked) and returns the assistant message the client gets: through the
// OpenAI SDK (its ChatCompletionMessage, accumulated from the stream when
// streaming) and as raw JSON, which is what clients that keep the message
// object as they received it (Python's SDK, LiteLLM) send back.
func answerMessage(t *testing.T, c Chat, answer string, stream bool) (openai.ChatCompletionMessage, json.RawMessage) {
	t.Helper()
	if !stream {
		out, _, err := c.ChatResponse([]byte(answer))
		if err != nil {
			t.Fatal(err)
		}
		var res openai.ChatCompletion
		if err := json.Unmarshal(out, &res); err != nil {
			t.Fatal(err)
		}
		return res.Choices[0].Message, json.RawMessage(gjson.GetBytes(out, "choices.0.message").Raw)
	}
	out, err := providerkit.Translate(c.ChatStream(providers.StreamOptions{}), Framing, asStream(t, answer), nil)
	if err != nil {
		t.Fatal(err)
	}
	var acc openai.ChatCompletionAccumulator
	// The raw message: what a client that keeps every delta field builds.
	raw := map[string]any{"role": "assistant"}
	var content, reasoning strings.Builder
	var blocks []json.RawMessage
	for _, ev := range bytes.SplitAfter(out, []byte("\n\n")) {
		data := bytes.TrimSuffix(bytes.TrimPrefix(ev, []byte("data: ")), []byte("\n\n"))
		if len(data) == 0 || data[0] != '{' {
			continue
		}
		var chunk openai.ChatCompletionChunk
		if err := json.Unmarshal(data, &chunk); err != nil {
			t.Fatal(err)
		}
		if !acc.AddChunk(chunk) {
			t.Fatalf("the accumulator refused %s", data)
		}
		d := gjson.GetBytes(data, "choices.0.delta")
		content.WriteString(d.Get("content").Str)
		reasoning.WriteString(d.Get("reasoning_content").Str)
		d.Get("thinking_blocks").ForEach(func(_, b gjson.Result) bool {
			blocks = append(blocks, json.RawMessage(b.Raw))
			return true
		})
	}
	msg := acc.Choices[0].Message
	if content.Len() > 0 {
		raw["content"] = content.String()
	}
	if reasoning.Len() > 0 {
		raw["reasoning_content"] = reasoning.String()
	}
	if blocks != nil {
		raw["thinking_blocks"] = blocks
	}
	if len(msg.ToolCalls) > 0 {
		raw["tool_calls"] = msg.ToolCalls
	}
	rawJSON, err := json.Marshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	return msg, rawJSON
}

// TestToolLoopWithThinking runs a multi-step function-calling turn with
// thinking on, as a client does: it sends each assistant message back as
// it got it, with the tool results, and the next request must carry every
// thought signature exactly where Gemini put it, or Gemini 3 refuses it.
// The OpenAI SDK's message type keeps tool call ids (which carry the
// signatures of function calls) but drops thinking_blocks, so through it
// only function-call signatures come back; raw messages keep all.
func TestToolLoopWithThinking(t *testing.T) {
	for _, stream := range []bool{false, true} {
		for _, viaSDK := range []bool{true, false} {
			name := "answer"
			if stream {
				name = "stream"
			}
			if viaSDK {
				name += "/openai-go message"
			} else {
				name += "/raw message"
			}
			t.Run(name, func(t *testing.T) { runToolLoop(t, stream, viaSDK) })
		}
	}
}

func runToolLoop(t *testing.T, stream, viaSDK bool) {
	c := Chat{Now: translatortest.Now} // real random ids, as in production
	const model = "gemini-3-pro-preview"
	tools := []openai.ChatCompletionToolUnionParam{
		openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{Name: "get_weather",
			Parameters: openai.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}}),
		openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{Name: "get_time",
			Parameters: openai.FunctionParameters{"type": "object", "properties": map[string]any{"tz": map[string]any{"type": "string"}}}}),
	}
	var messages []json.RawMessage
	add := func(m any) {
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		messages = append(messages, b)
	}
	// request sends the conversation so far and returns the Gemini body.
	request := func() gjson.Result {
		params := openai.ChatCompletionNewParams{Model: "my-gemini", Tools: tools, ReasoningEffort: openai.ReasoningEffortHigh}
		body, err := json.Marshal(params)
		if err != nil {
			t.Fatal(err)
		}
		msgs, _ := json.Marshal(messages)
		body = append(body[:len(body)-1], `,"messages":`...)
		body = append(body, msgs...)
		body = append(body, '}')
		if _, err := providers.ValidateChat(body); err != nil {
			t.Fatalf("ValidateChat: %v\n%s", err, body)
		}
		req, err := c.ChatRequest(body, model)
		if err != nil {
			t.Fatalf("ChatRequest: %v", err)
		}
		if !json.Valid(req.Body) {
			t.Fatalf("invalid JSON: %s", req.Body)
		}
		return gjson.ParseBytes(req.Body)
	}
	// reply translates a Gemini answer and appends the assistant message
	// the client sends back.
	var calls []openai.ChatCompletionMessageToolCallUnion
	reply := func(answer string) {
		msg, raw := answerMessage(t, c, answer, stream)
		calls = msg.ToolCalls
		if viaSDK {
			add(msg.ToParam())
		} else {
			messages = append(messages, raw)
		}
	}
	result := func(call int, content string) {
		add(openai.ToolMessage(content, calls[call].ID))
	}

	add(openai.UserMessage("Weather in Paris and the time there, then Lyon."))
	if tc := request().Get("generationConfig.thinkingConfig").Raw; tc != `{"includeThoughts":true,"thinkingLevel":"HIGH"}` {
		t.Errorf("thinkingConfig = %s", tc)
	}
	reply(loopStep1)
	if len(calls) != 2 || !strings.Contains(calls[0].ID, signatureSep) || strings.Contains(calls[1].ID, signatureSep) {
		t.Fatalf("tool calls %+v: want the first to carry its signature", calls)
	}
	result(0, `{"temp_c": 14}`)
	result(1, "10:00")

	step1Model := `{"role":"model","parts":[` +
		`{"text":"I need the weather first.","thought":true,"thoughtSignature":"EpYBCpMBAR/MhbY="},` +
		`{"text":"Checking."},` +
		`{"functionCall":{"name":"get_weather","args":{"city":"Paris"}},"thoughtSignature":"CiQBf3b+/Yp1Q2kzY3c="},` +
		`{"functionCall":{"name":"get_time","args":{"tz":"Europe/Paris"}}}]}`
	if viaSDK {
		// The SDK's message keeps no thinking_blocks: the thought part,
		// whose signature Gemini does not validate, is not sent back.
		step1Model = `{"role":"model","parts":[` +
			`{"text":"Checking."},` +
			`{"functionCall":{"name":"get_weather","args":{"city":"Paris"}},"thoughtSignature":"CiQBf3b+/Yp1Q2kzY3c="},` +
			`{"functionCall":{"name":"get_time","args":{"tz":"Europe/Paris"}}}]}`
	}
	step1Results := `{"role":"user","parts":[` +
		`{"functionResponse":{"name":"get_weather","response":{"temp_c":14}}},` +
		`{"functionResponse":{"name":"get_time","response":{"result":"10:00"}}}]}`
	user := `{"role":"user","parts":[{"text":"Weather in Paris and the time there, then Lyon."}]}`
	checkContents(t, request(), user, step1Model, step1Results)

	reply(loopStep2)
	result(0, `{"temp_c": 17}`)
	step2Model := `{"role":"model","parts":[{"functionCall":{"name":"get_weather","args":{"city":"Lyon"}},"thoughtSignature":"CjIBf3b+Zm9vYmFyYmF6"}]}`
	step2Results := `{"role":"user","parts":[{"functionResponse":{"name":"get_weather","response":{"temp_c":17}}}]}`
	checkContents(t, request(), user, step1Model, step1Results, step2Model, step2Results)

	reply(loopStep3)
	add(openai.UserMessage("Thanks!"))
	step3Model := `{"role":"model","parts":[{"text":"Paris: 14°C at 10:00. Lyon: 17°C.","thoughtSignature":"Ei8KLQFd1c+W"}]}`
	if viaSDK {
		step3Model = `{"role":"model","parts":[{"text":"Paris: 14°C at 10:00. Lyon: 17°C."}]}`
	}
	checkContents(t, request(), user, step1Model, step1Results, step2Model, step2Results, step3Model,
		`{"role":"user","parts":[{"text":"Thanks!"}]}`)
}

// checkContents compares a Gemini request's contents with want.
func checkContents(t *testing.T, req gjson.Result, want ...string) {
	t.Helper()
	got := req.Get("contents").Raw
	w := "[" + strings.Join(want, ",") + "]"
	if !reflect.DeepEqual(translatortest.Canonical(t, "got", []byte(got)), translatortest.Canonical(t, "want", []byte(w))) {
		t.Errorf("contents\ngot:  %s\nwant: %s", got, w)
	}
}

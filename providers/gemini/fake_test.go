package gemini

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/tidwall/gjson"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/providerkit"
	"github.com/modelgate/modelgate/providers/providertest"
)

// upstream is a translator wired to the fake provider as the gateway wires
// it to Google: the request's path and query under a base URL, a
// credential, the answer or stream translated back.
type upstream struct {
	chat Chat
	base string
	auth func(*http.Request)
}

// result is what the client of the gateway gets.
type result struct {
	status int
	body   []byte // the unified answer, stream or error
	err    *providers.Error
}

func (u upstream) do(t *testing.T, body []byte, model string) result {
	t.Helper()
	info, err := providers.ValidateChat(body)
	if err != nil {
		t.Fatalf("ValidateChat: %v\n%s", err, body)
	}
	req, err := u.chat.ChatRequest(body, model)
	if err != nil {
		var e *providers.Error
		if !errors.As(err, &e) {
			t.Fatal(err)
		}
		return result{status: e.Status, body: e.JSON(), err: e}
	}
	url := u.base + req.Path
	if req.Query != "" {
		url += "?" + req.Query
	}
	hr, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(req.Body))
	if err != nil {
		t.Fatal(err)
	}
	hr.Header.Set("Content-Type", "application/json")
	u.auth(hr)
	res, raw := providertest.Do(t, hr)
	if res.StatusCode >= 400 {
		e := u.chat.Error(res.StatusCode, res.Header, raw)
		return result{status: e.Status, body: e.JSON(), err: e}
	}
	if !info.Stream {
		out, _, err := u.chat.ChatResponse(raw)
		if err != nil {
			t.Fatalf("ChatResponse: %v\n%s", err, raw)
		}
		return result{status: 200, body: out}
	}
	if !req.Framing.IsStream(res.Header.Get("Content-Type")) {
		t.Fatalf("the stream came as %s", res.Header.Get("Content-Type"))
	}
	tr := u.chat.ChatStream(providers.StreamOptions{IncludeUsage: info.IncludeUsage})
	var out []byte
	buf := raw
	for {
		ev, rest, ok, err := req.Framing.Cut(buf)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		if out, err = tr.Event(out, ev); err != nil {
			t.Fatalf("Event: %v", err)
		}
		buf = rest
	}
	return result{status: 200, body: tr.Close(out)}
}

// accumulateStream reads a unified stream with the OpenAI SDK's accumulator
// and returns it with the stream's error event, if it ended with one.
func accumulateStream(t *testing.T, out []byte) (openai.ChatCompletionAccumulator, gjson.Result) {
	t.Helper()
	providerkit.CheckStreamShape(t, out)
	var acc openai.ChatCompletionAccumulator
	var errEvent gjson.Result
	for _, ev := range bytes.SplitAfter(out, []byte("\n\n")) {
		data := bytes.TrimSuffix(bytes.TrimPrefix(ev, []byte("data: ")), []byte("\n\n"))
		if len(data) == 0 || data[0] != '{' {
			continue
		}
		if e := gjson.GetBytes(data, "error"); e.Exists() {
			errEvent = e
			continue
		}
		var chunk openai.ChatCompletionChunk
		if err := json.Unmarshal(data, &chunk); err != nil {
			t.Fatal(err)
		}
		if !acc.AddChunk(chunk) {
			t.Fatalf("the accumulator refused %s", data)
		}
	}
	return acc, errEvent
}

func chatBody(t *testing.T, p openai.ChatCompletionNewParams) []byte {
	t.Helper()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestAgainstFake runs the translator against the fake provider's Gemini
// and Vertex AI formats, which check requests as strictly as Google does
// (thought signatures included): chat, streams, a tool loop with thinking,
// structured output and errors, through the OpenAI SDK's types.
func TestAgainstFake(t *testing.T) {
	fake := providertest.Start(t, providertest.Options{Keys: map[string]string{"gemini": "gemini-key"}})
	creds, err := google.CredentialsFromJSONWithTypeAndParams(context.Background(), fake.GoogleServiceAccount(""), google.ServiceAccount,
		google.CredentialsParams{Scopes: []string{VertexScope}})
	if err != nil {
		t.Fatal(err)
	}
	tokens := oauth2.ReuseTokenSource(nil, creds.TokenSource)
	surfaces := []struct {
		name string
		up   upstream
	}{
		{"gemini", upstream{chat: Chat{}, base: fake.URL + "/v1beta", auth: func(r *http.Request) { r.Header.Set("X-Goog-Api-Key", "gemini-key") }}},
		{"vertex", upstream{chat: Chat{Vertex: true, Project: creds.ProjectID, Location: "us-central1"}, base: fake.URL + "/v1",
			auth: func(r *http.Request) {
				tok, err := tokens.Token()
				if err != nil {
					t.Fatal(err)
				}
				tok.SetAuthHeader(r)
			}}},
	}
	for _, s := range surfaces {
		t.Run(s.name, func(t *testing.T) { runAgainstFake(t, s.up) })
	}
	if n := len(fake.GoogleTokens()); n != 1 {
		t.Errorf("%d tokens issued; one valid for an hour serves every request", n)
	}
	for _, r := range fake.Requests() {
		if strings.HasPrefix(r.Path, "/v1/projects/") && !strings.HasPrefix(r.Path, "/v1/projects/fake-project/locations/us-central1/publishers/google/models/") {
			t.Errorf("vertex path %s", r.Path)
		}
	}
}

func runAgainstFake(t *testing.T, up upstream) {
	user := func(text string) []openai.ChatCompletionMessageParamUnion {
		return []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("be brief"), openai.UserMessage(text)}
	}

	t.Run("chat and stream", func(t *testing.T) {
		p := openai.ChatCompletionNewParams{Model: "g", Messages: user("hello there")}
		r := up.do(t, chatBody(t, p), "gemini-2.5-flash")
		var res openai.ChatCompletion
		if r.status != 200 || json.Unmarshal(r.body, &res) != nil || res.Choices[0].Message.Content != "echo: hello there" ||
			res.Choices[0].FinishReason != "stop" || res.Usage.CompletionTokens != 3 || res.Usage.PromptTokens != 4 || res.Usage.TotalTokens != 7 {
			t.Fatalf("%d %s", r.status, r.body)
		}
		p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		body := chatBody(t, p)
		body = append(body[:len(body)-1], `,"stream":true}`...)
		r = up.do(t, body, "gemini-2.5-flash")
		acc, e := accumulateStream(t, r.body)
		if e.Exists() || acc.Choices[0].Message.Content != res.Choices[0].Message.Content || acc.Choices[0].FinishReason != "stop" ||
			acc.Usage.TotalTokens != res.Usage.TotalTokens || acc.Usage.CompletionTokens != res.Usage.CompletionTokens {
			t.Errorf("stream %s", r.body)
		}
	})

	t.Run("tool loop with thinking", func(t *testing.T) {
		for _, stream := range []bool{false, true} {
			p := openai.ChatCompletionNewParams{Model: "g", Messages: user("weather in Paris"), ReasoningEffort: openai.ReasoningEffortHigh,
				Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
					Name: "search", Parameters: openai.FunctionParameters{"type": "object", "properties": map[string]any{"query": map[string]any{"type": "string"}}}})}}
			send := func() openai.ChatCompletionMessage {
				body := chatBody(t, p)
				if stream {
					body = append(body[:len(body)-1], `,"stream":true}`...)
				}
				r := up.do(t, body, "gemini-3-flash-preview")
				if r.status != 200 {
					t.Fatalf("%d %s", r.status, r.body)
				}
				if !stream {
					var res openai.ChatCompletion
					if err := json.Unmarshal(r.body, &res); err != nil {
						t.Fatal(err)
					}
					if rc := gjson.GetBytes(r.body, "choices.0.message.reasoning_content").Str; rc != "The user said: weather in Paris" {
						t.Errorf("reasoning_content %q", rc)
					}
					return res.Choices[0].Message
				}
				acc, e := accumulateStream(t, r.body)
				if e.Exists() {
					t.Fatalf("stream error %s", e.Raw)
				}
				return acc.Choices[0].Message
			}
			msg := send()
			if len(msg.ToolCalls) != 1 || msg.ToolCalls[0].Function.Name != "search" || !strings.Contains(msg.ToolCalls[0].ID, signatureSep) ||
				gjson.Get(msg.ToolCalls[0].Function.Arguments, "query").Str != "weather in Paris" {
				t.Fatalf("tool calls %+v", msg.ToolCalls)
			}
			// The fake refuses the next step unless the call comes back
			// with exactly the signature it gave.
			p.Messages = append(p.Messages, msg.ToParam(), openai.ToolMessage("sunny, 21 C", msg.ToolCalls[0].ID))
			if final := send(); final.Content != "tool said: sunny, 21 C" {
				t.Errorf("after the tool: %q", final.Content)
			}
			// A call whose signature was lost (another gateway wrote the
			// history) gets Google's dummy value rather than a 400.
			p.Messages[len(p.Messages)-1] = openai.ToolMessage("sunny, 21 C", "call_from_elsewhere")
			asst := msg.ToParam()
			asst.OfAssistant.ToolCalls[0].OfFunction.ID = "call_from_elsewhere"
			p.Messages[len(p.Messages)-2] = asst
			if final := send(); final.Content != "tool said: sunny, 21 C" {
				t.Errorf("after the tool, without the signature: %q", final.Content)
			}
		}
	})

	t.Run("structured output", func(t *testing.T) {
		p := openai.ChatCompletionNewParams{Model: "g", Messages: user("describe Paris"),
			ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &openai.ResponseFormatJSONSchemaParam{
				JSONSchema: openai.ResponseFormatJSONSchemaJSONSchemaParam{Name: "city", Strict: openai.Bool(true),
					Schema: map[string]any{"type": "object", "additionalProperties": false, "required": []string{"summary", "words"},
						"properties": map[string]any{"summary": map[string]any{"type": "string"}, "words": map[string]any{"type": "integer"}}}}}}}
		r := up.do(t, chatBody(t, p), "gemini-2.5-pro")
		var city struct {
			Summary string `json:"summary"`
			Words   int    `json:"words"`
		}
		content := gjson.GetBytes(r.body, "choices.0.message.content").Str
		if r.status != 200 || json.Unmarshal([]byte(content), &city) != nil || city.Summary != "echo: describe Paris" || city.Words != 3 {
			t.Errorf("%d %s", r.status, r.body)
		}
	})

	t.Run("errors", func(t *testing.T) {
		body := chatBody(t, openai.ChatCompletionNewParams{Model: "g", Messages: user("hi there")})
		r := up.do(t, body, "fail-429")
		if r.status != 429 || r.err.Type != "rate_limit_error" || r.err.Code != "rate_limit_exceeded" || r.err.RetryAfter != time.Second {
			t.Errorf("fail-429: %d %+v", r.status, r.err)
		}
		if r := up.do(t, body, "fail-500"); r.status != 500 || r.err.Type != "server_error" {
			t.Errorf("fail-500: %d %s", r.status, r.body)
		}
		if r := up.do(t, body, "fail-529"); r.status != 503 || r.err.Code != "service_unavailable" {
			t.Errorf("fail-529: %d %s", r.status, r.body)
		}
		if r := up.do(t, body, "fail-html"); r.status != 502 || strings.Contains(string(r.body), "secret-internal-host") {
			t.Errorf("fail-html: %d %s", r.status, r.body)
		}
		stream := append(body[:len(body)-1], `,"stream":true}`...)
		for model, code := range map[string]string{"midstream-error": "service_unavailable", "cutoff": "stream_incomplete"} {
			r := up.do(t, stream, model)
			acc, e := accumulateStream(t, r.body)
			if e.Get("code").Str != code || acc.Choices[0].Message.Content != "echo:" {
				t.Errorf("%s: %s", model, r.body)
			}
		}
		if r := up.do(t, body, "../../files"); r.status != 400 || r.err.Param != "model" {
			t.Errorf("a model name leaving its path: %d %s", r.status, r.body)
		}
	})
}

package providertest

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/tidwall/gjson"
)

func do(t *testing.T, s *Server, path, body string, header ...string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, s.URL+path, strings.NewReader(body))
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

var anAuth = []string{"X-Api-Key", "ak", "Anthropic-Version", "2023-06-01"}

const anMin = `"model":"claude","max_tokens":100,"messages":[{"role":"user","content":"hi there"}]`

func TestAnthropicStrictness(t *testing.T) {
	s := Start(t, Options{OpenAIKey: "ok", AnthropicKey: "ak"})
	for _, tc := range []struct{ name, body, want string }{
		{"no max_tokens", `{"model":"c","messages":[{"role":"user","content":"hi"}]}`, "max_tokens"},
		{"system role", `{"model":"c","max_tokens":5,"messages":[{"role":"system","content":"s"},{"role":"user","content":"hi"}]}`, "messages.0.role"},
		{"temperature", `{` + anMin + `,"temperature":1.5}`, "temperature"},
		{"openai n", `{` + anMin + `,"n":1}`, "n: Extra inputs"},
		{"openai stop", `{` + anMin + `,"stop":["x"]}`, "stop: Extra inputs"},
		{"openai max_completion_tokens", `{` + anMin + `,"max_completion_tokens":5}`, "max_completion_tokens"},
		{"openai stream_options", `{` + anMin + `,"stream_options":{}}`, "stream_options"},
		{"empty text", `{"model":"c","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":""}]}]}`, "non-empty"},
		{"orphan tool_result", `{"model":"c","max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"x"}]}]}`, "tool_result"},
		{"tool without schema", `{` + anMin + `,"tools":[{"name":"f"}]}`, "input_schema"},
		{"bad tool_choice", `{` + anMin + `,"tool_choice":{"type":"required"}}`, "tool_choice.type"},
		{"image in assistant", `{"model":"c","max_tokens":5,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"image","source":{"type":"url","url":"u"}}]}]}`, "not allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, body := do(t, s, "/v1/messages", tc.body, anAuth...)
			if res.StatusCode != 400 || gjson.Get(body, "error.type").Str != "invalid_request_error" || !strings.Contains(body, tc.want) {
				t.Errorf("%d %s, want 400 mentioning %q", res.StatusCode, body, tc.want)
			}
		})
	}
	t.Run("authorization header leaked", func(t *testing.T) {
		res, _ := do(t, s, "/v1/messages", `{`+anMin+`}`, append([]string{"Authorization", "Bearer gateway-key"}, anAuth...)...)
		if res.StatusCode != 400 {
			t.Errorf("status %d", res.StatusCode)
		}
	})
	t.Run("no version", func(t *testing.T) {
		if res, _ := do(t, s, "/v1/messages", `{`+anMin+`}`, "X-Api-Key", "ak"); res.StatusCode != 400 {
			t.Errorf("status %d", res.StatusCode)
		}
	})
}

func TestAuth(t *testing.T) {
	s := Start(t, Options{OpenAIKey: "ok", AnthropicKey: "ak"})
	res, body := do(t, s, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, "Authorization", "Bearer no")
	if res.StatusCode != 401 || gjson.Get(body, "error.code").Str != "invalid_api_key" {
		t.Errorf("openai: %d %s", res.StatusCode, body)
	}
	res, body = do(t, s, "/v1/messages", `{`+anMin+`}`, "X-Api-Key", "no", "Anthropic-Version", "2023-06-01")
	if res.StatusCode != 401 || gjson.Get(body, "error.type").Str != "authentication_error" || gjson.Get(body, "type").Str != "error" {
		t.Errorf("anthropic: %d %s", res.StatusCode, body)
	}
	any := Start(t, Options{})
	if res, _ := do(t, any, "/v1/messages", `{`+anMin+`}`, "X-Api-Key", "whatever", "Anthropic-Version", "2023-06-01"); res.StatusCode != 200 {
		t.Errorf("any key: %d", res.StatusCode)
	}
}

func TestAnthropicAnswers(t *testing.T) {
	s := Start(t, Options{AnthropicKey: "ak"})
	res, body := do(t, s, "/v1/messages", `{"model":"claude","max_tokens":100,"system":"be brief","messages":[{"role":"user","content":"hi there"}]}`, anAuth...)
	if res.StatusCode != 200 || gjson.Get(body, "type").Str != "message" || gjson.Get(body, "content.0.text").Str != "echo: hi there" ||
		gjson.Get(body, "stop_reason").Str != "end_turn" || gjson.Get(body, "usage.input_tokens").Int() != 4 || res.Header.Get("Request-Id") == "" {
		t.Errorf("%d %s", res.StatusCode, body)
	}
	_, body = do(t, s, "/v1/messages", `{"model":"claude","max_tokens":2,"messages":[{"role":"user","content":"one two three"}]}`, anAuth...)
	if gjson.Get(body, "stop_reason").Str != "max_tokens" || gjson.Get(body, "content.0.text").Str != "echo: one" {
		t.Errorf("truncation: %s", body)
	}

	// A streamed tool call: the event names match the types, in order.
	res, body = do(t, s, "/v1/messages", `{"model":"claude","max_tokens":100,"stream":true,"tools":[{"name":"search","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"paris"}]}`, anAuth...)
	var names []string
	var args strings.Builder
	for _, ev := range strings.Split(strings.TrimSpace(body), "\n\n") {
		name, data, _ := strings.Cut(ev, "\ndata: ")
		name = strings.TrimPrefix(name, "event: ")
		if gjson.Get(data, "type").Str != name {
			t.Errorf("event %q carries type %q", name, gjson.Get(data, "type").Str)
		}
		names = append(names, name)
		args.WriteString(gjson.Get(data, "delta.partial_json").Str)
	}
	want := "message_start,ping,content_block_start,content_block_delta,content_block_delta,content_block_delta,content_block_stop,message_delta,message_stop"
	if strings.Join(names, ",") != want || gjson.Get(args.String(), "query").Str != "paris" || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		t.Errorf("events %v, arguments %q", names, args.String())
	}
}

func TestScripted(t *testing.T) {
	s := Start(t, Options{})
	for _, tc := range []struct {
		path, model string
		status      int
		contains    string
	}{
		{"/v1/chat/completions", "fail-429", 429, "rate_limit"},
		{"/v1/messages", "fail-429", 429, "rate_limit_error"},
		{"/v1/messages", "fail-500", 500, "api_error"},
		{"/v1/messages", "fail-529", 529, "overloaded_error"},
		{"/v1/chat/completions", "fail-529", 503, "overloaded"},
		{"/v1/chat/completions", "fail-html", 502, "<html>"},
	} {
		body := `{"model":"` + tc.model + `","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`
		res, got := do(t, s, tc.path, body, authFor(tc.path)...)
		if res.StatusCode != tc.status || !strings.Contains(got, tc.contains) {
			t.Errorf("%s %s: %d %s", tc.path, tc.model, res.StatusCode, got)
		}
		if tc.status == 429 && res.Header.Get("Retry-After") != "1" {
			t.Errorf("%s: no retry-after", tc.path)
		}
	}
	for _, path := range []string{"/v1/chat/completions", "/v1/messages"} {
		body := `{"model":"MODEL","stream":true,"max_tokens":50,"messages":[{"role":"user","content":"a b c"}]}`
		_, mid := do(t, s, path, strings.Replace(body, "MODEL", "midstream-error", 1), authFor(path)...)
		_, cut := do(t, s, path, strings.Replace(body, "MODEL", "cutoff", 1), authFor(path)...)
		if !strings.Contains(mid, `"error"`) || strings.Contains(mid, "[DONE]") || strings.Contains(mid, "message_stop") {
			t.Errorf("%s midstream-error: %s", path, mid)
		}
		if strings.Contains(cut, "[DONE]") || strings.Contains(cut, "message_stop") || !strings.Contains(cut, "echo:") {
			t.Errorf("%s cutoff: %s", path, cut)
		}
	}
	start := time.Now()
	do(t, s, "/v1/chat/completions", `{"model":"slow-50ms","messages":[{"role":"user","content":"hi"}]}`, oaAuthAny...)
	if time.Since(start) < 50*time.Millisecond {
		t.Error("slow-50ms answered at once")
	}
	if res, body := do(t, s, "/v2/other", `{}`); res.StatusCode != 404 || gjson.Get(body, "error.message").Str == "" {
		t.Errorf("unknown path: %d %s", res.StatusCode, body)
	}
}

var (
	oaAuthAny = []string{"Authorization", "Bearer any"}
	anAuthAny = []string{"X-Api-Key", "any", "Anthropic-Version", "2023-06-01"}
)

// authFor is what a keyless fake accepts on each route.
func authFor(path string) []string {
	if path == "/v1/messages" {
		return anAuthAny
	}
	return oaAuthAny
}

func TestGate(t *testing.T) {
	s := Start(t, Options{})
	s.Release() // nobody waits: this must not let a later stream through
	req, _ := http.NewRequest(http.MethodPost, s.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"gated","stream":true,"messages":[{"role":"user","content":"a b"}]}`))
	req.Header.Set("Authorization", "Bearer k")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	<-s.Waiting()
	lines := make(chan string, 32)
	go func() {
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	deadline := time.After(300 * time.Millisecond)
	for held := true; held; {
		select {
		case l := <-lines:
			if strings.Contains(l, "[DONE]") || strings.Contains(l, `" b"`) {
				t.Fatal("the gated stream went on before Release")
			}
		case <-deadline:
			held = false
		}
	}
	s.Release()
	var rest []string
	for l := range lines {
		rest = append(rest, l)
	}
	if got := strings.Join(rest, "\n"); !strings.Contains(got, `" b"`) || !strings.Contains(got, "[DONE]") {
		t.Errorf("after Release: %s", got)
	}
}

func TestRecording(t *testing.T) {
	s := Start(t, Options{})
	do(t, s, "/v1/chat/completions", `{"model":"m1","messages":[{"role":"user","content":"hi"}]}`, "Authorization", "Bearer k", "X-Extra", "1")
	reqs := s.Requests()
	if len(reqs) != 1 || reqs[0].Model != "m1" || reqs[0].Path != "/v1/chat/completions" || reqs[0].Header.Get("X-Extra") != "1" || !strings.Contains(string(reqs[0].Body), "hi") {
		t.Errorf("%+v", reqs)
	}
	quiet := Start(t, Options{NoRecord: true})
	do(t, quiet, "/v1/chat/completions", `{"model":"m1","messages":[{"role":"user","content":"hi"}]}`, "Authorization", "Bearer k")
	if len(quiet.Requests()) != 0 {
		t.Error("NoRecord recorded")
	}
}

// TestOpenAISDK drives the OpenAI route with the official SDK, the client
// the gateway's users run.
func TestOpenAISDK(t *testing.T) {
	s := Start(t, Options{OpenAIKey: "ok"})
	client := openai.NewClient(option.WithBaseURL(s.URL+"/v1/"), option.WithAPIKey("ok"), option.WithMaxRetries(0))
	ctx := context.Background()
	params := openai.ChatCompletionNewParams{Model: "gpt-4o", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello sdk")}}
	res, err := client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if res.Choices[0].Message.Content != "echo: hello sdk" || res.Usage.TotalTokens != res.Usage.PromptTokens+res.Usage.CompletionTokens {
		t.Errorf("%+v", res)
	}

	params.Tools = []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{Name: "search"})}
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := client.Chat.Completions.NewStreaming(ctx, params)
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if tc := acc.Choices[0].Message.ToolCalls; len(tc) != 1 || tc[0].Function.Name != "search" || gjson.Get(tc[0].Function.Arguments, "query").Str != "hello sdk" || acc.Usage.TotalTokens == 0 {
		t.Errorf("%+v usage %+v", acc.Choices[0].Message, acc.Usage)
	}

	wrong := openai.NewClient(option.WithBaseURL(s.URL+"/v1/"), option.WithAPIKey("bad"), option.WithMaxRetries(0))
	_, err = wrong.Chat.Completions.New(ctx, params)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 401 || apiErr.Code != "invalid_api_key" {
		t.Errorf("error %v", err)
	}
}

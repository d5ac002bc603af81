package messages

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/openai"
	"github.com/modelgate/modelgate/providers/sse"
)

// hubTurn is one scripted answer of the fake hub provider.
type hubTurn struct {
	reasoning string          // streamed as reasoning_content in three pieces
	block     json.RawMessage // a thinking_blocks entry completing it, or nil
	text      string
	calls     [][3]string // id, name, arguments
	finish    string
}

// answer renders the turn as a hub chat.completion.
func (h hubTurn) answer() []byte {
	msg := map[string]any{"role": "assistant", "content": nil, "refusal": nil}
	if h.text != "" {
		msg["content"] = h.text
	}
	if h.reasoning != "" {
		msg["reasoning_content"] = h.reasoning
	}
	if h.block != nil {
		msg["thinking_blocks"] = []json.RawMessage{h.block}
	}
	var calls []any
	for _, c := range h.calls {
		calls = append(calls, map[string]any{"id": c[0], "type": "function", "function": map[string]any{"name": c[1], "arguments": c[2]}})
	}
	if calls != nil {
		msg["tool_calls"] = calls
	}
	b, _ := json.Marshal(map[string]any{
		"id": "chatcmpl-sdk", "object": "chat.completion", "created": 1, "model": "hub-model",
		"choices": []any{map[string]any{"index": 0, "message": msg, "logprobs": nil, "finish_reason": h.finish}},
		"usage":   map[string]any{"prompt_tokens": 900, "completion_tokens": 60, "total_tokens": 960, "prompt_tokens_details": map[string]any{"cached_tokens": 800}},
	})
	return b
}

// stream renders the turn as a hub chunk stream, as OpenAI sends one.
func (h hubTurn) stream() []byte {
	var out []byte
	chunk := func(delta any, finish any, usage any, choices bool) {
		c := map[string]any{"id": "chatcmpl-sdk", "object": "chat.completion.chunk", "created": 1, "model": "hub-model", "usage": usage}
		if choices {
			c["choices"] = []any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}}
		} else {
			c["choices"] = []any{}
		}
		b, _ := json.Marshal(c)
		out = sse.AppendData(out, b)
	}
	chunk(map[string]any{"role": "assistant", "content": ""}, nil, nil, true)
	if r := h.reasoning; r != "" {
		third := len(r) / 3
		for _, p := range []string{r[:third], r[third : 2*third], r[2*third:]} {
			chunk(map[string]any{"reasoning_content": p}, nil, nil, true)
		}
	}
	if h.block != nil {
		chunk(map[string]any{"thinking_blocks": []json.RawMessage{h.block}}, nil, nil, true)
	}
	if h.text != "" {
		chunk(map[string]any{"content": h.text}, nil, nil, true)
	}
	for i, c := range h.calls {
		chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": c[0], "type": "function", "function": map[string]any{"name": c[1], "arguments": ""}}}}, nil, nil, true)
		half := len(c[2]) / 2
		for _, p := range []string{c[2][:half], c[2][half:]} {
			chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": p}}}}, nil, nil, true)
		}
	}
	chunk(map[string]any{}, h.finish, nil, true)
	chunk(nil, nil, map[string]any{"prompt_tokens": 900, "completion_tokens": 60, "total_tokens": 960, "prompt_tokens_details": map[string]any{"cached_tokens": 800}}, false)
	return append(out, sse.Done...)
}

// gateway is a /v1/messages endpoint as the gateway serves it for a
// provider behind the hub: Validate, Chat{Inner: the provider's
// translator} (here OpenAI's pass-through), errors in Anthropic's shape.
// The provider is a script of hub turns; the hub requests it got are kept.
type gateway struct {
	t     *testing.T
	mu    sync.Mutex
	turns []hubTurn
	seen  [][]byte // hub requests, as the provider received them
}

func (g *gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	writeErr := func(e *providers.Error) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(ErrorStatus(e))
		_, _ = w.Write(ErrorBody(e))
	}
	asErr := func(err error) *providers.Error {
		var e *providers.Error
		if errors.As(err, &e) {
			return e
		}
		return &providers.Error{Status: 500, Message: err.Error()}
	}
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/v1/models":
		page, err := ParseModelPage(r.URL.Query())
		if err != nil {
			writeErr(asErr(err))
			return
		}
		_, _ = w.Write(ModelList([]string{"claude-sonnet-4-5", "gpt-5.1", "openai/gpt-4o"}, page))
		return
	case "/v1/messages/count_tokens":
		if _, err := ValidateCountTokens(body); err != nil {
			writeErr(asErr(err))
			return
		}
		out, err := CountTokens(body)
		if err != nil {
			writeErr(asErr(err))
			return
		}
		_, _ = w.Write(out)
		return
	}
	info, err := Validate(body)
	if err != nil {
		writeErr(asErr(err))
		return
	}
	// The hub as it is, markers too: the inner translator passes them on.
	chat := Chat{Inner: openai.Chat{CacheControl: true}}
	req, err := chat.ChatRequest(body, "hub-model")
	if err != nil {
		writeErr(asErr(err))
		return
	}
	g.mu.Lock()
	g.seen = append(g.seen, req.Body)
	if strings.HasPrefix(info.Model, "fail-") {
		g.mu.Unlock()
		status := map[string]int{"fail-429": 429, "fail-503": 503, "fail-400": 400}[info.Model]
		upstream := `{"error":{"message":"upstream says no","type":"x","param":null,"code":"context_length_exceeded"}}`
		switch status {
		case 429:
			upstream = `{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}`
		case 503:
			upstream = `{"error":{"message":"upstream says no","type":"server_error","param":null,"code":null}}`
		}
		writeErr(chat.Error(status, nil, []byte(upstream)))
		return
	}
	if len(g.turns) == 0 {
		g.mu.Unlock()
		g.t.Errorf("no scripted turn left for %s", req.Body)
		writeErr(&providers.Error{Status: 500, Message: "script exhausted"})
		return
	}
	turn := g.turns[0]
	g.turns = g.turns[1:]
	g.mu.Unlock()

	if !info.Stream {
		out, _, err := chat.ChatResponse(turn.answer())
		if err != nil {
			writeErr(asErr(err))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(out)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	tr := chat.ChatStream(providers.StreamOptions{Model: "hub-model"})
	var out []byte
	rest := turn.stream()
	for {
		ev, r, ok := sse.Cut(rest)
		if !ok {
			break
		}
		out, _ = tr.Event(out, ev)
		rest = r
	}
	_, _ = w.Write(tr.Close(out))
}

func newClient(t *testing.T, g *gateway) anthropic.Client {
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	return anthropic.NewClient(option.WithBaseURL(srv.URL), option.WithAPIKey("mgk_test"), option.WithMaxRetries(0))
}

const (
	sig1 = "EqQBCkgIARABGAIiQGZpcnN0IHR1cm4gc2lnbmF0dXJl"
	sig2 = "ErUBCkYIBRgCIkBzZWNvbmQgdHVybiBzaWduYXR1cmU="
)

// TestSDKToolLoopWithThinking runs a Claude-Code-shaped session through
// anthropic-sdk-go, streamed and not: system blocks with cache_control,
// tools, thinking on, and a tool loop over two tool turns whose assistant
// messages (thinking blocks with their signatures, text, tool_use) the SDK
// sends back as it received them. The hub requests must carry those
// thinking blocks exactly, before the tool calls, with the same ids and
// inputs.
func TestSDKToolLoopWithThinking(t *testing.T) {
	for _, streamed := range []bool{false, true} {
		name := "answer"
		if streamed {
			name = "stream"
		}
		t.Run(name, func(t *testing.T) {
			g := &gateway{t: t, turns: []hubTurn{
				{reasoning: "I need to read the file first.", block: json.RawMessage(`{"type":"thinking","thinking":"I need to read the file first.","signature":"` + sig1 + `"}`),
					text: "Reading it.", calls: [][3]string{{"toolu_01Read", "Read", `{"file_path":"/src/main.go"}`}}, finish: "tool_calls"},
				{reasoning: "Now run the tests.", block: json.RawMessage(`{"type":"thinking","thinking":"Now run the tests.","signature":"` + sig2 + `"}`),
					calls: [][3]string{{"toolu_02Bash", "Bash", `{"command":"go test ./..."}`}, {"toolu_03Bash", "Bash", `{"command":"go vet ./..."}`}}, finish: "tool_calls"},
				{text: "main.go prints hi; tests and vet pass.", finish: "stop"},
			}}
			client := newClient(t, g)
			params := anthropic.MessageNewParams{
				Model:     "claude-sonnet-4-5",
				MaxTokens: 16000, // the SDK wants a stream above about 21,000
				System: []anthropic.TextBlockParam{
					{Text: "x-anthropic-billing-header: cc_version=2.1.100"},
					{Text: "You are Claude Code, Anthropic's official CLI for Claude.", CacheControl: anthropic.NewCacheControlEphemeralParam()},
				},
				Thinking: anthropic.ThinkingConfigParamOfEnabled(8000),
				Tools: []anthropic.ToolUnionParam{
					{OfTool: &anthropic.ToolParam{Name: "Read", Description: anthropic.String("Reads a file."),
						InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"file_path": map[string]any{"type": "string"}}, Required: []string{"file_path"}}}},
					{OfTool: &anthropic.ToolParam{Name: "Bash", InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"command": map[string]any{"type": "string"}}},
						CacheControl: anthropic.NewCacheControlEphemeralParam()}},
				},
				Metadata: anthropic.MetadataParam{UserID: anthropic.String("user_abc_account__session_123")},
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("What does main.go do? Are the tests green?"))},
			}
			send := func() *anthropic.Message {
				t.Helper()
				if !streamed {
					m, err := client.Messages.New(context.Background(), params)
					if err != nil {
						t.Fatalf("New: %v", err)
					}
					return m
				}
				s := client.Messages.NewStreaming(context.Background(), params)
				var m anthropic.Message
				for s.Next() {
					if err := m.Accumulate(s.Current()); err != nil {
						t.Fatalf("Accumulate: %v", err)
					}
				}
				if err := s.Err(); err != nil {
					t.Fatalf("stream: %v", err)
				}
				return &m
			}

			// Turn 1: thinking, text, one tool call.
			m := send()
			if m.StopReason != "tool_use" || len(m.Content) != 3 || m.Content[0].Type != "thinking" || m.Content[0].Signature != sig1 ||
				m.Content[1].Text != "Reading it." || m.Content[2].ID != "toolu_01Read" || string(m.Content[2].Input) != `{"file_path":"/src/main.go"}` {
				t.Fatalf("turn 1: %s", m.RawJSON())
			}
			if m.Usage.InputTokens != 100 || m.Usage.CacheReadInputTokens != 800 || m.Usage.OutputTokens != 60 {
				t.Errorf("turn 1 usage %+v", m.Usage)
			}
			params.Messages = append(params.Messages, m.ToParam(),
				anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_01Read", "package main\nfunc main() { println(\"hi\") }", false)))

			// Turn 2: thinking and two tool calls, no text.
			m = send()
			if m.StopReason != "tool_use" || len(m.Content) != 3 || m.Content[0].Signature != sig2 || m.Content[1].ID != "toolu_02Bash" || m.Content[2].ID != "toolu_03Bash" {
				t.Fatalf("turn 2: %s", m.RawJSON())
			}
			params.Messages = append(params.Messages, m.ToParam(), anthropic.NewUserMessage(
				anthropic.NewToolResultBlock("toolu_02Bash", "ok", false),
				anthropic.NewToolResultBlock("toolu_03Bash", "vet: exit status 1", true)))

			// Turn 3: the answer.
			m = send()
			if m.StopReason != "end_turn" || len(m.Content) != 1 || m.Content[0].Text != "main.go prints hi; tests and vet pass." {
				t.Fatalf("turn 3: %s", m.RawJSON())
			}

			if len(g.seen) != 3 {
				t.Fatalf("%d hub requests, want 3", len(g.seen))
			}
			first := gjson.ParseBytes(g.seen[0])
			if first.Get("reasoning_effort").Str != "high" || first.Get("max_completion_tokens").Int() != 16000 ||
				first.Get("user").Str != "user_abc_account__session_123" || first.Get("tools.#").Int() != 2 ||
				first.Get("messages.0.content.1.cache_control.type").Str != "ephemeral" || first.Get("messages.0.content.0.cache_control").Exists() ||
				first.Get("tools.1.cache_control.type").Str != "ephemeral" || first.Get("tools.0.cache_control").Exists() {
				t.Errorf("hub request 1: %s", g.seen[0])
			}
			if streamed != first.Get("stream_options.include_usage").Bool() {
				t.Errorf("hub request 1 stream options: %s", g.seen[0])
			}
			last := gjson.ParseBytes(g.seen[2]).Get("messages")
			// system, user, assistant 1, tool, assistant 2, tool, tool
			roles := []string{}
			for _, m := range last.Array() {
				roles = append(roles, m.Get("role").Str)
			}
			if strings.Join(roles, ",") != "system,user,assistant,tool,assistant,tool,tool" {
				t.Fatalf("hub roles %v\n%s", roles, g.seen[2])
			}
			a1, a2 := last.Get("2"), last.Get("4")
			if a1.Get("thinking_blocks").Raw != `[{"type":"thinking","thinking":"I need to read the file first.","signature":"`+sig1+`"}]` ||
				a1.Get("reasoning_content").Str != "I need to read the file first." || a1.Get("content").Str != "Reading it." ||
				a1.Get("tool_calls.0.id").Str != "toolu_01Read" || a1.Get("tool_calls.0.function.arguments").Str != `{"file_path":"/src/main.go"}` {
				t.Errorf("assistant 1 in the hub: %s", a1.Raw)
			}
			if a2.Get("thinking_blocks.0.signature").Str != sig2 || a2.Get("content").Type != gjson.Null || a2.Get("tool_calls.#").Int() != 2 ||
				a2.Get("tool_calls.1.function.arguments").Str != `{"command":"go vet ./..."}` {
				t.Errorf("assistant 2 in the hub: %s", a2.Raw)
			}
			if last.Get("5.tool_call_id").Str != "toolu_02Bash" || last.Get("6.content").Str != "Error: vet: exit status 1" {
				t.Errorf("tool results in the hub: %s", last.Raw)
			}
		})
	}
}

// TestSDKErrors: every error on /v1/messages reaches the SDK in
// Anthropic's shape, as an *anthropic.Error with the status and type.
func TestSDKErrors(t *testing.T) {
	client := newClient(t, &gateway{t: t})
	user := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}
	tests := []struct {
		name   string
		params anthropic.MessageNewParams
		status int
		typ    string
		msg    string
	}{
		{"rate limited", anthropic.MessageNewParams{Model: "fail-429", MaxTokens: 10, Messages: user}, 429, "rate_limit_error", "Rate limit reached"},
		{"overloaded", anthropic.MessageNewParams{Model: "fail-503", MaxTokens: 10, Messages: user}, 503, "overloaded_error", "upstream says no"},
		{"context length", anthropic.MessageNewParams{Model: "fail-400", MaxTokens: 10, Messages: user}, 400, "invalid_request_error", "prompt is too long: upstream says no"},
		{"server tool", anthropic.MessageNewParams{Model: "m", MaxTokens: 10, Messages: user,
			Tools: []anthropic.ToolUnionParam{{OfWebSearchTool20250305: &anthropic.WebSearchTool20250305Param{}}}}, 400, "invalid_request_error", "tools.0.type: "},
		{"no messages", anthropic.MessageNewParams{Model: "m", MaxTokens: 10}, 400, "invalid_request_error", "messages: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := client.Messages.New(context.Background(), tt.params)
			var apiErr *anthropic.Error
			if !errors.As(err, &apiErr) {
				t.Fatalf("error %v is not an *anthropic.Error", err)
			}
			if apiErr.StatusCode != tt.status || gjson.Get(apiErr.RawJSON(), "error.type").Str != tt.typ ||
				!strings.HasPrefix(gjson.Get(apiErr.RawJSON(), "error.message").Str, tt.msg) {
				t.Errorf("got %d %s, want %d %s %q", apiErr.StatusCode, apiErr.RawJSON(), tt.status, tt.typ, tt.msg)
			}
		})
	}
}

// TestSDKCountTokensAndModels reads count_tokens and the model list with
// the SDK, through its own pagination.
func TestSDKCountTokensAndModels(t *testing.T) {
	client := newClient(t, &gateway{t: t})
	n, err := client.Messages.CountTokens(context.Background(), anthropic.MessageCountTokensParams{
		Model:    "m",
		System:   anthropic.MessageCountTokensParamsSystemUnion{OfString: anthropic.String("Be brief.")},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Count these words, please."))},
	})
	if err != nil {
		t.Fatal(err)
	}
	// 3 (request) + 3+3 (system "Be brief.") + 3+7 (26 characters)
	if n.InputTokens != 19 {
		t.Errorf("input_tokens = %d, want 19", n.InputTokens)
	}

	var ids []string
	iter := client.Models.ListAutoPaging(context.Background(), anthropic.ModelListParams{Limit: anthropic.Int(2)})
	for iter.Next() {
		m := iter.Current()
		if m.Type != "model" || m.DisplayName != m.ID || m.CreatedAt.Unix() != 0 {
			t.Errorf("model %+v", m)
		}
		ids = append(ids, m.ID)
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	if strings.Join(ids, ",") != "claude-sonnet-4-5,gpt-5.1,openai/gpt-4o" {
		t.Errorf("models %v", ids)
	}
}

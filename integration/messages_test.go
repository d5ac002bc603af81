package integration

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/tidwall/gjson"
)

// anthropicClient is the Anthropic SDK pointed at the gateway with a
// gateway key, sent as x-api-key as the SDK sends it.
func anthropicClient(key string) anthropic.Client {
	return anthropic.NewClient(option.WithBaseURL(gatewayBase), option.WithAPIKey(key),
		option.WithMaxRetries(0), option.WithRequestTimeout(20*time.Second))
}

var weatherTool = anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{
	Name: "search", Description: anthropic.String("Search the web"),
	InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"query": map[string]any{"type": "string"}}, Required: []string{"query"}},
}}

// TestIntegrationMessages drives the Messages API with Anthropic's own SDK:
// passed through to Anthropic (a multi-turn tool loop with thinking on, the
// signatures intact, anthropic-beta reaching the provider), translated for
// chat providers of other wire formats (a tool loop, streamed and not),
// count_tokens, the model list in Anthropic's shape, and errors in
// Anthropic's shape the SDK raises.
func TestIntegrationMessages(t *testing.T) {
	fake, _ := startProviders(t)
	c := anthropicClient(aliceKey)
	ctx := context.Background()

	for _, model := range []string{"anthropic/claude-sonnet-4-5", "openai/gpt-4o", "azure_v1/prod-gpt-4o"} {
		t.Run(model+"/tool loop, streamed and not", func(t *testing.T) {
			p := anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 1024, Tools: []anthropic.ToolUnionParam{weatherTool},
				System:   []anthropic.TextBlockParam{{Text: "You are terse.", CacheControl: anthropic.NewCacheControlEphemeralParam()}},
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("weather in Paris"))}}
			msg, err := c.Messages.New(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			var use *anthropic.ToolUseBlock
			for _, b := range msg.Content {
				if tu, ok := b.AsAny().(anthropic.ToolUseBlock); ok {
					use = &tu
				}
			}
			if use == nil || use.Name != "search" || gjson.Get(string(use.Input), "query").Str != "weather in Paris" || msg.StopReason != anthropic.StopReasonToolUse {
				t.Fatalf("answer %+v", msg)
			}
			stream := c.Messages.NewStreaming(ctx, p)
			var acc anthropic.Message
			for stream.Next() {
				if err := acc.Accumulate(stream.Current()); err != nil {
					t.Fatal(err)
				}
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			if acc.StopReason != msg.StopReason || len(acc.Content) != len(msg.Content) || acc.Usage.OutputTokens != msg.Usage.OutputTokens {
				t.Errorf("streamed %+v, answered %+v", acc, msg)
			}
			p.Messages = append(p.Messages, msg.ToParam(), anthropic.NewUserMessage(anthropic.NewToolResultBlock(use.ID, "sunny, 21 C", false)))
			final, err := c.Messages.New(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			if len(final.Content) == 0 || final.Content[0].Text != "tool said: sunny, 21 C" || final.StopReason != anthropic.StopReasonEndTurn {
				t.Errorf("after the tool: %+v", final)
			}
		})
	}

	t.Run("pass-through: thinking across a tool loop, signatures and beta headers intact", func(t *testing.T) {
		p := anthropic.MessageNewParams{Model: "anthropic/claude-sonnet-4-5", MaxTokens: 4096, Tools: []anthropic.ToolUnionParam{weatherTool},
			Thinking: anthropic.ThinkingConfigParamOfEnabled(2048),
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("weather in Paris"))}}
		before := len(fake.Requests())
		stream := c.Messages.NewStreaming(ctx, p, option.WithHeader("anthropic-beta", "interleaved-thinking-2025-05-14"))
		var msg anthropic.Message
		for stream.Next() {
			if err := msg.Accumulate(stream.Current()); err != nil {
				t.Fatal(err)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		var signed, used bool
		var useID string
		for _, b := range msg.Content {
			switch v := b.AsAny().(type) {
			case anthropic.ThinkingBlock:
				signed = v.Signature != "" && v.Thinking != ""
			case anthropic.ToolUseBlock:
				used, useID = true, v.ID
			}
		}
		if !signed || !used {
			t.Fatalf("want a signed thinking block and a tool call: %+v", msg.Content)
		}
		sent := fake.Requests()[before:]
		if len(sent) != 1 || sent[0].Path != "/v1/messages" || sent[0].Header.Get("Anthropic-Beta") != "interleaved-thinking-2025-05-14" ||
			gjson.GetBytes(sent[0].Body, "model").Str != "claude-sonnet-4-5" || sent[0].Header.Get("X-Api-Key") == aliceKey {
			t.Fatalf("the provider got %s %v %s", sent[0].Path, sent[0].Header, sent[0].Body)
		}
		// The second turn carries the thinking block back byte for byte;
		// the fake verifies its signature and refuses a tool result whose
		// turn lost it.
		p.Messages = append(p.Messages, msg.ToParam(), anthropic.NewUserMessage(anthropic.NewToolResultBlock(useID, "sunny, 21 C", false)))
		final, err := c.Messages.New(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		var text string
		for _, b := range final.Content {
			if b.Type == "text" {
				text = b.Text
			}
		}
		if text != "tool said: sunny, 21 C" {
			t.Errorf("final %+v", final.Content)
		}
	})

	t.Run("count_tokens: Anthropic's own, and an estimate elsewhere", func(t *testing.T) {
		// Counting costs nothing: it is never an unpriced request.
		unpriced := `caddy_modelgate_unpriced_requests_total{model="claude-sonnet-4-5",provider="anthropic"}`
		before := metricValue(scrapeMetrics(t), unpriced)
		defer func() {
			if d := metricValue(scrapeMetrics(t), unpriced) - before; d != 0 {
				t.Errorf("count_tokens counted %v unpriced requests", d)
			}
		}()
		for _, model := range []string{"anthropic/claude-sonnet-4-5", "openai/gpt-4o"} {
			n, err := c.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: anthropic.Model(model),
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("how many tokens is this sentence"))}})
			if err != nil || n.InputTokens <= 0 {
				t.Errorf("%s: %+v %v", model, n, err)
			}
		}
	})

	t.Run("models in Anthropic's shape", func(t *testing.T) {
		status, body, _ := request(t, http.MethodGet, gatewayBase+"/v1/models?limit=2", "", "x-api-key", aliceKey, "anthropic-version", "2023-06-01")
		if status != 200 || gjson.Get(body, "data.0.type").Str != "model" || !gjson.Get(body, "has_more").Exists() || len(gjson.Get(body, "data").Array()) > 2 {
			t.Errorf("%d %s", status, body)
		}
		status, body, _ = request(t, http.MethodGet, gatewayBase+"/v1/models", "", "Authorization", "Bearer "+aliceKey)
		if status != 200 || gjson.Get(body, "object").Str != "list" {
			t.Errorf("OpenAI's shape without anthropic-version: %d %s", status, body)
		}
	})

	t.Run("errors in Anthropic's shape", func(t *testing.T) {
		for _, tc := range []struct {
			name, key, model string
			status           int
			typ              string
		}{
			{"unknown key", "nope", "anthropic/claude-sonnet-4-5", 401, "authentication_error"},
			{"unknown model", aliceKey, "nope-model", 404, "not_found_error"},
			{"provider rate limit", aliceKey, "openai/fail-429", 429, "rate_limit_error"},
			{"provider overloaded", aliceKey, "anthropic/fail-529", 503, "overloaded_error"},
		} {
			ac := anthropicClient(tc.key)
			_, err := ac.Messages.New(ctx, anthropic.MessageNewParams{Model: anthropic.Model(tc.model), MaxTokens: 10,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
			var apiErr *anthropic.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != tc.status || !strings.Contains(apiErr.RawJSON(), `"type":"`+tc.typ+`"`) ||
				!strings.HasPrefix(apiErr.RawJSON(), `{"type":"error"`) {
				t.Errorf("%s: %v", tc.name, err)
			}
		}
		s := c.Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: "openai/midstream-error", MaxTokens: 10,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi there"))}})
		for s.Next() {
		}
		if s.Err() == nil {
			t.Error("a translated stream that failed mid-way ended without an error the SDK raises")
		}
		// A provider that closes its stream after one event, before
		// message_stop (or [DONE]): passed through or translated, the SDK
		// raises an error rather than return a cut-off message as whole.
		for _, model := range []string{"anthropic/cutoff", "openai/cutoff"} {
			s := c.Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 10,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi there"))}})
			for s.Next() {
			}
			if err := s.Err(); err == nil || !strings.Contains(err.Error(), "stream ended before") {
				t.Errorf("%s: a stream the provider closed before its end: %v", model, err)
			}
		}
	})
}

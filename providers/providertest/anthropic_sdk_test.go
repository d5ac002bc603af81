package providertest

import (
	"context"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
)

// TestAnthropicSDK drives the fake with Anthropic's official Go SDK: a
// tool loop with extended thinking, the second turn sending back the
// assistant message as the SDK rebuilds it (Message.ToParam), and the
// same question streamed and accumulated by the SDK. The SDK reads the
// fake's answers and stream, and the fake takes what the SDK sends.
func TestAnthropicSDK(t *testing.T) {
	s := newFake(t)
	client := anthropic.NewClient(option.WithBaseURL(s.URL), option.WithAPIKey("ak"), option.WithMaxRetries(0))
	ctx := context.Background()
	params := anthropic.MessageNewParams{
		Model:     "claude-sonnet-4-5",
		MaxTokens: 2000,
		Thinking:  anthropic.ThinkingConfigParamOfEnabled(1024),
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Paris"))},
		Tools: []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{
			Name:        "weather",
			InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}},
		}}},
	}
	msg, err := client.Messages.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if len(msg.Content) != 2 || msg.Content[0].Type != "thinking" || msg.Content[0].Signature != thinkingSignature("Thinking about: Paris") ||
		msg.Content[1].Type != "tool_use" || msg.StopReason != anthropic.StopReasonToolUse || msg.Usage.OutputTokensDetails.ThinkingTokens != 3 {
		t.Fatalf("first turn %s", msg.RawJSON())
	}

	next := params
	next.Messages = append(append([]anthropic.MessageParam(nil), params.Messages...), msg.ToParam(),
		anthropic.NewUserMessage(anthropic.NewToolResultBlock(msg.Content[1].ID, "sunny", false)))
	final, err := client.Messages.New(ctx, next)
	if err != nil {
		t.Fatal(err)
	}
	if final.Content[1].Text != "tool said: sunny" {
		t.Errorf("second turn %s", final.RawJSON())
	}

	stream := client.Messages.NewStreaming(ctx, params)
	var acc anthropic.Message
	for stream.Next() {
		if err := acc.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(acc.Content) != 2 || acc.Content[0].Thinking != msg.Content[0].Thinking || acc.Content[0].Signature != msg.Content[0].Signature ||
		acc.Content[1].Name != "weather" || string(acc.Content[1].Input) != string(msg.Content[1].Input) {
		t.Errorf("streamed %s, answered %s", acc.RawJSON(), msg.RawJSON())
	}
}

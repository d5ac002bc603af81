package integration

import (
	"context"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers/providertest"
)

// cloudClaude is one way to Claude in an enterprise's cloud: the model as
// a client names it, and what the fake must have got for a streamed and a
// plain request.
type cloudClaude struct {
	name, model          string
	streamPath, sentPath string
	countPath            string // where count_tokens goes; "": estimated by the gateway
	version              string // the anthropic_version the body must carry
	betaInBody           bool   // anthropic-beta moves into the body's anthropic_beta
}

var cloudClaudes = []cloudClaude{
	{name: "bedrock", model: "bedrock/us.anthropic.claude-sonnet-4-5-20250929-v1:0",
		streamPath: "/model/us.anthropic.claude-sonnet-4-5-20250929-v1:0/invoke-with-response-stream",
		sentPath:   "/model/us.anthropic.claude-sonnet-4-5-20250929-v1:0/invoke",
		version:    "bedrock-2023-05-31", betaInBody: true},
	{name: "vertex", model: "vertex/claude-sonnet-4-5@20250929",
		streamPath: "/v1/projects/test-project/locations/us-central1/publishers/anthropic/models/claude-sonnet-4-5@20250929:streamRawPredict",
		sentPath:   "/v1/projects/test-project/locations/us-central1/publishers/anthropic/models/claude-sonnet-4-5@20250929:rawPredict",
		countPath:  "/v1/projects/test-project/locations/us-central1/publishers/anthropic/models/count-tokens:rawPredict",
		version:    "vertex-2023-10-16"},
}

// TestIntegrationClaudeOnClouds drives the Messages API with Anthropic's
// SDK to Claude on the clouds enterprises buy it through, passed through
// in the cloud's own Messages envelope: a tool loop with thinking on,
// streamed, whose signed thinking block goes back byte for byte (the fake
// verifies the signature); prompt caching; anthropic-beta reaching the
// provider; what the fake got (the cloud's path, anthropic_version, no
// model). Chat and Responses reach the same models translated.
func TestIntegrationClaudeOnClouds(t *testing.T) {
	fake, _ := startProviders(t)
	c := anthropicClient(aliceKey)
	ctx := context.Background()
	for _, cc := range cloudClaudes {
		t.Run(cc.name, func(t *testing.T) {
			p := anthropic.MessageNewParams{Model: anthropic.Model(cc.model), MaxTokens: 4096, Tools: []anthropic.ToolUnionParam{weatherTool},
				Thinking: anthropic.ThinkingConfigParamOfEnabled(2048),
				System:   []anthropic.TextBlockParam{{Text: "You are terse and helpful about the weather, always.", CacheControl: anthropic.NewCacheControlEphemeralParam()}},
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
			var signed bool
			var useID string
			for _, b := range msg.Content {
				switch v := b.AsAny().(type) {
				case anthropic.ThinkingBlock:
					signed = v.Signature != "" && v.Thinking != ""
				case anthropic.ToolUseBlock:
					useID = v.ID
				}
			}
			if !signed || useID == "" || msg.StopReason != anthropic.StopReasonToolUse || msg.Usage.CacheCreationInputTokens == 0 {
				t.Fatalf("want a signed thinking block, a tool call and a cache write: %+v", msg)
			}
			sent := calls(fake, before)
			if len(sent) != 1 {
				t.Fatalf("the provider got %d requests", len(sent))
			}
			checkCloudBody(t, cc, sent[0], cc.streamPath, "interleaved-thinking-2025-05-14")

			p.Messages = append(p.Messages, msg.ToParam(), anthropic.NewUserMessage(anthropic.NewToolResultBlock(useID, "sunny, 21 C", false)))
			before = len(fake.Requests())
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
			if text != "tool said: sunny, 21 C" || final.Usage.CacheReadInputTokens == 0 {
				t.Errorf("after the tool: %+v", final)
			}
			checkCloudBody(t, cc, calls(fake, before)[0], cc.sentPath, "")

			// count_tokens: the cloud's own where it has one, else the
			// gateway's estimate.
			before = len(fake.Requests())
			n, err := c.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: anthropic.Model(cc.model),
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("how many tokens is this"))}})
			if err != nil || n.InputTokens <= 0 {
				t.Errorf("count_tokens: %v %+v", err, n)
			}
			if sent := calls(fake, before); cc.countPath == "" && len(sent) != 0 || cc.countPath != "" && (len(sent) != 1 || sent[0].Path != cc.countPath) {
				t.Errorf("count_tokens reached the provider as %+v", sent)
			}

			// Chat and Responses reach the same model translated, to the
			// same endpoint.
			oc := sdk(aliceKey)
			before = len(fake.Requests())
			chat, err := oc.Chat.Completions.New(ctx, userChat(cc.model, "hello from chat"))
			if err != nil || len(chat.Choices) != 1 || chat.Choices[0].Message.Content != "echo: hello from chat" {
				t.Errorf("chat: %v %+v", err, chat)
			}
			if sent := calls(fake, before); len(sent) != 1 || (sent[0].Path != cc.sentPath && !strings.HasSuffix(sent[0].Path, "/converse")) {
				t.Errorf("chat reached the provider as %+v", sent)
			}
			resp, err := oc.Responses.New(ctx, responses.ResponseNewParams{Model: cc.model,
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello from responses")}})
			if err != nil || resp.OutputText() != "echo: hello from responses" {
				t.Errorf("responses: %v %+v", err, resp)
			}
		})
	}

	// Bedrock's other models take the Messages API through Converse.
	before := len(fake.Requests())
	msg, err := c.Messages.New(ctx, anthropic.MessageNewParams{Model: "bedrock/amazon.nova-2-lite-v1:0", MaxTokens: 100,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hello nova"))}})
	if err != nil || len(msg.Content) != 1 || msg.Content[0].Text != "echo: hello nova" {
		t.Fatalf("nova: %v %+v", err, msg)
	}
	if sent := calls(fake, before); len(sent) != 1 || !strings.HasSuffix(sent[0].Path, "/converse") {
		t.Errorf("nova went to %+v", sent)
	}
}

// calls are the requests the fake got since the first before, but for
// Google's token requests.
func calls(fake *providertest.Server, before int) []providertest.Recorded {
	var out []providertest.Recorded
	for _, r := range fake.Requests()[before:] {
		if r.Path != providertest.GoogleTokenPath {
			out = append(out, r)
		}
	}
	return out
}

// checkCloudBody checks a Messages request as the cloud takes it.
func checkCloudBody(t *testing.T, cc cloudClaude, r providertest.Recorded, path, beta string) {
	t.Helper()
	body := gjson.ParseBytes(r.Body)
	if r.Path != path || body.Get("model").Exists() || body.Get("anthropic_version").Str != cc.version {
		t.Errorf("the provider got %s %s", r.Path, r.Body)
	}
	if cc.betaInBody {
		if body.Get("stream").Exists() {
			t.Errorf("stream in the body: %s", r.Body)
		}
		if got := body.Get("anthropic_beta.0").Str; got != beta {
			t.Errorf("anthropic_beta = %s, want %q", body.Get("anthropic_beta").Raw, beta)
		}
	} else if got := r.Header.Get("Anthropic-Beta"); got != beta || r.Header.Get("Anthropic-Version") != "" {
		t.Errorf("anthropic-beta = %q, want %q; anthropic-version %q", got, beta, r.Header.Get("Anthropic-Version"))
	}
	if strings.Contains(string(r.Body), aliceKey) || r.Header.Get("X-Api-Key") != "" {
		t.Errorf("the client's key reached the provider")
	}
}

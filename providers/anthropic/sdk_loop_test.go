package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/providertest"
)

// miniGateway serves unified chat (not streamed) through the translator to
// the fake Anthropic, for model: the part of the gateway the translator
// owns, without routing or auth.
func miniGateway(t *testing.T, fake *providertest.Server, model string) *httptest.Server {
	t.Helper()
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fail := func(e *providers.Error) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(e.Status)
			_, _ = w.Write(e.JSON())
		}
		if _, err := providers.ValidateChat(body); err != nil {
			e, _ := errors.AsType[*providers.Error](err)
			fail(e)
			return
		}
		req, err := testChat.ChatRequest(body, model)
		if err != nil {
			e, _ := errors.AsType[*providers.Error](err)
			fail(e)
			return
		}
		up, _ := http.NewRequest(http.MethodPost, fake.URL+req.Path, strings.NewReader(string(req.Body)))
		up.Header.Set("Content-Type", "application/json")
		up.Header.Set("X-Api-Key", "k")
		up.Header.Set("Anthropic-Version", req.Header.Get("Anthropic-Version"))
		res, err := http.DefaultClient.Do(up)
		if err != nil {
			t.Error(err)
			return
		}
		defer res.Body.Close()
		answer, _ := io.ReadAll(res.Body)
		if res.StatusCode != 200 {
			fail(testChat.Error(res.StatusCode, res.Header, answer))
			return
		}
		out, _, err := testChat.ChatResponse(answer)
		if err != nil {
			t.Error(err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(out)
	}))
	t.Cleanup(gw.Close)
	return gw
}

// TestOpenAIGoThinkingLoop runs a tool loop with thinking on from
// openai-go, the official OpenAI Go SDK. Its ToParam keeps only the fields
// it knows, so a Go client carries thinking_blocks over as an extra field,
// as the README shows; without them the provider refuses the second turn.
func TestOpenAIGoThinkingLoop(t *testing.T) {
	gw := miniGateway(t, providertest.Start(t, providertest.Options{}), "claude-sonnet-4-5")
	client := openai.NewClient(option.WithBaseURL(gw.URL), option.WithAPIKey("k"), option.WithMaxRetries(0))
	ctx := context.Background()

	params := openai.ChatCompletionNewParams{
		Model:           "my-claude",
		ReasoningEffort: openai.ReasoningEffortLow,
		Messages:        []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Paris")},
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
			Name:       "weather",
			Parameters: openai.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}},
		})},
	}
	first, err := client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	msg := first.Choices[0].Message
	blocks, ok := msg.JSON.ExtraFields["thinking_blocks"]
	if !ok || len(msg.ToolCalls) != 1 || msg.JSON.ExtraFields["reasoning_content"].Raw() != `"Thinking about: Paris"` {
		t.Fatalf("first turn: %s", msg.RawJSON())
	}

	turn := func(assistant openai.ChatCompletionAssistantMessageParam) error {
		p := params
		p.Messages = append(append([]openai.ChatCompletionMessageParamUnion(nil), params.Messages...),
			openai.ChatCompletionMessageParamUnion{OfAssistant: &assistant},
			openai.ToolMessage("sunny", msg.ToolCalls[0].ID))
		final, err := client.Chat.Completions.New(ctx, p)
		if err == nil && final.Choices[0].Message.Content != "tool said: sunny" {
			t.Errorf("second turn: %s", final.RawJSON())
		}
		return err
	}

	withBlocks := msg.ToAssistantMessageParam()
	withBlocks.SetExtraFields(map[string]any{"thinking_blocks": json.RawMessage(blocks.Raw())})
	if err := turn(withBlocks); err != nil {
		t.Fatalf("with thinking_blocks: %v", err)
	}

	var apiErr *openai.Error
	if err := turn(msg.ToAssistantMessageParam()); err == nil || !errors.As(err, &apiErr) || apiErr.StatusCode != 400 ||
		!strings.Contains(apiErr.Message, "Expected `thinking`") {
		t.Errorf("without thinking_blocks: %v", err)
	}
}

package gateway

import (
	"context"
	"strings"
	"testing"

	"github.com/modelgate/modelgate/pricing"
	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/anthropic"
	"github.com/modelgate/modelgate/providers/messages"
	"github.com/modelgate/modelgate/providers/openai"
)

// TestCacheWrite1hPriced reads Claude's one-hour cache writes as the
// core reads usage, from what the translators and relays return — a chat
// answer translated from Anthropic's, a chat answer passed through as
// the provider sent it, a Message passed through, and a Messages stream
// passed through (message_start gives them, message_delta leaves them as
// they were) — and settles each at the model's cache_write_1h rate:
// 1,000 uncached, 2,000 read and 3,000 written prompt tokens (1,000 for
// an hour) and 100 output tokens of Claude Sonnet 4.5 cost $0.0186, not
// the $0.01635 of five-minute writes.
func TestCacheWrite1hPriced(t *testing.T) {
	const anthropicUsage = `{"input_tokens":1000,"cache_read_input_tokens":2000,"cache_creation_input_tokens":3000,"cache_creation":{"ephemeral_5m_input_tokens":2000,"ephemeral_1h_input_tokens":1000},"output_tokens":100}`
	read := map[string]func(t *testing.T) Usage{
		"chat from Anthropic": func(t *testing.T) Usage {
			_, used, err := anthropic.Chat{}.ChatResponse([]byte(`{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Hi"}],"stop_reason":"end_turn","usage":` + anthropicUsage + `}`))
			if err != nil {
				t.Fatal(err)
			}
			return used
		},
		"chat passed through": func(t *testing.T) Usage {
			_, used, err := openai.Chat{}.ChatResponse([]byte(`{"id":"c","object":"chat.completion","choices":[],"usage":{"prompt_tokens":6000,"completion_tokens":100,"prompt_tokens_details":{"cached_tokens":2000,"cache_write_tokens":3000,"cache_write_1h_tokens":1000}}}`))
			if err != nil {
				t.Fatal(err)
			}
			return used
		},
		"Message passed through": func(*testing.T) Usage {
			return messages.AnswerUsage([]byte(`{"id":"msg_1","type":"message","usage":` + anthropicUsage + `}`))
		},
		"Messages stream passed through": func(t *testing.T) Usage {
			r := messages.NewRelay()
			for _, ev := range []string{
				"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":" + strings.Replace(anthropicUsage, `"output_tokens":100`, `"output_tokens":1`, 1) + "}}",
				"event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"input_tokens\":1000,\"cache_read_input_tokens\":2000,\"cache_creation_input_tokens\":3000,\"output_tokens\":100}}",
				"event: message_stop\ndata: {\"type\":\"message_stop\"}",
			} {
				if _, err := r.Event(nil, []byte(ev)); err != nil {
					t.Fatal(err)
				}
			}
			return r.Usage()
		},
	}
	g := &Gateway{prices: pricing.Default()}
	sonnet := Target{Provider: &Provider{Name: "claude", Type: "anthropic"}, Model: "claude-sonnet-4-5"}
	for name, usage := range read {
		t.Run(name, func(t *testing.T) {
			u := usage(t)
			if u.Prompt != 6000 || u.CacheWrite != 3000 || u.CacheWrite1h != 1000 || u.Completion != 100 || !u.Known {
				t.Errorf("usage %+v", u)
			}
			o := &Outcome{Target: sonnet, Usage: u}
			g.settle(context.Background(), o, &request{endpoint: endpointMessages}, admission{})
			if !o.Priced || o.Cost != 18600*pricing.Microdollar {
				t.Errorf("cost %s, priced %v; want 0.0186", o.Cost, o.Priced)
			}
		})
	}
}

// TestPricingUsage: every count of what a call used reaches the price
// table.
func TestPricingUsage(t *testing.T) {
	u := providers.Used{Prompt: 1, Cached: 2, CacheWrite: 3, CacheWrite1h: 4, Completion: 5, Reasoning: 6, Searches: 7, Embedding: 8, Known: true}
	want := pricing.Usage{PromptTokens: 1, CachedTokens: 2, CacheWriteTokens: 3, CacheWrite1hTokens: 4, CompletionTokens: 5, Searches: 7, EmbeddingTokens: 8}
	if got := pricingUsage(u); got != want {
		t.Errorf("pricingUsage = %+v, want %+v", got, want)
	}
}

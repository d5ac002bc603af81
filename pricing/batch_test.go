package pricing

import (
	"strings"
	"testing"
)

func TestBatchPrices(t *testing.T) {
	u := Usage{PromptTokens: 1_000_000, CachedTokens: 200_000, CompletionTokens: 1_000_000}
	p := Default()
	for _, tc := range []struct{ typ, model string }{
		{"openai", "gpt-4o"}, {"anthropic", "claude-sonnet-4-5"}, {"gemini", "gemini-2.5-flash"}, {"azure_openai", "gpt-4.1"},
		// The models Bedrock batch inference and Vertex AI batch
		// prediction take, as their jobs name them.
		{"bedrock", "anthropic.claude-sonnet-4-5-20250929-v1:0"}, {"bedrock", "us.anthropic.claude-haiku-4-5-20251001-v1:0"},
		{"vertex", "gemini-2.5-flash"}, {"vertex", "publishers/google/models/gemini-2.5-pro"},
	} {
		live, ok := p.Cost(tc.typ, tc.model, u)
		if !ok {
			t.Fatalf("%s/%s is not priced", tc.typ, tc.model)
		}
		batch, ok := p.BatchCost(tc.typ, tc.model, u)
		if !ok || batch*2 != live && batch*2 != live+1 && batch*2 != live-1 {
			t.Errorf("%s/%s: batch %s, live %s; want half", tc.typ, tc.model, batch, live)
		}
	}
	// A type without batches costs the same in a batch.
	live, _ := p.Cost("cohere", "command-a-03-2025", u)
	if b, _ := p.BatchCost("cohere", "command-a-03-2025", u); b != live {
		t.Errorf("cohere batch %s, live %s", b, live)
	}
}

func TestBatchRatesOverrideDiscountAndTiers(t *testing.T) {
	table, err := ParseTable([]byte(`{"providers":{"acme":{"batch_discount":40,"models":{
		"m1":{"input":10,"output":20,"tiers":[{"above":1500000,"input":30}]},
		"m2":{"input":10,"output":20,"batch":{"output":1}}}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	p, err := Build(table)
	if err != nil {
		t.Fatal(err)
	}
	cost := func(model string, u Usage) Money {
		t.Helper()
		c, ok := p.BatchCost("acme", model, u)
		if !ok {
			t.Fatalf("%s unpriced", model)
		}
		return c
	}
	if got := cost("m1", Usage{PromptTokens: 1_000_000}); got != 6*Dollar {
		t.Errorf("m1 input at 40%% off: %s, want 6", got)
	}
	if got := cost("m1", Usage{PromptTokens: 2_000_000, CompletionTokens: 1_000_000}); got != 36*Dollar+12*Dollar {
		t.Errorf("m1 in its tier: %s, want 48 (2 × 18 + 12)", got)
	}
	if got := cost("m2", Usage{PromptTokens: 1_000_000, CompletionTokens: 1_000_000}); got != 6*Dollar+1*Dollar {
		t.Errorf("m2: %s, want 7 (discounted input, its own batch output)", got)
	}
	// An override's discount replaces the shipped one.
	merged := Merge(Shipped(), &Table{Providers: map[string]*ProviderPrices{"openai": {BatchDiscount: new(0)}}})
	mp, err := Build(merged)
	if err != nil {
		t.Fatal(err)
	}
	u := Usage{PromptTokens: 1000}
	live, _ := mp.Cost("openai", "gpt-4o", u)
	if b, _ := mp.BatchCost("openai", "gpt-4o", u); b != live {
		t.Errorf("discount 0: batch %s, live %s", b, live)
	}
}

func TestBatchDiscountValidated(t *testing.T) {
	for _, d := range []string{"-1", "101"} {
		_, err := ParseTable([]byte(`{"providers":{"acme":{"batch_discount":` + d + `,"models":{"m":{"input":1}}}}}`))
		if err == nil || !strings.Contains(err.Error(), "batch_discount") {
			t.Errorf("discount %s: %v", d, err)
		}
	}
}

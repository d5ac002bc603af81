package pricing

import (
	"math"
	"strings"
	"testing"
	"time"
)

// testPrices builds prices from a JSON table, failing the test on error.
func testPrices(t testing.TB, js string) *Prices {
	t.Helper()
	tab, err := ParseTable([]byte(js))
	if err != nil {
		t.Fatalf("ParseTable: %v", err)
	}
	p, err := Build(tab)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return p
}

func TestLookupShipped(t *testing.T) {
	p := Default()
	tests := []struct {
		typ, model string
		want       string // the entry; "" for unpriced
	}{
		// Exact names and aliases.
		{"openai", "gpt-4o", "gpt-4o"},
		{"openai", "gpt-4-0613", "gpt-4"},
		{"openai", "text-embedding-3-small", "text-embedding-3-small"},
		// Dated snapshots resolve to their base entry...
		{"openai", "gpt-4o-2024-08-06", "gpt-4o"},
		{"openai", "gpt-4o-mini-2024-07-18", "gpt-4o-mini"},
		{"openai", "gpt-5.4-2026-03-05", "gpt-5.4"},
		// ...unless the snapshot has a price of its own.
		{"openai", "gpt-4o-2024-05-13", "gpt-4o-2024-05-13"},
		{"azure_openai", "gpt-4.1-2025-04-14", "gpt-4.1"},
		{"anthropic", "claude-sonnet-4-5-20250929", "claude-sonnet-4-5"},
		{"anthropic", "claude-haiku-4-5-20251001", "claude-haiku-4-5"},
		{"anthropic", "claude-opus-4-20250514", "claude-opus-4-0"},
		{"anthropic", "claude-3-5-haiku-latest", "claude-3-5-haiku"},
		// Bedrock: geographic profiles price as the regional entry, global
		// profiles as their own entry where the price differs, ARNs by the
		// id they end with.
		{"bedrock", "us.anthropic.claude-sonnet-4-5-20250929-v1:0", "anthropic.claude-sonnet-4-5"},
		{"bedrock", "anthropic.claude-sonnet-4-5-20250929-v1:0", "anthropic.claude-sonnet-4-5"},
		{"bedrock", "eu.anthropic.claude-haiku-4-5-20251001-v1:0", "anthropic.claude-haiku-4-5"},
		{"bedrock", "global.anthropic.claude-sonnet-4-5-20250929-v1:0", "global.anthropic.claude-sonnet-4-5"},
		{"bedrock", "global.anthropic.claude-sonnet-4-20250514-v1:0", "anthropic.claude-sonnet-4"},
		{"bedrock", "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-sonnet-4-5-20250929-v1:0", "anthropic.claude-sonnet-4-5"},
		{"bedrock", "arn:aws:bedrock:us-east-1::foundation-model/amazon.nova-pro-v1:0", "amazon.nova-pro"},
		{"bedrock", "amazon.titan-embed-text-v2:0", "amazon.titan-embed-text-v2"},
		{"bedrock", "amazon.titan-embed-text-v1", "amazon.titan-embed-text-v1"},
		{"bedrock", "cohere.rerank-v3-5:0", "cohere.rerank-v3-5"},
		{"bedrock", "openai.gpt-oss-120b-1:0", "openai.gpt-oss-120b-1"},
		// Gemini and Vertex resource names.
		{"gemini", "models/gemini-2.5-flash", "gemini-2.5-flash"},
		{"gemini", "gemini-2.0-flash-001", "gemini-2.0-flash"},
		{"vertex", "publishers/google/models/gemini-2.5-pro", "gemini-2.5-pro"},
		{"vertex", "projects/my-project/locations/us-central1/publishers/google/models/gemini-2.0-flash-001", "gemini-2.0-flash"},
		{"vertex", "claude-sonnet-4-5@20250929", "claude-sonnet-4-5"},
		{"vertex", "publishers/anthropic/models/claude-opus-4-7@default", "claude-opus-4-7"},
		// Other providers' conventions.
		{"xai", "grok-4-0709", "grok-4"},
		{"xai", "grok-4-1-fast-reasoning-latest", "grok-4-1-fast-reasoning"},
		{"mistral", "mistral-large-latest", "mistral-large-2512"},
		{"mistral", "mistral-large-2411", "mistral-large-2411"},
		{"fireworks", "accounts/fireworks/models/gpt-oss-120b", "gpt-oss-120b"},
		{"mixedbread", "mixedbread-ai/mxbai-rerank-large-v2", "mxbai-rerank-large-v2"},
		{"cohere", "rerank-v3.5", "rerank-v3.5"},
		{"cohere", "command-r-plus", "command-r-plus-08-2024"},
		{"openrouter", "anthropic/claude-sonnet-4.5", "anthropic/claude-sonnet-4.5"},
		{"together", "meta-llama/Llama-3.3-70B-Instruct-Turbo", "meta-llama/Llama-3.3-70B-Instruct-Turbo"},
		// Unpriced: no entry, never a guess.
		{"openai", "ft:gpt-4o-mini-2024-07-18:acme::abc123", ""}, // fine-tuned models cost more
		{"openai", "gpt-99", ""},
		{"openai", "GPT-4O", ""}, // names are case-sensitive
		{"openai", "", ""},
		{"anthropic", "claude-sonnet-4-7", ""}, // a new model is not priced as an older one
		{"bedrock", "anthropic.claude-sonnet-4-7-v1:0", ""},
		{"bedrock", "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/a1b2c3", ""},
		{"gemini", "gemini-2.5-flash-preview-09-2025", ""}, // previews are priced apart
		{"vllm", "llama-3", ""}, // no shipped prices for self-hosted types
		{"no-such-type", "gpt-4o", ""},
		{"openai", "claude-sonnet-4-5", ""}, // prices are per provider type
	}
	for _, tt := range tests {
		t.Run(tt.typ+"/"+tt.model, func(t *testing.T) {
			e, ok := p.Lookup(tt.typ, tt.model)
			if ok != (tt.want != "") || e.Model() != tt.want {
				t.Fatalf("Lookup(%q, %q) = %q, %v; want %q", tt.typ, tt.model, e.Model(), ok, tt.want)
			}
			if ok && e.ProviderType() != tt.typ {
				t.Errorf("ProviderType() = %q", e.ProviderType())
			}
			if ok && e.Source() == "" {
				t.Errorf("entry %s has no source", e.Model())
			}
			cost, priced := p.Cost(tt.typ, tt.model, Usage{PromptTokens: 1000, CompletionTokens: 10, EmbeddingTokens: 0})
			if !ok && (priced || cost != 0) {
				t.Errorf("an unpriced model cost %s, priced=%v", cost, priced)
			}
		})
	}
}

func TestCost(t *testing.T) {
	p := testPrices(t, `{"providers": {"test": {"source": "https://example.com/pricing", "models": {
		"chat":        {"input": 3, "cached": 0.3, "cache_write": 3.75, "output": 15},
		"claude":      {"input": 3, "cached": 0.3, "cache_write": 3.75, "cache_write_1h": 6, "output": 15, "cache_hit": 0.5,
		               "tiers": [{"above": 200000, "input": 6, "cache_write_1h": 12}]},
		"plain":       {"input": 2, "output": 8},
		"input-only":  {"input": 1},
		"tiny":        {"input": 0.000001},
		"tiered":      {"input": 1.25, "cached": 0.125, "output": 10,
		               "tiers": [{"above": 200000, "input": 2.5, "cached": 0.25, "output": 15}]},
		"two-tiers":   {"input": 1, "output": 2,
		               "tiers": [{"above": 100, "input": 10}, {"above": 1000, "input": 100, "output": 200}]},
		"tier-keeps":  {"input": 1, "cached": 0.1, "output": 2, "tiers": [{"above": 10, "input": 5}]},
		"tier-falls":  {"input": 1, "output": 2, "tiers": [{"above": 10, "input": 5}]},
		"embed":       {"embedding": 0.02},
		"rerank-search": {"search": 2},
		"rerank-token":  {"input": 0.05},
		"free":        {"input": 0, "output": 0},
		"max":         {"input": 100000, "output": 100000}
	}}}}`)
	tests := []struct {
		name  string
		model string
		u     Usage
		want  Money
		ok    bool
	}{
		{"nothing used", "chat", Usage{}, 0, true},
		// 2,000 uncached × $3 + 6,000 cached × $0.30 + 2,000 written × $3.75
		// + 500 output × $15, per million: the cached and written tokens are
		// billed once, at their own rates.
		{"cache reads and writes", "chat", Usage{PromptTokens: 10000, CachedTokens: 6000, CacheWriteTokens: 2000, CompletionTokens: 500},
			6*Microdollar*1000 + 1800*Microdollar + 7500*Microdollar + 7500*Microdollar, true},
		{"reasoning is output", "chat", Usage{PromptTokens: 0, CompletionTokens: 1_000_000}, 15 * Dollar, true},
		{"cached falls back to input", "plain", Usage{PromptTokens: 1000, CachedTokens: 400, CompletionTokens: 100}, 2000*Microdollar + 800*Microdollar, true},
		{"cache write falls back to input", "plain", Usage{PromptTokens: 1000, CacheWriteTokens: 1000}, 2000 * Microdollar, true},
		{"more cached than prompt: no negative uncached", "chat", Usage{PromptTokens: 100, CachedTokens: 1000}, 300 * Microdollar, true},
		{"negative counts count as zero", "chat", Usage{PromptTokens: -5, CompletionTokens: -1}, 0, true},
		{"rounds half up: 499 pico-dollars", "tiny", Usage{PromptTokens: 499}, 0, true},
		{"rounds half up: 500 pico-dollars", "tiny", Usage{PromptTokens: 500}, 1, true},
		{"rounds once per request", "tiny", Usage{PromptTokens: 1499}, 1, true},
		{"at the threshold: base rates", "tiered", Usage{PromptTokens: 200000, CompletionTokens: 1000}, 250*Microdollar*1000 + 10*Microdollar*1000, true},
		{"above the threshold: the whole request at the tier", "tiered", Usage{PromptTokens: 200001, CachedTokens: 1, CompletionTokens: 1000},
			500*Microdollar*1000 + 250 + 15*Microdollar*1000, true},
		{"highest tier below the prompt", "two-tiers", Usage{PromptTokens: 500, CompletionTokens: 1_000_000}, 5*Microdollar*1000 + 2*Dollar, true},
		{"top tier", "two-tiers", Usage{PromptTokens: 2000, CompletionTokens: 1_000_000}, 200*Microdollar*1000 + 200*Dollar, true},
		{"a tier keeps the rates it does not set", "tier-keeps", Usage{PromptTokens: 20, CachedTokens: 10}, 51 * Microdollar, true},
		{"a tier's input is the cached fallback", "tier-falls", Usage{PromptTokens: 20, CachedTokens: 10}, 100 * Microdollar, true},
		{"embeddings", "embed", Usage{EmbeddingTokens: 1_234_567}, 24_691_340, true},
		{"embeddings fall back to input", "plain", Usage{EmbeddingTokens: 1000}, 2000 * Microdollar, true},
		{"rerank by the search", "rerank-search", Usage{Searches: 3, PromptTokens: 5000}, 6 * Microdollar * 1000, true},
		{"rerank by the token", "rerank-token", Usage{Searches: 1, PromptTokens: 20000}, 1000 * Microdollar, true},
		{"free is a price", "free", Usage{PromptTokens: 100, CompletionTokens: 100}, 0, true},
		// Cache writes by ttl: 1,000 uncached × $3 + 4,000 cached × $0.30 +
		// 1,500 written for five minutes × $3.75 + 500 for an hour × $6 +
		// 100 output × $15, per million.
		{"cache writes of an hour at their rate", "claude", Usage{PromptTokens: 7000, CachedTokens: 4000, CacheWriteTokens: 2000, CacheWrite1hTokens: 500, CompletionTokens: 100},
			3000*Microdollar + 1200*Microdollar + 5625*Microdollar + 3000*Microdollar + 1500*Microdollar, true},
		{"1-hour writes beyond the writes count as writes", "claude", Usage{PromptTokens: 1000, CacheWriteTokens: 1000, CacheWrite1hTokens: 5000}, 6000 * Microdollar, true},
		{"1-hour writes fall back to cache_write", "chat", Usage{PromptTokens: 1000, CacheWriteTokens: 1000, CacheWrite1hTokens: 1000}, 3750 * Microdollar, true},
		{"1-hour writes fall back to input", "plain", Usage{PromptTokens: 1000, CacheWriteTokens: 1000, CacheWrite1hTokens: 1000}, 2000 * Microdollar, true},
		{"a tier's 1-hour rate", "claude", Usage{PromptTokens: 300000, CacheWriteTokens: 100000, CacheWrite1hTokens: 100000}, 200000*6*Microdollar + 100000*12*Microdollar, true},
		// Cache hits: the hit price alone, always priced.
		{"a cache hit costs its own price", "claude", Usage{CacheHits: 1, PromptTokens: 7000, CompletionTokens: 100}, 500 * Microdollar, true},
		{"a cache hit of a model without a hit price", "input-only", Usage{CacheHits: 3, PromptTokens: 10, CompletionTokens: 1}, 0, true},
		{"a cache hit of an unpriced model", "no-such-model", Usage{CacheHits: 1, PromptTokens: 10}, 0, true},
		{"saturates", "max", Usage{PromptTokens: math.MaxInt64, CompletionTokens: math.MaxInt64}, math.MaxInt64, true},
		// Unpriced: a quantity the entry has no rate for.
		{"output without an output rate", "input-only", Usage{PromptTokens: 10, CompletionTokens: 1}, 0, false},
		{"chat tokens on an embedding entry", "embed", Usage{PromptTokens: 10}, 0, false},
		{"a rerank with neither a search rate nor tokens", "rerank-token", Usage{Searches: 1}, 0, false},
		{"searches of a chat model with no tokens", "plain", Usage{Searches: 1}, 0, false},
		{"tokens on a search-only entry", "rerank-search", Usage{PromptTokens: 10}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := p.Cost("test", tt.model, tt.u)
			if got != tt.want || ok != tt.ok {
				t.Fatalf("Cost(%s, %+v) = %d (%s), %v; want %d (%s), %v", tt.model, tt.u, int64(got), got, ok, int64(tt.want), tt.want, tt.ok)
			}
		})
	}
}

// The configuration's cache_hit prices the hits of every model without
// its own, known to the table or not.
func TestCacheHitDefault(t *testing.T) {
	hit := Rate(200_000) // $0.20 per 1,000 hits
	p, err := Load(&Config{CacheHit: &hit, Models: map[string]*Price{"test/own": {Input: rate("1"), CacheHit: rate("1")}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		typ, model string
		want       Money
	}{
		{"openai", "gpt-4o", 400 * Microdollar}, // shipped, no hit price of its own
		{"test", "own", 2000 * Microdollar},     // its own: $1 per 1,000
		{"nobody", "unknown", 400 * Microdollar},
	} {
		if got, ok := p.Cost(tt.typ, tt.model, Usage{CacheHits: 2, PromptTokens: 1000}); !ok || got != tt.want {
			t.Errorf("%s/%s: %s, %v; want %s", tt.typ, tt.model, got, ok, tt.want)
		}
	}
	neg := Rate(-1)
	if _, err := Load(&Config{CacheHit: &neg}); err == nil {
		t.Error("a negative cache_hit loaded")
	}
	if got, ok := Default().Cost("anthropic", "claude-sonnet-4-5", Usage{CacheHits: 1, PromptTokens: 5000}); !ok || got != 0 {
		t.Errorf("a cache hit without a cache_hit price: %s, %v; want $0, priced", got, ok)
	}
}

func TestCostShipped(t *testing.T) {
	p := Default()
	u := Usage{PromptTokens: 1000, CachedTokens: 200, CompletionTokens: 100}
	// 800 × $2.50 + 200 × $1.25 + 100 × $10, per million.
	if got, ok := p.Cost("openai", "gpt-4o-2024-11-20", u); !ok || got != 3250*Microdollar {
		t.Errorf("gpt-4o: %s, %v; want 0.00325", got, ok)
	}
	// Bedrock's regional profiles cost 10% more than the global one.
	regional, ok1 := p.Cost("bedrock", "us.anthropic.claude-sonnet-4-5-20250929-v1:0", u)
	global, ok2 := p.Cost("bedrock", "global.anthropic.claude-sonnet-4-5-20250929-v1:0", u)
	if !ok1 || !ok2 || regional*10 != global*11 {
		t.Errorf("bedrock regional %s, global %s: want regional = 1.1 × global", regional, global)
	}
	// Gemini 2.5 Pro's long-context tier.
	short, _ := p.Cost("gemini", "gemini-2.5-pro", Usage{PromptTokens: 200000})
	long, _ := p.Cost("gemini", "gemini-2.5-pro", Usage{PromptTokens: 200001})
	if short != 250*Microdollar*1000 || long <= 2*short {
		t.Errorf("gemini-2.5-pro: %s at 200,000 prompt tokens, %s at 200,001", short, long)
	}
	// Cohere rerank: $2 per 1,000 searches.
	if got, ok := p.Cost("cohere", "rerank-v3.5", Usage{Searches: 1}); !ok || got != 2*Microdollar*1000 {
		t.Errorf("rerank-v3.5: %s, %v", got, ok)
	}
	// Embeddings.
	if got, ok := p.Cost("voyage", "voyage-3.5", Usage{EmbeddingTokens: 1_000_000}); !ok || got != 60*Microdollar*1000 {
		t.Errorf("voyage-3.5: %s, %v", got, ok)
	}
	// Claude's prompt cache, everywhere Claude is served: reads at 0.1×
	// input, five-minute writes at 1.25×, one-hour writes at 2×. 1,000
	// uncached + 2,000 read + 3,000 written (1,000 of them for an hour) +
	// 100 output tokens of Claude Sonnet 4.5 ($3 / $15 per million):
	// 1,000 × 3 + 2,000 × 0.3 + 2,000 × 3.75 + 1,000 × 6 + 100 × 15 =
	// $0.0186.
	cached := Usage{PromptTokens: 6000, CachedTokens: 2000, CacheWriteTokens: 3000, CacheWrite1hTokens: 1000, CompletionTokens: 100}
	for _, tm := range [][2]string{{"anthropic", "claude-sonnet-4-5-20250929"}, {"vertex", "claude-sonnet-4-5@20250929"},
		{"bedrock", "global.anthropic.claude-sonnet-4-5-20250929-v1:0"}} {
		if got, ok := p.Cost(tm[0], tm[1], cached); !ok || got != 18600*Microdollar {
			t.Errorf("%s/%s with cache reads and writes: %s, %v; want 0.0186", tm[0], tm[1], got, ok)
		}
	}
	// A native batch pays half, one-hour writes included.
	if got, ok := p.BatchCost("anthropic", "claude-sonnet-4-5", cached); !ok || got != 9300*Microdollar {
		t.Errorf("claude-sonnet-4-5 in a native batch: %s, %v; want 0.0093", got, ok)
	}
	// The same writes all for five minutes cost less.
	fiveMinutes := cached
	fiveMinutes.CacheWrite1hTokens = 0
	if got, _ := p.Cost("anthropic", "claude-sonnet-4-5", fiveMinutes); got != 16350*Microdollar {
		t.Errorf("five-minute writes: %s, want 0.01635", got)
	}
}

func TestLookupBounds(t *testing.T) {
	p := Default()
	name := "anthropic.claude-sonnet-4-5-20250929-v1:0"
	if _, ok := p.Lookup("bedrock", strings.Repeat("us.", 8)+name); !ok {
		t.Error("8 prefix cuts are not made")
	}
	// A client's name cannot make a lookup cut without end.
	if e, ok := p.Lookup("bedrock", strings.Repeat("us.", 9)+name); ok {
		t.Errorf("9 prefix cuts were made: %s", e.Model())
	}
	if _, ok := p.Lookup("openai", "gpt-4o"+strings.Repeat("-2024-01-01", 9)); ok {
		t.Error("9 suffix cuts were made")
	}
	if _, ok := p.Lookup("openai", "gpt-4o"+strings.Repeat("-2024-01-01", 8)); !ok {
		t.Error("8 suffix cuts are not made")
	}
	if _, ok := p.Lookup("bedrock", strings.Repeat("x", 500)+"/"+name); ok {
		t.Error("a name over 512 bytes was priced")
	}
	// The worst name a client can send still costs little.
	evil := strings.Repeat("us.", 170) + "x" + strings.Repeat(":0", 4)
	start := time.Now()
	for range 1000 {
		p.Lookup("bedrock", evil)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("1000 lookups of an adversarial name took %v", d)
	}
}

func TestNilAndZero(t *testing.T) {
	var p *Prices
	if _, ok := p.Lookup("openai", "gpt-4o"); ok {
		t.Error("a nil *Prices priced something")
	}
	if c, ok := p.Cost("openai", "gpt-4o", Usage{PromptTokens: 1}); ok || c != 0 {
		t.Error("a nil *Prices priced something")
	}
	if p.Len() != 0 || p.AsOf() != "" || len(p.Table().Providers) != 0 {
		t.Error("a nil *Prices is not empty")
	}
	var e Entry
	if c, ok := e.Cost(Usage{}); ok || c != 0 || e.Model() != "" || e.Source() != "" || e.AsOf() != "" || e.ProviderType() != "" {
		t.Error("the zero Entry priced something")
	}
}

func TestLookupAllocatesNothing(t *testing.T) {
	p := Default()
	u := Usage{PromptTokens: 12000, CachedTokens: 8000, CacheWriteTokens: 1000, CompletionTokens: 700}
	for _, m := range [][2]string{
		{"openai", "gpt-4o"},
		{"bedrock", "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-sonnet-4-5-20250929-v1:0"},
		{"openai", "not-a-model-2024-01-01"},
	} {
		n := testing.AllocsPerRun(100, func() { p.Cost(m[0], m[1], u) })
		if n != 0 {
			t.Errorf("Cost(%s, %s) allocates %v times", m[0], m[1], n)
		}
	}
}

func BenchmarkLookupCost(b *testing.B) {
	p := Default()
	u := Usage{PromptTokens: 12000, CachedTokens: 8000, CacheWriteTokens: 1000, CompletionTokens: 700}
	for _, bm := range []struct{ name, typ, model string }{
		{"exact", "openai", "gpt-4o"},
		{"dated", "anthropic", "claude-sonnet-4-5-20250929"},
		{"bedrock-arn", "bedrock", "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-sonnet-4-5-20250929-v1:0"},
		{"unpriced", "openai", "ft:gpt-4o-mini-2024-07-18:acme::abc123"},
	} {
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p.Cost(bm.typ, bm.model, u)
			}
		})
	}
}

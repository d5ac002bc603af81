package pricing

import (
	"strings"
	"testing"
	"time"
)

// The provider types modelgate names, each of which the shipped table must
// cover.
var shippedTypes = []string{
	"openai", "azure_openai", "anthropic", "gemini", "vertex", "bedrock", "cohere", "mistral", "groq", "together",
	"fireworks", "deepseek", "xai", "perplexity", "deepinfra", "cerebras", "openrouter", "voyage", "jina", "mixedbread",
}

func TestShippedTable(t *testing.T) {
	tab, err := ParseTable(shippedJSON)
	if err != nil {
		t.Fatalf("the shipped table is invalid: %v", err)
	}
	asOf, err := time.Parse(time.DateOnly, tab.AsOf)
	if err != nil {
		t.Fatalf("as_of %q: %v", tab.AsOf, err)
	}
	p := Default()
	for _, typ := range shippedTypes {
		pp := tab.Providers[typ]
		if pp == nil || len(pp.Models) == 0 {
			t.Errorf("no prices for provider type %s", typ)
			continue
		}
		if pp.AsOf != "" {
			if d, err := time.Parse(time.DateOnly, pp.AsOf); err != nil || d.Before(asOf) {
				t.Errorf("%s: as_of %q is not a date on or after the table's", typ, pp.AsOf)
			}
		}
		for name, pr := range pp.Models {
			if pr.Source == "" && pp.Source == "" {
				t.Errorf("%s/%s has no source", typ, name)
			}
			e, ok := p.Lookup(typ, name)
			if !ok || e.Model() != name {
				t.Errorf("%s/%s looks up %q", typ, name, e.Model())
			}
			for _, a := range pr.Aliases {
				if e, _ := p.Lookup(typ, a); e.Model() != name {
					t.Errorf("%s: alias %s looks up %q, not %s", typ, a, e.Model(), name)
				}
			}
			// Every entry prices what its kind of model is used for.
			var u Usage
			switch {
			case pr.Search != nil:
				u = Usage{Searches: 1}
			case pr.Embedding != nil:
				u = Usage{EmbeddingTokens: 1000}
			case pr.Output == nil:
				u = Usage{Searches: 1, PromptTokens: 1000} // a per-token reranker
			default:
				u = Usage{PromptTokens: 1000, CachedTokens: 500, CacheWriteTokens: 100, CompletionTokens: 100}
			}
			cost, ok := e.Cost(u)
			if !ok {
				t.Errorf("%s/%s does not price %+v", typ, name, u)
			}
			if cost == 0 && (pr.Input == nil || *pr.Input != 0) && (pr.Embedding == nil || *pr.Embedding != 0) {
				t.Errorf("%s/%s costs nothing for %+v", typ, name, u)
			}
			// Sanity: cache reads are cheaper than fresh input, and no rate
			// is beyond what any listed model charges.
			if pr.Input != nil && pr.Cached != nil && *pr.Cached > *pr.Input {
				t.Errorf("%s/%s: cached %s above input %s", typ, name, pr.Cached, pr.Input)
			}
			// Claude (at Anthropic, on Vertex, on Bedrock) writes its
			// one-hour cache at twice the input price.
			if strings.Contains(name, "claude") && (typ == "anthropic" || typ == "vertex" || typ == "bedrock") {
				if pr.CacheWrite1h == nil || pr.Input == nil || *pr.CacheWrite1h != 2**pr.Input {
					t.Errorf("%s/%s: cache_write_1h %v, want 2 × input %v", typ, name, pr.CacheWrite1h, pr.Input)
				}
				for _, tr := range pr.Tiers {
					if tr.Input != nil && (tr.CacheWrite1h == nil || *tr.CacheWrite1h != 2**tr.Input) {
						t.Errorf("%s/%s: tier above %d: cache_write_1h %v, want 2 × input %v", typ, name, tr.Above, tr.CacheWrite1h, tr.Input)
					}
				}
			}
			for _, r := range []*Rate{pr.Input, pr.Cached, pr.CacheWrite, pr.CacheWrite1h, pr.Output, pr.Embedding, pr.Search, pr.CacheHit} {
				if r != nil && *r > 1000*1_000_000 {
					t.Errorf("%s/%s: rate %s looks like a typo", typ, name, r)
				}
			}
		}
	}
	for typ := range tab.Providers {
		found := false
		for _, s := range shippedTypes {
			found = found || s == typ
		}
		if !found {
			t.Errorf("the shipped table prices %q, which is not a provider type", typ)
		}
	}
}

// The shipped table covers at least the flagship and the small model of
// each provider type, and the common embedding and rerank models.
func TestShippedCoverage(t *testing.T) {
	p := Default()
	for _, c := range [][2]string{
		{"openai", "gpt-5.5"}, {"openai", "gpt-5.4-mini"}, {"openai", "gpt-5-nano"}, {"openai", "gpt-4.1"}, {"openai", "gpt-4o-mini"}, {"openai", "o4-mini"},
		{"openai", "text-embedding-3-small"}, {"openai", "text-embedding-3-large"},
		{"azure_openai", "gpt-4o"}, {"azure_openai", "gpt-5-mini"}, {"azure_openai", "text-embedding-3-small"},
		{"anthropic", "claude-opus-4-7"}, {"anthropic", "claude-sonnet-4-6"}, {"anthropic", "claude-haiku-4-5"}, {"anthropic", "claude-sonnet-5"},
		{"gemini", "gemini-2.5-pro"}, {"gemini", "gemini-2.5-flash-lite"}, {"gemini", "gemini-embedding-001"},
		{"vertex", "gemini-2.5-flash"}, {"vertex", "claude-sonnet-4-5@20250929"}, {"vertex", "text-embedding-005"},
		{"bedrock", "us.anthropic.claude-opus-4-7"}, {"bedrock", "amazon.nova-micro-v1:0"}, {"bedrock", "amazon.titan-embed-text-v2:0"}, {"bedrock", "cohere.rerank-v3-5:0"},
		{"cohere", "command-a-03-2025"}, {"cohere", "command-r7b-12-2024"}, {"cohere", "embed-v4.0"}, {"cohere", "rerank-v3.5"},
		{"mistral", "mistral-large-latest"}, {"mistral", "ministral-8b-latest"}, {"mistral", "mistral-embed"},
		{"groq", "llama-3.3-70b-versatile"}, {"groq", "llama-3.1-8b-instant"},
		{"together", "meta-llama/Llama-3.3-70B-Instruct-Turbo"}, {"together", "BAAI/bge-base-en-v1.5"},
		{"fireworks", "accounts/fireworks/models/deepseek-v3p2"}, {"fireworks", "accounts/fireworks/models/gpt-oss-20b"},
		{"deepseek", "deepseek-chat"}, {"deepseek", "deepseek-reasoner"},
		{"xai", "grok-4"}, {"xai", "grok-3-mini"},
		{"perplexity", "sonar-pro"}, {"perplexity", "sonar"},
		{"deepinfra", "meta-llama/Llama-3.3-70B-Instruct-Turbo"}, {"deepinfra", "BAAI/bge-m3"},
		{"cerebras", "gpt-oss-120b"}, {"cerebras", "llama3.1-8b"},
		{"openrouter", "openai/gpt-4o-mini"}, {"openrouter", "anthropic/claude-opus-5"},
		{"voyage", "voyage-3.5"}, {"voyage", "rerank-2.5"},
		{"jina", "jina-embeddings-v3"}, {"jina", "jina-reranker-v2-base-multilingual"},
		{"mixedbread", "mixedbread-ai/mxbai-embed-large-v1"}, {"mixedbread", "mxbai-rerank-large-v2"},
	} {
		if _, ok := p.Lookup(c[0], c[1]); !ok {
			t.Errorf("%s/%s is not priced", c[0], c[1])
		}
	}
}

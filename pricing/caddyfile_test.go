package pricing

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func rate(s string) *Rate {
	r, err := ParseRate(s)
	if err != nil {
		panic(err)
	}
	return &r
}

func TestUnmarshalLine(t *testing.T) {
	// Each case is a prices block, one line per line of the Caddyfile.
	tests := []struct {
		name  string
		block string
		want  Config
		err   string
	}{
		{
			name: "the README's example",
			block: `file /etc/modelgate/prices.json
				model openai/gpt-4o          input 2.50 cached 1.25 output 10.00
				model anthropic/claude-x     input 3 cache_write 3.75 cached 0.30 output 15
				model cohere/rerank-v3.5     search 2.00
				model voyage/voyage-3.5      embedding 0.06`,
			want: Config{File: "/etc/modelgate/prices.json", Models: map[string]*Price{
				"openai/gpt-4o":      {Input: rate("2.5"), Cached: rate("1.25"), Output: rate("10")},
				"anthropic/claude-x": {Input: rate("3"), CacheWrite: rate("3.75"), Cached: rate("0.3"), Output: rate("15")},
				"cohere/rerank-v3.5": {Search: rate("2")},
				"voyage/voyage-3.5":  {Embedding: rate("0.06")},
			}},
		},
		{
			name:  "tiers, aliases, source, a model with slashes",
			block: `model gemini/my-pro input 1.25 cached 0.125 output 10 alias my-pro-001 alias my-pro-latest source https://example.com/p above 200000 input 2.5 cached 0.25 output 15 above 1000000 output 20`,
			want: Config{Models: map[string]*Price{
				"gemini/my-pro": {Input: rate("1.25"), Cached: rate("0.125"), Output: rate("10"),
					Aliases: []string{"my-pro-001", "my-pro-latest"}, Source: "https://example.com/p",
					Tiers: []Tier{{Above: 200000, Input: rate("2.5"), Cached: rate("0.25"), Output: rate("15")}, {Above: 1000000, Output: rate("20")}}},
			}},
		},
		{
			name:  "a free self-hosted model",
			block: `model vllm/meta-llama/Llama-3.3-70B-Instruct input 0 output 0`,
			want:  Config{Models: map[string]*Price{"vllm/meta-llama/Llama-3.3-70B-Instruct": {Input: rate("0"), Output: rate("0")}}},
		},
		{
			name:  "cache writes by ttl, cache hits",
			block: "cache_hit 0.10\nmodel anthropic/claude-y input 3 cache_write 3.75 cache_write_1h 6 cache_hit 0.5 output 15 above 200000 input 6 cache_write_1h 12",
			want: Config{CacheHit: rate("0.1"), Models: map[string]*Price{
				"anthropic/claude-y": {Input: rate("3"), CacheWrite: rate("3.75"), CacheWrite1h: rate("6"), CacheHit: rate("0.5"), Output: rate("15"),
					Tiers: []Tier{{Above: 200000, Input: rate("6"), CacheWrite1h: rate("12")}}},
			}},
		},
		{name: "cache_hit twice", block: "cache_hit 1\ncache_hit 2", err: "cache_hit is given twice"},
		{name: "cache_hit without a price", block: "cache_hit", err: "cache_hit takes one argument"},
		{name: "cache_hit negative", block: "cache_hit -1", err: "cache_hit"},
		{name: "cache_hit in a tier", block: "model openai/m input 1 above 10 cache_hit 1", err: "belongs before the first above"},
		{name: "cache_write_1h twice", block: "model openai/m cache_write_1h 1 cache_write_1h 2", err: "cache_write_1h is given twice"},
		{name: "file twice", block: "file a.json\nfile b.json", err: "file is given twice"},
		{name: "file without a path", block: "file", err: "file takes one argument"},
		{name: "model twice", block: "model openai/m input 1\nmodel openai/m input 2", err: "priced twice"},
		{name: "no type", block: "model gpt-4o input 1", err: "<provider type>/<model>"},
		{name: "empty model", block: "model openai/ input 1", err: "<provider type>/<model>"},
		{name: "nothing priced", block: "model openai/m", err: "prices nothing"},
		{name: "only an alias", block: "model openai/m alias n", err: "prices nothing"},
		{name: "model without a name", block: "model", err: "needs <provider type>/<model>"},
		{name: "negative", block: "model openai/m input -1", err: "negative"},
		{name: "not a number", block: "model openai/m input $2", err: "not a decimal number"},
		{name: "too precise", block: "model openai/m input 0.0000001", err: "more than 6 decimal places"},
		{name: "missing value", block: "model openai/m input 1 output", err: "output needs a value"},
		{name: "unknown field", block: "model openai/m input 1 ouput 2", err: `unknown price field "ouput"`}, //nolint:misspell // the misspelled field is the test
		{name: "rate twice", block: "model openai/m input 1 input 2", err: "input is given twice"},
		{name: "rate twice in a tier", block: "model openai/m input 1 above 10 input 2 input 3", err: "in the tier above 10"},
		{name: "search in a tier", block: "model openai/m input 1 above 10 search 2", err: "belongs before the first above"},
		{name: "bad threshold", block: "model openai/m input 1 above 200k input 2", err: "give the prompt length in tokens"},
		{name: "tiers out of order", block: "model openai/m input 1 above 10 input 2 above 5 input 3", err: "must increase"},
		{name: "empty tier", block: "model openai/m input 1 above 10", err: "sets no rate"},
		{name: "bad source", block: "model openai/m input 1 source example.com", err: "not an http(s) URL"},
		{name: "alias twice", block: "model openai/m input 1 alias n alias n", err: "listed twice"},
		{name: "unknown option", block: "models openai/m input 1", err: `unrecognized prices option "models"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c Config
			var err error
			for line := range strings.SplitSeq(tt.block, "\n") {
				if err = c.UnmarshalLine(strings.Fields(line)); err != nil {
					break
				}
			}
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v; want one with %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(c, tt.want) {
				t.Fatalf("got %+v\nwant %+v", c, tt.want)
			}
			if _, err := c.InlineTable(); err != nil {
				t.Fatalf("InlineTable: %v", err)
			}
		})
	}
	if err := new(Config).UnmarshalLine(nil); err == nil {
		t.Error("an empty line was accepted")
	}
}

// FuzzUnmarshalLine: any tokens either fail or give a Config that loads.
func FuzzUnmarshalLine(f *testing.F) {
	f.Add("model openai/gpt-4o input 2.50 cached 1.25 output 10 above 200000 input 5")
	f.Add("model cohere/rerank-v3.5 search 2")
	f.Add("file /tmp/x.json")
	f.Fuzz(func(t *testing.T, line string) {
		var c Config
		if err := c.UnmarshalLine(strings.Fields(line)); err != nil || c.File != "" {
			return
		}
		if _, err := Load(&c); err != nil {
			t.Fatalf("a line that parsed does not load: %v", err)
		}
	})
}

// The README's Prices section shows this block and this file; both load.
func TestReadmeExamples(t *testing.T) {
	block := `file PRICEFILE
		cache_hit 0.10
		model openai/gpt-4o          input 2.50 cached 1.25 output 10.00
		model anthropic/claude-x     input 3 cache_write 3.75 cache_write_1h 6 cached 0.30 output 15
		model cohere/rerank-v3.5     search 2.00
		model voyage/voyage-3.5      embedding 0.06
		model vllm/meta-llama/Llama-3.3-70B-Instruct input 0 output 0
		model gemini/gemini-2.5-pro  input 1.25 cached 0.125 output 10 above 200000 input 2.50 cached 0.25 output 15
		model openai/my-ft           input 0.30 output 1.20 alias ft:gpt-4o-mini-2024-07-18:acme::abc123`
	file := `{
  "as_of": "2026-09-01",
  "providers": {
    "openai": {
      "source": "https://openai.com/api/pricing/",
      "models": {
        "gpt-4o": {"input": 2.5, "cached": 1.25, "output": 10},
        "my-ft":  {"input": 0.3, "output": 1.2, "aliases": ["ft:gpt-4o-mini-2024-07-18:acme::abc123"]}
      }
    },
    "vllm": {
      "suffixes": ["-####-##-##"],
      "models": {"meta-llama/Llama-3.3-70B-Instruct": {"input": 0, "output": 0}}
    }
  }
}`
	path := filepath.Join(t.TempDir(), "prices.json")
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	var c Config
	for line := range strings.SplitSeq(strings.ReplaceAll(block, "PRICEFILE", path), "\n") {
		if err := c.UnmarshalLine(strings.Fields(line)); err != nil {
			t.Fatal(err)
		}
	}
	p, err := Load(&c)
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := p.Cost("openai", "ft:gpt-4o-mini-2024-07-18:acme::abc123", Usage{PromptTokens: 1_000_000}); !ok || c != 300*Microdollar*1000 {
		t.Errorf("my-ft: %s, %v", c, ok)
	}
	if c, ok := p.Cost("vllm", "meta-llama/Llama-3.3-70B-Instruct", Usage{PromptTokens: 10, CompletionTokens: 10}); !ok || c != 0 {
		t.Errorf("vllm: %s, %v", c, ok)
	}
	if c, ok := p.Cost("anthropic", "claude-x", Usage{PromptTokens: 1_000_000, CacheWriteTokens: 1_000_000, CacheWrite1hTokens: 1_000_000}); !ok || c != 6*Dollar {
		t.Errorf("claude-x, an hour's writes: %s, %v", c, ok)
	}
	if c, ok := p.Cost("openai", "gpt-4o", Usage{CacheHits: 10}); !ok || c != Dollar/1000 {
		t.Errorf("gpt-4o, ten cache hits: %s, %v", c, ok)
	}
}

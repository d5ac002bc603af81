package gateway

import (
	"strings"
	"testing"
)

func TestResolve(t *testing.T) {
	oa := &Provider{Name: "oa", Models: []string{"gpt-4o"}}
	cl := &Provider{Name: "claude", Models: []string{"claude-sonnet-4-5"}}
	org := &Provider{Name: "or"}
	newRoutes := func(def string) *routes {
		r, err := newRoutes(map[string]*Provider{"oa": oa, "claude": cl, "or": org},
			map[string][]string{"smart": {"claude/claude-sonnet-4-5", "oa/gpt-4o"}, "gpt-4o": {"claude/claude-sonnet-4-5"}}, def)
		if err != nil {
			t.Fatal(err)
		}
		return &r
	}
	for _, tc := range []struct {
		model, def string
		want       string // provider/model, comma-separated, in order
	}{
		{"oa/gpt-4o-mini", "", "oa/gpt-4o-mini"},
		{"or/meta-llama/llama-3.1-8b", "", "or/meta-llama/llama-3.1-8b"}, // the rest may hold '/'
		{"smart", "", "claude/claude-sonnet-4-5,oa/gpt-4o"},
		{"gpt-4o", "", "claude/claude-sonnet-4-5"}, // an alias wins over a models list
		{"claude-sonnet-4-5", "", "claude/claude-sonnet-4-5"},
		{"llama-3", "", ""},
		{"llama-3", "or", "or/llama-3"},
		{"nope/x", "", ""},
		{"nope/x", "oa", "oa/nope/x"}, // not a provider: a bare name for the default
		{"oa/", "", ""},
	} {
		var got []string
		for _, tg := range newRoutes(tc.def).resolve(tc.model) {
			got = append(got, tg.String())
		}
		if strings.Join(got, ",") != tc.want {
			t.Errorf("resolve(%q) with default %q = %v, want %s", tc.model, tc.def, got, tc.want)
		}
	}
}

// BenchmarkResolve is routing: a model name to its targets.
func BenchmarkResolve(b *testing.B) {
	provs := map[string]*Provider{}
	for _, name := range []string{"oa", "claude", "gemini", "bedrock", "cohere", "mistral", "groq", "vllm"} {
		provs[name] = &Provider{Name: name, Models: []string{name + "-model-a", name + "-model-b"}}
	}
	d, err := newRoutes(provs, map[string][]string{"smart": {"claude/claude-sonnet-4-5", "oa/gpt-4o"}}, "oa")
	if err != nil {
		b.Fatal(err)
	}
	for _, model := range []string{"oa/gpt-4o-mini", "smart", "vllm-model-b", "unlisted-model"} {
		b.Run(model, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if len(d.resolve(model)) == 0 {
					b.Fatal("no target")
				}
			}
		})
	}
}

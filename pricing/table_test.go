package pricing

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestParseTableErrors(t *testing.T) {
	tests := []struct {
		name, js, err string
	}{
		{"unknown top-level field", `{"as_of": "2026-01-01", "prices": {}}`, `unknown field "prices"`},
		{"unknown entry field", `{"providers": {"openai": {"models": {"m": {"input": 1, "ouput": 2}}}}}`, `unknown field "ouput"`}, //nolint:misspell // the misspelled field is the test
		{"duplicate model", `{"providers": {"openai": {"models": {"m": {"input": 1}, "m": {"input": 2}}}}}`, `"m" appears twice in providers.openai.models`},
		{"duplicate provider", `{"providers": {"openai": {}, "openai": {}}}`, `"openai" appears twice in providers`},
		{"duplicate rate", `{"providers": {"openai": {"models": {"m": {"input": 1, "input": 2}}}}}`, `"input" appears twice in providers.openai.models.m`},
		{"negative price", `{"providers": {"openai": {"models": {"m": {"input": -1}}}}}`, "negative"},
		{"too precise", `{"providers": {"openai": {"models": {"m": {"input": 0.0000001}}}}}`, "more than 6 decimal places"},
		{"price as a string", `{"providers": {"openai": {"models": {"m": {"input": "1"}}}}}`, "not a string"},
		{"prices nothing", `{"providers": {"openai": {"models": {"m": {"aliases": ["n"]}}}}}`, "openai/m: prices nothing"},
		{"null entry", `{"providers": {"openai": {"models": {"m": null}}}}`, "null instead of a price"},
		{"alias is an entry", `{"providers": {"openai": {"models": {"m": {"input": 1}, "n": {"input": 2, "aliases": ["m"]}}}}}`, `alias "m" is already an entry of its own`},
		{"alias twice", `{"providers": {"openai": {"models": {"m": {"input": 1, "aliases": ["x"]}, "n": {"input": 2, "aliases": ["x"]}}}}}`, `alias "x" is already an alias of m`},
		{"alias of itself", `{"providers": {"openai": {"models": {"m": {"input": 1, "aliases": ["m"]}}}}}`, "names the entry itself"},
		{"bad date", `{"as_of": "July 2026"}`, "not a date"},
		{"bad source", `{"providers": {"openai": {"source": "openai.com/pricing"}}}`, "not an http(s) URL"},
		{"space in a name", `{"providers": {"openai": {"models": {"gpt 4o": {"input": 1}}}}}`, "space"},
		{"slash in a type", `{"providers": {"open/ai": {}}}`, "has no '/'"},
		{"star in a suffix", `{"providers": {"openai": {"suffixes": ["-*"]}}}`, "only allowed in prefixes"},
		{"pattern twice", `{"providers": {"openai": {"prefixes": ["models/", "models/"]}}}`, "listed twice"},
		{"tier without threshold", `{"providers": {"g": {"models": {"m": {"input": 1, "tiers": [{"input": 2}]}}}}}`, "above must be"},
		{"tiers out of order", `{"providers": {"g": {"models": {"m": {"input": 1, "tiers": [{"above": 10, "input": 2}, {"above": 5, "input": 3}]}}}}}`, "must increase"},
		{"empty tier", `{"providers": {"g": {"models": {"m": {"input": 1, "tiers": [{"above": 10}]}}}}}`, "sets no rate"},
		{"unknown tier field", `{"providers": {"g": {"models": {"m": {"input": 1, "tiers": [{"above": 10, "search": 1}]}}}}}`, `unknown field "search"`},
		{"trailing data", `{} {}`, "after the top-level object"},
		{"not an object", `[]`, "cannot unmarshal array"},
		{"truncated", `{"providers": {`, "unexpected EOF"},
		{"too deep", strings.Repeat("[", 100) + strings.Repeat("]", 100), "nested more than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseTable([]byte(tt.js))
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("ParseTable(%s) = %v; want an error with %q", tt.js, err, tt.err)
			}
		})
	}
}

func TestParseTableRoundTrip(t *testing.T) {
	tab := Shipped()
	out, err := json.Marshal(tab)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseTable(out)
	if err != nil {
		t.Fatalf("the shipped table does not survive a round trip: %v", err)
	}
	if !reflect.DeepEqual(tab, back) {
		t.Fatal("the shipped table changed in a round trip through JSON")
	}
}

func TestMerge(t *testing.T) {
	base := mustTable(t, `{"as_of": "2026-07-24", "providers": {
		"openai": {"source": "https://openai.example/pricing", "suffixes": ["-####-##-##"], "models": {
			"gpt-4o": {"input": 2.5, "cached": 1.25, "output": 10, "aliases": ["chatgpt-4o-latest"], "note": "shipped"},
			"gpt-4o-mini": {"input": 0.15, "output": 0.6}
		}},
		"anthropic": {"models": {"claude-x": {"input": 3, "output": 15}}}
	}}`)
	file := mustTable(t, `{"as_of": "2026-09-01", "providers": {
		"openai": {"as_of": "2026-09-01", "suffixes": ["-####-##-##", "-v#"], "models": {
			"gpt-4o": {"input": 2, "output": 8},
			"my-model": {"input": 1, "output": 1, "aliases": ["gpt-4o-mini"]}
		}},
		"vllm": {"models": {"llama-3": {"input": 0, "output": 0}}}
	}}`)
	inline := mustTable(t, `{"providers": {"openai": {"models": {"gpt-4o": {"input": 1.5, "cached": 0.5, "output": 6}}}}}`)
	before := base.Clone()

	got := Merge(base, file, inline)
	if !reflect.DeepEqual(base, before) {
		t.Fatal("Merge changed its base")
	}
	o := got.Providers["openai"]
	// Inline entries come last and replace the entry whole: no leftover
	// note or alias from the shipped entry or the file's.
	if want := mustPrice(t, `{"input": 1.5, "cached": 0.5, "output": 6}`); !reflect.DeepEqual(o.Models["gpt-4o"], want) {
		t.Errorf("gpt-4o = %+v, want the inline entry whole", o.Models["gpt-4o"])
	}
	// A name the file defines as an alias is taken from the shipped entry.
	if _, ok := o.Models["gpt-4o-mini"]; ok {
		t.Error("gpt-4o-mini is still an entry after the file made it an alias")
	}
	if o.AsOf != "2026-09-01" || o.Source != "https://openai.example/pricing" {
		t.Errorf("as_of %q, source %q", o.AsOf, o.Source)
	}
	if !slices.Equal(o.Suffixes, []string{"-####-##-##", "-v#"}) {
		t.Errorf("suffixes %v: want the file's added after the shipped ones, once", o.Suffixes)
	}
	if got.Providers["vllm"] == nil || got.Providers["anthropic"] == nil {
		t.Error("a provider type was lost or not added")
	}
	if got.AsOf != "2026-07-24" {
		t.Errorf("as_of %q: want the base's", got.AsOf)
	}

	p, err := Build(base, file, inline)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		typ, model, entry string
	}{
		{"openai", "gpt-4o-2024-08-06", "gpt-4o"},
		{"openai", "chatgpt-4o-latest", ""}, // the alias went with the replaced entry
		{"openai", "gpt-4o-mini", "my-model"},
		{"vllm", "llama-3", "llama-3"},
		{"anthropic", "claude-x", "claude-x"},
	} {
		e, ok := p.Lookup(c.typ, c.model)
		if e.Model() != c.entry || ok != (c.entry != "") {
			t.Errorf("Lookup(%s, %s) = %q, %v; want %q", c.typ, c.model, e.Model(), ok, c.entry)
		}
	}
	if c, ok := p.Cost("vllm", "llama-3", Usage{PromptTokens: 100, CompletionTokens: 100}); !ok || c != 0 {
		t.Errorf("an operator's zero price: %s, %v; want priced at 0", c, ok)
	}
}

func TestMergeShippedAliasTakeover(t *testing.T) {
	// An override entry named like a shipped alias takes the name.
	over := mustTable(t, `{"providers": {"openai": {"models": {"gpt-4-0613": {"input": 1, "output": 1}}}}}`)
	p, err := Build(Shipped(), over)
	if err != nil {
		t.Fatal(err)
	}
	if e, _ := p.Lookup("openai", "gpt-4-0613"); e.Model() != "gpt-4-0613" {
		t.Errorf("gpt-4-0613 prices as %q", e.Model())
	}
	if e, _ := p.Lookup("openai", "gpt-4"); e.Model() != "gpt-4" {
		t.Errorf("gpt-4 prices as %q", e.Model())
	}
}

func TestBuildErrors(t *testing.T) {
	bad := &Table{Providers: map[string]*ProviderPrices{"openai": {Models: map[string]*Price{"m": {}}}}}
	if _, err := Build(Shipped(), bad); err == nil || !strings.Contains(err.Error(), "price table 2") {
		t.Errorf("Build with an invalid layer: %v", err)
	}
	neg := Rate(-1)
	if _, err := Build(&Table{Providers: map[string]*ProviderPrices{"x": {Models: map[string]*Price{"m": {Input: &neg}}}}}); err == nil || !strings.Contains(err.Error(), "negative") {
		t.Errorf("Build with a negative rate made in Go: %v", err)
	}
	if p, err := Build(); err != nil || p.Len() != 0 {
		t.Errorf("Build() = %v, %v", p, err)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "prices.json")
	if err := os.WriteFile(file, []byte(`{"providers": {"openai": {"models": {
		"gpt-4o": {"input": 2, "output": 8},
		"my-finetune": {"input": 0.3, "output": 1.2, "aliases": ["ft:gpt-4o-mini-2024-07-18:acme::abc123"]}
	}}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := &Config{File: file}
	for _, line := range [][]string{
		{"model", "openai/gpt-4o", "input", "1", "output", "4"},
		{"model", "vllm/meta-llama/Llama-3.3-70B-Instruct", "input", "0.2", "output", "0.2"},
	} {
		if err := cfg.UnmarshalLine(line); err != nil {
			t.Fatal(err)
		}
	}
	p, err := Load(cfg)
	if err != nil {
		t.Fatal(err)
	}
	u := Usage{PromptTokens: 1_000_000, CompletionTokens: 1_000_000}
	for _, c := range []struct {
		typ, model string
		want       Money
	}{
		{"openai", "gpt-4o", 5 * Dollar},                                                // inline beats the file
		{"openai", "ft:gpt-4o-mini-2024-07-18:acme::abc123", 1500 * Microdollar * 1000}, // the file adds
		{"vllm", "meta-llama/Llama-3.3-70B-Instruct", 400 * Microdollar * 1000},         // '/' in the model
		{"anthropic", "claude-haiku-4-5", 6 * Dollar},                                   // shipped, untouched
	} {
		if got, ok := p.Cost(c.typ, c.model, u); !ok || got != c.want {
			t.Errorf("%s/%s: %s, %v; want %s", c.typ, c.model, got, ok, c.want)
		}
	}

	if p, err := Load(nil); err != nil || p != Default() {
		t.Errorf("Load(nil) = %p, %v; want the shipped prices", p, err)
	}
	if _, err := Load(&Config{File: filepath.Join(dir, "missing.json")}); err == nil {
		t.Error("Load with a missing file succeeded")
	}
	if err := os.WriteFile(file, []byte(`{"providers": {"openai": {"models": {"m": {"input": -1}}}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(&Config{File: file}); err == nil || !strings.Contains(err.Error(), file) {
		t.Errorf("Load with a bad file: %v; want an error naming the file", err)
	}
	if _, err := Load(&Config{Models: map[string]*Price{"gpt-4o": mustPrice(t, `{"input": 1}`)}}); err == nil || !strings.Contains(err.Error(), "<provider type>/<model>") {
		t.Errorf("Load with an inline key without a type: %v", err)
	}
}

func mustTable(t *testing.T, js string) *Table {
	t.Helper()
	tab, err := ParseTable([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

func mustPrice(t *testing.T, js string) *Price {
	t.Helper()
	var p Price
	if err := json.Unmarshal([]byte(js), &p); err != nil {
		t.Fatal(err)
	}
	return &p
}

// FuzzParseTable: any input either fails to parse or gives a table that
// builds, prices without panicking, and survives a round trip.
func FuzzParseTable(f *testing.F) {
	f.Add(shippedJSON)
	f.Add([]byte(`{"providers": {"openai": {"suffixes": ["-####"], "prefixes": ["a*/"], "models": {"m": {"input": 1, "tiers": [{"above": 5, "output": 2}], "aliases": ["n"]}}}}}`))
	f.Add([]byte(`{"providers": {"x": {"models": {"m": {"input": 1e-6, "search": 0.5}}}}}`))
	f.Add([]byte(`{"a": {"a": 1}, "a": 2}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tab, err := ParseTable(data)
		if err != nil {
			return
		}
		p, err := Build(tab)
		if err != nil {
			t.Fatalf("a parsed table does not build: %v", err)
		}
		for typ, pp := range tab.Providers {
			for model := range pp.Models {
				e, ok := p.Lookup(typ, model)
				if !ok || e.Model() != model {
					t.Fatalf("entry %s/%s does not look itself up (got %q)", typ, model, e.Model())
				}
				e.Cost(Usage{PromptTokens: 300, CachedTokens: 100, CompletionTokens: 5, Searches: 1})
				p.Lookup(typ, "x"+model+"-2024-01-01")
			}
		}
		out, err := json.Marshal(tab)
		if err != nil {
			t.Fatal(err)
		}
		// Empty maps and lists vanish (omitempty); what is written again
		// must be the same.
		back, err := ParseTable(out)
		if err != nil {
			t.Fatalf("round trip: %v", err)
		}
		again, _ := json.Marshal(back)
		if string(again) != string(out) {
			t.Fatalf("round trip changed the table:\n%s\n%s", out, again)
		}
	})
}

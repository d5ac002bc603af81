package caddymodule

import (
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/keys"
	"github.com/modelgate/modelgate/pricing"
	"github.com/modelgate/modelgate/providers/openai"
	"github.com/modelgate/modelgate/quota"
)

func TestEstimateInputTokens(t *testing.T) {
	png := "data:image/png;base64," + strings.Repeat("iVBORw0KGgo", 200)
	for _, tc := range []struct {
		name string
		body string
		want int64
	}{
		{"text", `{"model":"a-very-long-model-name-that-is-not-counted","messages":[{"role":"user","content":"four"}]}`, 1 + 1}, // "user", "four"
		{"nothing", `{}`, 0},
		{"an image counts as one", `{"messages":[{"content":[{"type":"image_url","image_url":{"url":"` + png + `"}}]}]}`, imageTokens + 3},                                    // and "image_url"
		{"base64 without spaces", `{"messages":[{"content":[{"type":"image","source":{"type":"base64","data":"` + strings.Repeat("A", 5000) + `"}}]}]}`, imageTokens + 2 + 2}, // and "image", "base64"
		{"long prose is text", `{"input":"` + strings.Repeat("word ", 1000) + `"}`, 1250},
		{"numbers and booleans are not", `{"max_tokens":5000,"stream":true}`, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := estimateInputTokens([]byte(tc.body)); got != tc.want {
				t.Errorf("estimate %d, want %d", got, tc.want)
			}
		})
	}
}

func TestEstimateCall(t *testing.T) {
	prices, err := pricing.Load(nil)
	if err != nil {
		t.Fatal(err)
	}
	a := &App{prices: prices}
	oa := &provider{name: "oa", typ: "openai", base: &ProviderBase{}, Endpoints: Endpoints{Chat: openai.Chat{}}}
	mini := target{provider: oa, model: "gpt-4o-mini"}
	big := target{provider: oa, model: "gpt-4o"}
	unpriced := target{provider: oa, model: "my-finetune"}
	body := []byte(`{"model":"x","max_tokens":100,"messages":[{"role":"user","content":"12345678"}]}`)
	in := estimateInputTokens(body)
	cost := func(model string, out int64) pricing.Money {
		c, _ := prices.Cost("openai", model, pricing.Usage{PromptTokens: in, CompletionTokens: out})
		return c
	}
	for _, tc := range []struct {
		name    string
		body    []byte
		targets []target
		tokens  int64
		cost    pricing.Money
		priced  bool
	}{
		{"max_tokens counted", body, []target{mini}, in + 100, cost("gpt-4o-mini", 100), true},
		{"the dearest target", body, []target{mini, big}, in + 100, cost("gpt-4o", 100), true},
		{"an unpriced target", body, []target{big, unpriced}, in + 100, cost("gpt-4o", 100), false},
		{"without max_tokens: the allowance, for cost only", []byte(`{"messages":[{"role":"user","content":"12345678"}]}`), []target{mini},
			in, cost("gpt-4o-mini", outputAllowance), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := a.estimateCall(&call{endpoint: endpointChat, body: tc.body}, tc.targets)
			if e.tokens != tc.tokens || e.cost != tc.cost || e.priced != tc.priced {
				t.Errorf("estimate %+v, want tokens %d cost %v priced %v", e, tc.tokens, tc.cost, tc.priced)
			}
		})
	}
}

func TestSubjects(t *testing.T) {
	lc := &LimitsConfig{
		Key:    &keys.Policy{Limits: &keys.Limits{RequestsPerMinute: 10}},
		Owners: map[string]*keys.Policy{"team": {Budget: &keys.Budget{USD: "2.5", Period: "day"}}},
	}
	if err := lc.provision(); err != nil {
		t.Fatal(err)
	}
	a := &App{Limits: lc}
	s := a.subjects(&Key{Name: "ci", Owner: "team"})
	if s.Key.ID != "static:ci" || s.Key.Limits.RequestsPerMinute != 10 || s.Owner.ID != "team" ||
		s.Owner.Budget != (quota.Budget{Amount: 2_500_000_000, Period: quota.Day}) || !enforced(&s) || !budgeted(&s) {
		t.Errorf("static key: %+v", s)
	}
	own := &Key{Name: "m", ID: "key_1", Owner: "other", Budget: &keys.Budget{USD: "0.000001", Period: "total"}}
	s = a.subjects(own)
	if s.Key.ID != "key_1" || s.Key.Budget.Amount != 1000 || s.Owner.Budget.Amount != 0 {
		t.Errorf("managed key: %+v", s)
	}
	if s := (&App{}).subjects(&Key{Name: "x", Owner: "x"}); enforced(&s) {
		t.Errorf("nothing configured, yet %+v is enforced", s)
	}
}

func FuzzEstimateInputTokens(f *testing.F) {
	for _, s := range []string{`{"messages":[{"content":"hi"}]}`, `[1,"a",{"b":["c"]}]`, `"x"`, `{"a":`, ``} {
		f.Add([]byte(s))
	}
	for _, s := range []string{`{"model":"m","max_tokens":"9","max_completion_tokens":0,"max_output_tokens":7,"max_tokens":8}`,
		`{"max_tokens":5,"max_completion_tokens":-1,"x":{"model":"not counted","max_tokens":3}}`, `{"max_output_tokens":2.5}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		n, maxOut := estimateBody(body)
		if n < 0 {
			t.Fatalf("negative estimate %d", n)
		}
		if gjson.ValidBytes(body) && len(body) < 1024 && n > int64(len(body)) {
			t.Fatalf("estimate %d for %d bytes", n, len(body))
		}
		// Every API's body is checked to be JSON before it is estimated
		// (gjson's lookups and walks read broken JSON each its own way).
		if wantIn, wantOut := estimateReference(body); gjson.ValidBytes(body) && (n != wantIn || maxOut != wantOut) {
			t.Fatalf("estimate %d, max output %d; the plain walk and lookups give %d, %d", n, maxOut, wantIn, wantOut)
		}
	})
}

// TestEstimateBodyAsReference: estimateBody's one scan gives what the
// plain walk and lookups give, on every JSON file under testdata (request
// and answer bodies of every provider) and on random JSON with "model"
// and the maximum output's fields at every depth, escapes and non-ASCII
// text.
func TestEstimateBodyAsReference(t *testing.T) {
	check := func(name string, body []byte) {
		t.Helper()
		in, out := estimateBody(body)
		if wantIn, wantOut := estimateReference(body); in != wantIn || out != wantOut {
			t.Errorf("%s: estimate %d, max output %d; want %d, %d: %.300s", name, in, out, wantIn, wantOut, body)
		}
	}
	files := 0
	err := filepath.WalkDir("../testdata", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".json") {
			return err
		}
		body, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if gjson.ValidBytes(body) {
			files++
			check(path, body)
		}
		return nil
	})
	if err != nil || files < 100 {
		t.Fatalf("%d JSON files under testdata: %v", files, err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	keys := []string{"model", "max_tokens", "max_completion_tokens", "max_output_tokens", "content", `mod\u0065l`, `max_\u0074okens`, "x"}
	strs := []string{"", "hi there", "日本語のテキスト", `tab\tand \"quote\"`, `\u00e9t\u00e9`, strings.Repeat("A", 1100), "data:image/png;base64," + strings.Repeat("iVBO", 300), "[{not json}]"}
	nums := []string{"0", "5", "-3", "2.5", "1e3", "100000000000", "-0.5"}
	var gen func(b *strings.Builder, depth int)
	gen = func(b *strings.Builder, depth int) {
		switch k := rng.IntN(7); {
		case k < 2 && depth < 6:
			b.WriteString("{ ")
			for i := range rng.IntN(5) {
				if i > 0 {
					b.WriteString(" ,\n")
				}
				b.WriteString(`"` + keys[rng.IntN(len(keys))] + `" : `)
				gen(b, depth+1)
			}
			b.WriteString("}")
		case k < 4 && depth < 6:
			b.WriteString("[")
			for i := range rng.IntN(4) {
				if i > 0 {
					b.WriteString(",")
				}
				gen(b, depth+1)
			}
			b.WriteString(" ]")
		case k < 5:
			b.WriteString(nums[rng.IntN(len(nums))])
		case k < 6:
			b.WriteString([]string{"true", "false", "null"}[rng.IntN(3)])
		default:
			b.WriteString(`"` + strs[rng.IntN(len(strs))] + `"`)
		}
	}
	for i := range 20000 {
		var b strings.Builder
		if i%2 == 0 {
			b.WriteString("{")
			for j := range rng.IntN(6) {
				if j > 0 {
					b.WriteString(",")
				}
				b.WriteString(`"` + keys[rng.IntN(len(keys))] + `":`)
				gen(&b, 1)
			}
			b.WriteString("}")
		} else {
			gen(&b, 0)
		}
		if body := []byte(b.String()); gjson.ValidBytes(body) {
			check("random", body)
		} else {
			t.Fatalf("generated invalid JSON: %s", body)
		}
	}
}

// estimateReference is what estimateBody does in one pass, done the plain
// way: a walk of the whole body, then a lookup of each field of the
// maximum output.
func estimateReference(body []byte) (in, maxOut int64) {
	var walk func(v gjson.Result)
	walk = func(v gjson.Result) {
		switch {
		case v.Type == gjson.String:
			in += stringTokens(v.Str)
		case v.IsObject() || v.IsArray():
			v.ForEach(func(k, x gjson.Result) bool {
				if k.Str != "model" {
					walk(x)
				}
				return true
			})
		}
	}
	walk(gjson.ParseBytes(body))
	for _, f := range maxOutputFields {
		if v := gjson.GetBytes(body, f); v.Type == gjson.Number && v.Int() > 0 {
			return in, v.Int()
		}
	}
	return in, 0
}

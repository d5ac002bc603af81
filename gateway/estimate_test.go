package gateway

import (
	"encoding/base64"
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/pricing"
	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/anthropic"
	"github.com/modelgate/modelgate/providers/embeddings"
	"github.com/modelgate/modelgate/providers/openai"
	"github.com/modelgate/modelgate/providers/rerank"
)

// estimateInputTokens is estimateBody's input tokens.
func estimateInputTokens(body []byte) int64 { return estimateBody(body).in }

// text is what the estimate counts for strings: providers.MaxTextTokens
// of each.
func text(strs ...string) int64 {
	var n int64
	for _, s := range strs {
		n += providers.MaxTextTokens(s)
	}
	return n
}

// pdf is the base64 of a PDF of n pages (the page objects, not a
// renderable document).
func pdf(n int) string {
	var b strings.Builder
	b.WriteString("%PDF-1.7\n1 0 obj << /Type /Pages /Count " + fmt.Sprint(n) + " >> endobj\n")
	for i := range n {
		fmt.Fprintf(&b, "%d 0 obj << /Type /Page /Parent 1 0 R >> endobj\n", i+2)
	}
	return base64.StdEncoding.EncodeToString([]byte(b.String()))
}

func TestEstimateInputTokens(t *testing.T) {
	png := "data:image/png;base64," + strings.Repeat("iVBORw0KGgo", 200)
	cjk := strings.Repeat("人工智能正在改变我们的生活方式。", 100) // no space, no newline
	minified := strings.Repeat(`{"id":12345,"name":"Widget","tags":["a","b"],"price":9.99},`, 50)
	audio := strings.Repeat("UklGRiQAAABXQVZF", 1000) // 16,000 bytes of base64
	for _, tc := range []struct {
		name string
		body string
		want int64
	}{
		{"nothing", `{}`, 1},
		{"text, keys and containers, not the model",
			`{"model":"a-very-long-model-name-that-is-not-counted","messages":[{"role":"user","content":"four"}]}`,
			3 + text("model", "messages", "role", "user", "content", "four")},
		{"numbers and literals are text", `{"max_tokens":5000,"stream":true}`, 1 + text("max_tokens", "5000", "stream", "true")},
		// The probe's case: a long string without a space near its start
		// is text, however long.
		{"CJK prose is text", `{"input":"` + cjk + `"}`, 1 + text("input", cjk)},
		{"minified JSON is text", `{"input":` + fmt.Sprintf("%q", minified) + `}`, 1 + text("input", minified)},
		{"a data: URL is text outside a content part", `{"messages":[{"role":"user","content":"` + png + `"}]}`,
			3 + text("messages", "role", "user", "content", png)},
		{"a chat image part", `{"messages":[{"content":[{"type":"image_url","image_url":{"url":"` + png + `","detail":"high"}}]}]}`,
			6 + text("messages", "content", "type", "image_url", "image_url", "url", "detail", "high") + imageTokens},
		{"a chat image by URL", `{"messages":[{"content":[{"type":"image_url","image_url":{"url":"https://example.com/a.png"}}]}]}`,
			6 + text("messages", "content", "type", "image_url", "image_url", "url") + imageTokens},
		{"a chat audio part", `{"messages":[{"content":[{"type":"input_audio","input_audio":{"data":"` + audio + `","format":"wav"}}]}]}`,
			6 + text("messages", "content", "type", "input_audio", "input_audio", "data", "format", "wav") + 12000/audioBytesPerToken + 1},
		{"a chat file part", `{"messages":[{"content":[{"type":"file","file":{"file_data":"data:application/pdf;base64,` + pdf(3) + `","filename":"a.pdf"}}]}]}`,
			6 + text("messages", "content", "type", "file", "file", "file_data", "filename", "a.pdf") + 3*pdfPageTokens},
		{"a Responses image and file", `{"input":[{"role":"user","content":[{"type":"input_image","image_url":"` + png + `"},{"type":"input_file","file_data":"data:application/pdf;base64,` + pdf(2) + `"}]}]}`,
			6 + text("input", "role", "user", "content", "type", "input_image", "image_url", "type", "input_file", "file_data") + imageTokens + 2*pdfPageTokens},
		{"a Responses tool output with an image", `{"input":[{"type":"function_call_output","call_id":"c","output":[{"type":"input_image","image_url":"` + png + `"}]}]}`,
			5 + text("input", "type", "function_call_output", "call_id", "c", "output", "type", "input_image", "image_url") + imageTokens},
		// Anthropic's source: the data may come before the type.
		{"an Anthropic image", `{"messages":[{"role":"user","content":[{"type":"image","source":{"data":"` + strings.Repeat("A", 5000) + `","media_type":"image/png","type":"base64"}}]}]}`,
			6 + text("messages", "role", "user", "content", "type", "image", "source", "data", "media_type", "image/png", "type", "base64") + imageTokens},
		{"an Anthropic PDF in a tool result", `{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"` + pdf(4) + `"}}]}]}]}`,
			8 + text("messages", "role", "user", "content", "type", "tool_result", "tool_use_id", "t", "content", "type", "document", "source", "type", "base64", "media_type", "application/pdf", "data") + 4*pdfPageTokens},
		{"an Anthropic text document is text", `{"messages":[{"role":"user","content":[{"type":"document","source":{"type":"text","media_type":"text/plain","data":"` + cjk + `"}}]}]}`,
			6 + text("messages", "role", "user", "content", "type", "document", "source", "type", "text", "media_type", "text/plain", "data", cjk)},
		// In a tool's schema or a tool call's input, the same shapes are
		// what the model reads: text.
		{"media shapes in a tool schema are text", `{"tools":[{"input_schema":{"source":{"type":"base64","media_type":"image/png","data":"` + cjk + `"}}}],"messages":[]}`,
			6 + text("tools", "input_schema", "source", "type", "base64", "media_type", "image/png", "data", cjk, "messages")},
		{"media shapes in a tool call's input are text", `{"messages":[{"role":"assistant","content":[{"type":"tool_use","input":{"image_url":"` + png + `"}}]}]}`,
			6 + text("messages", "role", "assistant", "content", "type", "tool_use", "input", "image_url", png)},
		{"a model deeper down is text", `{"tools":[{"parameters":{"model":"` + cjk + `"}}]}`, 4 + text("tools", "parameters", "model", cjk)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := estimateInputTokens([]byte(tc.body)); got != tc.want {
				t.Errorf("estimate %d, want %d", got, tc.want)
			}
			if got := estimateReference([]byte(tc.body), contextRoot).in; got != tc.want {
				t.Errorf("the reference's estimate %d, want %d", got, tc.want)
			}
		})
	}
}

// TestEstimateOutput: the output is the largest maximum asked for, times
// the answers asked for.
func TestEstimateOutput(t *testing.T) {
	for _, tc := range []struct {
		body            string
		maxOut, answers int64
	}{
		{`{}`, 0, 1},
		{`{"max_tokens":100}`, 100, 1},
		{`{"max_tokens":100,"max_completion_tokens":50}`, 100, 1}, // a translator may send either
		{`{"max_output_tokens":2.5}`, 3, 1},
		{`{"max_tokens":-5,"n":0}`, 0, 1},
		{`{"n":128,"max_tokens":16000}`, 16000, 128},
		{`{"n":2,"best_of":5,"max_tokens":10}`, 10, 5},
		{`{"x":{"n":9,"max_tokens":9}}`, 0, 1}, // the top level only
		{`{"max_tokens":1e30,"n":100000000000000000000}`, math.MaxInt64, math.MaxInt64},
	} {
		e := estimateBody([]byte(tc.body))
		if e.maxOut != tc.maxOut || e.answers != tc.answers {
			t.Errorf("%s: max output %d, answers %d; want %d, %d", tc.body, e.maxOut, e.answers, tc.maxOut, tc.answers)
		}
	}
}

func TestEstimateCall(t *testing.T) {
	prices, err := pricing.Load(nil)
	if err != nil {
		t.Fatal(err)
	}
	a := &Gateway{prices: prices}
	oa := &Provider{Name: "oa", Type: "openai", Endpoints: Endpoints{Chat: openai.Chat{}, Embeddings: embeddings.OpenAI}}
	claude := &Provider{Name: "claude", Type: "anthropic", Endpoints: Endpoints{Chat: &anthropic.Chat{}}}
	co := &Provider{Name: "co", Type: "cohere", Endpoints: Endpoints{Rerank: rerank.Cohere}}
	mini := Target{Provider: oa, Model: "gpt-4o-mini"}
	big := Target{Provider: oa, Model: "gpt-4o"}
	unpriced := Target{Provider: oa, Model: "my-finetune"}
	sonnet := Target{Provider: claude, Model: "claude-sonnet-4-5"}
	body := []byte(`{"model":"x","max_tokens":100,"messages":[{"role":"user","content":"12345678"}]}`)
	many := []byte(`{"model":"x","n":128,"max_tokens":16000,"messages":[{"role":"user","content":"12345678"}]}`)
	bare := []byte(`{"messages":[{"role":"user","content":"12345678"}]}`)
	in, inMany, inBare := estimateInputTokens(body), estimateInputTokens(many), estimateInputTokens(bare)
	cost := func(typ, model string, u pricing.Usage) pricing.Money {
		c, ok := prices.Cost(typ, model, u)
		if !ok {
			t.Fatalf("%s/%s has no price", typ, model)
		}
		return c
	}
	chat := func(model string, in, out int64) pricing.Money {
		return cost("openai", model, pricing.Usage{PromptTokens: in, CompletionTokens: out})
	}
	emb := &providers.EmbeddingsRequest{Texts: []string{"hello world", "日本語"}, Tokens: [][]int64{{1, 2, 3}}}
	docs := make([]string, 250)
	for i := range docs {
		docs[i] = strings.Repeat("word ", 10)
	}
	docs[0] = strings.Repeat("a long document ", 300) // over 500 tokens: several chunks
	rr := &providers.RerankRequest{Query: "which?", Documents: docs}
	rrTokens, rrSearches := rerankEstimate(rr)
	for _, tc := range []struct {
		name    string
		c       *request
		targets []Target
		tokens  int64
		cost    pricing.Money
		priced  bool
	}{
		{"max_tokens counted", &request{endpoint: endpointChat, body: body}, []Target{mini}, in + 100, chat("gpt-4o-mini", in, 100), true},
		{"the dearest target", &request{endpoint: endpointChat, body: body}, []Target{mini, big}, in + 100, chat("gpt-4o", in, 100), true},
		{"an unpriced target", &request{endpoint: endpointChat, body: body}, []Target{big, unpriced}, in + 100, chat("gpt-4o", in, 100), false},
		{"without max_tokens: the allowance, for cost only", &request{endpoint: endpointChat, body: bare}, []Target{mini},
			inBare, chat("gpt-4o-mini", inBare, outputAllowance), true},
		{"n answers: n times the output", &request{endpoint: endpointChat, body: many}, []Target{mini},
			inMany + 128*16000, chat("gpt-4o-mini", inMany, 128*16000), true},
		{"a prompt written to the cache costs its rate", &request{endpoint: endpointMessages, body: body}, []Target{sonnet},
			in + 100, cost("anthropic", "claude-sonnet-4-5", pricing.Usage{PromptTokens: in, CacheWriteTokens: in, CompletionTokens: 100}), true},
		{"a conversation continued", &request{endpoint: endpointResponses, body: body, history: []byte(`[{"role":"user","content":"` + strings.Repeat("earlier ", 100) + `"}]`)}, []Target{mini},
			in + 100 + 2 + text("role", "user", "content", strings.Repeat("earlier ", 100)), chat("gpt-4o-mini", in+2+text("role", "user", "content", strings.Repeat("earlier ", 100)), 100), true},
		{"embeddings: texts bounded, token ids exact", &request{endpoint: endpointEmbeddings, embeddings: emb}, []Target{{Provider: oa, Model: "text-embedding-3-small"}},
			text("hello world", "日本語") + 3, cost("openai", "text-embedding-3-small", pricing.Usage{EmbeddingTokens: text("hello world", "日本語") + 3}), true},
		{"rerank: by searches", &request{endpoint: endpointRerank, rerank: rr}, []Target{{Provider: co, Model: "rerank-v3.5"}},
			rrTokens, cost("cohere", "rerank-v3.5", pricing.Usage{PromptTokens: rrTokens, Searches: rrSearches}), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := a.estimateCall(tc.c, tc.targets)
			if e.tokens != tc.tokens || e.cost != tc.cost || e.priced != tc.priced {
				t.Errorf("estimate %+v, want tokens %d cost %v priced %v", e, tc.tokens, tc.cost, tc.priced)
			}
		})
	}
	// 250 documents, one of them in several chunks: three searches of
	// up to 100.
	if rrSearches != 3 || rrTokens != 250*text("which?")+249*text(strings.Repeat("word ", 10))+text(docs[0]) {
		t.Errorf("rerank: %d tokens, %d searches", rrTokens, rrSearches)
	}
	// A cache write costs more than the input at Anthropic: the estimate
	// is above the plain input's price.
	if plain := cost("anthropic", "claude-sonnet-4-5", pricing.Usage{PromptTokens: in, CompletionTokens: 100}); a.estimateCall(&request{endpoint: endpointMessages, body: body}, []Target{sonnet}).cost <= plain {
		t.Error("the cache-write rate was not counted")
	}
}

func TestPDFPages(t *testing.T) {
	for _, n := range []int{1, 2, 7, 300} {
		if got := pdfPages(pdf(n)); got != n {
			t.Errorf("%d pages counted as %d", n, got)
		}
	}
	for _, s := range []string{"", "not base64!", base64.StdEncoding.EncodeToString([]byte("%PDF-1.7 no pages"))} {
		if got := pdfPages(s); got != 1 {
			t.Errorf("%q: %d pages, want 1", s, got)
		}
	}
}

func FuzzEstimateInputTokens(f *testing.F) {
	for _, s := range []string{`{"messages":[{"content":"hi"}]}`, `[1,"a",{"b":["c"]}]`, `"x"`, `{"a":`, ``} {
		f.Add([]byte(s))
	}
	for _, s := range []string{`{"model":"m","max_tokens":"9","max_completion_tokens":0,"max_output_tokens":7,"max_tokens":8}`,
		`{"max_tokens":5,"max_completion_tokens":-1,"x":{"model":"not counted","max_tokens":3}}`, `{"max_output_tokens":2.5,"n":3,"best_of":1e3}`,
		`{"messages":[{"content":[{"type":"image","source":{"data":"AAAA","type":"base64","media_type":"application/pdf"}}]}]}`,
		`{"input":[{"content":[{"image_url":"x","file_data":"data:audio/wav;base64,AAAA"},{"input_audio":{"data":"AA"}}]}]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		e := estimateBody(body)
		if e.in < 0 || e.maxOut < 0 || e.answers < 1 {
			t.Fatalf("estimate %+v", e)
		}
		// Every API's body is checked to be JSON before it is estimated
		// (gjson's lookups and walks read broken JSON each its own way).
		if want := estimateReference(body, contextRoot); gjson.ValidBytes(body) && e != want {
			t.Fatalf("estimate %+v; the plain walk gives %+v", e, want)
		}
	})
}

// TestEstimateBodyAsReference: estimateBody's one scan gives what the
// plain walk gives, on every JSON file under testdata (request and answer
// bodies of every provider) and on random JSON with the fields it reads
// and the media shapes at every depth, escapes and non-ASCII text.
func TestEstimateBodyAsReference(t *testing.T) {
	check := func(name string, body []byte) {
		t.Helper()
		for _, root := range []mediaContext{contextRoot, contextTurns} {
			if got, want := estimateJSON(body, root), estimateReference(body, root); got != want {
				t.Errorf("%s (root %d): estimate %+v; want %+v: %.300s", name, root, got, want, body)
			}
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
	keys := []string{"model", "max_tokens", "max_completion_tokens", "max_output_tokens", "n", "best_of", "messages", "input", "content", "output",
		"image_url", "input_audio", "file", "source", "url", "data", "file_data", "type", "media_type", `mod\u0065l`, `max_\u0074okens`, `d\u0061ta`, "x"}
	strs := []string{"", "hi there", "日本語のテキスト", `tab\tand \"quote\"`, `\u00e9t\u00e9`, strings.Repeat("A", 1100), "data:image/png;base64," + strings.Repeat("iVBO", 300),
		"data:application/pdf;base64," + pdf(2), pdf(1), "data:audio/wav;base64,UklG", "base64", "text", "image/png", "application/pdf", `\/9j\/4AAQ`, "[{not json}]"}
	nums := []string{"0", "5", "-3", "2.5", "1e3", "100000000000", "-0.5"}
	var gen func(b *strings.Builder, depth int)
	gen = func(b *strings.Builder, depth int) {
		switch k := rng.IntN(7); {
		case k < 2 && depth < 8:
			b.WriteString("{ ")
			for i := range rng.IntN(5) {
				if i > 0 {
					b.WriteString(" ,\n")
				}
				b.WriteString(`"` + keys[rng.IntN(len(keys))] + `" : `)
				gen(b, depth+1)
			}
			b.WriteString("}")
		case k < 4 && depth < 8:
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

// estimateReference is what estimateJSON does in one pass, done the plain
// way: a recursive walk of the parsed body.
func estimateReference(body []byte, root mediaContext) bodyEstimate {
	e := bodyEstimate{answers: 1}
	var walk func(v gjson.Result, ctx mediaContext, sources int)
	walk = func(v gjson.Result, ctx mediaContext, sources int) {
		e.in++ // the container
		if v.IsArray() {
			v.ForEach(func(_, x gjson.Result) bool {
				switch {
				case x.IsObject() || x.IsArray():
					walk(x, ctx, sources)
				case x.Type == gjson.String:
					e.in = satAdd(e.in, providers.MaxTextTokens(x.Str))
				default:
					e.in = satAdd(e.in, providers.MaxTextTokens(x.Raw))
				}
				return true
			})
			return
		}
		isSource := ctx == contextSource
		if isSource {
			sources++
		}
		var src source
		v.ForEach(func(k, x gjson.Result) bool {
			e.in = satAdd(e.in, providers.MaxTextTokens(k.Str))
			switch {
			case x.IsObject() || x.IsArray():
				walk(x, ctx.member(k.Str), sources)
			case x.Type == gjson.String:
				if ctx == contextRoot && k.Str == "model" {
					break
				}
				kind := ctx.stringKind(k.Str)
				if isSource && sources <= 2 {
					switch k.Str {
					case "type":
						src.typ = x.Str
					case "media_type":
						src.mediaType = x.Str
					}
					if kind == mediaSource {
						if src.hasData { // a repeated key: the earlier data is text
							e.in = satAdd(e.in, providers.MaxTextTokens(src.data))
						}
						src.data, src.hasData = x.Str, true
						break
					}
				}
				if kind == mediaSource {
					kind = mediaText
				}
				e.in = satAdd(e.in, mediaTokens(kind, x.Str))
			default:
				e.in = satAdd(e.in, providers.MaxTextTokens(x.Raw))
				if ctx != contextRoot || x.Type != gjson.Number {
					break
				}
				n := countOf(x.Raw)
				for _, f := range maxOutputFields {
					if k.Str == f {
						e.maxOut = max(e.maxOut, n)
					}
				}
				for _, f := range answersFields {
					if k.Str == f {
						e.answers = max(e.answers, n)
					}
				}
			}
			return true
		})
		if isSource && sources <= 2 && src.hasData {
			e.in = satAdd(e.in, sourceTokens(&src))
		}
	}
	switch v := gjson.ParseBytes(body); {
	case v.IsArray() && root == contextRoot:
		walk(v, contextNone, 0) // a request is an object
	case v.IsObject() || v.IsArray():
		walk(v, root, 0)
	case v.Type == gjson.String:
		e.in = providers.MaxTextTokens(v.Str)
	case v.Exists():
		e.in = providers.MaxTextTokens(v.Raw)
	}
	return e
}

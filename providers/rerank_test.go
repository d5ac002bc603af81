package providers

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

func TestValidateRerank(t *testing.T) {
	req, err := ValidateRerank([]byte(`{"model":"co/rerank-v3.5","query":"plays","top_n":2,
		"documents":["Hamlet",{"title":"Macbeth","note":"act: 1"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if req.Model != "co/rerank-v3.5" || req.Query != "plays" || req.TopN != 2 ||
		strings.Join(req.Documents, "|") != "Hamlet|title: Macbeth\nnote: \"act: 1\"" {
		t.Errorf("%+v", req)
	}
	if req, _ := ValidateRerank([]byte(`{"model":"m","query":"q","documents":["a","b"],"top_n":9}`)); req.TopN != 2 {
		t.Errorf("top_n above the document count: %d, want 2", req.TopN)
	}
	if req, _ := ValidateRerank([]byte(`{"model":"m","query":"q","documents":["a","b"],"top_n":null}`)); req.TopN != 0 {
		t.Errorf("top_n null: %d", req.TopN)
	}

	for _, tc := range []struct{ name, body, param string }{
		{"no model", `{"query":"q","documents":["a"]}`, "model"},
		{"empty query", `{"model":"m","query":"","documents":["a"]}`, "query"},
		{"query not string", `{"model":"m","query":5,"documents":["a"]}`, "query"},
		{"no documents", `{"model":"m","query":"q"}`, "documents"},
		{"documents empty", `{"model":"m","query":"q","documents":[]}`, "documents"},
		{"empty string document", `{"model":"m","query":"q","documents":["a",""]}`, "documents[1]"},
		{"empty object document", `{"model":"m","query":"q","documents":[{}]}`, "documents[0]"},
		{"number field", `{"model":"m","query":"q","documents":[{"title":"x","year":1603}]}`, "documents[0].year"},
		{"nested field", `{"model":"m","query":"q","documents":[{"meta":{"a":"b"}}]}`, "documents[0].meta"},
		{"number document", `{"model":"m","query":"q","documents":["a",7]}`, "documents[1]"},
		{"top_n zero", `{"model":"m","query":"q","documents":["a"],"top_n":0}`, "top_n"},
		{"top_n float", `{"model":"m","query":"q","documents":["a"],"top_n":1.5}`, "top_n"},
		{"top_n string", `{"model":"m","query":"q","documents":["a"],"top_n":"1"}`, "top_n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ValidateRerank([]byte(tc.body))
			var e *Error
			if !errors.As(err, &e) || e.Status != 400 || e.Param != tc.param {
				t.Errorf("error %+v, want 400 on %q", err, tc.param)
			}
		})
	}
	if _, err := ValidateRerank([]byte(`{"model":`)); err == nil {
		t.Error("invalid JSON accepted")
	}
	deep := `{"model":"m","query":"q","documents":["a"],"x":` + strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1) + `}`
	if _, err := ValidateRerank([]byte(deep)); err == nil {
		t.Error("JSON nested past MaxDepth accepted")
	}
}

func TestRerankResult(t *testing.T) {
	scored := func() []Scored {
		return []Scored{{0, 0.2}, {1, 0.9}, {2, 0.5}, {3, 0.9}, {4, 0.1}}
	}
	for _, tc := range []struct {
		name string
		topN int
		want string // indices in order
	}{
		{"all, ties in request order", 0, "1,3,2,0,4"},
		{"top_n equal to the count", 5, "1,3,2,0,4"},
		{"top_n cuts", 2, "1,3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, ok := RerankResult(nil, RerankAnswer{ID: "r1", Scored: scored()}, 5, tc.topN)
			if !ok || !gjson.ValidBytes(out) {
				t.Fatalf("%s", out)
			}
			var got []string
			for _, r := range gjson.GetBytes(out, "results").Array() {
				got = append(got, r.Get("index").Raw)
			}
			if strings.Join(got, ",") != tc.want || gjson.GetBytes(out, "id").Str != "r1" {
				t.Errorf("%s", out)
			}
			if s := gjson.GetBytes(out, "results.0.relevance_score").Num; s != 0.9 {
				t.Errorf("score %v", s)
			}
		})
	}
	out, _ := RerankResult(nil, RerankAnswer{Scored: []Scored{{0, 1}}}, 1, 0)
	if id := gjson.GetBytes(out, "id").Str; !strings.HasPrefix(id, "rerank-") || len(id) < 20 {
		t.Errorf("generated id %q", id)
	}
	for _, tc := range []struct {
		billed BilledUnits
		want   string
	}{
		{BilledUnits{}, `{"api_version":{"version":"2"}}`},
		{BilledUnits{SearchUnits: 2}, `{"api_version":{"version":"2"},"billed_units":{"search_units":2}}`},
		{BilledUnits{InputTokens: 15}, `{"api_version":{"version":"2"},"billed_units":{"input_tokens":15}}`},
		{BilledUnits{SearchUnits: 1, InputTokens: 3}, `{"api_version":{"version":"2"},"billed_units":{"search_units":1,"input_tokens":3}}`},
	} {
		out, _ := RerankResult(nil, RerankAnswer{ID: "m", Scored: []Scored{{0, 1}}, Billed: tc.billed}, 1, 0)
		if got := gjson.GetBytes(out, "meta").Raw; got != tc.want {
			t.Errorf("meta of %+v: %s, want %s", tc.billed, got, tc.want)
		}
	}
	for _, bad := range [][]Scored{{{5, 1}}, {{-1, 1}}, {{0, 1}, {0, 0.5}}, {{0, math.NaN()}}, {{0, math.Inf(1)}}} {
		if _, ok := RerankResult(nil, RerankAnswer{ID: "x", Scored: bad}, 2, 0); ok {
			t.Errorf("%v accepted", bad)
		}
	}
}

// BenchmarkValidateRerank checks the harness's rerank request: 100
// documents of ~60 words, top 10.
func BenchmarkValidateRerank(b *testing.B) {
	body := []byte(`{"model":"co/rerank-v3.5","query":"which document talks about word7 and word42","top_n":10,"documents":[`)
	for i := range 100 {
		if i > 0 {
			body = append(body, ',')
		}
		body = AppendString(body, "document "+strconv.Itoa(i)+" mentions word7 and word42; "+strings.Repeat("word ", 55))
	}
	body = append(body, "]}"...)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if req, err := ValidateRerank(body); err != nil || len(req.Documents) != 100 || req.TopN != 10 {
			b.Fatal(req, err)
		}
	}
}

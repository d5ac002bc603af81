package providertest

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// rerankFormats are the rerank rows of formats.
func rerankFormats() []*rerankFormat {
	var out []*rerankFormat
	for _, f := range formats {
		if rf, ok := f.(*rerankFormat); ok {
			out = append(out, rf)
		}
	}
	return out
}

// TestRerank checks every rerank format's answer: results by RerankScore,
// best first, cut to the format's count field, in the format's own keys;
// and "unsorted", which keeps request order and every document.
func TestRerank(t *testing.T) {
	s := newFake(t)
	docs := []string{"a blue whale", "the red fox jumps", "a red bus"}
	const query = "red fox"
	for _, f := range rerankFormats() {
		for _, model := range []string{"rr", "rr-unsorted"} {
			t.Run(f.id+" "+model, func(t *testing.T) {
				body := `{"query":"` + query + `","` + f.docs + `":["` + strings.Join(docs, `","`) + `"]`
				if f.named {
					body += `,"model":"` + model + `"`
				}
				if f.count != "" {
					body += `,"` + f.count + `":2`
				}
				res, got := post(t, s, f.path, body+"}", oaAuth...)
				if res.StatusCode != http.StatusOK || !gjson.Valid(got) {
					t.Fatalf("%d %s", res.StatusCode, got)
				}
				r := gjson.Parse(got)
				list := r
				if f.results != "" {
					list = r.Get(f.results)
					if f.named && !f.cohere && r.Get("model").Str != model {
						t.Errorf("model %s", r.Get("model").Raw)
					}
					// Cohere's answer is V2RerankResponse: id, results and
					// meta billing search units; the others report usage.
					if f.cohere != (r.Get("meta.billed_units.search_units").Int() == 1 && r.Get("meta.api_version.version").Str == "2" &&
						!r.Get("model").Exists() && !r.Get("usage").Exists()) {
						t.Errorf("meta and usage: %s", got)
					}
					if f.withID != strings.HasPrefix(r.Get("id").Str, f.id+"-") {
						t.Errorf("id %s", r.Get("id").Raw)
					}
				}
				want := []int{1, 2} // best first, two of them
				switch {
				case f.named && model == "rr-unsorted":
					want = []int{0, 1, 2}
				case f.count == "":
					want = []int{1, 2, 0}
				}
				items := list.Array()
				if len(items) != len(want) {
					t.Fatalf("%d results, want %d: %s", len(items), len(want), got)
				}
				for i, it := range items {
					idx := it.Get("index").Int()
					if idx != int64(want[i]) || it.Get(f.score).Float() != RerankScore(query, docs[idx]) {
						t.Errorf("result %d: %s, want index %d scored %v", i, it.Raw, want[i], RerankScore(query, docs[want[i]]))
					}
				}
			})
		}
	}
}

// TestRerankStrictness checks that each rerank format refuses what its API
// refuses, with a 400 in its own error shape.
func TestRerankStrictness(t *testing.T) {
	s := newFake(t)
	for _, f := range rerankFormats() {
		isError := formatExamples[f.id].isError
		docs, model := `"`+f.docs+`":["x"]`, `,"model":"m"`
		if !f.named {
			model = ""
		}
		cases := map[string]string{
			"no query":        `{` + docs + model + `}`,
			"empty documents": `{"query":"q","` + f.docs + `":[]` + model + `}`,
			"document object": `{"query":"q","` + f.docs + `":[{"text":"x"}]` + model + `}`,
			"unknown field":   `{"query":"q",` + docs + model + `,"rank_fields":["text"]}`,
			"not JSON":        `query=q`,
		}
		if f.named {
			cases["no model"] = `{"query":"q",` + docs + `}`
		} else {
			cases["a model"] = `{"query":"q",` + docs + `,"model":"m"}`
		}
		if f.count != "" {
			cases["count zero"] = `{"query":"q",` + docs + model + `,"` + f.count + `":0}`
		}
		for name, body := range cases {
			t.Run(f.id+" "+name, func(t *testing.T) {
				res, got := post(t, s, f.path, body, oaAuth...)
				if res.StatusCode != http.StatusBadRequest || !isError(got) {
					t.Errorf("%d %s, want a 400 in %s's shape", res.StatusCode, got, f.id)
				}
			})
		}
	}
}

package integration

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"testing"

	cohere "github.com/cohere-ai/cohere-go/v2"
	cohereclient "github.com/cohere-ai/cohere-go/v2/client"
	cohereoption "github.com/cohere-ai/cohere-go/v2/option"
	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/providertest"
)

var rerankDocs = []string{
	"Cats sleep most of the day",
	"The weather in Paris is mild in spring",
	"Paris weather today: sunny",
	"Berlin has cold winters",
	"weather report: rain in Paris, sun in Rome",
}

const rerankQuery = "Paris weather"

// wantOrder is the order the gateway must return for the fake's scores:
// highest first, ties in request order, cut to topN (0: all).
func wantOrder(query string, docs []string, topN int) []int {
	idx := make([]int, len(docs))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool {
		return providertest.RerankScore(query, docs[idx[a]]) > providertest.RerankScore(query, docs[idx[b]])
	})
	if topN > 0 && topN < len(idx) {
		idx = idx[:topN]
	}
	return idx
}

func rerankBody(model string, topN int) string {
	docs, _ := jsonStrings(rerankDocs)
	b := `{"model":"` + model + `","query":"` + rerankQuery + `","documents":` + docs
	if topN > 0 {
		b += fmt.Sprintf(`,"top_n":%d`, topN)
	}
	return b + "}"
}

func jsonStrings(ss []string) (string, error) {
	var b []byte
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = providers.AppendString(b, s)
	}
	return string(append(b, ']')), nil
}

func TestIntegrationRerank(t *testing.T) {
	g := startGateway(t)
	for _, model := range []string{"co/rerank-v3.5", "rerank-v3.5", "jina/jina-reranker-v2", "voyage/rerank-2.5", "tei/bge-reranker",
		"vllm/bge-reranker-v2-m3", "infinity/mxbai-rerank", "together/Salesforce/Llama-Rank-v1", "mxbai/mxbai-rerank-large-v2",
		"co/unsorted", "voyage/unsorted"} { // the provider ignores top_n and order: the gateway applies both
		for _, tc := range []struct {
			path string
			topN int
		}{{"/v1/rerank", 0}, {"/v1/reranker", 0}, {"/v1/rerank", 2}, {"/v1/reranker", len(rerankDocs)}} {
			t.Run(fmt.Sprintf("%s%s/top_n=%d", model, tc.path, tc.topN), func(t *testing.T) {
				res := post(t, tc.path, aliceKey, rerankBody(model, tc.topN))
				body, _ := io.ReadAll(res.Body)
				if res.StatusCode != 200 {
					t.Fatalf("status %d: %s", res.StatusCode, body)
				}
				var got []int
				var last float64 = 2
				for _, r := range gjson.GetBytes(body, "results").Array() {
					got = append(got, int(r.Get("index").Int()))
					score := r.Get("relevance_score").Num
					if score > last {
						t.Errorf("scores not descending: %s", body)
					}
					last = score
					if want := providertest.RerankScore(rerankQuery, rerankDocs[r.Get("index").Int()]); score != want {
						t.Errorf("index %d has score %v, the provider gave %v", r.Get("index").Int(), score, want)
					}
				}
				if want := wantOrder(rerankQuery, rerankDocs, tc.topN); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("order %v, want %v: %s", got, want, body)
				}
				if gjson.GetBytes(body, "id").Str == "" {
					t.Errorf("no id: %s", body)
				}
			})
		}
	}

	t.Run("object documents reach the provider as YAML", func(t *testing.T) {
		before := len(g.fake.Requests())
		res := post(t, "/v1/rerank", aliceKey, `{"model":"co/rerank-v3.5","query":"Paris weather","documents":[
			{"title":"Paris weather","note":"mild: mostly"},{"title":"Cats","yes":"no"}]}`)
		body, _ := io.ReadAll(res.Body)
		if res.StatusCode != 200 || gjson.GetBytes(body, "results.0.index").Int() != 0 {
			t.Fatalf("%d %s", res.StatusCode, body)
		}
		sent := g.fake.Requests()[before:]
		docs := gjson.GetBytes(sent[0].Body, "documents").Array()
		if len(docs) != 2 || docs[0].Str != "title: Paris weather\nnote: \"mild: mostly\"" || docs[1].Str != "title: Cats\n\"yes\": \"no\"" {
			t.Errorf("provider got %s", sent[0].Body)
		}
	})

	t.Run("fallback", func(t *testing.T) {
		before := len(g.fake.Requests())
		res := post(t, "/v1/rerank", aliceKey, rerankBody("rerank-fallback", 1))
		body, _ := io.ReadAll(res.Body)
		if res.StatusCode != 200 || len(gjson.GetBytes(body, "results").Array()) != 1 {
			t.Fatalf("%d %s", res.StatusCode, body)
		}
		var paths []string
		for _, r := range g.fake.Requests()[before:] {
			paths = append(paths, r.Path)
		}
		if strings.Join(paths, ",") != "/cohere/v2/rerank,/jina/v1/rerank" {
			t.Errorf("provider calls %v", paths)
		}
	})

	for _, tc := range []struct{ name, body, code, param string }{
		{"number field", `{"model":"co/x","query":"q","documents":[{"a":1}]}`, "invalid_value", "documents[0].a"},
		{"empty documents", `{"model":"co/x","query":"q","documents":[]}`, "invalid_value", "documents"},
		{"empty query", `{"model":"co/x","query":"","documents":["a"]}`, "invalid_value", "query"},
		{"top_n zero", `{"model":"co/x","query":"q","documents":["a"],"top_n":0}`, "invalid_value", "top_n"},
		{"no model", `{"query":"q","documents":["a"]}`, "invalid_value", "model"},
		{"nested too deep", `{"model":"co/x","query":"q","documents":["a"],"x":` + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + `}`, "invalid_json", ""},
		{"chat provider", `{"model":"claude/claude-sonnet-4-5","query":"q","documents":["a"]}`, "unsupported_endpoint", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := wantErrorShape(t, post(t, "/v1/rerank", aliceKey, tc.body), 400, tc.code)
			if e.Get("param").Str != tc.param {
				t.Errorf("param %q", e.Get("param").Str)
			}
		})
	}
	t.Run("unknown model", func(t *testing.T) {
		wantErrorShape(t, post(t, "/v1/rerank", aliceKey, `{"model":"nope","query":"q","documents":["a"]}`), 404, "model_not_found")
	})
}

// TestIntegrationRerankCohereSDK calls the gateway through Cohere's own Go
// SDK, whose Rerank posts to /v1/rerank.
func TestIntegrationRerankCohereSDK(t *testing.T) {
	startGateway(t)
	client := cohereclient.NewClient(cohereoption.WithBaseURL(gatewayBase), cohereoption.WithToken(aliceKey))
	var docs []*cohere.RerankRequestDocumentsItem
	for _, d := range rerankDocs {
		docs = append(docs, &cohere.RerankRequestDocumentsItem{String: d})
	}
	topN := 3
	model := "co/rerank-v3.5"
	res, err := client.Rerank(context.Background(), &cohere.RerankRequest{Model: &model, Query: rerankQuery, Documents: docs, TopN: &topN})
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	for _, r := range res.Results {
		got = append(got, r.Index)
		if r.RelevanceScore != providertest.RerankScore(rerankQuery, rerankDocs[r.Index]) {
			t.Errorf("index %d score %v", r.Index, r.RelevanceScore)
		}
	}
	if want := wantOrder(rerankQuery, rerankDocs, topN); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("order %v, want %v", got, want)
	}
	if res.Id == nil || *res.Id == "" {
		t.Error("no id")
	}
	// Cohere's billing reaches its SDK: the search units the provider
	// billed, in meta.billed_units, as Cohere's own answer carries them.
	wantUnits := func(n int) float64 { return float64(providertest.CohereSearchUnits(n)) }
	if m := res.Meta; m == nil || m.BilledUnits == nil || m.BilledUnits.SearchUnits == nil || *m.BilledUnits.SearchUnits != wantUnits(len(docs)) ||
		m.ApiVersion == nil || m.ApiVersion.Version != "2" {
		t.Errorf("meta %+v, want %v search units billed", res.Meta, wantUnits(len(docs)))
	}
	// 250 documents are three search units at Cohere; what the gateway
	// reports is what the provider billed, not a count of its own.
	docs = nil
	for i := range 250 {
		docs = append(docs, &cohere.RerankRequestDocumentsItem{String: fmt.Sprintf("document %d on Paris weather", i)})
	}
	res, err = client.Rerank(context.Background(), &cohere.RerankRequest{Model: &model, Query: rerankQuery, Documents: docs, TopN: &topN})
	if err != nil {
		t.Fatal(err)
	}
	if m := res.Meta; len(res.Results) != topN || m == nil || m.BilledUnits == nil || m.BilledUnits.SearchUnits == nil || *m.BilledUnits.SearchUnits != 3 || wantUnits(250) != 3 {
		t.Errorf("250 documents: %d results, meta %+v", len(res.Results), res.Meta)
	}
}

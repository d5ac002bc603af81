package rerank

import (
	"encoding/json"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
)

var formats = map[string]Format{
	"cohere": Cohere, "jina": Jina, "voyage": Voyage, "tei": TEI, "vllm": VLLM,
	"infinity": Infinity, "together": Together, "mixedbread": Mixedbread,
}

func unifiedRequest(t testing.TB) providers.RerankRequest {
	body, err := os.ReadFile("../../testdata/providers/rerank/unified.json")
	if err != nil {
		t.Fatal(err)
	}
	req, err := providers.ValidateRerank(body)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// TestRequestGolden: the unified request, translated for each format, is
// <format>.request.json (compared as JSON values).
func TestRequestGolden(t *testing.T) {
	req := unifiedRequest(t)
	paths := map[string]string{"cohere": "/v2/rerank", "mixedbread": "/reranking"}
	for name, f := range formats {
		t.Run(name, func(t *testing.T) {
			want, err := os.ReadFile("../../testdata/providers/rerank/" + name + ".request.json")
			if err != nil {
				t.Fatal(err)
			}
			got, err := f.RerankRequest(req, "rr")
			if err != nil {
				t.Fatal(err)
			}
			var g, w any
			if err := json.Unmarshal(got.Body, &g); err != nil {
				t.Fatalf("invalid JSON %s", got.Body)
			}
			_ = json.Unmarshal(want, &w)
			if !reflect.DeepEqual(g, w) {
				t.Errorf("body\n%s\nwant\n%s", got.Body, want)
			}
			wantPath := paths[name]
			if wantPath == "" {
				wantPath = "/rerank"
			}
			if got.Path != wantPath {
				t.Errorf("path %q, want %q", got.Path, wantPath)
			}
		})
	}
}

// TestResponse reads each provider's answer (as the provider documents it,
// deliberately unsorted, partial or with extra fields) into the unified
// result for the three-document request with top_n 2.
func TestResponse(t *testing.T) {
	for _, tc := range []struct {
		format, body string
		id           string // "" : generated
		want         string // indices, best first
	}{
		{"cohere", `{"id":"c-1","results":[{"index":2,"relevance_score":0.1},{"index":1,"relevance_score":0.8},{"index":0,"relevance_score":0.8}],"meta":{"api_version":{"version":"2"},"billed_units":{"search_units":1}}}`, "c-1", "0,1"},
		{"jina", `{"model":"jina-reranker-v2","usage":{"total_tokens":15},"results":[{"index":1,"relevance_score":0.7,"document":{"text":"x"}},{"index":0,"relevance_score":0.3,"document":"Hamlet"}]}`, "", "1,0"},
		{"voyage", `{"object":"list","data":[{"index":0,"relevance_score":0.91},{"index":2,"relevance_score":0.05}],"model":"rerank-2.5","usage":{"total_tokens":26}}`, "", "0,2"},
		{"tei", `[{"index":1,"score":0.998},{"index":0,"score":0.5},{"index":2,"score":0.001}]`, "", "1,0"},
		{"vllm", `{"id":"rerank-abc","model":"m","usage":{"prompt_tokens":9,"total_tokens":9},"results":[{"index":2,"document":{"text":"Cats","multi_modal":null},"relevance_score":0.97},{"index":1,"document":{"text":"M"},"relevance_score":0.2}]}`, "rerank-abc", "2,1"},
		{"infinity", `{"object":"rerank","data":[{"relevance_score":0.3,"index":2},{"relevance_score":0.6,"index":0},{"relevance_score":0.1,"index":1}],"model":"m","id":"infinity-1","created":1700000000}`, "infinity-1", "0,2"},
		{"together", `{"id":"t-1","object":"rerank","model":"m","results":[{"index":1,"relevance_score":0.4,"document":{}},{"index":0,"relevance_score":0.45,"document":{}}],"usage":{"prompt_tokens":1,"completion_tokens":0,"total_tokens":1}}`, "t-1", "0,1"},
		{"mixedbread", `{"object":"list","model":"m","top_k":2,"return_input":false,"data":[{"index":2,"score":0.9,"object":"rank_result"},{"index":0,"score":0.2,"object":"rank_result"}],"usage":{"prompt_tokens":5,"total_tokens":5}}`, "", "2,0"},
	} {
		t.Run(tc.format, func(t *testing.T) {
			a, err := formats[tc.format].RerankResponse([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			out, ok := providers.RerankResult(nil, a, 3, 2)
			if !ok {
				t.Fatalf("rejected %v", a.Scored)
			}
			var got []string
			for _, r := range gjson.GetBytes(out, "results").Array() {
				got = append(got, strconv.Itoa(int(r.Get("index").Int())))
			}
			if strings.Join(got, ",") != tc.want {
				t.Errorf("order %v, want %s: %s", got, tc.want, out)
			}
			wantBilled := map[string]providers.BilledUnits{"cohere": {SearchUnits: 1}, "jina": {InputTokens: 15},
				"voyage": {InputTokens: 26}, "vllm": {InputTokens: 9}, "together": {InputTokens: 1}, "mixedbread": {InputTokens: 5}}[tc.format]
			if a.Billed != wantBilled {
				t.Errorf("billed %+v, want %+v", a.Billed, wantBilled)
			}
			gotID := gjson.GetBytes(out, "id").Str
			if tc.id != "" && gotID != tc.id || tc.id == "" && !strings.HasPrefix(gotID, "rerank-") {
				t.Errorf("id %q", gotID)
			}
		})
	}
	for _, bad := range []string{`{"results":{}}`, `{"nothing":1}`, `[{"index":"0","score":1}]`, `[{"index":0}]`, `<html>`} {
		if _, err := TEI.RerankResponse([]byte(bad)); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

func TestError(t *testing.T) {
	for _, tc := range []struct {
		f      Format
		status int
		body   string
		want   providers.Error
	}{
		{Cohere, 400, `{"message":"invalid request: query is empty"}`, providers.Error{Status: 400, Type: "invalid_request_error", Message: "invalid request: query is empty"}},
		{TEI, 424, `{"error":"model is not a reranker","error_type":"Backend"}`, providers.Error{Status: 502, Type: "server_error", Message: "model is not a reranker"}},
		{TEI, 429, `{"error":"overloaded","error_type":"Overloaded"}`, providers.Error{Status: 429, Type: "rate_limit_error", Message: "overloaded"}},
		{VLLM, 400, `{"error":{"message":"bad","type":"BadRequestError","param":null,"code":400}}`, providers.Error{Status: 400, Type: "BadRequestError", Message: "bad"}},
	} {
		if got := tc.f.Error(tc.status, nil, []byte(tc.body)); *got != tc.want {
			t.Errorf("%s %d: %+v, want %+v", tc.f.Name, tc.status, *got, tc.want)
		}
	}
}

func FuzzRerankResponse(f *testing.F) {
	f.Add([]byte(`{"id":"x","results":[{"index":1,"relevance_score":0.5}]}`), 3)
	f.Add([]byte(`[{"index":0,"score":1e308}]`), 1)
	f.Fuzz(func(t *testing.T, body []byte, n int) {
		n = n%2000 + 1
		if n < 1 {
			n = -n + 1
		}
		for _, fm := range formats {
			a, err := fm.RerankResponse(body)
			if err != nil {
				continue
			}
			if out, ok := providers.RerankResult(nil, a, n, 0); ok && !gjson.ValidBytes(out) {
				t.Fatalf("invalid JSON %s", out)
			}
		}
	})
}

// BenchmarkRerank1000 is the gateway's own work for one rerank of 1,000
// documents of 1 KiB: validating the unified request, writing the
// provider's, reading the provider's answer and writing the unified one.
func BenchmarkRerank1000(b *testing.B) {
	doc := strings.Repeat("lorem ipsum dolor sit amet, ", 37)[:1024]
	var body, answer strings.Builder
	body.WriteString(`{"model":"co/rerank-v3.5","query":"which document talks about amet","top_n":1000,"documents":[`)
	answer.WriteString(`{"id":"c-1","results":[`)
	for i := 0; i < 1000; i++ {
		if i > 0 {
			body.WriteByte(',')
			answer.WriteByte(',')
		}
		body.WriteString(strconv.Quote(doc))
		answer.WriteString(`{"index":` + strconv.Itoa(i) + `,"relevance_score":0.` + strconv.Itoa(1000+(i*7919)%9000) + `}`)
	}
	body.WriteString(`]}`)
	answer.WriteString(`],"meta":{"billed_units":{"search_units":10}}}`)
	in, resp := []byte(body.String()), []byte(answer.String())
	b.ReportAllocs()
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		req, err := providers.ValidateRerank(in)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Cohere.RerankRequest(req, "rerank-v3.5"); err != nil {
			b.Fatal(err)
		}
		a, err := Cohere.RerankResponse(resp)
		if err != nil {
			b.Fatal(err)
		}
		if _, ok := providers.RerankResult(nil, a, len(req.Documents), req.TopN); !ok {
			b.Fatal("rejected")
		}
	}
}

package providertest

import (
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// rerankFake is one provider's rerank wire format, as the fake serves it
// under "/<name><path>" (for example /cohere/v2/rerank, /tei/rerank).
type rerankFake struct {
	path       string
	docsField  string // documents, texts or input
	countField string // top_n, top_k or "" (always every document)
	model      bool   // the body names the model
	flag       string // the return-documents flag the format accepts
	resultsKey string // results, data, or "" for a bare array
	scoreKey   string
	id         bool // the answer carries an id
}

var rerankFakes = map[string]rerankFake{
	"cohere":     {path: "/v2/rerank", docsField: "documents", countField: "top_n", model: true, resultsKey: "results", scoreKey: "relevance_score", id: true},
	"jina":       {path: "/v1/rerank", docsField: "documents", countField: "top_n", model: true, flag: "return_documents", resultsKey: "results", scoreKey: "relevance_score"},
	"voyage":     {path: "/v1/rerank", docsField: "documents", countField: "top_k", model: true, flag: "return_documents", resultsKey: "data", scoreKey: "relevance_score"},
	"tei":        {path: "/rerank", docsField: "texts", flag: "return_text", scoreKey: "score"},
	"vllm":       {path: "/v1/rerank", docsField: "documents", countField: "top_n", model: true, resultsKey: "results", scoreKey: "relevance_score", id: true},
	"infinity":   {path: "/rerank", docsField: "documents", countField: "top_n", model: true, flag: "return_documents", resultsKey: "results", scoreKey: "relevance_score", id: true},
	"together":   {path: "/v1/rerank", docsField: "documents", countField: "top_n", model: true, flag: "return_documents", resultsKey: "results", scoreKey: "relevance_score", id: true},
	"mixedbread": {path: "/v1/reranking", docsField: "input", countField: "top_k", model: true, flag: "return_input", resultsKey: "data", scoreKey: "score"},
}

func isRerank(path string) bool { _, _, ok := rerankRoute(path); return ok }

// rerankRoute finds the rerank format a path belongs to.
func rerankRoute(path string) (string, rerankFake, bool) {
	name, rest, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	f, ok := rerankFakes[name]
	return name, f, ok && "/"+rest == f.path
}

// RerankScore is the fake's relevance of doc to query: the share of the
// query's words (case-folded) that occur in the document. Tests use it to
// know the order the gateway must return.
func RerankScore(query, doc string) float64 {
	words := strings.Fields(strings.ToLower(query))
	have := map[string]bool{}
	for _, w := range strings.FieldsFunc(strings.ToLower(doc), func(r rune) bool { return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r >= 0x80) }) {
		have[w] = true
	}
	hit := 0
	for _, w := range words {
		if have[w] {
			hit++
		}
	}
	if len(words) == 0 {
		return 0
	}
	return float64(hit) / float64(len(words))
}

func (s *Server) serveRerank(w http.ResponseWriter, r *http.Request, body []byte, name string, f rerankFake, id string) {
	scheme, key, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	if scheme != "Bearer" || key == "" || (s.opts.OpenAIKey != "" && key != s.opts.OpenAIKey) {
		rerankError(w, name, http.StatusUnauthorized, "invalid api token")
		return
	}
	if msg := f.check(body); msg != "" {
		rerankError(w, name, http.StatusBadRequest, msg)
		return
	}
	req := gjson.ParseBytes(body)
	model := req.Get("model").Str
	switch {
	case strings.Contains(model, "fail-429"):
		w.Header().Set("Retry-After", "1")
		rerankError(w, name, http.StatusTooManyRequests, "too many requests")
		return
	case strings.Contains(model, "fail-500"):
		rerankError(w, name, http.StatusInternalServerError, "internal error")
		return
	}

	query := req.Get("query").Str
	type result struct {
		index int
		score float64
	}
	var results []result
	for i, d := range req.Get(f.docsField).Array() {
		results = append(results, result{i, RerankScore(query, d.Str)})
	}
	if !strings.Contains(model, "unsorted") { // scripted: in request order, all of them
		sort.SliceStable(results, func(i, j int) bool { return results[i].score > results[j].score })
		if n := req.Get(f.countField).Int(); f.countField != "" && n > 0 && int(n) < len(results) {
			results = results[:n]
		}
	}

	b := make([]byte, 0, 64+48*len(results))
	if f.resultsKey != "" {
		b = append(b, '{')
		if f.id {
			b = append(b, `"id":"`+name+`-`+id+`",`...)
		}
		if f.model {
			b = append(b, `"model":`...)
			b = appendString(b, model)
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, f.resultsKey...)
		b = append(b, `":`...)
	}
	b = append(b, '[')
	for i, res := range results {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"index":`...)
		b = strconv.AppendInt(b, int64(res.index), 10)
		b = append(b, `,"`...)
		b = append(b, f.scoreKey...)
		b = append(b, `":`...)
		b = strconv.AppendFloat(b, res.score, 'g', -1, 64)
		b = append(b, '}')
	}
	b = append(b, ']')
	if f.resultsKey != "" {
		b = append(b, `,"usage":{"total_tokens":`...)
		b = strconv.AppendInt(b, int64(countWords(query)*len(results)), 10)
		b = append(b, "}}"...)
	}
	writeJSON(w, http.StatusOK, b)
}

// check validates a request as strictly as the format's API: only its own
// field names, the required ones present.
func (f rerankFake) check(body []byte) string {
	if !validJSON(body) || !gjson.ParseBytes(body).IsObject() {
		return "the body is not a JSON object"
	}
	req := gjson.ParseBytes(body)
	var bad string
	req.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "query":
		case f.docsField:
		case "model":
			if !f.model {
				bad = "model: unknown field"
			}
		case f.countField:
			if f.countField == "" || v.Type != gjson.Number || v.Int() < 1 {
				bad = k.Str + ": must be a positive integer"
			}
		case f.flag:
			if f.flag == "" || (v.Type != gjson.True && v.Type != gjson.False) {
				bad = k.Str + ": must be a boolean"
			}
		default:
			bad = k.Str + ": unknown field"
		}
		return bad == ""
	})
	if bad != "" {
		return bad
	}
	if f.model && req.Get("model").Str == "" {
		return "model: field required"
	}
	if req.Get("query").Str == "" {
		return "query: field required"
	}
	docs := req.Get(f.docsField)
	if !docs.IsArray() || len(docs.Array()) == 0 {
		return f.docsField + ": a non-empty list of strings is required"
	}
	for _, d := range docs.Array() {
		if d.Type != gjson.String || d.Str == "" {
			return f.docsField + ": documents must be non-empty strings"
		}
	}
	return ""
}

// rerankError writes an error in the format's own shape.
func rerankError(w http.ResponseWriter, name string, status int, msg string) {
	switch name {
	case "cohere":
		writeJSON(w, status, append(appendString([]byte(`{"message":`), msg), '}'))
	case "tei":
		b := append(appendString([]byte(`{"error":`), msg), `,"error_type":"Validation"}`...)
		writeJSON(w, status, b)
	default:
		openAIError(w, status, "invalid_request_error", "", msg)
	}
}

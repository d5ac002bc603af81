package providertest

import (
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// rerankFormat is one provider's rerank wire format, as the fake serves it
// under a prefix of its own (/cohere/v2/rerank, /tei/rerank, …). Its rows are
// in formats.
type rerankFormat struct {
	modelInBody
	id      string // the format's name
	path    string // where it is served
	docs    string // the documents field: documents, texts or input
	count   string // top_n, top_k or "" (always every document)
	named   bool   // the body names the model
	flag    string // the return-documents flag the format accepts
	results string // results, data, or "" for a bare array
	score   string // the score's key in a result
	withID  bool   // the answer carries an id
	// cohere: the answer is Cohere's V2RerankResponse, {id, results, meta}
	// with meta.billed_units.search_units (CohereSearchUnits), naming no
	// model and no usage; the request may carry Cohere's
	// max_tokens_per_doc and priority.
	cohere bool
}

// CohereSearchUnits is what the fake's Cohere rerank bills for a query
// over docs documents: one search unit per 100 documents or part of them,
// as Cohere bills a query.
func CohereSearchUnits(docs int) int64 {
	return int64(max(1, (docs+99)/100))
}

func (f *rerankFormat) name() string                                 { return f.id }
func (f *rerankFormat) route(r *http.Request) routing                { return postTo(r, f.path) }
func (f *rerankFormat) headers(http.Header, string)                  {}
func (f *rerankFormat) authorized(r *http.Request, want string) bool { return keyOK(bearer(r), want) }

func (f *rerankFormat) fail(w http.ResponseWriter, r *http.Request, fl fault) {
	msg := ""
	switch fl {
	case notFound:
		msg = "Not Found: " + r.Method + " " + r.URL.Path
	case tooLarge:
		msg = msgTooLarge
	case unreadable:
		msg = msgUnreadable
	case unauthorized:
		msg = "invalid api token"
	case rateLimited:
		msg = "too many requests"
	case serverError:
		msg = "internal error"
	case overloaded:
		msg = "the server is overloaded"
	}
	f.error(w, fl.status(), msg)
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

func (f *rerankFormat) serve(c *call) {
	if msg := f.check(c.body); msg != "" {
		f.error(c.w, http.StatusBadRequest, msg)
		return
	}
	if c.scripted() {
		return
	}
	req, model := gjson.ParseBytes(c.body), c.model

	query := req.Get("query").Str
	type result struct {
		index int
		score float64
	}
	var results []result
	for i, d := range req.Get(f.docs).Array() {
		results = append(results, result{i, RerankScore(query, d.Str)})
	}
	if !strings.Contains(model, "unsorted") { // scripted: in request order, all of them
		sort.SliceStable(results, func(i, j int) bool { return results[i].score > results[j].score })
		if n := req.Get(f.count).Int(); f.count != "" && n > 0 && int(n) < len(results) {
			results = results[:n]
		}
	}

	b := make([]byte, 0, 64+48*len(results))
	if f.results != "" {
		b = append(b, '{')
		if f.withID {
			b = append(b, `"id":"`+f.id+`-`+c.id+`",`...)
		}
		if f.named && !f.cohere {
			b = append(b, `"model":`...)
			b = appendString(b, model)
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, f.results...)
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
		b = append(b, f.score...)
		b = append(b, `":`...)
		b = strconv.AppendFloat(b, res.score, 'g', -1, 64)
		b = append(b, '}')
	}
	b = append(b, ']')
	switch {
	case f.cohere:
		b = append(b, `,"meta":{"api_version":{"version":"2"},"billed_units":{"search_units":`...)
		b = strconv.AppendInt(b, CohereSearchUnits(len(req.Get(f.docs).Array())), 10)
		b = append(b, "}}}"...)
	case f.results != "":
		b = append(b, `,"usage":{"total_tokens":`...)
		b = strconv.AppendInt(b, int64(c.s.promptTokens(query)*len(results)), 10)
		b = append(b, "}}"...)
	}
	writeJSON(c.w, http.StatusOK, b)
}

// check validates a request as strictly as the format's API: only its own
// field names, the required ones present.
func (f *rerankFormat) check(body []byte) string {
	if !validJSON(body) || !gjson.ParseBytes(body).IsObject() {
		return "the body is not a JSON object"
	}
	req := gjson.ParseBytes(body)
	var bad string
	req.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "query":
		case f.docs:
		case "model":
			if !f.named {
				bad = "model: unknown field"
			}
		case f.count:
			if f.count == "" || v.Type != gjson.Number || v.Int() < 1 {
				bad = k.Str + ": must be a positive integer"
			}
		case f.flag:
			if f.flag == "" || (v.Type != gjson.True && v.Type != gjson.False) {
				bad = k.Str + ": must be a boolean"
			}
		case "max_tokens_per_doc", "priority":
			if !f.cohere {
				bad = k.Str + ": unknown field"
			} else if least := map[string]float64{"max_tokens_per_doc": 1, "priority": 0}[k.Str]; v.Type != gjson.Number || v.Num != float64(int64(v.Num)) || v.Num < least {
				bad = k.Str + ": must be an integer of at least " + strconv.Itoa(int(least))
			}
		default:
			bad = k.Str + ": unknown field"
		}
		return bad == ""
	})
	if bad != "" {
		return bad
	}
	if f.named && req.Get("model").Str == "" {
		return "model: field required"
	}
	if req.Get("query").Str == "" {
		return "query: field required"
	}
	docs := req.Get(f.docs)
	if !docs.IsArray() || len(docs.Array()) == 0 {
		return f.docs + ": a non-empty list of strings is required"
	}
	for _, d := range docs.Array() {
		if d.Type != gjson.String || d.Str == "" {
			return f.docs + ": documents must be non-empty strings"
		}
	}
	return ""
}

// error writes an error in the format's own shape.
func (f *rerankFormat) error(w http.ResponseWriter, status int, msg string) {
	switch f.id {
	case "cohere":
		writeJSON(w, status, append(appendString([]byte(`{"message":`), msg), '}'))
	case "tei":
		b := append(appendString([]byte(`{"error":`), msg), `,"error_type":"Validation"}`...)
		writeJSON(w, status, b)
	default:
		openAIError(w, status, "invalid_request_error", "", msg)
	}
}

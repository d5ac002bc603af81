package providers

import (
	"github.com/modelgate/modelgate/providers/jsonw"

	"crypto/rand"
	"encoding/hex"
	"math"
	"net/http"
	"sort"
	"strconv"

	"github.com/tidwall/gjson"
)

// RerankRequest is a checked unified rerank request:
//
//	{"model": "…", "query": "…", "documents": ["…", {"title": "…", …}], "top_n": 3}
//
// Object documents are already turned into YAML strings, so translators
// see strings only.
type RerankRequest struct {
	Model     string
	Query     string
	Documents []string
	TopN      int // 0: all documents
}

// ValidateRerank checks a unified rerank body and returns it with object
// documents written as YAML. Errors are 400s naming the field.
func ValidateRerank(body []byte) (RerankRequest, error) {
	var req RerankRequest
	if !ValidJSON(body) {
		return req, &Error{Status: 400, Type: "invalid_request_error", Code: "invalid_json",
			Message: "the request body must be a JSON object"}
	}
	// One pass over the members (the documents take most of the body):
	// the first of each name counts, as gjson's Get would find it.
	root := gjson.ParseBytes(body)
	if !root.IsObject() {
		return req, &Error{Status: 400, Type: "invalid_request_error", Code: "invalid_json",
			Message: "the request body must be a JSON object"}
	}
	var model, query, docs, topN gjson.Result
	root.ForEach(func(k, v gjson.Result) bool {
		var dst *gjson.Result
		switch k.Str {
		case "model":
			dst = &model
		case "query":
			dst = &query
		case "documents":
			dst = &docs
		case "top_n":
			dst = &topN
		default:
			return true
		}
		if !dst.Exists() {
			*dst = v
		}
		return true
	})
	if m := model; m.Type != gjson.String || m.Str == "" {
		return req, InvalidParam("model", "model must be a non-empty string")
	} else {
		req.Model = m.Str
	}
	if q := query; q.Type != gjson.String || q.Str == "" {
		return req, InvalidParam("query", "query must be a non-empty string")
	} else {
		req.Query = q.Str
	}
	if !docs.IsArray() {
		return req, InvalidParam("documents", "documents must be an array of strings or objects")
	}
	var err error
	docs.ForEach(func(_, d gjson.Result) bool {
		// The document's path, for an error only.
		p := func() string { return "documents[" + strconv.Itoa(len(req.Documents)) + "]" }
		switch {
		case d.Type == gjson.String && d.Str != "":
			req.Documents = append(req.Documents, d.Str)
		case d.Type == gjson.String:
			err = InvalidParam(p(), "documents must not be empty")
		case d.IsObject():
			fields := 0
			d.ForEach(func(k, v gjson.Result) bool {
				if v.Type != gjson.String {
					err = InvalidParam(p()+"."+k.Str, "the fields of an object document must be strings")
				}
				fields++
				return err == nil
			})
			if err == nil && fields == 0 {
				err = InvalidParam(p(), "documents must not be empty")
			}
			if err == nil {
				req.Documents = append(req.Documents, string(AppendYAMLDocument(nil, d)))
			}
		default:
			err = InvalidParam(p(), "each document must be a string or an object of strings")
		}
		return err == nil
	})
	if err != nil {
		return req, err
	}
	if len(req.Documents) == 0 {
		return req, InvalidParam("documents", "documents must contain at least one document")
	}
	if n := topN; n.Exists() && n.Type != gjson.Null {
		if !IsInt(n) || n.Int() < 1 {
			return req, InvalidParam("top_n", "top_n must be an integer of at least 1")
		}
		req.TopN = int(min(n.Int(), int64(len(req.Documents))))
	}
	return req, nil
}

// Rerank translates rerank requests for one provider wire format.
type Rerank interface {
	// RerankRequest writes the provider's request for req, with model the
	// provider's own name of the model.
	RerankRequest(req RerankRequest, model string) (Request, error)

	// RerankResponse reads a successful provider answer: its id (empty when
	// it has none), a score per document it ranked, and what it billed.
	RerankResponse(body []byte) (RerankAnswer, error)

	// Error maps a provider's failed answer into the unified error.
	Error(status int, header http.Header, body []byte) *Error
}

// RerankAnswer is what a provider's rerank answer says.
type RerankAnswer struct {
	// ID is the provider's id of the answer; empty when it gives none.
	ID string
	// Scored holds a score per document the provider ranked.
	Scored []Scored
	// Billed is what the provider reports it billed; zero fields: not
	// reported.
	Billed BilledUnits
}

// Used is what the rerank used, as data: the searches the provider billed,
// else one search (the unit rerank is priced in), and the tokens it
// reported; what the answer's meta.billed_units says.
func (a RerankAnswer) Used() Used {
	return Used{Known: true, Searches: max(a.Billed.SearchUnits, 1), Prompt: max(a.Billed.InputTokens, 0)}
}

// BilledUnits are the units a provider bills a request in, as Cohere's
// meta.billed_units names them.
type BilledUnits struct {
	SearchUnits int64
	InputTokens int64
}

// Scored is one document's score as a provider gave it.
type Scored struct {
	Index int
	Score float64
}

// RerankResult writes the unified answer {id, results:[{index,
// relevance_score}], meta}: highest score first, ties in request order, cut
// to topN (0: all). id is the provider's, or a generated one. meta is
// shaped as Cohere's v2 answer carries it, which Cohere's SDKs expect:
// {"api_version":{"version":"2"}, "billed_units":{…}}, billed_units holding
// what the provider reported (omitted when it reported nothing). A provider
// that names a document that is not in the request, or one twice, or gives
// a score that is not a finite number, has answered wrongly: ok is false.
func RerankResult(dst []byte, a RerankAnswer, nDocs, topN int) (out []byte, ok bool) {
	id, scored := a.ID, a.Scored
	seen := make([]bool, nDocs)
	for _, s := range scored {
		if s.Index < 0 || s.Index >= nDocs || seen[s.Index] || math.IsNaN(s.Score) || math.IsInf(s.Score, 0) {
			return dst, false
		}
		seen[s.Index] = true
	}
	sort.SliceStable(scored, func(i, j int) bool {
		if scored[i].Score != scored[j].Score {
			return scored[i].Score > scored[j].Score
		}
		return scored[i].Index < scored[j].Index
	})
	if topN > 0 && len(scored) > topN {
		scored = scored[:topN]
	}
	if id == "" {
		var b [12]byte
		_, _ = rand.Read(b[:])
		id = "rerank-" + hex.EncodeToString(b[:])
	}
	w := jsonw.New(dst)
	o := w.Object()
	o.Str("id", id)
	results := o.Array("results")
	for _, s := range scored {
		r := results.Object()
		r.Int("index", int64(s.Index))
		r.Float("relevance_score", s.Score)
		r.End()
	}
	results.End()
	meta := o.Object("meta")
	v := meta.Object("api_version")
	v.Str("version", "2")
	v.End()
	if b := a.Billed; b.SearchUnits > 0 || b.InputTokens > 0 {
		bu := meta.Object("billed_units")
		if b.SearchUnits > 0 {
			bu.Int("search_units", b.SearchUnits)
		}
		if b.InputTokens > 0 {
			bu.Int("input_tokens", b.InputTokens)
		}
		bu.End()
	}
	meta.End()
	o.End()
	out, err := w.Finish()
	return out, err == nil
}

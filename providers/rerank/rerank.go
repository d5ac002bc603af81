// Package rerank translates unified rerank requests into the wire formats
// of the rerank providers and their answers back. The providers differ only
// in names — where the documents go, what the result count is called, where
// the results and scores are — so one translator, parameterised by a
// Format, serves them all.
package rerank

import (
	"errors"
	"net/http"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/jsonw"
)

// Format describes one provider's rerank wire format.
type Format struct {
	// Name is the provider type, for error messages.
	Name string

	// Path is appended to the provider's base URL.
	Path string

	// DocumentsField holds the documents: "documents", "texts" or "input".
	DocumentsField string

	// CountField holds the number of results wanted: "top_n", "top_k", or
	// empty when the API always returns every document.
	CountField string

	// SendsModel is true when the body names the model.
	SendsModel bool

	// Extra holds JSON members added to every request, such as
	// `"return_documents":false`: modelgate never returns document text, so
	// it asks providers not to send it.
	Extra string

	// ScoreKey is the score's name in a result: "relevance_score" or "score".
	ScoreKey string
}

// The formats of the supported providers.
var (
	Cohere     = Format{Name: "cohere", Path: "/v2/rerank", DocumentsField: "documents", CountField: "top_n", SendsModel: true, ScoreKey: "relevance_score"}
	Jina       = Format{Name: "jina", Path: "/rerank", DocumentsField: "documents", CountField: "top_n", SendsModel: true, Extra: `"return_documents":false`, ScoreKey: "relevance_score"}
	Voyage     = Format{Name: "voyage", Path: "/rerank", DocumentsField: "documents", CountField: "top_k", SendsModel: true, Extra: `"return_documents":false`, ScoreKey: "relevance_score"}
	TEI        = Format{Name: "tei", Path: "/rerank", DocumentsField: "texts", Extra: `"return_text":false`, ScoreKey: "score"}
	VLLM       = Format{Name: "vllm", Path: "/rerank", DocumentsField: "documents", CountField: "top_n", SendsModel: true, ScoreKey: "relevance_score"}
	Infinity   = Format{Name: "infinity", Path: "/rerank", DocumentsField: "documents", CountField: "top_n", SendsModel: true, Extra: `"return_documents":false`, ScoreKey: "relevance_score"}
	Together   = Format{Name: "together", Path: "/rerank", DocumentsField: "documents", CountField: "top_n", SendsModel: true, Extra: `"return_documents":false`, ScoreKey: "relevance_score"}
	Mixedbread = Format{Name: "mixedbread", Path: "/reranking", DocumentsField: "input", CountField: "top_k", SendsModel: true, Extra: `"return_input":false`, ScoreKey: "score"}
)

// RerankRequest writes the provider's request body.
func (f Format) RerankRequest(req providers.RerankRequest, model string) (providers.Request, error) {
	size := len(req.Query) + len(model) + 96
	for _, d := range req.Documents {
		size += len(d) + 8
	}
	w := jsonw.New(make([]byte, 0, size))
	o := w.Object()
	if f.SendsModel {
		o.Str("model", model)
	}
	o.Str("query", req.Query)
	docs := o.Array(f.DocumentsField)
	for _, d := range req.Documents {
		docs.Str(d)
	}
	docs.End()
	if f.CountField != "" && req.TopN > 0 {
		o.Int(f.CountField, int64(req.TopN))
	}
	o.RawMembers(f.Extra)
	o.End()
	b, err := w.Finish()
	if err != nil {
		return providers.Request{}, err
	}
	return providers.Request{Path: f.Path, Body: b}, nil
}

var errMalformed = errors.New("malformed rerank answer")

// RerankResponse reads the results, wherever the format keeps them: a bare
// array (TEI), "results", or "data" (Voyage, Mixedbread, older Infinity).
func (f Format) RerankResponse(body []byte) (providers.RerankAnswer, error) {
	var a providers.RerankAnswer
	if !providers.ValidJSON(body) {
		return a, errMalformed
	}
	root := gjson.ParseBytes(body)
	results := root
	if !root.IsArray() {
		if results = root.Get("results"); !results.IsArray() {
			results = root.Get("data")
		}
	}
	if !results.IsArray() {
		return a, errMalformed
	}
	var scored []providers.Scored
	var err error
	results.ForEach(func(_, r gjson.Result) bool {
		idx, score := r.Get("index"), r.Get(f.ScoreKey)
		if score.Type != gjson.Number { // tolerate the other common name
			if score = r.Get("relevance_score"); score.Type != gjson.Number {
				score = r.Get("score")
			}
		}
		if idx.Type != gjson.Number || score.Type != gjson.Number {
			err = errMalformed
			return false
		}
		scored = append(scored, providers.Scored{Index: int(idx.Int()), Score: score.Num})
		return true
	})
	if err != nil {
		return a, err
	}
	a.ID, a.Scored, a.Billed = root.Get("id").Str, scored, billed(root)
	return a, nil
}

// billed reads what the provider says it billed: Cohere's
// meta.billed_units (search units), or the token count Jina and Voyage
// report in usage.total_tokens.
func billed(root gjson.Result) providers.BilledUnits {
	var b providers.BilledUnits
	if bu := root.Get("meta.billed_units"); bu.IsObject() {
		b.SearchUnits = bu.Get("search_units").Int()
		b.InputTokens = bu.Get("input_tokens").Int()
		return b
	}
	if t := root.Get("usage.total_tokens"); t.Type == gjson.Number {
		b.InputTokens = t.Int()
	}
	return b
}

// Error maps a provider's error answer. TEI's 424 (its model backend
// failed) is a provider fault and becomes a 502.
func (f Format) Error(status int, _ http.Header, body []byte) *providers.Error {
	e := providers.ErrorFromBody(status, body)
	if status == http.StatusFailedDependency {
		e.Status, e.Type = http.StatusBadGateway, "server_error"
	}
	return e
}

var _ providers.Rerank = Format{}

package caddymodule

import (
	"errors"
	"net/http"

	"github.com/modelgate/modelgate/providers"
)

// endpointRerank is the endpoint label of rerank in metrics.
const endpointRerank = "rerank"

var errBadRerankAnswer = errors.New("the provider's rerank answer names documents that are not in the request")

// serveRerank answers POST /v1/rerank (and /v1/reranker): validate, route,
// translate for the provider, and turn its scores into the unified answer:
// highest score first, ties in request order, top_n applied.
func (h *Handler) serveRerank(w http.ResponseWriter, r *http.Request) {
	body, perr := readBody(r, h.MaxRequestBody)
	if perr != nil {
		writeEndpointError(w, endpointRerank, "", perr)
		return
	}
	req, err := providers.ValidateRerank(body)
	if err != nil {
		writeEndpointError(w, endpointRerank, "", asProviderError(err))
		return
	}
	if !requestKey(r).allows(req.Model) {
		writeEndpointError(w, endpointRerank, "", modelNotAllowed(req.Model))
		return
	}
	targets := h.app.resolve(req.Model)
	if len(targets) == 0 {
		writeEndpointError(w, endpointRerank, "", modelNotFound(req.Model))
		return
	}
	h.tryTargets(w, r, endpointRerank, targets, func(p *provider, model string) (providers.Request, exchange, error) {
		tr := p.rerank
		if tr == nil {
			return providers.Request{}, exchange{}, errUnsupported
		}
		preq, err := tr.RerankRequest(req, model)
		return preq, exchange{
			translate: func(answer []byte) ([]byte, error) {
				a, err := tr.RerankResponse(answer)
				if err != nil {
					return nil, err
				}
				out, ok := providers.RerankResult(nil, a, len(req.Documents), req.TopN)
				if !ok {
					return nil, errBadRerankAnswer
				}
				return out, nil
			},
			mapError: tr.Error,
		}, err
	})
}

// Package azure translates modelgate's unified chat completions for Azure
// OpenAI, whose bodies are OpenAI's own: only where a request goes differs,
// and a few errors.
//
// Two surfaces:
//
//   - classic deployment URLs,
//     POST /openai/deployments/{deployment}/chat/completions?api-version=…,
//     where the deployment in the path selects the model and api-version is
//     required;
//   - the v1 API, POST /openai/v1/chat/completions, where the body's model
//     is the deployment name and there is no api-version.
//
// Answers and streams are OpenAI's and pass through untouched (Azure's
// prompt_filter_results and content_filter_results annotations included;
// the OpenAI SDKs ignore them). Errors are OpenAI's shape; Azure's content
// filter refusals (400, code content_filter) keep their code.
package azure

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/embeddings"
	"github.com/modelgate/modelgate/providers/openai"
)

// Chat is the Azure OpenAI chat translator. It is safe for concurrent use.
type Chat struct {
	// APIVersion selects the classic deployment URLs and is sent as the
	// api-version query parameter; empty selects the v1 API.
	APIVersion string

	// Deployments maps a model name, as the gateway's clients name it after
	// the provider, to the Azure deployment that serves it. A model not in
	// the map is taken to be a deployment name itself.
	Deployments map[string]string
}

// Deployment returns the deployment serving model.
func (c Chat) Deployment(model string) string {
	if d, ok := c.Deployments[model]; ok {
		return d
	}
	return model
}

// ChatRequest writes the request for model's deployment: the body is
// OpenAI's with model set to the deployment, on the path and query of the
// configured surface.
func (c Chat) ChatRequest(body []byte, model string) (providers.Request, error) {
	d := c.Deployment(model)
	req, err := openai.Chat{}.ChatRequest(body, d)
	if err != nil {
		return req, err
	}
	req.Path, req.Query = c.Route("/chat/completions", d)
	return req, nil
}

// Route returns the path and query string of an OpenAI endpoint path (such
// as "/chat/completions" or "/embeddings") for a deployment on the
// configured surface. The deployment is path-escaped: a client-chosen model
// name cannot reach another path.
func (c Chat) Route(endpoint, deployment string) (path, query string) {
	if c.APIVersion == "" {
		return "/openai/v1" + endpoint, ""
	}
	return "/openai/deployments/" + url.PathEscape(deployment) + endpoint,
		url.Values{"api-version": {c.APIVersion}}.Encode()
}

// ChatResponse returns the body unchanged, it is already unified, and
// the usage it carries.
func (Chat) ChatResponse(body []byte) ([]byte, providers.Used, error) {
	return body, providers.ReadAnswerUsage(body), nil
}

// ChatStream returns nil: Azure's events are OpenAI's chunks.
func (Chat) ChatStream(providers.StreamOptions) providers.StreamTranslator { return nil }

// Error maps Azure's error answers, which are OpenAI's shape. Azure names
// the throttled case in a 429 with code "429" and a message telling how long
// to wait; it becomes OpenAI's rate_limit_exceeded, with the retry-after
// header the host passes on. A content-filter refusal keeps its code
// content_filter; a deployment that does not exist is model_not_found.
func (Chat) Error(status int, h http.Header, body []byte) *providers.Error {
	e := providers.ErrorFromBody(status, body)
	switch {
	case status == http.StatusTooManyRequests:
		e.Type, e.Code = "rate_limit_error", "rate_limit_exceeded"
	case e.Code == "DeploymentNotFound":
		e.Code, e.Param = "model_not_found", "model"
	case strings.EqualFold(e.Code, "content_filter") || strings.EqualFold(e.Code, "ResponsibleAIPolicyViolation"):
		e.Code = "content_filter"
	case e.Code == "context_length_exceeded" || strings.Contains(e.Message, "maximum context length"):
		e.Code = "context_length_exceeded"
	}
	return e
}

var _ providers.Chat = Chat{}

// Embeddings is Azure OpenAI's embeddings: OpenAI's body on the
// deployment's route.
type Embeddings struct{ Chat }

// EmbeddingsRequests writes OpenAI's request for model's deployment.
func (e Embeddings) EmbeddingsRequests(req *providers.EmbeddingsRequest, model string) ([]providers.Request, error) {
	d := e.Deployment(model)
	reqs, err := embeddings.OpenAI.EmbeddingsRequests(req, d)
	if err != nil {
		return nil, err
	}
	reqs[0].Path, reqs[0].Query = e.Route("/embeddings", d)
	return reqs, nil
}

// EmbeddingsResponse reads OpenAI's answer.
func (Embeddings) EmbeddingsResponse(i int, h http.Header, body []byte, res *providers.EmbeddingsResult) error {
	return embeddings.OpenAI.EmbeddingsResponse(i, h, body, res)
}

var _ providers.Embeddings = Embeddings{}

// Native passes the Responses API through to Azure OpenAI: the v1 API's
// /openai/v1/responses, or the classic surface's /openai/responses with
// api-version (the Responses API is not deployment-scoped there); the body's
// model is the deployment.
type Native struct{ Chat }

// NativeRequest writes the pass-through request for path ("/responses").
func (n Native) NativeRequest(path string, body []byte, model string, _ http.Header) (providers.Request, error) {
	req, err := openai.Native{}.NativeRequest(path, body, n.Deployment(model), nil)
	if n.APIVersion == "" {
		req.Path = "/openai/v1" + path
	} else {
		req.Path, req.Query = "/openai"+path, url.Values{"api-version": {n.APIVersion}}.Encode()
	}
	return req, err
}

var _ providers.Native = Native{}

package providertest

import (
	"net/http"
	"strings"
)

// azureFormat is Azure OpenAI's chat completions: the classic deployment URL
// /openai/deployments/{deployment}/chat/completions?api-version=… (the
// deployment names the model; api-version is required) and the v1 API
// /openai/v1/chat/completions (the body's model names the deployment).
// Embeddings are served beside chat, on the same two surfaces, and the v1
// API's Responses (as OpenAI's Responses format serves them). Bodies are
// OpenAI's; the key comes as api-key or as an Entra ID bearer token. Streams
// begin, as Azure's do, with a chunk of prompt_filter_results and no choices.
// Throttling is Azure's 429 with code "429".
type azureFormat struct{}

const (
	azureClassic = "/openai/deployments/"
	azureV1      = "/openai/v1/chat/completions"

	azureV1Embeddings = "/openai/v1/embeddings"
	azureV1Responses  = "/openai/v1/responses"
)

// azureEmbeddings is how Azure serves embeddings: OpenAI's format.
var azureEmbeddings = &embeddingsFormat{id: "azure_openai", dims: "dimensions", tokens: true, usage: "prompt_tokens"}

func (azureFormat) name() string { return "azure_openai" }

func (azureFormat) route(r *http.Request) routing {
	p := r.URL.Path
	rest, classic := strings.CutPrefix(p, azureClassic)
	switch {
	case classic:
		dep, tail, _ := strings.Cut(rest, "/")
		if dep == "" || tail != "chat/completions" && tail != "embeddings" {
			return owned
		}
	case p == azureV1, p == azureV1Embeddings, p == azureV1Responses, strings.HasPrefix(p, azureV1Responses+"/"):
	case strings.HasPrefix(p, "/openai/"):
		return owned
	default:
		return notMine
	}
	if r.Method != http.MethodPost && !strings.HasPrefix(p, azureV1Responses+"/") {
		return owned
	}
	return served
}

func (azureFormat) headers(h http.Header, id string) {
	h.Set("Apim-Request-Id", "apim-"+id)
	h.Set("X-Request-Id", "req_"+id)
}

// authorized takes the api-key header, or an Entra ID token as a bearer.
func (azureFormat) authorized(r *http.Request, want string) bool {
	if k := r.Header.Get("Api-Key"); k != "" {
		return keyOK(k, want)
	}
	return keyOK(bearer(r), want)
}

// model is the deployment: in the classic path, else the body's model.
func (azureFormat) model(r *http.Request, body []byte) string {
	if rest, ok := strings.CutPrefix(r.URL.Path, azureClassic); ok {
		dep, _, _ := strings.Cut(rest, "/")
		return dep
	}
	return modelInBody{}.model(r, body)
}

// fail writes Azure's own errors where they differ from OpenAI's: the
// gateway and resource errors come as {"error":{"code","message"}} with the
// status as the code.
func (azureFormat) fail(w http.ResponseWriter, r *http.Request, f fault) {
	switch f {
	case notFound:
		azureError(w, http.StatusNotFound, "404", "Resource not found")
	case unauthorized:
		azureError(w, http.StatusUnauthorized, "401", "Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key for an active subscription and use a correct regional API endpoint for your resource.")
	case rateLimited:
		azureError(w, http.StatusTooManyRequests, "429", "Requests to the ChatCompletions_Create Operation under Azure OpenAI API version 2024-10-21 have exceeded token rate limit of your current OpenAI S0 pricing tier. Please retry after 1 second.")
	default:
		openAIFormat{}.fail(w, r, f)
	}
}

func azureError(w http.ResponseWriter, status int, code, msg string) {
	b := append([]byte(`{"error":{"code":`), appendString(nil, code)...)
	b = append(append(b, `,"message":`...), appendString(nil, msg)...)
	writeJSON(w, status, append(b, "}}"...))
}

// serve checks api-version on the classic surface, then answers as OpenAI
// does, with Azure's prompt filter chunk ahead of a stream.
func (azureFormat) serve(c *call) {
	if strings.HasPrefix(c.r.URL.Path, azureClassic) && c.r.URL.Query().Get("api-version") == "" {
		azureError(c.w, http.StatusBadRequest, "MissingApiVersionParameter",
			"The api-version query parameter (?api-version=) is required for all requests.")
		return
	}
	if strings.HasSuffix(c.r.URL.Path, "/embeddings") {
		azureEmbeddings.serve(c)
		return
	}
	if strings.HasPrefix(c.r.URL.Path, azureV1Responses) {
		c.r.URL.Path = "/v1" + strings.TrimPrefix(c.r.URL.Path, "/openai/v1")
		responsesFormat{}.serve(c)
		return
	}
	c.w = &azureStream{ResponseWriter: c.w}
	openAIFormat{}.serve(c)
}

// azureStream writes Azure's prompt_filter_results chunk before the first
// event of a stream.
type azureStream struct {
	http.ResponseWriter
	started bool
}

func (w *azureStream) Write(p []byte) (int, error) {
	if !w.started {
		w.started = true
		if strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream") {
			_, _ = w.ResponseWriter.Write([]byte(`data: {"choices":[],"created":0,"id":"","model":"","object":"","prompt_filter_results":[{"prompt_index":0,"content_filter_results":{"hate":{"filtered":false,"severity":"safe"},"self_harm":{"filtered":false,"severity":"safe"},"sexual":{"filtered":false,"severity":"safe"},"violence":{"filtered":false,"severity":"safe"}}}]}` + "\n\n"))
		}
	}
	return w.ResponseWriter.Write(p)
}

func (w *azureStream) Unwrap() http.ResponseWriter { return w.ResponseWriter }

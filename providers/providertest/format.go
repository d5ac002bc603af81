package providertest

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"
)

// A wireFormat is one provider API the fake speaks. ServeHTTP does the same
// for every one (the body limit, recording, the "flaky" model, 404s and
// 401s, through the format's own error writer); the format says where its
// requests arrive, how they authenticate, where they name the model, how
// its errors look, and answers.
type wireFormat interface {
	// name names the format in Options.Keys and Recorded.Format.
	name() string
	// route says whether a request is the format's: served (it answers
	// it), owned (its path but not its method, or a path under its own
	// prefix that it does not serve: a 404 in its shape) or neither.
	route(r *http.Request) routing
	// headers sets the headers every answer carries, such as a request id.
	headers(h http.Header, id string)
	// authorized reports whether the request carries the credentials the
	// format wants: want is the configured key, where "" accepts any
	// non-empty one (see keyOK).
	authorized(r *http.Request, want string) bool
	// model is the model the request names, in its body or its path.
	model(r *http.Request, body []byte) string
	// fail writes a fault in the format's own error shape and status.
	fail(w http.ResponseWriter, r *http.Request, f fault)
	// serve checks the request as strictly as the provider (a 400 in its
	// own shape), then runs c.scripted, then answers; a stream runs
	// c.afterFirstWord after its first content event.
	serve(c *call)
}

// formats is every wire format the fake serves of its own; the formats
// provider modules register (Register) follow them. A request belongs to
// the first row that serves it, else to the first row that owns its path,
// else to OpenAI's (whose 404 is the fake's default).
var formats = []wireFormat{
	openAIBatchFormat{},
	openAIBatchFormat{azure: true},
	anthropicBatchFormat{},
	geminiBatchFormat{},
	bedrockBatchFormat{},
	vertexBatchFormat{},
	openAIFormat{},
	responsesFormat{},
	anthropicFormat{},
	azureFormat{},
	bedrockFormat{},
	cohereChatFormat{},
	cohereEmbedFormat{},
	geminiFormat{},
	vertexFormat{},
	&rerankFormat{id: "cohere", path: "/cohere/v2/rerank", docs: "documents", count: "top_n", named: true, results: "results", score: "relevance_score", withID: true, cohere: true},
	&rerankFormat{id: "jina", path: "/jina/v1/rerank", docs: "documents", count: "top_n", named: true, flag: "return_documents", results: "results", score: "relevance_score"},
	&rerankFormat{id: "voyage", path: "/voyage/v1/rerank", docs: "documents", count: "top_k", named: true, flag: "return_documents", results: "data", score: "relevance_score"},
	&rerankFormat{id: "tei", path: "/tei/rerank", docs: "texts", flag: "return_text", score: "score"},
	&rerankFormat{id: "vllm", path: "/vllm/v1/rerank", docs: "documents", count: "top_n", named: true, results: "results", score: "relevance_score", withID: true},
	&rerankFormat{id: "infinity", path: "/infinity/rerank", docs: "documents", count: "top_n", named: true, flag: "return_documents", results: "results", score: "relevance_score", withID: true},
	&rerankFormat{id: "together", path: "/together/v1/rerank", docs: "documents", count: "top_n", named: true, flag: "return_documents", results: "results", score: "relevance_score", withID: true},
	moderationFormat{},
	&embeddingsFormat{id: "openai_embeddings", path: "/v1/embeddings", dims: "dimensions", tokens: true, usage: "prompt_tokens"},
	&embeddingsFormat{id: "vllm_embeddings", path: "/vllm/v1/embeddings", dims: "dimensions", tokens: true, usage: "prompt_tokens"},
	&embeddingsFormat{id: "ollama_embeddings", path: "/ollama/v1/embeddings", dims: "dimensions", usage: "prompt_tokens"},
	&embeddingsFormat{id: "infinity_embeddings", path: "/infinity/embeddings", dims: "dimensions", usage: "prompt_tokens"},
	&embeddingsFormat{id: "together_embeddings", path: "/together/v1/embeddings", usage: "prompt_tokens"},
	&embeddingsFormat{id: "tei_embeddings", path: "/tei/v1/embeddings", usage: "prompt_tokens"},
	&embeddingsFormat{id: "mistral_embeddings", path: "/mistral/v1/embeddings", dims: "output_dimension", usage: "prompt_tokens"},
	&embeddingsFormat{id: "voyage_embeddings", path: "/voyage/v1/embeddings", dims: "output_dimension", inputType: "input_type", usage: "total_tokens"},
	&embeddingsFormat{id: "jina_embeddings", path: "/jina/v1/embeddings", dims: "dimensions", inputType: "task", usage: "total_tokens"},
	&rerankFormat{id: "mixedbread", path: "/mixedbread/v1/reranking", docs: "input", count: "top_k", named: true, flag: "return_input", results: "data", score: "score"},
}

// fallback answers the requests no row owns: with OpenAI's 404.
var fallback wireFormat = openAIFormat{}

// route finds the format of a request and whether it serves it.
func route(r *http.Request) (wireFormat, bool) {
	var owner wireFormat
	for _, table := range [2][]wireFormat{formats, registeredFormats()} {
		for _, f := range table {
			switch f.route(r) {
			case served:
				return f, true
			case owned:
				if owner == nil {
					owner = f
				}
			}
		}
	}
	if owner == nil {
		owner = fallback
	}
	return owner, false
}

// routing is what a format makes of a request.
type routing int

const (
	notMine routing = iota
	owned           // its path, not served: a 404 in its shape
	served
)

// postTo routes the format of one endpoint at path: a POST there is
// served, another method owned.
func postTo(r *http.Request, path string) routing {
	switch {
	case r.URL.Path != path:
		return notMine
	case r.Method == http.MethodPost:
		return served
	}
	return owned
}

// fault is an error every format writes in its own shape.
type fault int

const (
	notFound     fault = iota // no such route
	tooLarge                  // the body is over MaxBody
	unreadable                // the body could not be read
	unauthorized              // wrong or missing credentials
	rateLimited               // fail-429 and flaky (ServeHTTP sets retry-after)
	serverError               // fail-500
	overloaded                // fail-529
)

// status is the fault's usual HTTP status. Formats may differ: Anthropic
// answers overloaded with its own 529.
func (f fault) status() int {
	return [...]int{
		notFound: http.StatusNotFound, tooLarge: http.StatusRequestEntityTooLarge, unreadable: http.StatusBadRequest,
		unauthorized: http.StatusUnauthorized, rateLimited: http.StatusTooManyRequests,
		serverError: http.StatusInternalServerError, overloaded: http.StatusServiceUnavailable,
	}[f]
}

// Messages of faults that read the same in every format.
const (
	msgTooLarge   = "request exceeds the maximum allowed number of bytes"
	msgUnreadable = "could not read the body"
)

// keyOK reports whether a presented key passes: it must be non-empty, and
// equal want unless want is empty.
func keyOK(got, want string) bool { return got != "" && (want == "" || got == want) }

// bearer is the token of an "Authorization: Bearer <token>" header, or "".
func bearer(r *http.Request) string {
	scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	if scheme != "Bearer" {
		return ""
	}
	return token
}

// modelInBody is embedded by the formats whose body names the model, as
// "model" at its top level.
type modelInBody struct{}

func (modelInBody) model(_ *http.Request, body []byte) string {
	return gjson.GetBytes(body, "model").Str
}

// key is the key a format wants: Keys[name], else AnthropicKey for
// Anthropic's format, Keys["cohere"] (the rerank row's) for Cohere's chat
// and embed, OpenAIKey for OpenAI's, Cohere's chat and embed and the rerank
// formats, and "" (any key) for the others.
func (o *Options) key(f wireFormat) string {
	if k, ok := o.Keys[f.name()]; ok {
		return k
	}
	switch f.(type) {
	case anthropicFormat:
		return o.AnthropicKey
	case cohereChatFormat, cohereEmbedFormat:
		// One Cohere key serves chat, embed and rerank.
		if k, ok := o.Keys["cohere"]; ok {
			return k
		}
		return o.OpenAIKey
	case openAIFormat, responsesFormat, *rerankFormat, *embeddingsFormat:
		return o.OpenAIKey
	}
	return ""
}

// call is one request a format serves.
type call struct {
	s     *Server
	f     wireFormat
	w     http.ResponseWriter
	r     *http.Request
	body  []byte
	model string
	id    string // the request's sequence number, for ids in the answer
}

// fail writes a fault in the format's shape; a rate limit says retry
// after a second.
func (c *call) fail(f fault) {
	if f == rateLimited {
		c.w.Header().Set("Retry-After", "1")
	}
	c.f.fail(c.w, c.r, f)
}

// scripted answers the failure behaviours selected by the model name and
// reports whether it did. slow-<N>ms only sleeps first (cut short if the
// client leaves).
func (c *call) scripted() bool {
	if d, ok := slowDelay(c.model); ok {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-c.r.Context().Done():
			t.Stop()
		}
	}
	switch m := c.model; {
	case strings.Contains(m, "fail-429"):
		c.fail(rateLimited)
	case strings.Contains(m, "fail-500"):
		c.fail(serverError)
	case strings.Contains(m, "fail-529"):
		c.fail(overloaded)
	case strings.Contains(m, "fail-html"):
		c.w.Header().Set("Content-Type", "text/html; charset=utf-8")
		c.w.WriteHeader(http.StatusBadGateway)
		_, _ = c.w.Write([]byte("<html><body><h1>502 Bad Gateway</h1><p>secret-internal-host</p></body></html>"))
	default:
		return false
	}
	return true
}

// slowDelay reads "slow-<N>ms" anywhere in a model name ("x/slow-50ms",
// "slow-50ms-gated").
func slowDelay(model string) (time.Duration, bool) {
	_, rest, ok := strings.Cut(model, "slow-")
	if !ok {
		return 0, false
	}
	n := 0
	for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
		n++
	}
	if n == 0 || !strings.HasPrefix(rest[n:], "ms") {
		return 0, false
	}
	ms, err := strconv.Atoi(rest[:n])
	if err != nil {
		return 0, false
	}
	return time.Duration(ms) * time.Millisecond, true
}

// afterFirstWord runs the scripted behaviour due once a stream has sent its
// first content event and reports whether the stream ends there: a gated
// stream waits for Release; midstream-error writes errEvent (a complete
// event in the stream's framing) and ends; cutoff just ends.
func (c *call) afterFirstWord(errEvent []byte) bool {
	switch {
	case strings.Contains(c.model, "gated"):
		c.s.gate(c.r)
	case strings.Contains(c.model, "midstream-error"):
		c.send(errEvent)
		return true
	case strings.Contains(c.model, "cutoff"):
		return true
	}
	return false
}

// startSSE begins a 200 server-sent event stream.
func (c *call) startSSE() {
	c.w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	c.w.Header().Set("Cache-Control", "no-cache")
	c.w.WriteHeader(http.StatusOK)
}

// send writes b and flushes it to the client.
func (c *call) send(b []byte) {
	_, _ = c.w.Write(b)
	_ = http.NewResponseController(c.w).Flush()
}

// field is a top-level request field a check reads, and where it goes.
type field struct {
	name string
	to   *gjson.Result
}

// readFields reads an object's top-level fields in one pass, storing those
// named in fields. It stops at the first other field refuse refuses and
// returns its name.
func readFields(obj gjson.Result, fields []field, refuse func(name string) bool) (refused string) {
	obj.ForEach(func(k, v gjson.Result) bool {
		for _, f := range fields {
			if f.name == k.Str {
				*f.to = v
				return true
			}
		}
		if refuse(k.Str) {
			refused = k.Str
		}
		return refused == ""
	})
	return refused
}

func writeJSON(w http.ResponseWriter, status int, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

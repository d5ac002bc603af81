// Package providertest is a fake model provider: one HTTP server that
// speaks the wire formats of the providers a gateway translates to, strictly
// enough that a gateway's translation errors show up as 400s. Tests start it
// on loopback (Start); cmd/fakeprovider runs it standalone for the quick
// start.
//
// The formats, by name (the key of Options.Keys) and path:
//
//	openai       POST /v1/chat/completions (Authorization: Bearer)
//	openai_moderations POST /v1/moderations (Authorization: Bearer), OpenAI's
//	             moderations API: flags by ModerationTriggers (moderation.go)
//	openai_responses POST /v1/responses (Authorization: Bearer), OpenAI's
//	             Responses API, streamed or not (responses.go)
//	anthropic    POST /v1/messages (x-api-key, anthropic-version)
//	azure_openai POST /openai/deployments/{deployment}/chat/completions?api-version=…,
//	             POST /openai/v1/chat/completions (api-key, or an Entra bearer token)
//	bedrock      POST /model/{modelId}/converse, POST /model/{modelId}/converse-stream,
//	             POST /model/{modelId}/invoke (Titan and Cohere embeddings; Anthropic's
//	             Messages body for Claude, and …/invoke-with-response-stream, see
//	             bedrock_messages.go)
//	             (AWS SigV4; the key is "<access key id>:<secret access key>"
//	             [":<session token>"], and the fake recomputes the signature;
//	             or a Bedrock API key as a bearer token, Keys["bedrock_api_key"])
//	cohere_chat  POST /cohere/v2/chat (Authorization: Bearer; the "cohere" key serves it too)
//	cohere_embed POST /cohere/v2/embed (likewise), vectors from EmbeddingVector
//	gemini       POST /v1beta/models/{model}:generateContent, …:streamGenerateContent?alt=sse,
//	             embeddings …:batchEmbedContents and …:embedContent (x-goog-api-key or ?key=)
//	vertex       POST /v1/projects/{p}/locations/{l}/publishers/google/models/{model}:generateContent,
//	             …:streamGenerateContent?alt=sse, embeddings …:predict and …:embedContent
//	             (an OAuth bearer token), express mode's
//	             POST /v1/publishers/google/models/{model}:… (x-goog-api-key), and the
//	             Google token endpoint POST /oauth2/token that issues the tokens to the
//	             service account of GoogleServiceAccount (see GoogleTokens); Google's
//	             embeddings are described in gemini_embeddings.go
//	bedrock_batch POST /model-invocation-job, GET /model-invocation-jobs, GET and
//	             POST …/{jobArn}[/stop]: Bedrock batch inference (SigV4 as bedrock's),
//	             its jobs run against Options.Objects (bedrock_batch.go)
//	vertex_batch POST and GET /v1/projects/{p}/locations/{l}/batchPredictionJobs, GET
//	             and POST …/{id}[:cancel]: Vertex AI batch prediction for Gemini and
//	             Claude (bearer tokens as vertex's), its jobs run against
//	             Options.Objects (vertex_batch.go)
//	cohere       POST /cohere/v2/rerank      jina      POST /jina/v1/rerank
//	voyage       POST /voyage/v1/rerank      tei       POST /tei/rerank
//	vllm         POST /vllm/v1/rerank        infinity  POST /infinity/rerank
//	together     POST /together/v1/rerank    mixedbread POST /mixedbread/v1/reranking
//	openai_embeddings POST /v1/embeddings, and OpenAI-shaped embeddings under
//	             /vllm/v1, /ollama/v1, /infinity, /together/v1, /tei/v1,
//	             /mistral/v1, /voyage/v1, /jina/v1 (…/embeddings; names
//	             <prefix>_embeddings), vectors from EmbeddingVector
//
// (the rerank formats each under a prefix of their own, with a bearer key;
// their scores are RerankScore's word overlap, and Cohere's answer bills
// CohereSearchUnits; Cohere's chat, embed and rerank share the /cohere
// prefix, whose other paths are 404s in Cohere's shape).
//
// Requests are checked as strictly as the real APIs check them (required
// fields, value ranges, roles, content block types, tool calls paired with
// their results, no fields of another format), and a violation is a 400
// in the provider's own error shape. Every error is in the shape of the
// format the path belongs to: a 404 for a path no format serves (Anthropic's
// shape under /v1/messages, a rerank format's on its path, OpenAI's
// elsewhere), a 413 for a body over MaxBody, a 401 for a wrong or missing
// key.
//
// Chat answers are derived from the request, so a test can check what went
// through: the answer is "echo: <last user text>" (system messages,
// wherever they are, are not turns; in Anthropic's format, of a user turn
// of several text blocks the last one's, as a client's context comes
// before its words in one turn there); or "tool said: <tool
// results>" when the conversation ends with tool results (all of them, in
// order, joined with spaces); or, when tools are offered and the
// conversation ends with a user's text, a call of the first offered tool
// (the one tool_choice names, if any) with arguments {"query": "<last user
// text>"}. max_tokens (max_completion_tokens) shorter than the answer cuts
// it to that many words. Token counts are word counts: the prompt's over
// every message's text (system and tool results included; or what
// Options.PromptTokens counts), the answer's words, 1 for a tool call.
//
// The Anthropic format also speaks extended thinking, JSON outputs and
// prompt caching. With thinking on ({"type":"enabled"} with a budget of at
// least 1024 below max_tokens, or {"type":"adaptive"}) the answer starts
// with a thinking block ("Thinking about: <last user text>", or "The tools
// said: …") signed with an HMAC of its text; a thinking block sent back
// must carry that signature, and a request ending in tool results whose
// assistant turn does not start with its thinking block is refused, as
// Anthropic refuses them; Anthropic's rules on temperature, top_p, top_k
// and forced tools with thinking hold. A tool call's input is an instance
// of the tool's input schema (see Structured in answer.go) when the schema
// names properties, and output_config.format (checked against the schema
// subset Anthropic takes) makes the text an instance of its schema. Blocks
// and tools marked with cache_control, or a top-level cache_control, cache
// the prompt up to the last marker: the first request reports it as
// cache_creation_input_tokens, repeats within the ttl as
// cache_read_input_tokens.
//
// The model name selects scripted behaviour, since it is the one thing a
// gateway passes through unchanged. Every format follows it, each with its
// own error shape and status:
//
//	fail-429          429 with retry-after: 1
//	fail-500          500
//	fail-529          overloaded: Anthropic's 529 overloaded_error, 503
//	                  in the other formats
//	fail-html         502 with an HTML body
//	gated             a stream sends its first content event, then waits
//	                  for Release (see Waiting)
//	midstream-error   a stream sends one content event, then an error event
//	cutoff            a stream sends one content event, then ends
//	slow-<N>ms        waits N milliseconds before answering
//	flaky             the first request with a given body gets 429 with
//	                  retry-after-ms: 50 (and retry-after: 1); a repeat of
//	                  it is answered
//	unsorted          rerank results in request order, top_n ignored
//	no-tools          (Anthropic's and OpenAI's Responses formats) an answer in
//	                  text although tools are offered
//	redacted          (Anthropic, thinking on) a redacted_thinking block
//	                  follows the thinking block
//
// # Failing as providers fail
//
// StartChaos (chaos.go) puts a fake behind failures a gateway's circuit
// breakers, cool-downs and routing must handle: a black hole, a
// connection reset mid-stream, a 429 storm announcing its end in each
// provider's headers, 500s and overloads, a slow first token, a slow but
// working provider, and a provider that flaps between healthy and
// failing. Its failures take each wire format's own error shape.
//
// # Adding a wire format
//
// Write one file, <name>.go, with a type that implements wireFormat
// (format.go): name, route (postTo for one POST endpoint; a path prefix
// you own makes its 404s yours), headers (a request id, if the provider
// sends one), authorized (keyOK on the credential the provider takes:
// bearer, an api-key header, a signature), model (embed modelInBody when
// the body names it, else read it from the path), fail (a switch over the
// faults, writing the provider's error body; fault.status gives the usual
// status) and serve. serve checks the request as strictly as the provider
// does (a 400 in its shape), then calls c.scripted() and returns if that
// answered, then answers: derive a chat answer with decide (answer.go),
// write it with writeJSON, or stream it (c.startSSE and c.send for SSE),
// calling c.afterFirstWord(errorEvent) after the first content event. Then
// add one row for it to formats (format.go) and its line to the list
// above, and give the tests one example request for it (formatExamples in
// format_test.go): TestEveryFormat runs the answer, the 401, the 404 and
// every scripted failure against each row, and fails for a row without
// an example.
//
// # A provider module's own format
//
// A provider type in a Go module of its own registers its wire format
// with the fake rather than editing this table: a type implementing
// Format (register.go), whose Serve answers through Call (Call.Scripted,
// Call.Reply, Call.Send, Call.AfterFirstWord), passed to Register from
// the module's test code. The fake then serves it beside its own formats,
// with its key in Options.Keys under the format's name, every scripted
// behaviour above, recording and the "flaky" model. The example provider
// module in examples/provider registers one.
package providertest

import (
	"crypto/sha256"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Options configure a fake provider.
type Options struct {
	// OpenAIKey is the key the OpenAI format wants as "Authorization:
	// Bearer <key>", and the Responses, rerank and embeddings formats and
	// Cohere's chat and embed too. Empty accepts any non-empty bearer token.
	OpenAIKey string

	// AnthropicKey is the key the Anthropic format wants as x-api-key.
	// Empty accepts any non-empty key.
	AnthropicKey string

	// Keys are the keys of the formats by name (see the package doc),
	// each presented the way its provider takes it; an entry overrides
	// OpenAIKey or AnthropicKey. A format with no key here or there, or
	// an empty one, accepts any non-empty key.
	Keys map[string]string

	// NoRecord turns off request recording (for load benchmarks).
	NoRecord bool

	// GoogleTokenLifetime is how long the access tokens of the Google
	// token endpoint (GoogleTokenPath) live. Default:
	// DefaultGoogleTokenLifetime.
	GoogleTokenLifetime time.Duration

	// Log, if set, is called once for each request when its answer is
	// complete (a stream's when it ends) with the status answered. The
	// Recorded has no Header or Body when NoRecord is set.
	Log func(r Recorded, status int)

	// PromptTokens, if set, counts the tokens of each text of a prompt
	// (a message's or a system prompt's, an instruction's, a tool
	// result's, an embedding input's, a rerank query's) in place of its
	// words, in every format: a test can have the fake count as a
	// provider's tokenizer does. Answers are still counted in words.
	PromptTokens func(text string) int

	// Objects is the object storage the batch jobs of Bedrock and
	// Vertex AI read their input from and write their output to (see
	// Objects); without it their jobs fail.
	Objects Objects
}

// promptTokens counts a text of a prompt: Options.PromptTokens, else its
// words.
func (s *Server) promptTokens(text string) int {
	if s.opts.PromptTokens != nil {
		return s.opts.PromptTokens(text)
	}
	return countWords(text)
}

// Recorded is one request the fake received.
type Recorded struct {
	At           time.Time
	Method, Path string
	Header       http.Header
	Body         []byte
	Model        string
	Format       string // the wire format's name (see Options.Keys)
}

// Server is a fake provider. Its zero value is not usable; use New or Start.
type Server struct {
	// URL is the base URL ("http://127.0.0.1:port") when started with Start.
	URL string

	opts    Options
	seq     atomic.Int64
	mu      sync.Mutex
	reqs    []Recorded
	waiting chan struct{}
	gates   []chan struct{}        // gated streams waiting for Release, under mu
	flaky   map[[32]byte]bool      // bodies of "flaky" requests seen, under mu
	caches  map[[32]byte]time.Time // Anthropic prompt cache: prefix → expiry, under mu
	stored  map[string][]byte      // stored Responses, by id, under mu
	google  googleAuth             // the Google service account and its tokens

	batchOnce sync.Once
	batchAPI  *batchStore // the Files and Batch APIs' state

	anOnce     sync.Once
	anBatchAPI *anBatchStore // the Message Batches API's state

	gemOnce     sync.Once
	gemBatchAPI *geminiBatchStore // the Gemini batch mode's state

	bjOnce sync.Once
	bjAPI  *bedrockJobStore // Bedrock's model invocation jobs

	vjOnce sync.Once
	vjAPI  *vertexJobStore // Vertex AI's batch prediction jobs

	batchHoldMu sync.Mutex
	batchHold   bool // HoldBatches
}

// New returns a fake provider that is not listening; serve it yourself.
func New(opts Options) *Server {
	return &Server{opts: opts, waiting: make(chan struct{}, 64)}
}

// Start serves a new fake provider on 127.0.0.1 until the test ends.
func Start(tb testing.TB, opts Options) *Server {
	s := New(opts)
	hs := httptest.NewServer(s)
	s.URL = hs.URL
	tb.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
	})
	return s
}

// Requests returns a copy of every request received so far, in order.
func (s *Server) Requests() []Recorded {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Recorded(nil), s.reqs...)
}

// Waiting delivers one value each time a "gated" stream has sent its first
// content event and starts waiting for Release (at most 10 s).
func (s *Server) Waiting() <-chan struct{} { return s.waiting }

// Release lets every gated stream that is waiting now continue. It does
// not affect streams that reach their gate later.
func (s *Server) Release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range s.gates {
		close(g)
	}
	s.gates = nil
}

// gate blocks a gated stream until Release, 10 s, or the client leaves.
func (s *Server) gate(r *http.Request) {
	g := make(chan struct{})
	s.mu.Lock()
	s.gates = append(s.gates, g)
	s.mu.Unlock()
	select {
	case s.waiting <- struct{}{}:
	default:
	}
	select {
	case <-g:
	case <-time.After(10 * time.Second):
	case <-r.Context().Done():
	}
}

// firstTime reports whether body is seen for the first time (by "flaky").
func (s *Server) firstTime(body []byte) bool {
	sum := sha256.Sum256(body)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.flaky == nil {
		s.flaky = make(map[[32]byte]bool)
	}
	seen := s.flaky[sum]
	s.flaky[sum] = true
	return !seen
}

// MaxBody is the largest request body the fake reads: Anthropic's limit for
// the Messages API. A larger body is a 413 in the route's error shape.
const MaxBody = 32 << 20

// ServeHTTP routes a request to its wire format (see formats), checks its
// key and answers it; the "flaky" model fails first, before anything else.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f, serves := route(r)
	c := &call{s: s, f: f, w: w, r: r, id: strconv.FormatInt(s.seq.Add(1), 10)}
	rec := Recorded{At: time.Now(), Method: r.Method, Path: r.URL.Path, Format: f.name()}
	if s.opts.Log != nil {
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		c.w = sw
		defer func() { s.opts.Log(rec, sw.status) }()
	}
	f.headers(c.w.Header(), c.id)
	limit := int64(MaxBody)
	if l, ok := f.(interface{ maxBody() int64 }); ok {
		limit = l.maxBody()
	}
	body, err := readAll(r, limit)
	if err != nil {
		fl := unreadable
		if _, tooBig := errors.AsType[*http.MaxBytesError](err); tooBig {
			fl = tooLarge
		}
		c.fail(fl)
		return
	}
	c.body, c.model = body, f.model(r, body)
	rec.Model = c.model
	if !s.opts.NoRecord {
		rec.Header, rec.Body = r.Header.Clone(), body
		s.mu.Lock()
		s.reqs = append(s.reqs, rec)
		s.mu.Unlock()
	}
	switch {
	case strings.Contains(c.model, "flaky") && s.firstTime(body):
		c.w.Header().Set("Retry-After-Ms", "50")
		c.fail(rateLimited)
	case !serves:
		c.fail(notFound)
	case !f.authorized(r, s.opts.key(f)):
		c.fail(unauthorized)
	default:
		f.serve(c)
	}
}

// readAll reads the body, at most limit bytes of it.
func readAll(r *http.Request, limit int64) ([]byte, error) {
	rd := http.MaxBytesReader(nil, r.Body, limit)
	if n := r.ContentLength; n >= 0 && n <= limit {
		// The server holds the body to its Content-Length: read it into
		// one buffer of that size.
		buf := make([]byte, n)
		_, err := io.ReadFull(rd, buf)
		return buf, err
	}
	return io.ReadAll(rd)
}

// statusWriter remembers the status written, for Options.Log.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	w.status = status
	w.ResponseWriter.WriteHeader(status)
}

// Unwrap lets http.ResponseController reach the real writer for flushes.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Send makes one request to url for a test and reads the whole answer.
// header holds name, value pairs, set after Content-Type:
// application/json.
func Send(tb testing.TB, method, url, body string, header ...string) (*http.Response, string) {
	tb.Helper()
	res, b := Do(tb, NewRequest(tb, method, url, body, header...))
	return res, string(b)
}

// Do sends req for a test and reads the whole answer, failing tb when
// either fails.
func Do(tb testing.TB, req *http.Request) (*http.Response, []byte) {
	tb.Helper()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return res, b
}

// NewRequest is the request Send makes.
func NewRequest(tb testing.TB, method, url, body string, header ...string) *http.Request {
	tb.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return req
}

// Package providertest is a fake model provider that speaks OpenAI's chat
// completions and Anthropic's Messages wire formats, and the rerank formats
// of Cohere, Jina, Voyage, TEI, vLLM, Infinity, Together and Mixedbread
// (each under its own prefix: /cohere/v2/rerank, /voyage/v1/rerank,
// /tei/rerank, …), strictly enough that a gateway's translation errors show
// up as 400s. Rerank scores are RerankScore's word overlap. Tests start it on loopback;
// cmd/fakeprovider runs it standalone for the quick start.
//
// Requests are checked as strictly as the real APIs check them (required
// fields, value ranges, roles, content block types, tool calls paired with
// their results, no fields of the other format), and a violation is a 400
// in the provider's own error shape. Any other path is a 404: Anthropic's
// shape under /v1/messages, OpenAI's elsewhere. Bodies over MaxBody are 413.
//
// Answers are derived from the request, so a test can check what went
// through: the answer is "echo: <last user text>"; or "tool said: <tool
// results>" when the conversation ends with tool results (all of them, in
// order, joined with spaces); or, when tools are offered and the
// conversation ends with a user's text, a call of the first offered tool
// (the one tool_choice names, if any) with arguments {"query": "<last user
// text>"}. max_tokens (max_completion_tokens) shorter than the answer cuts
// it to that many words. Token counts are word counts: the prompt's over
// every message's text (system and tool results included), the answer's
// words, 1 for a tool call.
//
// The model name selects scripted behaviour, since it is the one thing a
// gateway passes through unchanged:
//
//	fail-429          429 with retry-after: 1
//	fail-500          500
//	fail-529          Anthropic 529 overloaded_error (503 on the OpenAI route)
//	fail-html         502 with an HTML body
//	gated             a stream sends its first content event, then waits
//	                  for Release (see Waiting)
//	midstream-error   a stream sends one content event, then an error event
//	cutoff            a stream sends one content event, then ends
//	slow-<N>ms        waits N milliseconds before answering
//	flaky             (chat) the first request with a given body gets 429
//	                  with retry-after-ms: 50 (and retry-after: 1); a
//	                  repeat of it is answered
//	unsorted          rerank results in request order, top_n ignored
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
	"unicode"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
)

// Options configure a fake provider.
type Options struct {
	// OpenAIKey is the key the OpenAI route wants as "Authorization:
	// Bearer <key>". Empty accepts any non-empty bearer token.
	OpenAIKey string

	// AnthropicKey is the key the Anthropic route wants as x-api-key.
	// Empty accepts any non-empty key.
	AnthropicKey string

	// NoRecord turns off request recording (for load benchmarks).
	NoRecord bool
}

// Recorded is one request the fake received.
type Recorded struct {
	At           time.Time
	Method, Path string
	Header       http.Header
	Body         []byte
	Model        string
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
	gates   []chan struct{}   // gated streams waiting for Release, under mu
	flaky   map[[32]byte]bool // bodies of "flaky" requests seen, under mu
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

// ServeHTTP routes POST /v1/chat/completions (OpenAI), POST /v1/messages
// (Anthropic) and the rerank routes. Any other request is a 404: in
// Anthropic's error shape under /v1/messages, in OpenAI's elsewhere.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	anthropic := r.URL.Path == "/v1/messages" || strings.HasPrefix(r.URL.Path, "/v1/messages/")
	body, err := readAll(r)
	if err != nil {
		status, msg := http.StatusBadRequest, "could not read the body"
		if _, tooBig := errors.AsType[*http.MaxBytesError](err); tooBig {
			status, msg = http.StatusRequestEntityTooLarge, "request exceeds the maximum allowed number of bytes"
		}
		if anthropic {
			anthropicError(w, status, "request_too_large", msg)
		} else {
			openAIError(w, status, "invalid_request_error", "", msg)
		}
		return
	}
	model := gjson.GetBytes(body, "model").Str
	if !s.opts.NoRecord {
		s.mu.Lock()
		s.reqs = append(s.reqs, Recorded{
			At: time.Now(), Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(),
			Body: body, Model: model,
		})
		s.mu.Unlock()
	}
	id := strconv.FormatInt(s.seq.Add(1), 10)
	if strings.Contains(model, "flaky") && s.firstTime(body) {
		w.Header().Set("Retry-After-Ms", "50")
		w.Header().Set("Retry-After", "1")
		if anthropic {
			anthropicError(w, http.StatusTooManyRequests, "rate_limit_error", "rate limit reached")
		} else {
			openAIError(w, http.StatusTooManyRequests, "rate_limit_error", "rate_limit_exceeded", "rate limit reached")
		}
		return
	}
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/chat/completions":
		w.Header().Set("X-Request-Id", "req_"+id)
		s.serveOpenAI(w, r, body, id)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages":
		w.Header().Set("Request-Id", "req_"+id)
		s.serveAnthropic(w, r, body, id)
	case r.Method == http.MethodPost && isRerank(r.URL.Path):
		name, f, _ := rerankRoute(r.URL.Path)
		s.serveRerank(w, r, body, name, f, id)
	case anthropic:
		w.Header().Set("Request-Id", "req_"+id)
		anthropicError(w, http.StatusNotFound, "not_found_error", "Not Found: "+r.Method+" "+r.URL.Path)
	default:
		w.Header().Set("X-Request-Id", "req_"+id)
		openAIError(w, http.StatusNotFound, "invalid_request_error", "unknown_url", "Invalid URL ("+r.Method+" "+r.URL.Path+")")
	}
}

// readAll reads the body, at most MaxBody bytes of it.
func readAll(r *http.Request) ([]byte, error) {
	rd := http.MaxBytesReader(nil, r.Body, MaxBody)
	if n := r.ContentLength; n >= 0 && n <= MaxBody {
		// The server holds the body to its Content-Length: read it into
		// one buffer of that size.
		buf := make([]byte, n)
		_, err := io.ReadFull(rd, buf)
		return buf, err
	}
	return io.ReadAll(rd)
}

// scripted answers the failure behaviours selected by the model name and
// reports whether it did. slow-<N>ms only sleeps first (cut short if the
// client leaves).
func scripted(w http.ResponseWriter, r *http.Request, model string, anthropic bool) bool {
	if d, ok := slowDelay(model); ok {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
		}
	}
	type failure struct {
		status                         int
		openAIType, anthropicType, msg string
	}
	var f *failure
	code := ""
	switch {
	case strings.Contains(model, "fail-429"):
		w.Header().Set("Retry-After", "1")
		f = &failure{429, "rate_limit_error", "rate_limit_error", "rate limit reached"}
		code = "rate_limit_exceeded"
	case strings.Contains(model, "fail-500"):
		f = &failure{500, "server_error", "api_error", "internal server error"}
	case strings.Contains(model, "fail-529"):
		if anthropic {
			f = &failure{529, "", "overloaded_error", "Overloaded"}
		} else {
			f = &failure{503, "server_error", "", "the engine is overloaded"}
		}
	case strings.Contains(model, "fail-html"):
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusBadGateway)
		_, _ = w.Write([]byte("<html><body><h1>502 Bad Gateway</h1><p>secret-internal-host</p></body></html>"))
		return true
	default:
		return false
	}
	if anthropic {
		anthropicError(w, f.status, f.anthropicType, f.msg)
	} else {
		openAIError(w, f.status, f.openAIType, code, f.msg)
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
// stream waits for Release; midstream-error writes errEvent (a complete SSE
// event in the stream's format) and ends; cutoff just ends.
func (s *Server) afterFirstWord(w http.ResponseWriter, r *http.Request, model string, errEvent []byte) bool {
	switch {
	case strings.Contains(model, "gated"):
		s.gate(r)
	case strings.Contains(model, "midstream-error"):
		_, _ = w.Write(errEvent)
		flush(w)
		return true
	case strings.Contains(model, "cutoff"):
		return true
	}
	return false
}

// answer is what the fake model says.
type answer struct {
	words        []string // text answer, split into words
	tool         string   // name of the tool called, if any
	toolArgs     []byte   // its arguments, JSON
	promptTokens int
	truncated    bool
}

func (a *answer) completionTokens() int {
	if a.tool != "" {
		return 1
	}
	return len(a.words)
}

// decide builds the answer. userText is the text of the last user message;
// toolResult is the text of the tool results that end the conversation, if
// isToolResult; userLast says whether the conversation ends with a user
// message (not an assistant prefill). tools are the offered tools' names,
// chosen the one tool_choice names, toolsOff whether tool_choice is none.
func decide(userText, toolResult string, isToolResult, userLast bool, tools []string, chosen string, toolsOff bool, maxTokens int64, promptWords int) *answer {
	a := &answer{promptTokens: promptWords}
	switch {
	case !isToolResult && userLast && len(tools) > 0 && !toolsOff:
		a.tool = tools[0]
		if chosen != "" {
			a.tool = chosen
		}
		a.toolArgs = appendString(append([]byte(nil), `{"query":`...), userText)
		a.toolArgs = append(a.toolArgs, '}')
		return a
	case isToolResult:
		a.words = strings.Fields("tool said: " + toolResult)
	default:
		a.words = strings.Fields("echo: " + userText)
	}
	if maxTokens > 0 && int64(len(a.words)) > maxTokens {
		a.words = a.words[:maxTokens]
		a.truncated = true
	}
	return a
}

// text is the whole text answer.
func (a *answer) text() string { return strings.Join(a.words, " ") }

// chunkWord is the i-th word as a stream delta: words after the first keep
// their leading space.
func (a *answer) chunkWord(i int) string {
	if i == 0 {
		return a.words[0]
	}
	return " " + a.words[i]
}

// argFragments splits the tool arguments into three pieces, as providers
// stream them. The cuts fall on character boundaries: a piece that ended
// inside a UTF-8 sequence would not survive a JSON decoder.
func (a *answer) argFragments() []string {
	s := string(a.toolArgs)
	n := len(s)
	cut := func(i int) int {
		for i < n && !utf8.RuneStart(s[i]) {
			i++
		}
		return i
	}
	i, j := cut(n/3), cut(2*n/3)
	return []string{s[:i], s[i:j], s[j:]}
}

// countWords is len(strings.Fields(s)), without the slice.
func countWords(s string) int {
	n, inWord := 0, false
	for _, r := range s {
		if unicode.IsSpace(r) {
			inWord = false
		} else if !inWord {
			inWord = true
			n++
		}
	}
	return n
}

// flush sends what was written so far to the client.
func flush(w http.ResponseWriter) { _ = http.NewResponseController(w).Flush() }

// validJSON reports whether body is valid UTF-8 JSON that nests at most
// providers.MaxDepth levels deep (deeper bodies would overflow gjson's
// recursive validator and end the process).
func validJSON(body []byte) bool { return utf8.Valid(body) && providers.ValidJSON(body) }

// appendString appends s as a JSON string (invalid UTF-8 becomes U+FFFD).
func appendString(dst []byte, s string) []byte { return providers.AppendString(dst, s) }

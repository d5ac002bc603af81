package providertest

import (
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
)

// Format is a wire format of a provider type outside this module, which
// the fake serves beside its own once it is registered (Register). The
// fake does for it what it does for every format: it reads the body (a
// 413 past MaxBody), records the request, answers the "flaky" model,
// 404s for paths the format owns but does not serve, and 401s for
// requests Authorized refuses, each through Fail; Serve answers the rest.
type Format interface {
	// Name names the format in Options.Keys and Recorded.Format.
	Name() string

	// Route says whether a request is the format's: Served (Serve answers
	// it), Owned (its path but not its method, or a path under its own
	// prefix that it does not serve: a 404 through Fail) or NotMine. A
	// registered format is asked after the fake's own: its paths are its
	// own, under a prefix of its name, say.
	Route(r *http.Request) Routing

	// Authorized reports whether the request carries the credentials the
	// format wants: key is the configured one (Options.Keys[Name()]), ""
	// meaning any (see KeyOK).
	Authorized(r *http.Request, key string) bool

	// Model is the model the request names, in its body or its path: the
	// scripted behaviours follow it.
	Model(r *http.Request, body []byte) string

	// Fail writes a fault in the format's own error shape, with the
	// status the provider gives it (Fault.Status is the usual one).
	Fail(w http.ResponseWriter, r *http.Request, f Fault)

	// Serve checks the request as strictly as the provider does (a 400 in
	// its own shape), returns if Call.Scripted answered, and answers:
	// with Call.Reply's words, whole or streamed; a stream calls
	// Call.AfterFirstWord after its first content event.
	Serve(c *Call)
}

// Routing is what a format makes of a request (see Format.Route).
type Routing = routing

// The routings of a request.
const (
	NotMine Routing = notMine
	Owned   Routing = owned
	Served  Routing = served
)

// Fault is an error every format writes in its own shape (see
// Format.Fail).
type Fault = fault

// The faults the fake has every format write.
const (
	FaultNotFound     Fault = notFound     // no such route
	FaultTooLarge     Fault = tooLarge     // the body is over MaxBody
	FaultUnreadable   Fault = unreadable   // the body could not be read
	FaultUnauthorized Fault = unauthorized // wrong or missing credentials
	FaultRateLimited  Fault = rateLimited  // fail-429 and flaky (retry-after is set)
	FaultServerError  Fault = serverError  // fail-500
	FaultOverloaded   Fault = overloaded   // fail-529
)

// Status is the fault's usual HTTP status.
func (f fault) Status() int { return f.status() }

// KeyOK reports whether a presented key passes: it must be non-empty,
// and equal want unless want is empty.
func KeyOK(got, want string) bool { return keyOK(got, want) }

// Bearer is the token of an "Authorization: Bearer <token>" header, or "".
func Bearer(r *http.Request) string { return bearer(r) }

// registered holds the registered formats, read without a lock by every
// request; Register replaces the slice.
var (
	registered   atomic.Pointer[[]wireFormat]
	registerLock sync.Mutex
)

// Register adds a wire format to every fake, in this process, as a
// provider module's tests do from an init function or TestMain. It panics
// when the format has no name or the name is taken, as
// caddy.RegisterModule does.
func Register(f Format) {
	registerLock.Lock()
	defer registerLock.Unlock()
	name := f.Name()
	if name == "" || strings.ContainsAny(name, " \t\n") {
		panic("providertest: a registered format needs a name without spaces")
	}
	old := registeredFormats()
	for _, g := range append(formats[:len(formats):len(formats)], old...) {
		if g.name() == name {
			panic("providertest: a format named " + name + " is already registered")
		}
	}
	next := append(old[:len(old):len(old)], registeredFormat{f})
	registered.Store(&next)
}

// registeredFormats is the registered formats, in the order of
// registration.
func registeredFormats() []wireFormat {
	if p := registered.Load(); p != nil {
		return *p
	}
	return nil
}

// registeredFormat is a registered Format as a row of the table.
type registeredFormat struct{ f Format }

func (r registeredFormat) name() string                             { return r.f.Name() }
func (r registeredFormat) route(req *http.Request) routing          { return r.f.Route(req) }
func (r registeredFormat) model(req *http.Request, b []byte) string { return r.f.Model(req, b) }
func (r registeredFormat) serve(c *call)                            { r.f.Serve(&Call{c: c}) }

func (r registeredFormat) authorized(req *http.Request, want string) bool {
	return r.f.Authorized(req, want)
}

func (r registeredFormat) fail(w http.ResponseWriter, req *http.Request, f fault) {
	r.f.Fail(w, req, f)
}

// headers sets what the format's Headers method sets, when it has one:
// a request id, say.
func (r registeredFormat) headers(h http.Header, id string) {
	if hf, ok := r.f.(interface {
		Headers(h http.Header, id string)
	}); ok {
		hf.Headers(h, id)
	}
}

// Call is one request a registered format serves.
type Call struct{ c *call }

// Request is the request.
func (c *Call) Request() *http.Request { return c.c.r }

// Writer is where the answer goes.
func (c *Call) Writer() http.ResponseWriter { return c.c.w }

// Body is the request's body, read whole.
func (c *Call) Body() []byte { return c.c.body }

// Model is the model the request names (Format.Model).
func (c *Call) Model() string { return c.c.model }

// Key is the key the fake was configured with for the format
// (Options.Keys under its name), "" meaning any: a format whose
// credential signs the request checks the signature with it in Serve,
// where the body is read.
func (c *Call) Key() string { return c.c.s.opts.key(c.c.f) }

// ID is the request's sequence number in the fake, for ids in the answer.
func (c *Call) ID() string { return c.c.id }

// Scripted answers the failures the model name selects (fail-429,
// fail-500, fail-529, fail-html, slow-<N>ms; see the package doc) and
// reports whether it did: Serve returns then.
func (c *Call) Scripted() bool { return c.c.scripted() }

// AfterFirstWord runs what a stream's model name scripts after its first
// content event and reports whether the stream ends there: gated waits
// for Release, midstream-error sends errEvent (a complete event in the
// stream's framing) and ends, cutoff ends.
func (c *Call) AfterFirstWord(errEvent []byte) bool { return c.c.afterFirstWord(errEvent) }

// Send writes b to the answer and flushes it to the client.
func (c *Call) Send(b []byte) { c.c.send(b) }

// WriteJSON answers with status and the JSON body b.
func (c *Call) WriteJSON(status int, b []byte) { writeJSON(c.c.w, status, b) }

// Fail writes a fault in the format's shape, as the fake does (a rate
// limit says retry after a second).
func (c *Call) Fail(f Fault) { c.c.fail(f) }

// Reply is what the fake model answers a conversation, as in every
// format (see the package doc): "echo: <last user text>", cut to
// maxTokens words when maxTokens is above 0, the prompt counted over the
// texts of every message of prompt (Options.PromptTokens, else in words)
// and the answer in words.
func (c *Call) Reply(userText string, prompt []string, maxTokens int64) Reply {
	n := 0
	for _, p := range prompt {
		n += c.c.s.promptTokens(p)
	}
	a := decide(userText, "", false, true, nil, "", false, maxTokens, n)
	return Reply{Words: a.words, PromptTokens: a.promptTokens, CompletionTokens: a.completionTokens(), Truncated: a.truncated}
}

// Reply is the fake model's answer (see Call.Reply).
type Reply struct {
	// Words are the answer's words; streams send them one an event, each
	// but the first with its leading space.
	Words []string

	PromptTokens, CompletionTokens int

	// Truncated says the answer was cut to maxTokens words.
	Truncated bool
}

// Text is the whole answer.
func (r Reply) Text() string { return strings.Join(r.Words, " ") }

// Chunk is the i-th word as a stream sends it: words after the first
// keep their leading space.
func (r Reply) Chunk(i int) string {
	if i == 0 {
		return r.Words[0]
	}
	return " " + r.Words[i]
}

package providerkit

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
)

// ChatSuite is what RunChat checks a chat translator with: the translator,
// and what its provider answers, as the provider's API sends it.
type ChatSuite struct {
	// Chat is the translator under test.
	Chat providers.Chat

	// Model is the provider's own name of a model it serves, as the
	// gateway passes it to ChatRequest.
	Model string

	// Answer is a successful answer of the provider to a chat request:
	// its whole body.
	Answer []byte

	// Stream is the same answer streamed: the provider's whole streamed
	// body, in the framing of its stream requests (the Framing of the
	// Request that ChatRequest makes of a request with "stream": true;
	// nil there means server-sent events).
	Stream []byte

	// Usage is the usage Answer reports, in the unified counts (Total
	// included): the gateway meters it, so it is checked as numbers in
	// the answer and at the end of the stream, and as data, which is
	// what the gateway reads: the Used that ChatResponse returns and
	// that the stream translator reports (StreamTranslator.Usage).
	Usage Usage

	// Errors are failed answers of the provider and the unified errors
	// they map to. Besides these, every translator maps a few answers
	// every provider may give (an HTML page from a proxy, an empty body,
	// a rate limit) as the gateway needs them mapped (see RunChat).
	Errors []ErrorCase

	// Requests are unified chat requests, by name, the translator must
	// take beside the standard ones (see StandardRequests): features of
	// the provider's own, say.
	Requests map[string]string

	// Refuses names the standard requests the provider cannot express
	// (see StandardRequests): the translator refuses each with a 4xx
	// *providers.Error that names the parameter. A standard request not
	// named here must translate.
	Refuses []string
}

// ErrorCase is a failed answer of a provider and the unified error it
// maps to.
type ErrorCase struct {
	Name   string
	Status int
	Header http.Header
	Body   string

	// Want is the error wanted: its Status, Type and Code are compared,
	// and its Message when it is not empty (a mapped error always has
	// one).
	Want providers.Error
}

// StandardRequests are the unified chat requests RunChat translates, by
// name: valid requests a client's SDK sends. Those marked basic every
// provider type takes; a provider may refuse the others, saying so in
// ChatSuite.Refuses.
var StandardRequests = []StandardRequest{
	{"user", true, `{"model":"m","messages":[{"role":"user","content":"Hello there"}]}`},
	{"system and turns", true, `{"model":"m","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello."},{"role":"user","content":"How are you?"}]}`},
	{"content parts", true, `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"first part"},{"type":"text","text":"second part"}]}]}`},
	{"sampling", true, `{"model":"m","messages":[{"role":"user","content":"Hi"}],"temperature":0.2,"top_p":0.9,"max_completion_tokens":64,"stop":["\n\n"]}`},
	{"stream", true, `{"model":"m","messages":[{"role":"user","content":"Hi"}],"stream":true}`},
	{"stream with usage", true, `{"model":"m","messages":[{"role":"user","content":"Hi"}],"stream":true,"stream_options":{"include_usage":true}}`},
	{"odd text", true, `{"model":"m","messages":[{"role":"user","content":"quotes \" backslash \\ tab \t newline \n nul \u0000 emoji 🦊 rtl \u202e end"}]}`},
	{"empty text", true, `{"model":"m","messages":[{"role":"user","content":""}]}`},
	{"tools", false, `{"model":"m","messages":[{"role":"user","content":"Weather in Paris?"}],"tools":[{"type":"function","function":{"name":"get_weather","description":"Current weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}],"tool_choice":"auto"}`},
	{"tool results", false, `{"model":"m","messages":[{"role":"user","content":"Weather in Paris?"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},{"role":"tool","tool_call_id":"call_1","content":"14 degrees, rain"}],"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]}`},
	{"image", false, `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"What is this?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}}]}]}`},
	{"json output", false, `{"model":"m","messages":[{"role":"user","content":"A city as JSON"}],"response_format":{"type":"json_schema","json_schema":{"name":"city","schema":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}}}}`},
}

// StandardRequest is one of StandardRequests.
type StandardRequest struct {
	Name  string
	Basic bool // every provider type takes it
	Body  string
}

// RunChat runs the standard checks of a chat translator, each a subtest:
//
//   - requests: every standard request (StandardRequests) and every one of
//     s.Requests translates into the provider's request — a relative path,
//     a query without "?", a body of valid JSON — without writing into the
//     client's body; those in s.Refuses get a 4xx *providers.Error naming
//     the parameter instead;
//   - answer: s.Answer translates into a chat.completion the OpenAI SDK
//     reads, with an id, a model, an assistant message and a finish
//     reason, and s.Usage as numbers (see CheckUsage), which ChatResponse
//     also returns as data (see CheckAnswerUsage);
//   - stream: s.Stream, cut by the stream request's framing, translates
//     into a well-formed unified stream (CheckUnifiedStream), the same
//     whatever pieces its bytes arrive in, that says what the answer says
//     (content, tool calls, finish reason; usage with include_usage), and
//     the translator reports s.Usage as data whether the client asked for
//     usage or not (see CheckStreamUsage);
//   - errors: every s.Errors case maps as it wants, and so do answers every
//     provider may give: an HTML page (its text never reaches the error),
//     an empty body, a 429 (a rate limit stays one, so that the gateway
//     retries and falls back) and a 503 (a server error stays one);
//   - odd input: answers and streams that are cut off, empty, not JSON,
//     too deep, or repeated get an error or valid JSON, never a panic.
func RunChat(t *testing.T, s ChatSuite) {
	t.Helper()
	if s.Chat == nil || s.Model == "" || len(s.Answer) == 0 || len(s.Stream) == 0 {
		t.Fatal("providerkit: a ChatSuite needs Chat, Model, Answer and Stream")
	}
	t.Run("requests", func(t *testing.T) { s.checkRequests(t) })
	t.Run("answer", func(t *testing.T) {
		out, used := s.answer(t)
		CheckCompletion(t, out)
		CheckUsage(t, gjson.GetBytes(out, "usage").Raw, s.Usage)
		CheckAnswerUsage(t, out, used)
	})
	t.Run("stream", func(t *testing.T) {
		for _, include := range []bool{false, true} {
			name := map[bool]string{false: "without usage", true: "with usage"}[include]
			t.Run(name, func(t *testing.T) { s.checkStream(t, include) })
		}
		t.Run("usage as data", func(t *testing.T) { s.checkStreamUsage(t) })
	})
	t.Run("errors", func(t *testing.T) { s.checkErrors(t) })
	t.Run("odd input", func(t *testing.T) { s.checkOddInput(t) })
}

// answer is the translated Answer and the usage ChatResponse returned
// with it.
func (s ChatSuite) answer(t testing.TB) ([]byte, providers.Used) {
	t.Helper()
	out, used, err := s.Chat.ChatResponse(s.Answer)
	if err != nil {
		t.Fatalf("ChatResponse: %v\nanswer: %s", err, s.Answer)
	}
	return out, used
}

// checkStreamUsage checks that the stream translator reports the usage of
// s.Stream as data, and that it is s.Usage. A provider whose events pass
// through untranslated reports none: the gateway's relay reads them.
func (s ChatSuite) checkStreamUsage(t *testing.T) {
	newStream := func(opts providers.StreamOptions) providers.StreamTranslator { return s.Chat.ChatStream(opts) }
	if newStream(providers.StreamOptions{Model: s.Model}) == nil {
		t.Skip("the provider's stream passes through")
	}
	used := CheckStreamUsage(t, newStream, s.streamFraming(t), providers.StreamOptions{Model: s.Model}, s.Stream)
	got := Usage{Prompt: used.Prompt, Completion: used.Completion, Total: used.Total(), Cached: used.Cached, Reasoning: used.Reasoning}
	if !used.Known || got != s.Usage {
		t.Errorf("the stream translator reports the usage %+v, want %+v", used, s.Usage)
	}
}

func (s ChatSuite) checkRequests(t *testing.T) {
	for _, r := range StandardRequests {
		t.Run(r.Name, func(t *testing.T) {
			refused := slices.Contains(s.Refuses, r.Name)
			if r.Basic && refused {
				t.Fatalf("%q is a request every provider type takes; it cannot be refused", r.Name)
			}
			CheckRequest(t, s.Chat, r.Body, s.Model, refused)
		})
	}
	for name, body := range s.Requests {
		t.Run(name, func(t *testing.T) { CheckRequest(t, s.Chat, body, s.Model, false) })
	}
	for _, name := range s.Refuses {
		if !slices.ContainsFunc(StandardRequests, func(r StandardRequest) bool { return r.Name == name }) {
			t.Errorf("Refuses names %q, which is not a standard request", name)
		}
	}
}

// CheckRequest checks that c translates body, a unified chat request
// providers.ValidateChat accepts, for model: into a request with a path
// starting with "/", a query without "?" and a body of valid JSON (or an
// Upload), leaving body as it was. With refused, c must instead refuse it
// with a 4xx *providers.Error that names the parameter and says why. It
// returns the request.
func CheckRequest(t testing.TB, c providers.Chat, body, model string, refused bool) providers.Request {
	t.Helper()
	if _, err := providers.ValidateChat([]byte(body)); err != nil {
		t.Fatalf("the request does not pass ValidateChat: %v\n%s", err, body)
	}
	in := []byte(body)
	req, err := c.ChatRequest(in, model)
	if string(in) != body {
		t.Errorf("ChatRequest wrote into the client's body:\n%s", in)
	}
	if refused {
		var e *providers.Error
		if !errors.As(err, &e) || e.Status < 400 || e.Status >= 500 || e.Param == "" || e.Message == "" {
			t.Errorf("ChatRequest = %v, want a 4xx *providers.Error naming the parameter it refuses", err)
		}
		return req
	}
	if err != nil {
		t.Fatalf("ChatRequest: %v\nrequest: %s", err, body)
	}
	switch {
	case !strings.HasPrefix(req.Path, "/"):
		t.Errorf("path %q does not start with /", req.Path)
	case strings.HasPrefix(req.Query, "?"):
		t.Errorf("query %q starts with ?", req.Query)
	case req.Upload == nil && !json.Valid(req.Body):
		t.Errorf("the provider's body is not valid JSON:\n%s", req.Body)
	}
	return req
}

// CheckCompletion checks that out is a unified chat.completion a client
// reads: the OpenAI SDK decodes it, and it has an id, a model, a created
// time, and choices each with an assistant message and a finish reason
// the API knows.
func CheckCompletion(t testing.TB, out []byte) {
	t.Helper()
	AnswerOf(t, out) // the SDK decodes it
	root := gjson.ParseBytes(out)
	switch {
	case root.Get("object").Str != "chat.completion":
		t.Errorf(`object %s, want "chat.completion"`, root.Get("object").Raw)
	case root.Get("id").Str == "" || root.Get("model").Str == "" || root.Get("created").Int() <= 0:
		t.Errorf("id %s, model %s, created %s: each must be set", root.Get("id").Raw, root.Get("model").Raw, root.Get("created").Raw)
	case root.Get("choices.#").Int() == 0:
		t.Errorf("no choices")
	}
	root.Get("choices").ForEach(func(_, ch gjson.Result) bool {
		if ch.Get("message.role").Str != "assistant" {
			t.Errorf("choice %s: role %s, want assistant", ch.Get("index").Raw, ch.Get("message.role").Raw)
		}
		if f := ch.Get("finish_reason").Str; !slices.Contains(finishReasons, f) {
			t.Errorf("choice %s: finish_reason %q, want one of %q", ch.Get("index").Raw, f, finishReasons)
		}
		return true
	})
}

// finishReasons are the finish reasons of OpenAI's API.
var finishReasons = []string{"stop", "length", "tool_calls", "content_filter", "function_call"}

// CheckUsage checks that usage, a unified usage object (raw JSON), holds
// the counts want as data: integers, not strings or fractions, with
// total_tokens the sum of prompt_tokens and completion_tokens, cached
// tokens (prompt_tokens_details.cached_tokens) no more than the prompt's
// and reasoning tokens (completion_tokens_details.reasoning_tokens) no
// more than the completion's.
func CheckUsage(t testing.TB, usage string, want Usage) {
	t.Helper()
	u := gjson.Parse(usage)
	if !u.IsObject() {
		t.Fatalf("usage %q is not an object", usage)
	}
	count := func(path string, required bool) int64 {
		v := u.Get(path)
		if !v.Exists() && !required {
			return 0
		}
		if v.Type != gjson.Number || strings.ContainsAny(v.Raw, ".eE-") {
			t.Errorf("usage.%s is %s, want a non-negative integer", path, v.Raw)
		}
		return v.Int()
	}
	got := Usage{
		Prompt: count("prompt_tokens", true), Completion: count("completion_tokens", true), Total: count("total_tokens", true),
		Cached: count("prompt_tokens_details.cached_tokens", false), Reasoning: count("completion_tokens_details.reasoning_tokens", false),
	}
	switch {
	case got.Total != got.Prompt+got.Completion:
		t.Errorf("usage %s: total_tokens is not prompt_tokens + completion_tokens", usage)
	case got.Cached > got.Prompt || got.Reasoning > got.Completion:
		t.Errorf("usage %s: more cached or reasoning tokens than the prompt's or completion's", usage)
	case got != want:
		t.Errorf("usage %+v, want %+v", got, want)
	}
}

// streamFraming is the framing of the provider's stream requests.
func (s ChatSuite) streamFraming(t testing.TB) providers.Framing {
	t.Helper()
	req, err := s.Chat.ChatRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"Hi"}],"stream":true,"stream_options":{"include_usage":true}}`), s.Model)
	if err != nil {
		t.Fatalf("ChatRequest of a stream: %v", err)
	}
	return req.Framing
}

func (s ChatSuite) checkStream(t *testing.T, include bool) {
	opts := providers.StreamOptions{IncludeUsage: include, Model: s.Model}
	framing := s.streamFraming(t)
	tr := s.Chat.ChatStream(opts)
	var out []byte
	if tr == nil {
		// The provider's events are unified chunks already.
		out = s.Stream
	} else {
		var err error
		if out, err = Translate(tr, framing, s.Stream, nil); err != nil {
			t.Fatalf("the stream: %v\nunified so far:\n%s", err, out)
		}
		rng := rand.New(rand.NewPCG(7, uint64(len(s.Stream))))
		for range 20 {
			again, err := Translate(s.Chat.ChatStream(opts), framing, s.Stream, rng)
			if err != nil || !bytes.Equal(again, out) {
				t.Fatalf("the stream in pieces of random sizes gave another output (%v):\n%s\nwant:\n%s", err, again, out)
			}
		}
	}
	if !include && tr == nil {
		// A passed-through stream carries usage as the provider sends it.
		CheckStreamShape(t, out)
	} else {
		CheckUnifiedStream(t, out, opts)
	}
	acc := Accumulate(t, out)
	if !acc.Done {
		t.Fatalf("the stream did not end with [DONE]:\n%s", out)
	}
	answer, _ := s.answer(t)
	streamed, whole := acc.Answer(), AnswerOf(t, answer)
	// A stream's id and time are its own: providers that send none in
	// their events get new ones.
	streamed.ID, streamed.Created, whole.ID, whole.Created = "", 0, "", 0
	if !include {
		whole.Usage = Usage{}
		if tr == nil {
			streamed.Usage = Usage{}
		}
	}
	if msg := diffAnswers(streamed, whole); msg != "" {
		t.Errorf("the stream and the answer differ: %s\nstream:\n%s", msg, out)
	}
	if include {
		data := Data(out)
		if len(data) < 2 {
			t.Fatalf("a stream of %d events", len(data))
		}
		CheckUsage(t, gjson.GetBytes(data[len(data)-2], "usage").Raw, s.Usage)
	}
}

// commonErrors are failed answers any provider may give, and what the
// gateway needs of their mapping: a rate limit stays a 429 and a server
// error a 5xx (the gateway retries and falls back on them), and a body
// that is not JSON never reaches the client.
var commonErrors = []struct {
	name   string
	status int
	header http.Header
	body   string
	want   func(status int) bool
}{
	{"an HTML page", http.StatusBadGateway, http.Header{"Content-Type": {"text/html"}},
		"<html><body><h1>502 Bad Gateway</h1><p>secret-internal-host</p></body></html>", is5xx},
	{"an empty body", http.StatusInternalServerError, nil, "", is5xx},
	{"a rate limit", http.StatusTooManyRequests, http.Header{"Retry-After": {"3"}, "Content-Type": {"text/plain"}}, "slow down",
		func(s int) bool { return s == http.StatusTooManyRequests }},
	{"unavailable", http.StatusServiceUnavailable, http.Header{"Content-Type": {"text/plain"}}, "unavailable", is5xx},
	{"JSON of another shape", http.StatusBadRequest, http.Header{"Content-Type": {"application/json"}}, `[1,{"x":null}]`,
		func(s int) bool { return s >= 400 && s < 500 }},
}

func is5xx(s int) bool { return s >= 500 && s < 600 }

func (s ChatSuite) checkErrors(t *testing.T) {
	for _, c := range s.Errors {
		t.Run(c.Name, func(t *testing.T) {
			e := CheckError(t, s.Chat, c.Status, c.Header, []byte(c.Body))
			w := c.Want
			if e.Status != w.Status || e.Type != w.Type || e.Code != w.Code || (w.Message != "" && e.Message != w.Message) {
				t.Errorf("mapped to %d %s, want %d %s", e.Status, e.JSON(), w.Status, w.JSON())
			}
		})
	}
	for _, c := range commonErrors {
		t.Run(c.name, func(t *testing.T) {
			e := CheckError(t, s.Chat, c.status, c.header, []byte(c.body))
			if !c.want(e.Status) {
				t.Errorf("a %d (%s) mapped to status %d", c.status, c.name, e.Status)
			}
		})
	}
}

// CheckError checks that c maps a failed answer into a unified error:
// not nil, with a status of 400 or more, a type and a message, its body
// in OpenAI's error shape, and nothing of a body that is not JSON (an
// HTML page, say) in it. It returns the error.
func CheckError(t testing.TB, c providers.Chat, status int, header http.Header, body []byte) *providers.Error {
	t.Helper()
	if header == nil {
		header = http.Header{}
	}
	e := c.Error(status, header, body)
	if e == nil {
		t.Fatalf("Error(%d, %q) = nil", status, body)
	}
	j := gjson.ParseBytes(e.JSON())
	switch {
	case e.Status < 400 || e.Status > 599:
		t.Errorf("Error(%d, %q): status %d", status, body, e.Status)
	case e.Type == "" || e.Message == "":
		t.Errorf("Error(%d, %q) = %s: type and message must be set", status, body, e.JSON())
	case !j.Get("error.message").Exists() || !j.Get("error.param").Exists() || !j.Get("error.code").Exists():
		t.Errorf("Error(%d, %q) = %s: not OpenAI's error shape", status, body, e.JSON())
	}
	if !json.Valid(body) && len(body) > 8 && strings.Contains(e.Message, string(body[:8])) {
		t.Errorf("Error(%d, %q) copies a body that is not JSON: %q", status, body, e.Message)
	}
	if bytes.Contains(body, []byte("secret-internal-host")) && strings.Contains(e.Message, "secret-internal-host") {
		t.Errorf("Error(%d, %q) copies the page: %q", status, body, e.Message)
	}
	return e
}

// oddAnswers are answer bodies no provider should send: each gets an
// error or valid JSON.
func (s ChatSuite) oddAnswers() map[string][]byte {
	deep := strings.Repeat(`{"a":[`, 20000) + strings.Repeat(`]}`, 20000)
	return map[string][]byte{
		"empty":                  nil,
		"null":                   []byte("null"),
		"an array":               []byte("[]"),
		"an empty object":        []byte("{}"),
		"not JSON":               []byte("<html>oops</html>"),
		"too deep":               []byte(deep),
		"invalid UTF-8":          append(append([]byte(nil), s.Answer...), 0xff, 0xfe),
		"cut off":                s.Answer[:len(s.Answer)/2],
		"twice":                  append(append([]byte(nil), s.Answer...), s.Answer...),
		"fields null":            nullFields(s.Answer),
		"fields of another type": wrongFields(s.Answer),
	}
}

// nullFields is answer with each of its top-level fields null.
func nullFields(answer []byte) []byte {
	return mapFields(answer, func(gjson.Result) string { return "null" })
}

// wrongFields is answer with each of its top-level fields given a value
// of another JSON type.
func wrongFields(answer []byte) []byte {
	return mapFields(answer, func(v gjson.Result) string {
		switch v.Type {
		case gjson.String:
			return "[1]"
		case gjson.Number:
			return `"7"`
		}
		if v.IsObject() || v.IsArray() {
			return `"x"`
		}
		return "{}"
	})
}

func mapFields(answer []byte, value func(gjson.Result) string) []byte {
	root := gjson.ParseBytes(answer)
	if !root.IsObject() {
		return answer
	}
	out := []byte("{")
	root.ForEach(func(k, v gjson.Result) bool {
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(append(append(out, k.Raw...), ':'), value(v)...)
		return true
	})
	return append(out, '}')
}

func (s ChatSuite) checkOddInput(t *testing.T) {
	for name, body := range s.oddAnswers() {
		t.Run("answer "+name, func(t *testing.T) {
			out, used, err := s.Chat.ChatResponse(body)
			CheckFuzzedBody(t, body, out, err)
			if err == nil {
				CheckAnswerUsage(t, out, used)
			}
		})
	}
	framing := s.streamFraming(t)
	n := len(s.Stream)
	for name, upstream := range map[string][]byte{
		"empty":   nil,
		"cut off": s.Stream[:n/2],
		"twice":   append(append([]byte(nil), s.Stream...), s.Stream...),
		"garbage": []byte("\x00\x01\xff garbage\n\n{]\r\n\r\n"),
		"answer":  s.Answer,
	} {
		t.Run("stream "+name, func(t *testing.T) {
			for _, include := range []bool{false, true} {
				tr := s.Chat.ChatStream(providers.StreamOptions{IncludeUsage: include, Model: s.Model})
				if tr == nil {
					t.Skip("the provider's stream passes through")
				}
				CheckFuzzedStream(t, tr, framing, upstream)
			}
		})
	}
	t.Run("stream cut off ends with an error", func(t *testing.T) {
		tr := s.Chat.ChatStream(providers.StreamOptions{Model: s.Model})
		if tr == nil {
			t.Skip("the provider's stream passes through")
		}
		out, err := Translate(tr, framing, s.Stream[:n/2], nil)
		if err != nil {
			return // the gateway ends the stream with its own error
		}
		data := Data(out)
		if len(data) == 0 || !bytes.HasPrefix(data[len(data)-1], []byte(`{"error":`)) {
			t.Errorf("a stream cut off in the middle did not end with an error event:\n%s", out)
		}
	})
}

// FuzzRequest fuzzes the suite's translator with unified requests, seeded
// with the standard ones and s.Requests: see FuzzChatRequest.
func (s ChatSuite) FuzzRequest(f *testing.F) {
	for _, r := range StandardRequests {
		f.Add([]byte(r.Body))
	}
	for _, body := range s.Requests {
		f.Add([]byte(body))
	}
	FuzzChatRequest(f, func(body []byte) (providers.Request, error) { return s.Chat.ChatRequest(body, s.Model) })
}

// FuzzResponse fuzzes the suite's translator with answers, seeded with
// s.Answer and the odd answers RunChat tries: see FuzzChatResponse.
func (s ChatSuite) FuzzResponse(f *testing.F) {
	f.Add(s.Answer)
	for _, body := range s.oddAnswers() {
		f.Add(body)
	}
	FuzzChatResponse(f, s.Chat.ChatResponse)
}

// FuzzStream fuzzes the suite's stream translator with streams in the
// provider's framing, seeded with s.Stream: see FuzzStream. A provider
// whose events pass through untranslated has nothing to fuzz.
func (s ChatSuite) FuzzStream(f *testing.F) {
	if s.Chat.ChatStream(providers.StreamOptions{}) == nil {
		f.Skip("the provider's stream passes through")
	}
	f.Add(s.Stream, false)
	f.Add(s.Stream, true)
	FuzzStream(f, func(opts providers.StreamOptions) providers.StreamTranslator {
		opts.Model = s.Model
		return s.Chat.ChatStream(opts)
	}, s.streamFraming(f))
}

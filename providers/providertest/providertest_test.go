package providertest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

const (
	oaPath = "/v1/chat/completions"
	anPath = "/v1/messages"
)

var (
	oaAuth = []string{"Authorization", "Bearer ok"}
	anAuth = []string{"X-Api-Key", "ak", "Anthropic-Version", "2023-06-01"}
)

// newFake starts the fake with the keys every test in this package uses.
func newFake(t *testing.T) *Server {
	t.Helper()
	return Start(t, Options{OpenAIKey: "ok", AnthropicKey: "ak"})
}

// authFor is the right credentials for a route of newFake's server.
func authFor(path string) []string {
	if path == anPath {
		return anAuth
	}
	return oaAuth
}

// send makes one request to the fake and reads the whole answer.
func send(t *testing.T, s *Server, method, path, body string, header ...string) (*http.Response, string) {
	t.Helper()
	return Send(t, method, s.URL+path, body, header...)
}

// post is send with POST.
func post(t *testing.T, s *Server, path, body string, header ...string) (*http.Response, string) {
	t.Helper()
	return send(t, s, http.MethodPost, path, body, header...)
}

// answerOf posts body to path, which must answer 200 with a JSON body and
// a request id in idHeader, and returns the answer.
func answerOf(t *testing.T, s *Server, path, body, idHeader string) gjson.Result {
	t.Helper()
	res, got := post(t, s, path, body, authFor(path)...)
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") || !gjson.Valid(got) {
		t.Fatalf("%d %s %s", res.StatusCode, res.Header.Get("Content-Type"), got)
	}
	if res.Header.Get(idHeader) == "" {
		t.Errorf("no %s", idHeader)
	}
	return gjson.Parse(got)
}

// streamed returns body with "stream": true (and the given extra fields).
func streamed(t *testing.T, body string, extra ...any) string {
	t.Helper()
	out, err := sjson.Set(body, "stream", true)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(extra); i += 2 {
		if out, err = sjson.Set(out, extra[i].(string), extra[i+1]); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// sseEvent is one server-sent event: its event: name (if any) and data.
type sseEvent struct{ name, data string }

// readEvent reads the next event from r; ok is false at the end of the
// stream. A trailing event without its blank line still counts.
func readEvent(r *bufio.Reader) (ev sseEvent, ok bool, err error) {
	var data []string
	seen := false
	for {
		line, rerr := r.ReadString('\n')
		if rerr != nil && rerr != io.EOF {
			return ev, false, rerr
		}
		if rerr == io.EOF && line == "" {
			ev.data = strings.Join(data, "\n")
			return ev, seen, nil
		}
		line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
		switch {
		case line == "":
			if seen {
				ev.data = strings.Join(data, "\n")
				return ev, true, nil
			}
		case strings.HasPrefix(line, "event:"):
			ev.name = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
			seen = true
		case strings.HasPrefix(line, "data:"):
			data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
			seen = true
		case strings.HasPrefix(line, ":"):
		default:
			return ev, false, fmt.Errorf("not an SSE line: %q", line)
		}
		if rerr == io.EOF {
			ev.data = strings.Join(data, "\n")
			return ev, seen, nil
		}
	}
}

// parseSSE splits a whole stream into events. Every event must carry data
// that is valid UTF-8, and JSON unless it is OpenAI's [DONE].
func parseSSE(t *testing.T, body string) []sseEvent {
	t.Helper()
	r := bufio.NewReader(strings.NewReader(body))
	var evs []sseEvent
	for {
		ev, ok, err := readEvent(r)
		if err != nil {
			t.Fatalf("%v in %s", err, body)
		}
		if !ok {
			return evs
		}
		checkEventData(t, ev)
		evs = append(evs, ev)
	}
}

func checkEventData(t *testing.T, ev sseEvent) {
	t.Helper()
	if !utf8.ValidString(ev.data) {
		t.Errorf("event data is not valid UTF-8: %q", ev.data)
	}
	if ev.data != "[DONE]" && !json.Valid([]byte(ev.data)) {
		t.Errorf("event data is not JSON: %q", ev.data)
	}
}

// liveStream reads a stream as it arrives.
type liveStream struct {
	events chan sseEvent // closed at the end of the stream
}

// openStream starts a streaming request and delivers its events as they
// arrive. The response must be a 200 event stream.
func openStream(t *testing.T, s *Server, path, body string, header ...string) *liveStream {
	t.Helper()
	res, err := http.DefaultClient.Do(NewRequest(t, http.MethodPost, s.URL+path, body, header...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("stream: %d %s %s", res.StatusCode, res.Header.Get("Content-Type"), b)
	}
	ls := &liveStream{events: make(chan sseEvent, 64)}
	go func() {
		defer close(ls.events)
		r := bufio.NewReader(res.Body)
		for {
			ev, ok, err := readEvent(r)
			if err != nil || !ok {
				return
			}
			ls.events <- ev
		}
	}()
	return ls
}

// next returns the next event, or ok false at the end of the stream; it
// fails the test after d.
func (ls *liveStream) next(t *testing.T, d time.Duration) (sseEvent, bool) {
	t.Helper()
	select {
	case ev, ok := <-ls.events:
		return ev, ok
	case <-time.After(d):
		t.Fatalf("no event within %v", d)
		return sseEvent{}, false
	}
}

// rest reads the stream to its end.
func (ls *liveStream) rest(t *testing.T) []sseEvent {
	t.Helper()
	var evs []sseEvent
	for {
		ev, ok := ls.next(t, 5*time.Second)
		if !ok {
			return evs
		}
		checkEventData(t, ev)
		evs = append(evs, ev)
	}
}

// isContent reports whether an event of either format carries answer
// content: text or tool-call arguments.
func isContent(ev sseEvent) bool {
	d := gjson.Parse(ev.data)
	return d.Get("type").Str == "content_block_delta" ||
		d.Get("choices.0.delta.content").Str != "" ||
		d.Get("choices.0.delta.tool_calls.0.function.arguments").Str != ""
}

// isEnd reports whether an event finishes a stream of either format.
func isEnd(ev sseEvent) bool {
	return ev.data == "[DONE]" || ev.name == "message_stop" || ev.name == "message_delta" ||
		gjson.Get(ev.data, "choices.0.finish_reason").Str != ""
}

// checkOpenAIError checks an OpenAI error body (A.2): all four keys, a
// message and the given type.
func checkOpenAIError(t *testing.T, body, typ string) {
	t.Helper()
	e := gjson.Get(body, "error")
	if !gjson.Valid(body) || !e.IsObject() || e.Get("message").Str == "" || e.Get("type").Str != typ ||
		!e.Get("param").Exists() || !e.Get("code").Exists() {
		t.Errorf("not an OpenAI %s error: %s", typ, body)
	}
}

// checkAnthropicError checks an Anthropic error body (C.1).
func checkAnthropicError(t *testing.T, body, typ string) {
	t.Helper()
	if !gjson.Valid(body) || gjson.Get(body, "type").Str != "error" || gjson.Get(body, "error.type").Str != typ ||
		gjson.Get(body, "error.message").Str == "" {
		t.Errorf("not an Anthropic %s error: %s", typ, body)
	}
}

func TestRequestsRecorded(t *testing.T) {
	s := newFake(t)
	bodies := []struct{ method, path, body, model string }{
		{http.MethodPost, oaPath, `{"model":"gpt-rec","messages":[{"role":"user","content":"first"}]}`, "gpt-rec"},
		{http.MethodPost, anPath, `{"model":"claude-rec","max_tokens":9,"messages":[{"role":"user","content":"second"}]}`, "claude-rec"},
		{http.MethodGet, "/v1/models", ``, ""},
		{http.MethodPost, oaPath, `not json`, ""},
	}
	for _, b := range bodies {
		send(t, s, b.method, b.path, b.body, append([]string{"X-Trace", "t-" + b.model}, authFor(b.path)...)...)
	}
	got := s.Requests()
	if len(got) != len(bodies) {
		t.Fatalf("%d requests recorded, want %d: %+v", len(got), len(bodies), got)
	}
	for i, b := range bodies {
		r := got[i]
		if r.Method != b.method || r.Path != b.path || string(r.Body) != b.body || r.Model != b.model {
			t.Errorf("request %d: %s %s model %q body %q, want %s %s model %q body %q",
				i, r.Method, r.Path, r.Model, r.Body, b.method, b.path, b.model, b.body)
		}
		if r.Header.Get("X-Trace") != "t-"+b.model || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("request %d: header %v", i, r.Header)
		}
	}
	// Requests returns a copy.
	got[0].Model = "changed"
	if s.Requests()[0].Model != "gpt-rec" {
		t.Error("Requests shares its slice with the server")
	}

	quiet := Start(t, Options{NoRecord: true})
	post(t, quiet, oaPath, bodies[0].body, "Authorization", "Bearer k")
	post(t, quiet, anPath, bodies[1].body, "X-Api-Key", "k", "Anthropic-Version", "2023-06-01")
	if n := len(quiet.Requests()); n != 0 {
		t.Errorf("NoRecord recorded %d requests", n)
	}
}

// TestConcurrentRequests runs requests side by side, for the race detector.
func TestConcurrentRequests(t *testing.T) {
	s := newFake(t)
	const n = 24
	var wg sync.WaitGroup
	errs := make(chan string, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			path, body := oaPath, fmt.Sprintf(`{"model":"m","stream":%t,"messages":[{"role":"user","content":"n%d"}]}`, i%2 == 0, i)
			if i%3 == 0 {
				path, body = anPath, fmt.Sprintf(`{"model":"m","max_tokens":5,"stream":%t,"messages":[{"role":"user","content":"n%d"}]}`, i%2 == 0, i)
			}
			res, err := http.DefaultClient.Do(NewRequest(t, http.MethodPost, s.URL+path, body, authFor(path)...))
			if err != nil {
				errs <- err.Error()
				return
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != 200 || !strings.Contains(string(b), fmt.Sprintf("n%d", i)) {
				errs <- fmt.Sprintf("%d: %d %s", i, res.StatusCode, b)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if got := len(s.Requests()); got != n {
		t.Errorf("%d requests recorded, want %d", got, n)
	}
}

// TestUnknownPath checks the 404s: Anthropic's error shape under
// /v1/messages, OpenAI's everywhere else.
func TestUnknownPath(t *testing.T) {
	s := newFake(t)
	for _, tc := range []struct {
		method, path string
		anthropic    bool
	}{
		{http.MethodPost, "/v1/unknown", false},
		{http.MethodPost, "/v2/chat/completions", false},
		{http.MethodGet, oaPath, false},
		{http.MethodGet, "/", false},
		{http.MethodGet, anPath, true},
		{http.MethodPost, anPath + "/other", true},
		{http.MethodGet, anPath + "/batches/msgbatch_1/other", true},
		{http.MethodPut, anPath + "/batches", true},
		{http.MethodPost, anPath + "x", false},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			res, body := send(t, s, tc.method, tc.path, `{}`, oaAuth...)
			if res.StatusCode != http.StatusNotFound || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
				t.Fatalf("%d %s %s", res.StatusCode, res.Header.Get("Content-Type"), body)
			}
			if tc.anthropic {
				checkAnthropicError(t, body, "not_found_error")
				if rid := res.Header.Get("Request-Id"); rid == "" || gjson.Get(body, "request_id").Str != rid {
					t.Errorf("request-id %q, body %s", rid, body)
				}
				return
			}
			checkOpenAIError(t, body, "invalid_request_error")
			if gjson.Get(body, "error.code").Str != "unknown_url" || res.Header.Get("X-Request-Id") == "" {
				t.Errorf("%s %s", res.Header, body)
			}
		})
	}
}

func TestAuth(t *testing.T) {
	s := newFake(t)
	oaBody := `{"model":"gpt","messages":[{"role":"user","content":"hi"}]}`
	anBody := `{"model":"claude","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`
	const ver = "2023-06-01"
	for _, tc := range []struct {
		name, path string
		header     []string
	}{
		{"openai wrong key", oaPath, []string{"Authorization", "Bearer nope"}},
		{"openai no header", oaPath, nil},
		{"openai no scheme", oaPath, []string{"Authorization", "ok"}},
		{"openai basic", oaPath, []string{"Authorization", "Basic ok"}},
		{"openai empty bearer", oaPath, []string{"Authorization", "Bearer "}},
		{"openai x-api-key", oaPath, []string{"X-Api-Key", "ok"}},
		{"openai anthropic key", oaPath, []string{"Authorization", "Bearer ak"}},
		{"anthropic wrong key", anPath, []string{"X-Api-Key", "nope", "Anthropic-Version", ver}},
		{"anthropic no key", anPath, []string{"Anthropic-Version", ver}},
		{"anthropic openai key", anPath, []string{"X-Api-Key", "ok", "Anthropic-Version", ver}},
		{"anthropic bearer only", anPath, []string{"Authorization", "Bearer ak", "Anthropic-Version", ver}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := oaBody
			if tc.path == anPath {
				body = anBody
			}
			res, got := post(t, s, tc.path, body, tc.header...)
			if res.StatusCode != http.StatusUnauthorized {
				t.Fatalf("status %d %s, want 401", res.StatusCode, got)
			}
			if tc.path == oaPath {
				checkOpenAIError(t, got, "invalid_request_error")
				if gjson.Get(got, "error.code").Str != "invalid_api_key" {
					t.Errorf("code %s, want invalid_api_key", got)
				}
			} else {
				checkAnthropicError(t, got, "authentication_error")
			}
		})
	}

	t.Run("keyless accepts any key", func(t *testing.T) {
		open := Start(t, Options{})
		if res, got := post(t, open, oaPath, oaBody, "Authorization", "Bearer whatever"); res.StatusCode != 200 {
			t.Errorf("openai: %d %s", res.StatusCode, got)
		}
		if res, got := post(t, open, anPath, anBody, "X-Api-Key", "whatever", "Anthropic-Version", ver); res.StatusCode != 200 {
			t.Errorf("anthropic: %d %s", res.StatusCode, got)
		}
		// A key is still needed.
		if res, got := post(t, open, oaPath, oaBody); res.StatusCode != 401 || gjson.Get(got, "error.code").Str != "invalid_api_key" {
			t.Errorf("openai without a key: %d %s", res.StatusCode, got)
		}
		if res, got := post(t, open, anPath, anBody, "Anthropic-Version", ver); res.StatusCode != 401 {
			t.Errorf("anthropic without a key: %d %s", res.StatusCode, got)
		}
	})

	t.Run("right keys", func(t *testing.T) {
		if res, got := post(t, s, oaPath, oaBody, oaAuth...); res.StatusCode != 200 {
			t.Errorf("openai: %d %s", res.StatusCode, got)
		}
		if res, got := post(t, s, anPath, anBody, anAuth...); res.StatusCode != 200 {
			t.Errorf("anthropic: %d %s", res.StatusCode, got)
		}
	})
}

// TestKeys checks Options.Keys: an entry overrides OpenAIKey or
// AnthropicKey for its format, the formats without one keep those, and an
// empty entry accepts any key.
func TestKeys(t *testing.T) {
	s := Start(t, Options{OpenAIKey: "oa", AnthropicKey: "an", Keys: map[string]string{"openai": "oa2", "cohere": "co", "jina": ""}})
	for _, tc := range []struct {
		format, key string
		status      int
	}{
		{"openai", "oa2", 200}, {"openai", "oa", 401},
		{"anthropic", "an", 200}, {"anthropic", "oa", 401},
		{"cohere", "co", 200}, {"cohere", "oa", 401},
		{"voyage", "oa", 200}, {"voyage", "co", 401},
		{"jina", "anything", 200},
	} {
		t.Run(tc.format+" "+tc.key, func(t *testing.T) {
			path, body, header := formatExamples[tc.format].request("m")
			header = append([]string(nil), header...)
			for i := 0; i+1 < len(header); i += 2 {
				switch header[i] {
				case "Authorization":
					header[i+1] = "Bearer " + tc.key
				case "X-Api-Key":
					header[i+1] = tc.key
				}
			}
			if res, got := post(t, s, path, body, header...); res.StatusCode != tc.status {
				t.Errorf("%d %s, want %d", res.StatusCode, got, tc.status)
			}
		})
	}
}

// TestLog checks Options.Log: one call for each request once it is
// answered, with what it was and the status, and without the header and
// body when nothing is recorded.
func TestLog(t *testing.T) {
	type entry struct {
		rec    Recorded
		status int
	}
	logged := make(chan entry, 16)
	s := Start(t, Options{NoRecord: true, Log: func(r Recorded, status int) { logged <- entry{r, status} }})
	for _, tc := range []struct {
		method, path, body, model, format string
		header                            []string
		status                            int
	}{
		{"POST", oaPath, `{"model":"gpt","messages":[{"role":"user","content":"hi"}]}`, "gpt", "openai", oaAuth, 200},
		{"POST", anPath, `{"model":"claude","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, "claude", "anthropic", anAuth, 200},
		{"POST", oaPath, `{"model":"gpt","messages":[]}`, "gpt", "openai", nil, 401},
		{"GET", "/v1/models", ``, "", "openai", oaAuth, 404},
		{"POST", "/cohere/v2/rerank", `{"model":"fail-500","query":"q","documents":["d"]}`, "fail-500", "cohere", oaAuth, 500},
	} {
		start := time.Now()
		send(t, s, tc.method, tc.path, tc.body, tc.header...)
		select {
		case e := <-logged:
			r := e.rec
			if r.Method != tc.method || r.Path != tc.path || r.Model != tc.model || r.Format != tc.format || e.status != tc.status {
				t.Errorf("logged %s %s model %q format %q status %d, want %s %s %q %q %d",
					r.Method, r.Path, r.Model, r.Format, e.status, tc.method, tc.path, tc.model, tc.format, tc.status)
			}
			if r.At.Before(start) || r.Header != nil || r.Body != nil {
				t.Errorf("logged at %v (sent at %v), header %v, body %q", r.At, start, r.Header, r.Body)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s %s was not logged", tc.method, tc.path)
		}
	}
}

func TestScriptedFailures(t *testing.T) {
	s := newFake(t)
	for _, tc := range []struct {
		path, model string
		status      int
		errType     string // "" for the HTML body
	}{
		{oaPath, "fail-429", 429, "rate_limit_error"},
		{anPath, "fail-429", 429, "rate_limit_error"},
		{oaPath, "fail-500", 500, "server_error"},
		{anPath, "fail-500", 500, "api_error"},
		{oaPath, "fail-529", 503, "server_error"},
		{anPath, "fail-529", 529, "overloaded_error"},
		{oaPath, "fail-html", 502, ""},
		{anPath, "fail-html", 502, ""},
		{oaPath, "route/fail-500", 500, "server_error"},
	} {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s %s stream=%t", tc.path, tc.model, stream), func(t *testing.T) {
				body := fmt.Sprintf(`{"model":%q,"max_tokens":5,"stream":%t,"messages":[{"role":"user","content":"hi"}]}`, tc.model, stream)
				res, got := post(t, s, tc.path, body, authFor(tc.path)...)
				if res.StatusCode != tc.status {
					t.Fatalf("status %d %s, want %d", res.StatusCode, got, tc.status)
				}
				if ra := res.Header.Get("Retry-After"); (tc.status == 429) != (ra == "1") {
					t.Errorf("retry-after %q", ra)
				}
				switch {
				case tc.errType == "":
					if !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") || !strings.Contains(got, "<html>") {
						t.Errorf("not HTML: %s %s", res.Header.Get("Content-Type"), got)
					}
				case tc.path == anPath:
					checkAnthropicError(t, got, tc.errType)
				default:
					checkOpenAIError(t, got, tc.errType)
				}
			})
		}
	}
}

func TestSlow(t *testing.T) {
	s := newFake(t)
	for _, path := range []string{oaPath, anPath} {
		t.Run(path, func(t *testing.T) {
			start := time.Now()
			res, body := post(t, s, path, `{"model":"slow-50ms","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, authFor(path)...)
			if d := time.Since(start); d < 45*time.Millisecond {
				t.Errorf("slow-50ms answered in %v", d)
			}
			if res.StatusCode != 200 || !strings.Contains(body, "echo: hi") {
				t.Errorf("%d %s", res.StatusCode, body)
			}
		})
	}
}

// TestStreamFailures checks midstream-error and cutoff: one content event,
// then an error event or the end, never the finish.
func TestStreamFailures(t *testing.T) {
	s := newFake(t)
	tools := `[{"type":"function","function":{"name":"search","parameters":{"type":"object"}}}]`
	anTools := `[{"name":"search","input_schema":{"type":"object"}}]`
	for _, path := range []string{oaPath, anPath} {
		for _, tool := range []bool{false, true} {
			for _, model := range []string{"midstream-error", "cutoff"} {
				t.Run(fmt.Sprintf("%s %s tool=%t", path, model, tool), func(t *testing.T) {
					body := fmt.Sprintf(`{"model":%q,"max_tokens":50,"stream":true,"messages":[{"role":"user","content":"alpha beta gamma"}]}`, model)
					if tool && path == oaPath {
						body, _ = sjson.SetRaw(body, "tools", tools)
					} else if tool {
						body, _ = sjson.SetRaw(body, "tools", anTools)
					}
					res, got := post(t, s, path, body, authFor(path)...)
					if res.StatusCode != 200 {
						t.Fatalf("%d %s", res.StatusCode, got)
					}
					evs := parseSSE(t, got)
					if len(evs) == 0 {
						t.Fatal("no events")
					}
					last := evs[len(evs)-1]
					content := 0
					for _, ev := range evs {
						if isEnd(ev) {
							t.Errorf("stream finished: %s %s", ev.name, ev.data)
						}
						if isContent(ev) {
							content++
						}
					}
					if content != 1 {
						t.Errorf("%d content events, want 1: %s", content, got)
					}
					switch {
					case model == "cutoff":
						if !isContent(last) {
							t.Errorf("cutoff stream does not end on its content event: %s", got)
						}
					case path == oaPath:
						if last.name != "" || !gjson.Get(last.data, "error").IsObject() || gjson.Get(last.data, "error.message").Str == "" {
							t.Errorf("no data error at the end: %s", got)
						}
					default:
						if last.name != "error" || gjson.Get(last.data, "type").Str != "error" || gjson.Get(last.data, "error.type").Str != "overloaded_error" {
							t.Errorf("no error event at the end: %s", got)
						}
					}
				})
			}
		}
	}
}

// TestGated checks the gate: a gated stream stops after its first content
// event until Release, even when Release was called before it got there.
func TestGated(t *testing.T) {
	for _, tc := range []struct {
		name, path, body string
	}{
		{"openai text", oaPath, `{"model":"gated","stream":true,"messages":[{"role":"user","content":"one two three"}]}`},
		{"openai tool", oaPath, `{"model":"oa/gated","stream":true,"tools":[{"type":"function","function":{"name":"f"}}],"messages":[{"role":"user","content":"one two three"}]}`},
		{"anthropic text", anPath, `{"model":"gated","max_tokens":50,"stream":true,"messages":[{"role":"user","content":"one two three"}]}`},
		{"anthropic tool", anPath, `{"model":"claude/gated","max_tokens":50,"stream":true,"tools":[{"name":"f","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"one two three"}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newFake(t)
			// Round 0: Release before anything waits. Round 1: a Release
			// after an earlier gated stream was let go. Neither may let
			// the new stream through.
			for round := range 2 {
				s.Release()
				ls := openStream(t, s, tc.path, tc.body, authFor(tc.path)...)
				select {
				case <-s.Waiting():
				case <-time.After(5 * time.Second):
					t.Fatalf("round %d: Waiting did not fire", round)
				}
				held := time.After(200 * time.Millisecond)
				sawContent := false
			hold:
				for {
					select {
					case ev, ok := <-ls.events:
						switch {
						case !ok:
							t.Fatalf("round %d: the gated stream ended before Release", round)
						case sawContent || isEnd(ev):
							t.Fatalf("round %d: the gated stream went on before Release: %s %s", round, ev.name, ev.data)
						case isContent(ev):
							sawContent = true
						}
					case <-held:
						break hold
					}
				}
				if !sawContent {
					t.Fatalf("round %d: no content event before the gate", round)
				}
				s.Release()
				rest := ls.rest(t)
				if len(rest) == 0 {
					t.Fatalf("round %d: nothing after Release", round)
				}
				last := rest[len(rest)-1]
				if last.data != "[DONE]" && last.name != "message_stop" {
					t.Errorf("round %d: stream did not finish after Release: %v", round, rest)
				}
				more := 0
				for _, ev := range rest {
					if isContent(ev) {
						more++
					}
				}
				if more == 0 {
					t.Errorf("round %d: no content after Release: %v", round, rest)
				}
			}
			select {
			case <-s.Waiting():
				t.Error("Waiting fired more often than streams were gated")
			default:
			}
		})
	}
}

// TestGatedReleaseAll checks that one Release lets every waiting stream go.
func TestGatedReleaseAll(t *testing.T) {
	s := newFake(t)
	a := openStream(t, s, oaPath, `{"model":"gated","stream":true,"messages":[{"role":"user","content":"x y"}]}`, oaAuth...)
	b := openStream(t, s, anPath, `{"model":"gated","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"x y"}]}`, anAuth...)
	for range 2 {
		select {
		case <-s.Waiting():
		case <-time.After(5 * time.Second):
			t.Fatal("Waiting did not fire")
		}
	}
	s.Release()
	for _, ls := range []*liveStream{a, b} {
		evs := ls.rest(t)
		if last := evs[len(evs)-1]; last.data != "[DONE]" && last.name != "message_stop" {
			t.Errorf("not finished: %v", evs)
		}
	}
}

// TestFlaky checks "flaky": the first request with a body gets 429 with
// retry-after-ms, its repeat is answered, and another body starts over.
func TestFlaky(t *testing.T) {
	s := newFake(t)
	for _, path := range []string{oaPath, anPath} {
		t.Run(path, func(t *testing.T) {
			body := `{"model":"flaky","max_tokens":5,"messages":[{"role":"user","content":"hi ` + path + `"}]}`
			for i, want := range []int{429, 200, 200} {
				res, got := post(t, s, path, body, authFor(path)...)
				if res.StatusCode != want {
					t.Fatalf("attempt %d: status %d %s, want %d", i, res.StatusCode, got, want)
				}
				if ra := res.Header.Get("Retry-After-Ms"); (want == 429) != (ra == "50") {
					t.Errorf("attempt %d: retry-after-ms %q", i, ra)
				}
			}
		})
	}
}

// TestPromptTokens: Options.PromptTokens counts the prompts of every
// format in place of their words.
func TestPromptTokens(t *testing.T) {
	bytesCount := func(s string) int { return len(s) }
	s := Start(t, Options{PromptTokens: bytesCount})
	for _, tc := range []struct {
		path, body, usage string
		want              int64
	}{
		{"/v1/chat/completions", `{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"日本語です"}]}`, "usage.prompt_tokens", 8 + 15},
		{"/v1/messages", `{"model":"m","max_tokens":5,"system":"be brief","messages":[{"role":"user","content":"日本語です"}]}`, "usage.input_tokens", 8 + 15},
		{"/v1/responses", `{"model":"m","instructions":"be brief","input":"日本語です"}`, "usage.input_tokens", 8 + 15},
		{"/v1/embeddings", `{"model":"m","input":["日本語です","two words"]}`, "usage.prompt_tokens", 15 + 9},
	} {
		header := []string{"Authorization", "Bearer k"}
		if tc.path == "/v1/messages" {
			header = []string{"X-Api-Key", "k", "Anthropic-Version", "2023-06-01"}
		}
		req, _ := http.NewRequest(http.MethodPost, s.URL+tc.path, strings.NewReader(tc.body))
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if got := gjson.GetBytes(b, tc.usage).Int(); res.StatusCode != 200 || got != tc.want {
			t.Errorf("%s: %d %s; want %s %d", tc.path, res.StatusCode, b, tc.usage, tc.want)
		}
	}
}

package providertest

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// noteFormat is a wire format registered as a provider module outside
// this package registers its own: POST /note/v1/say with an x-note-key
// header and {"model", "text", "stream"}, answered {"said", "in", "out"},
// or, streamed, a line of JSON per word and {"done":true,"in","out"};
// errors are {"oops": {"why"}}.
type noteFormat struct{}

func (noteFormat) Name() string { return "note" }

func (noteFormat) Route(r *http.Request) Routing {
	switch {
	case r.URL.Path == "/note/v1/say" && r.Method == http.MethodPost:
		return Served
	case strings.HasPrefix(r.URL.Path, "/note/"):
		return Owned
	}
	return NotMine
}

func (noteFormat) Authorized(r *http.Request, key string) bool {
	return KeyOK(r.Header.Get("X-Note-Key"), key)
}

func (noteFormat) Model(_ *http.Request, body []byte) string {
	return gjson.GetBytes(body, "model").Str
}

func (noteFormat) Fail(w http.ResponseWriter, _ *http.Request, f Fault) {
	status := f.Status()
	if f == FaultOverloaded {
		status = 529
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(`{"oops":{"why":"status ` + strconv.Itoa(status) + `"}}`))
}

func (noteFormat) Headers(h http.Header, id string) { h.Set("X-Note-Request", "note-"+id) }

func (noteFormat) Serve(c *Call) {
	body := gjson.ParseBytes(c.Body())
	text := body.Get("text")
	if text.Type != gjson.String {
		c.WriteJSON(http.StatusBadRequest, []byte(`{"oops":{"why":"text is required"}}`))
		return
	}
	if c.Scripted() {
		return
	}
	if c.Key() != "" && c.Request().Header.Get("X-Note-Key") != c.Key() {
		panic("the key Authorized passed is not the configured one")
	}
	reply := c.Reply(text.Str, []string{text.Str}, body.Get("max").Int())
	counts := `"in":` + strconv.Itoa(reply.PromptTokens) + `,"out":` + strconv.Itoa(reply.CompletionTokens)
	if !body.Get("stream").Bool() {
		c.WriteJSON(http.StatusOK, []byte(`{"said":`+strconv.Quote(reply.Text())+`,`+counts+`}`))
		return
	}
	c.Writer().Header().Set("Content-Type", "application/x-ndjson")
	for i := range reply.Words {
		c.Send([]byte(`{"word":` + strconv.Quote(reply.Chunk(i)) + "}\n"))
		if i == 0 && c.AfterFirstWord([]byte(`{"oops":{"why":"midstream"}}`+"\n")) {
			return
		}
	}
	c.Send([]byte(`{"done":true,` + counts + "}\n"))
}

func init() {
	Register(noteFormat{})
	formatExamples["note"] = example{
		request: func(model string) (string, string, []string) {
			return "/note/v1/say", `{"model":"` + model + `","text":"hi there"}`, []string{"X-Note-Key", "k"}
		},
		overloaded: 529,
		isError:    func(body string) bool { return gjson.Get(body, "oops.why").Str != "" },
	}
}

// TestRegisteredFormat serves a registered format's answers, whole and
// streamed, with its headers and its key; TestEveryFormat runs its
// example through every scripted failure, as for the fake's own rows.
func TestRegisteredFormat(t *testing.T) {
	s := Start(t, Options{Keys: map[string]string{"note": "note-key"}})
	key := []string{"X-Note-Key", "note-key"}
	res, body := Send(t, http.MethodPost, s.URL+"/note/v1/say", `{"model":"m","text":"hello you there"}`, key...)
	if res.StatusCode != 200 || body != `{"said":"echo: hello you there","in":3,"out":4}` || !strings.HasPrefix(res.Header.Get("X-Note-Request"), "note-") {
		t.Fatalf("%d %s %v", res.StatusCode, body, res.Header)
	}
	if r := s.Requests(); r[len(r)-1].Format != "note" || r[len(r)-1].Model != "m" {
		t.Errorf("recorded %+v", r[len(r)-1])
	}
	_, body = Send(t, http.MethodPost, s.URL+"/note/v1/say", `{"model":"m","text":"a b c","max":2,"stream":true}`, key...)
	if want := "{\"word\":\"echo:\"}\n{\"word\":\" a\"}\n{\"done\":true,\"in\":3,\"out\":2}\n"; body != want {
		t.Errorf("stream %q, want %q", body, want)
	}
	for _, tc := range []struct {
		name, path string
		header     []string
		status     int
	}{
		{"another key", "/note/v1/say", []string{"X-Note-Key", "other"}, 401},
		{"a path it owns", "/note/v1/other", key, 404},
		{"a path of the fake's own", "/v1/chat/completions", key, 401},
	} {
		res, body := Send(t, http.MethodPost, s.URL+tc.path, `{"model":"m","text":"x"}`, tc.header...)
		if res.StatusCode != tc.status || (tc.path != "/v1/chat/completions") != strings.Contains(body, `"oops"`) {
			t.Errorf("%s: %d %s", tc.name, res.StatusCode, body)
		}
	}
}

// TestRegisterRefuses: a second format of a name, or one of a built-in
// row's names, is a programming error.
func TestRegisterRefuses(t *testing.T) {
	for _, f := range []Format{noteFormat{}, namedFormat{noteFormat{}, "anthropic"}, namedFormat{noteFormat{}, ""}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register(%q) did not panic", f.Name())
				}
			}()
			Register(f)
		}()
	}
}

type namedFormat struct {
	noteFormat
	n string
}

func (f namedFormat) Name() string { return f.n }

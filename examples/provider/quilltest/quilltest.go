// Package quilltest teaches modelgate's fake provider (package
// providertest) Quill's wire format: importing it registers the format,
// named "quill", served at /quill/v1/generate, so that a fake started with
// providertest.Start answers Quill's requests at its URL + "/quill" as
// strictly as Quill would. Its key (Options.Keys["quill"]) is
// "<key id>:<secret>", and the fake checks each request's signature with
// it; without one it takes any key id and checks no signature.
//
// Answers follow the fake's rules for every format: "echo: <last human
// say>", cut to limit words, every word a delta line of a stream; and the
// model names script failures (fail-429, fail-529, midstream-error,
// cutoff, …; see providertest), each in Quill's error shape.
package quilltest

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/providertest"

	"example.com/modelgate-provider-quill/quill"
)

func init() {
	providertest.Register(Format{})
}

// Path is where the fake serves Quill's API; a provider's base URL is the
// fake's URL with the prefix "/quill".
const Path = "/quill/v1/generate"

// MaxAge is how old a signature Quill takes.
const MaxAge = 5 * time.Minute

// Format is Quill's wire format, as the fake serves it.
type Format struct{}

// Name names the format in providertest.Options.Keys.
func (Format) Name() string { return "quill" }

// Route serves POST /quill/v1/generate; other paths under /quill/ are
// 404s in Quill's shape.
func (Format) Route(r *http.Request) providertest.Routing {
	switch {
	case r.URL.Path == Path && r.Method == http.MethodPost:
		return providertest.Served
	case strings.HasPrefix(r.URL.Path, "/quill/"):
		return providertest.Owned
	}
	return providertest.NotMine
}

// Authorized checks the key id; Serve checks the signature, over the
// body.
func (Format) Authorized(r *http.Request, key string) bool {
	id, _, _ := strings.Cut(key, ":")
	return providertest.KeyOK(r.Header.Get("X-Quill-Key"), id)
}

// Model is the body's model.
func (Format) Model(_ *http.Request, body []byte) string { return gjson.GetBytes(body, "model").Str }

// Headers sets Quill's request id.
func (Format) Headers(h http.Header, id string) { h.Set("X-Quill-Request", "qr-"+id) }

// Fail writes a fault as Quill does.
func (Format) Fail(w http.ResponseWriter, _ *http.Request, f providertest.Fault) {
	kinds := map[providertest.Fault]string{
		providertest.FaultNotFound: "bad_request", providertest.FaultTooLarge: "bad_request",
		providertest.FaultUnreadable: "bad_request", providertest.FaultUnauthorized: "denied",
		providertest.FaultRateLimited: "rate_limited", providertest.FaultServerError: "internal",
		providertest.FaultOverloaded: "overloaded",
	}
	writeError(w, f.Status(), kinds[f], strings.ToLower(http.StatusText(f.Status())))
}

// ErrorLine is the line a stream that fails midway ends with.
var ErrorLine = []byte(`{"error":{"kind":"overloaded","detail":"the model is overloaded"}}` + "\n")

// Serve checks a request as Quill does and answers it.
func (Format) Serve(c *providertest.Call) {
	body := c.Body()
	if msg := check(body); msg != "" {
		writeError(c.Writer(), http.StatusBadRequest, "bad_request", msg)
		return
	}
	if id, secret, ok := strings.Cut(c.Key(), ":"); ok {
		signer := quill.Signer{KeyID: id, Secret: []byte(secret)}
		if !signer.Verify(c.Request().Header, c.Request().Method, c.Request().URL.RequestURI(), body, MaxAge) {
			writeError(c.Writer(), http.StatusForbidden, "denied", "the signature does not match")
			return
		}
	}
	if c.Scripted() {
		return
	}
	root := gjson.ParseBytes(body)
	var says []string
	human := ""
	for _, t := range root.Get("turns").Array() {
		says = append(says, t.Get("say").Str)
		if t.Get("speaker").Str == "human" {
			human = t.Get("say").Str
		}
	}
	reply := c.Reply(human, says, root.Get("limit").Int())
	end := "done"
	if reply.Truncated {
		end = "limit"
	}
	tokens := `{"read":` + strconv.Itoa(reply.PromptTokens) + `,"wrote":` + strconv.Itoa(reply.CompletionTokens) + `}`
	id := `"q-` + c.ID() + `"`
	model := string(providers.AppendString(nil, c.Model()))
	if !root.Get("stream").Bool() {
		text := string(providers.AppendString(nil, reply.Text()))
		c.WriteJSON(http.StatusOK, []byte(`{"id":`+id+`,"model":`+model+`,"text":`+text+`,"end":"`+end+`","tokens":`+tokens+`}`))
		return
	}
	c.Writer().Header().Set("Content-Type", quill.MediaType)
	c.Writer().WriteHeader(http.StatusOK)
	c.Send([]byte(`{"id":` + id + `,"model":` + model + "}\n"))
	for i := range reply.Words {
		c.Send([]byte(`{"delta":` + string(providers.AppendString(nil, reply.Chunk(i))) + "}\n"))
		if i == 0 && c.AfterFirstWord(ErrorLine) {
			return
		}
	}
	c.Send([]byte(`{"end":"` + end + `","tokens":` + tokens + "}\n"))
}

// check says what is wrong with a request body, or returns "".
func check(body []byte) string {
	if !providers.ValidJSON(body) {
		return "the body is not JSON"
	}
	root := gjson.ParseBytes(body)
	if !root.IsObject() {
		return "the body is not an object"
	}
	msg := ""
	root.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "model":
			if v.Type != gjson.String || v.Str == "" {
				msg = "model must be a non-empty string"
			}
		case "turns":
			msg = checkTurns(v)
		case "limit":
			if v.Type != gjson.Number || v.Int() < 1 || v.Raw != strconv.FormatInt(v.Int(), 10) {
				msg = "limit must be a positive integer"
			}
		case "heat":
			if v.Type != gjson.Number || v.Float() < 0 || v.Float() > 2 {
				msg = "heat must be a number from 0 to 2"
			}
		case "stop":
			for _, s := range v.Array() {
				if s.Type != gjson.String {
					msg = "stop must be an array of strings"
				}
			}
			if !v.IsArray() {
				msg = "stop must be an array of strings"
			}
		case "stream":
			if v.Type != gjson.True && v.Type != gjson.False {
				msg = "stream must be a boolean"
			}
		default:
			msg = "unknown field " + strconv.Quote(k.Str)
		}
		return msg == ""
	})
	if msg == "" && !root.Get("model").Exists() {
		msg = "model is required"
	}
	if msg == "" && !root.Get("turns").Exists() {
		msg = "turns is required"
	}
	return msg
}

// checkTurns says what is wrong with a request's turns, or returns "".
func checkTurns(turns gjson.Result) string {
	if !turns.IsArray() || len(turns.Array()) == 0 {
		return "turns must be a non-empty array"
	}
	for i, t := range turns.Array() {
		at := "turns[" + strconv.Itoa(i) + "]"
		if !t.IsObject() {
			return at + " must be an object"
		}
		switch t.Get("speaker").Str {
		case "guide", "human", "quill":
		default:
			return at + ".speaker must be guide, human or quill"
		}
		if t.Get("say").Type != gjson.String {
			return at + ".say must be a string"
		}
		n := 0
		t.ForEach(func(gjson.Result, gjson.Result) bool { n++; return true })
		if n != 2 {
			return at + " has fields besides speaker and say"
		}
	}
	return ""
}

func writeError(w http.ResponseWriter, status int, kind, detail string) {
	b := []byte(`{"error":{"kind":"` + kind + `","detail":`)
	b = providers.AppendString(b, detail)
	b = append(b, "}}"...)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// Package quill translates modelgate's unified chat API to Quill's, a
// small made-up model API that stands for any provider with a wire format
// of its own. It knows nothing of Caddy: the provider module at the root
// of this Go module wraps it.
//
// Quill's wire format:
//
//	POST <base URL>/v1/generate
//	X-Quill-Key:       <key id>
//	X-Quill-Time:      <Unix seconds>
//	X-Quill-Signature: hex HMAC-SHA256 with the secret over
//	                   "<time>\n<method>\n<request URI>\n" and the body
//
//	{"model": "quill-1", "turns": [{"speaker": "guide"|"human"|"quill", "say": "…"}],
//	 "limit": 100, "heat": 0.7, "stop": ["…"], "stream": false}
//
// answered with
//
//	{"id": "q-1", "model": "quill-1", "text": "…", "end": "done"|"limit"|"stop",
//	 "tokens": {"read": 12, "wrote": 3}}
//
// or, for "stream": true, with Content-Type application/x-ndjson: one JSON
// object a line, {"id", "model"} first, then {"delta": "…"} for each piece
// of the text, and last {"end", "tokens"}; a stream that fails midway
// ends with an error line. Errors are {"error": {"kind", "detail"}}, with
// kind one of bad_request, denied, rate_limited, overloaded, internal.
package quill

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/jsonw"
)

// MediaType is the Content-Type of Quill's streams.
const MediaType = "application/x-ndjson"

// Chat translates chat completions to Quill. The zero value is ready to
// use, and a Chat is safe for concurrent use.
type Chat struct {
	// Now returns the time for "created"; nil means time.Now.
	Now func() time.Time
}

var _ providers.Chat = Chat{}

// speakers are Quill's speakers by unified role.
var speakers = map[string]string{"system": "guide", "developer": "guide", "user": "human", "assistant": "quill"}

// ChatRequest rewrites a unified chat request into Quill's. Quill has no
// tools, images, JSON output, audio, log probabilities or several
// choices: a request that asks for them gets a 400 naming the parameter.
// Sampling parameters Quill does not have (top_p, penalties, seed) are
// dropped.
func (c Chat) ChatRequest(body []byte, model string) (providers.Request, error) {
	root := gjson.ParseBytes(body)
	for _, p := range []string{"tools", "functions", "function_call", "audio", "modalities", "logprobs", "top_logprobs", "web_search_options"} {
		if v := root.Get(p); v.Exists() && v.Type != gjson.Null && !(v.Type == gjson.False) {
			return providers.Request{}, providers.Unsupported(p, "quill")
		}
	}
	if n := root.Get("n"); n.Exists() && n.Type != gjson.Null && n.Int() != 1 {
		return providers.Request{}, providers.Unsupported("n", "quill")
	}
	if tc := root.Get("tool_choice"); tc.Exists() && tc.Str != "none" && tc.Str != "auto" {
		return providers.Request{}, providers.Unsupported("tool_choice", "quill")
	}
	if rf := root.Get("response_format.type"); rf.Exists() && rf.Str != "text" {
		return providers.Request{}, providers.Unsupported("response_format", "quill")
	}

	w := jsonw.New(make([]byte, 0, len(body)+64))
	o := w.Object()
	o.Str("model", model)
	turns := o.Array("turns")
	var err error
	root.Get("messages").ForEach(func(i, m gjson.Result) bool {
		err = writeTurn(turns, int(i.Int()), m)
		return err == nil
	})
	if err != nil {
		return providers.Request{}, err
	}
	turns.End()
	if limit := root.Get("max_completion_tokens"); limit.Exists() && limit.Type != gjson.Null {
		o.Raw("limit", limit.Raw)
	} else if limit := root.Get("max_tokens"); limit.Exists() && limit.Type != gjson.Null {
		o.Raw("limit", limit.Raw)
	}
	if heat := root.Get("temperature"); heat.Type == gjson.Number {
		o.Raw("heat", heat.Raw)
	}
	switch stop := root.Get("stop"); {
	case stop.Type == gjson.String:
		a := o.Array("stop")
		a.Text(jsonw.StrOf(stop))
		a.End()
	case stop.IsArray():
		o.Raw("stop", stop.Raw)
	}
	stream := root.Get("stream").Bool()
	if stream {
		o.Bool("stream", true)
	}
	o.End()
	out, err := w.Finish()
	if err != nil {
		return providers.Request{}, err
	}
	req := providers.Request{Path: "/v1/generate", Body: out}
	if stream {
		req.Framing = NDJSON
	}
	return req, nil
}

// writeTurn writes message i as a turn: its speaker and its text.
func writeTurn(turns jsonw.Array, i int, m gjson.Result) error {
	at := "messages[" + strconv.Itoa(i) + "]"
	role := m.Get("role").Str
	speaker, ok := speakers[role]
	if !ok {
		return providers.UnsupportedBecause(at+".role", "Quill has no "+role+" messages")
	}
	if tc := m.Get("tool_calls"); tc.IsArray() && len(tc.Array()) > 0 {
		return providers.Unsupported(at+".tool_calls", "quill")
	}
	t := turns.Object()
	t.Str("speaker", speaker)
	switch content := m.Get("content"); {
	case content.Type == gjson.String:
		t.Text("say", jsonw.StrOf(content))
	case content.IsArray():
		var text []byte
		var err error
		content.ForEach(func(j, part gjson.Result) bool {
			if part.Get("type").Str != "text" {
				err = providers.Unsupported(at+".content["+j.String()+"].type", "quill")
				return false
			}
			if len(text) > 0 {
				text = append(text, '\n')
			}
			text = append(text, part.Get("text").Str...)
			return true
		})
		if err != nil {
			return err
		}
		t.Str("say", string(text))
	default:
		t.Str("say", "")
	}
	t.End()
	return nil
}

// ChatResponse translates Quill's answer into a chat.completion, and
// returns the usage it carries as data: what the gateway meters and
// prices.
func (c Chat) ChatResponse(body []byte) ([]byte, providers.Used, error) {
	if !providers.ValidJSON(body) {
		return nil, providers.Used{}, errors.New("quill: the answer is not JSON")
	}
	root := gjson.ParseBytes(body)
	text := root.Get("text")
	if !root.IsObject() || text.Type != gjson.String {
		return nil, providers.Used{}, errors.New("quill: the answer has no text")
	}
	w := jsonw.New(make([]byte, 0, len(body)+256))
	cc := providers.StartCompletion(&w, providers.Head{
		ID:      jsonw.StrOf(root.Get("id")).Prefixed("chatcmpl-"),
		Created: providers.Now(c.Now).Unix(),
		Model:   jsonw.StrOf(root.Get("model")),
	})
	m := cc.Choice(0)
	m.Content(jsonw.StrOf(text))
	m.NullRefusal()
	m.End(finishReason(root.Get("end").Str))
	u := usageOf(root.Get("tokens"))
	cc.Usage(u)
	out, err := cc.Finish()
	return out, u.Used(), err
}

// finishReason is the unified finish reason of Quill's end.
func finishReason(end string) string {
	if end == "limit" {
		return "length"
	}
	return "stop"
}

// usageOf reads Quill's token counts.
func usageOf(tokens gjson.Result) providers.Usage {
	read, wrote := max(tokens.Get("read").Int(), 0), max(tokens.Get("wrote").Int(), 0)
	return providers.Usage{Prompt: read, Completion: wrote, Total: read + wrote}
}

// Error maps Quill's failed answer into the unified error: its kind says
// more than its status (an overload is one whatever the status), and a
// body that is not Quill's error is read as providers.ErrorFromBody reads
// one.
func (c Chat) Error(status int, _ http.Header, body []byte) *providers.Error {
	if !providers.ValidJSON(body) {
		return providers.ErrorFromBody(status, body)
	}
	e := gjson.GetBytes(body, "error")
	kind, detail := e.Get("kind").Str, e.Get("detail").Str
	if !e.IsObject() || kind == "" {
		return providers.ErrorFromBody(status, body)
	}
	return mapError(status, kind, detail)
}

// mapError is the unified error of Quill's error kind, with the status
// the provider answered.
func mapError(status int, kind, detail string) *providers.Error {
	if detail == "" {
		detail = "quill: " + kind
	}
	e := &providers.Error{Status: status, Type: providers.TypeForStatus(status), Message: detail}
	switch kind {
	case "rate_limited":
		e.Status, e.Type, e.Code = http.StatusTooManyRequests, "rate_limit_error", "rate_limit_exceeded"
	case "overloaded":
		e.Status, e.Type, e.Code = http.StatusServiceUnavailable, "server_error", "overloaded"
	case "denied":
		// Quill refused the gateway's own credentials: the client's
		// request is not at fault.
		e.Status, e.Type, e.Code = http.StatusBadGateway, "server_error", "upstream_auth_failed"
	}
	if e.Status < 400 || e.Status > 599 {
		e.Status = http.StatusBadGateway
	}
	return e
}

// Signer signs Quill requests: it is the provider's Authenticator.
type Signer struct {
	KeyID  string
	Secret []byte

	// Now returns the time of the signature; nil means time.Now.
	Now func() time.Time
}

// Signature is the signature of a request at time t (Unix seconds) with
// method, request URI (path and query) and body.
func (s Signer) Signature(t, method, uri string, body []byte) string {
	m := hmac.New(sha256.New, s.Secret)
	m.Write([]byte(t + "\n" + method + "\n" + uri + "\n"))
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// Authenticate signs req, the request exactly as it goes out, whose body
// is body.
func (s Signer) Authenticate(req *http.Request, body []byte) error {
	t := strconv.FormatInt(providers.Now(s.Now).Unix(), 10)
	req.Header.Set("X-Quill-Key", s.KeyID)
	req.Header.Set("X-Quill-Time", t)
	req.Header.Set("X-Quill-Signature", s.Signature(t, req.Method, req.URL.RequestURI(), body))
	return nil
}

// Verify reports whether the signature headers of a request with body
// are the signer's, made within maxAge of now: what Quill checks.
func (s Signer) Verify(h http.Header, method, uri string, body []byte, maxAge time.Duration) bool {
	t := h.Get("X-Quill-Time")
	sec, err := strconv.ParseInt(t, 10, 64)
	if err != nil || h.Get("X-Quill-Key") != s.KeyID {
		return false
	}
	if age := providers.Now(s.Now).Sub(time.Unix(sec, 0)); age > maxAge || age < -maxAge {
		return false
	}
	return hmac.Equal([]byte(h.Get("X-Quill-Signature")), []byte(s.Signature(t, method, uri, body)))
}

// NDJSON is Quill's stream framing: an event is a line, without its line
// break ("\n", or "\r\n"); empty lines are skipped.
var NDJSON providers.Framing = ndjson{}

// MaxLine is the longest line NDJSON reads: a longer one is a corrupt
// stream.
const MaxLine = 1 << 20

type ndjson struct{}

func (ndjson) IsStream(contentType string) bool {
	mt, _, _ := bytes.Cut([]byte(contentType), []byte(";"))
	return string(bytes.ToLower(bytes.TrimSpace(mt))) == MediaType
}

func (ndjson) Cut(buf []byte) (event, rest []byte, ok bool, err error) {
	for {
		line, after, found := bytes.Cut(buf, []byte("\n"))
		if !found {
			if len(buf) > MaxLine {
				return nil, nil, false, errors.New("quill: a stream line is too long")
			}
			return nil, buf, false, nil
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) > MaxLine {
			return nil, nil, false, errors.New("quill: a stream line is too long")
		}
		if len(line) > 0 {
			return line, after, true, nil
		}
		buf = after
	}
}

package anthropic

import (
	"net/http"
	"net/url"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/jsonw"
)

// VertexVersion is the anthropic_version of a Messages body sent to
// Claude on Vertex AI.
const VertexVersion = "vertex-2023-10-16"

// Vertex is Claude on Google Cloud's Vertex AI, as Anthropic's Vertex
// SDKs call it: Anthropic's Messages body, less model, with
// anthropic_version vertex-2023-10-16, POSTed to
// /projects/{Project}/locations/{Location}/publishers/anthropic/models/{model}:rawPredict
// (:streamRawPredict for a stream; the answer is Anthropic's, events and
// all), below the Vertex AI base URL (…/v1); count_tokens to
// …/publishers/anthropic/models/count-tokens:rawPredict with the model in
// the body. Betas go in the anthropic-beta header, as to Anthropic.
//
// It serves chat (Chat translates, then the request is rewritten so) and
// passes the Messages API through (NativeRequest).
type Vertex struct {
	Chat Chat

	// Project and Location name the Vertex AI resource; Location defaults
	// to global.
	Project, Location string
}

// ChatRequest translates a unified chat request for Claude on Vertex AI.
func (v Vertex) ChatRequest(body []byte, model string) (providers.Request, error) {
	req, err := v.Chat.ChatRequest(body, model)
	if err != nil {
		return req, err
	}
	return v.request(req.Body, model, req.Header)
}

// ChatResponse translates Claude's answer, Anthropic's message.
func (v Vertex) ChatResponse(body []byte) ([]byte, providers.Used, error) {
	return v.Chat.ChatResponse(body)
}

// ChatStream translates Claude's stream, Anthropic's events.
func (v Vertex) ChatStream(opts providers.StreamOptions) providers.StreamTranslator {
	return v.Chat.ChatStream(opts)
}

// Error maps an error answer: Anthropic's shape when Claude answered,
// Google's when Vertex AI did (authentication, quota, a model it does not
// have), which the Anthropic mapping reads as well (its error.message and
// status).
func (v Vertex) Error(status int, header http.Header, body []byte) *providers.Error {
	return v.Chat.Error(status, header, body)
}

// NativeRequest passes a Messages request (path "/messages") or a token
// count ("/messages/count_tokens") through to Claude on Vertex AI.
func (v Vertex) NativeRequest(path string, body []byte, model string, header http.Header) (providers.Request, error) {
	var h http.Header
	if b := header.Values("Anthropic-Beta"); len(b) > 0 {
		h = http.Header{"Anthropic-Beta": b}
	}
	switch path {
	case "/messages":
		return v.request(body, model, h)
	case "/messages/count_tokens":
		out, err := vertexBody(body, model, true)
		if err != nil {
			return providers.Request{}, err
		}
		p, err := v.path("count-tokens", "rawPredict")
		return providers.Request{Path: p, Body: out, Header: h}, err
	}
	return providers.Request{}, providers.ErrNotNative
}

// request is the rawPredict (streamRawPredict) request for a Messages
// body; of the headers only anthropic-beta goes.
func (v Vertex) request(body []byte, model string, header http.Header) (providers.Request, error) {
	out, err := vertexBody(body, model, false)
	if err != nil {
		return providers.Request{}, err
	}
	method := "rawPredict"
	if gjson.GetBytes(body, "stream").Type == gjson.True {
		method = "streamRawPredict"
	}
	p, err := v.path(model, method)
	if err != nil {
		return providers.Request{}, err
	}
	var h http.Header
	if b := header.Values("Anthropic-Beta"); len(b) > 0 {
		h = http.Header{"Anthropic-Beta": b}
	}
	return providers.Request{Path: p, Body: out, Header: h}, nil
}

// path is the resource path of a method of model.
func (v Vertex) path(model, method string) (string, error) {
	if !validModel(model) {
		return "", providers.InvalidParam("model", "the model name %q cannot be sent to Vertex AI: use letters, digits, '-', '_', '.' and '@'", model)
	}
	loc := v.Location
	if loc == "" {
		loc = "global"
	}
	return "/projects/" + url.PathEscape(v.Project) + "/locations/" + url.PathEscape(loc) +
		"/publishers/anthropic/models/" + model + ":" + method, nil
}

// validModel reports whether model can be a path segment as it is.
func validModel(m string) bool {
	if m == "" || m == "." || m == ".." || len(m) > 256 {
		return false
	}
	for i := 0; i < len(m); i++ {
		c := m[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' || c == '@') {
			return false
		}
	}
	return true
}

// vertexBody is a Messages body as Vertex AI takes it: the members as the
// client sent them but model (kept, as model, when keepModel) and
// anthropic_version, which becomes Vertex's.
func vertexBody(body []byte, model string, keepModel bool) ([]byte, error) {
	w := jsonw.New(make([]byte, 0, len(body)+48))
	o := w.Object()
	if keepModel {
		o.Str("model", model)
	}
	providers.EachMember(providers.InPlace(body), func(key string, v gjson.Result) bool {
		switch key {
		case "model", "anthropic_version":
		default:
			o.Key(key).Compact(v.Raw)
		}
		return true
	})
	o.Str("anthropic_version", VertexVersion)
	o.End()
	return w.Finish()
}

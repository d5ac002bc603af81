package caddygateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"

	"github.com/modelgate/modelgate/gateway"
	"github.com/modelgate/modelgate/providers"
)

// This file holds the one writer of the unified API's answers and errors:
// every answer modelgate writes itself — the handlers', the dispatcher's,
// the secret-scanning endpoint's — goes through WriteJSON, so clients never
// see an empty, HTML or half-written body.

// WriteJSON writes body, a complete JSON document, with status.
func WriteJSON(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	setHeader(h, "Content-Type", "application/json")
	setHeader(h, "Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// WriteValue writes v encoded as JSON with status; a value that cannot be
// encoded is a 500 in OpenAI's error shape.
func WriteValue(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		WriteError(w, &providers.Error{Status: http.StatusInternalServerError, Type: "server_error", Message: "the answer could not be encoded"})
		return
	}
	WriteJSON(w, status, b)
}

// WriteError writes e in OpenAI's error shape with its status.
func WriteError(w http.ResponseWriter, e *providers.Error) {
	delete(w.Header(), "Content-Encoding")
	WriteJSON(w, e.Status, e.JSON())
}

// headerValue is h.Get(key) for a key in canonical form, as net/http
// stores the headers it reads and reverse_proxy those it copies: without
// Get's canonicalising pass over the key, a few hundred instructions a
// call on every request.
func headerValue(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// setHeader is h.Set(key, value) for a key in canonical form, without
// Set's pass over the key.
func setHeader(h http.Header, key, value string) { h[key] = []string{value} }

// writeError is WriteError, as this package calls it.
func writeError(w http.ResponseWriter, e *providers.Error) { WriteError(w, e) }

// AllowMethod reports whether r uses one of methods (HEAD counts as GET);
// otherwise it answers 405 with Allow, in the error shape of the API the
// path belongs to.
func AllowMethod(w http.ResponseWriter, r *http.Request, methods ...string) bool {
	for _, m := range methods {
		if r.Method == m || m == http.MethodGet && r.Method == http.MethodHead {
			return true
		}
	}
	allow := strings.Join(methods, ", ")
	w.Header().Set("Allow", allow)
	writeAPIError(w, apiForPath(r.URL.Path), &providers.Error{
		Status: http.StatusMethodNotAllowed, Type: "invalid_request_error", Code: "method_not_allowed",
		Message: fmt.Sprintf("%s %s is not supported: use %s", r.Method, r.URL.Path, allow),
	})
	return false
}

// TooLarge is the 413 for a body over limit bytes.
func TooLarge(limit int64) *providers.Error {
	return &providers.Error{
		Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error", Code: "request_too_large",
		Message: fmt.Sprintf("the request body is larger than %d bytes", limit),
	}
}

// BadRequest is a 400 invalid_request_error about param (may be empty).
func BadRequest(param, msg string) *providers.Error {
	return &providers.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: param, Message: msg}
}

func notFound(param, msg string) *providers.Error { return gateway.NotFound(param, msg) }

// writeAPIError writes e in the shape of api (OpenAI's, or Anthropic's on
// the Messages API).
func writeAPIError(w http.ResponseWriter, api gateway.API, e *providers.Error) {
	status, body := api.ErrorBody(e)
	delete(w.Header(), "Content-Encoding")
	WriteJSON(w, status, body)
}

// apiForPath is the API a path belongs to, for the shape of its errors:
// the Messages API's (Anthropic's shape; modelgate_auth's too), else
// OpenAI's.
func apiForPath(path string) gateway.API {
	if path == "/v1/messages" || strings.HasPrefix(path, "/v1/messages/") {
		return gateway.APIMessages
	}
	return gateway.APIChat
}

// ConfiguredApp returns the modelgate app of the config ctx belongs to, or
// an error that tells the user to configure it. Modules of other packages
// (key administration, secret scanning) find the app through it.
func ConfiguredApp(ctx caddy.Context) (*App, error) {
	v, err := ctx.AppIfConfigured("modelgate")
	if errors.Is(err, caddy.ErrNotConfigured) {
		return nil, errors.New("the modelgate app is not configured: add the modelgate global option")
	}
	if err != nil {
		return nil, err
	}
	return v.(*App), nil
}

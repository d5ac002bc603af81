package caddygateway

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/modelgate/modelgate/keys"
	"github.com/modelgate/modelgate/providers"
)

func init() {
	caddy.RegisterModule(Handler{})
}

// Handler serves modelgate's unified API, OpenAI's conventions under /v1:
//
//	POST /v1/chat/completions   chat, streamed (SSE) or not
//	POST /v1/rerank             rerank (also /v1/reranker)
//	GET  /v1/models             the models clients can name
//	GET  /v1/models/{id}        one of them
//	/v1/files…, /v1/batches…    OpenAI's Files and Batch APIs (files.go, batches.go)
//
// Other paths under /v1 get 404 in OpenAI's error shape, as OpenAI answers
// them; paths outside /v1 go to the next handler. Every error is written in
// OpenAI's error shape.
type Handler struct {
	// MaxRequestBody is the largest request body accepted, in bytes; larger
	// ones get 413. Default: 16 MiB.
	MaxRequestBody int64 `json:"max_request_body,omitempty"`

	app     *App
	created int64
	logger  *zap.Logger
}

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.modelgate",
		New: func() caddy.Module { return new(Handler) },
	}
}

const defaultMaxRequestBody = 16 << 20

// Provision finds the modelgate app of this config and fills defaults.
func (h *Handler) Provision(ctx caddy.Context) error {
	h.logger = ctx.Logger()
	if h.MaxRequestBody == 0 {
		h.MaxRequestBody = defaultMaxRequestBody
	}
	app, err := ConfiguredApp(ctx)
	if err != nil {
		return fmt.Errorf("modelgate handler: %w", err)
	}
	h.app = app
	h.created = time.Now().Unix()
	return nil
}

// Validate checks the configuration.
func (h *Handler) Validate() error {
	if h.MaxRequestBody < 0 {
		return errors.New("max_request_body must not be negative")
	}
	return nil
}

// ServeHTTP routes the request to the endpoint for its path.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	path := r.URL.Path
	if strings.Contains(r.URL.RawQuery, keys.Prefix) {
		h.app.scanExposure(r.Method+" "+path, r.URL.RawQuery, nil, sender(requestKey(r)))
	}
	switch {
	case path == "/v1/chat/completions":
		if !AllowMethod(w, r, http.MethodPost) {
			return nil
		}
		if body, ok := h.body(w, r, endpointChat); ok {
			h.app.dispatch.chat(w, r, body, requestKey(r), h.logger)
		}
		return nil
	case path == "/v1/rerank" || path == "/v1/reranker":
		if !AllowMethod(w, r, http.MethodPost) {
			return nil
		}
		if body, ok := h.body(w, r, endpointRerank); ok {
			h.app.dispatch.rerank(w, r, body, requestKey(r), h.logger)
		}
		return nil
	case path == "/v1/embeddings":
		if !AllowMethod(w, r, http.MethodPost) {
			return nil
		}
		if body, ok := h.body(w, r, endpointEmbeddings); ok {
			h.app.dispatch.embeddings(w, r, body, requestKey(r), h.logger)
		}
		return nil
	case path == "/v1/messages" || path == "/v1/messages/count_tokens":
		if !AllowMethod(w, r, http.MethodPost) {
			return nil
		}
		e, serve := endpointMessages, h.app.dispatch.messages
		if path == "/v1/messages/count_tokens" {
			e, serve = endpointCountTokens, h.app.dispatch.countTokens
		}
		if body, ok := h.body(w, r, e); ok {
			serve(w, r, body, requestKey(r), h.logger)
		}
		return nil
	case path == "/v1/responses":
		if !AllowMethod(w, r, http.MethodPost) {
			return nil
		}
		if body, ok := h.body(w, r, endpointResponses); ok {
			h.app.dispatch.responses(w, r, body, requestKey(r), h.app.responseStore(), h.logger)
		}
		return nil
	case strings.HasPrefix(path, "/v1/responses/"):
		h.serveStoredResponse(w, r, strings.TrimPrefix(path, "/v1/responses/"))
		return nil
	case path == "/v1/models":
		if !AllowMethod(w, r, http.MethodGet) {
			return nil
		}
		if r.Header.Get("Anthropic-Version") != "" {
			h.serveAnthropicModels(w, r, "")
			return nil
		}
		h.serveModels(w, r)
		return nil
	case path == "/v1/files" || strings.HasPrefix(path, "/v1/files/"):
		h.serveFiles(w, r, strings.TrimPrefix(strings.TrimPrefix(path, "/v1/files"), "/"))
		return nil
	case path == "/v1/batches" || strings.HasPrefix(path, "/v1/batches/"):
		h.serveBatches(w, r, strings.TrimPrefix(strings.TrimPrefix(path, "/v1/batches"), "/"))
		return nil
	case strings.HasPrefix(path, "/v1/models/"):
		if !AllowMethod(w, r, http.MethodGet) {
			return nil
		}
		if r.Header.Get("Anthropic-Version") != "" {
			h.serveAnthropicModels(w, r, strings.TrimPrefix(path, "/v1/models/"))
			return nil
		}
		h.serveModel(w, strings.TrimPrefix(path, "/v1/models/"))
		return nil
	case path == "/v1" || strings.HasPrefix(path, "/v1/"):
		// OpenAI's own answer to a path it does not serve (Anthropic's
		// shape under /v1/messages/); an empty 200 from the next handler
		// would be unreadable to an SDK.
		apiForPath(path).writeError(w, &providers.Error{
			Status: http.StatusNotFound, Type: "invalid_request_error", Code: "unknown_url",
			Message: fmt.Sprintf("Invalid URL (%s %s)", r.Method, path),
		})
		return nil
	}
	return next.ServeHTTP(w, r)
}

// body reads the request body of an endpoint call, or answers the error.
// A managed key in it (a key pasted into a prompt or a tool result) is
// reported exposed: it is on its way into a provider's logs.
func (h *Handler) body(w http.ResponseWriter, r *http.Request, e endpoint) ([]byte, bool) {
	body, perr := readBody(r, h.MaxRequestBody)
	if perr != nil {
		writeEndpointError(w, e, "", perr)
		return nil, false
	}
	// Nearly no request holds a managed key: the request and its sender
	// are named (two strings built) only for one that may.
	if bytes.Contains(body, keyPattern) {
		h.app.scanExposure(r.Method+" "+r.URL.Path, "", body, sender(requestKey(r)))
	}
	return body, true
}

// readBody reads the request body up to limit bytes. A body whose length
// the client declared is read into one buffer of that length plus the
// byte that shows the body ended there (bytes.Buffer.ReadFrom would want
// 512 spare bytes, a chat request's size again); a longer body or one of
// unknown length grows the buffer as it comes.
func readBody(r *http.Request, limit int64) ([]byte, *providers.Error) {
	if r.ContentLength > limit {
		return nil, TooLarge(limit)
	}
	var buf []byte
	if r.ContentLength > 0 {
		buf = make([]byte, 0, r.ContentLength+1)
	}
	body := io.LimitReader(r.Body, limit+1)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)] // grows as append does
		}
		n, err := body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, &providers.Error{
				Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "invalid_body",
				Message: "the request body could not be read",
			}
		}
	}
	if int64(len(buf)) > limit {
		return nil, TooLarge(limit)
	}
	return buf, nil
}

func (h *Handler) serveModels(w http.ResponseWriter, _ *http.Request) {
	ids := h.app.dispatch.modelIDs()
	b := make([]byte, 0, 64+80*len(ids))
	b = append(b, `{"object":"list","data":[`...)
	for i, m := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = h.appendModel(b, m)
	}
	b = append(b, "]}"...)
	WriteJSON(w, http.StatusOK, b)
}

func (h *Handler) serveModel(w http.ResponseWriter, id string) {
	for _, m := range h.app.dispatch.modelIDs() {
		if m.id == id {
			WriteJSON(w, http.StatusOK, h.appendModel(nil, m))
			return
		}
	}
	writeError(w, modelNotFound(id))
}

func (h *Handler) appendModel(b []byte, m modelID) []byte {
	b = append(b, `{"id":`...)
	b = providers.AppendString(b, m.id)
	b = append(b, `,"object":"model","created":`...)
	b = strconv.AppendInt(b, h.created, 10)
	b = append(b, `,"owned_by":`...)
	b = providers.AppendString(b, m.owner)
	return append(b, '}')
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.Validator             = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
)

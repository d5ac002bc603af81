package caddygateway

import (
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

	"github.com/modelgate/modelgate/gateway"
	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/messages"
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
	h.app.gw.ScanQuery(r.Method, path, r.URL.RawQuery, requestKey(r))
	switch {
	case path == "/v1/chat/completions":
		h.serveCall(w, r, gateway.APIChat)
		return nil
	case path == "/v1/rerank" || path == "/v1/reranker":
		h.serveCall(w, r, gateway.APIRerank)
		return nil
	case path == "/v1/embeddings":
		h.serveCall(w, r, gateway.APIEmbeddings)
		return nil
	case path == "/v1/messages":
		h.serveCall(w, r, gateway.APIMessages)
		return nil
	case path == "/v1/messages/count_tokens":
		h.serveCall(w, r, gateway.APICountTokens)
		return nil
	case path == "/v1/responses":
		h.serveCall(w, r, gateway.APIResponses)
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
		writeAPIError(w, apiForPath(path), &providers.Error{
			Status: http.StatusNotFound, Type: "invalid_request_error", Code: "unknown_url",
			Message: fmt.Sprintf("Invalid URL (%s %s)", r.Method, path),
		})
		return nil
	}
	return next.ServeHTTP(w, r)
}

// serveCall serves a call to api: it reads the body, has the gateway serve
// it, with the request's placeholders answered from its outcome as it is
// served, and writes the outcome, unless the gateway streamed it (or the
// client has gone). A settled call's fields go into the access log entry.
func (h *Handler) serveCall(w http.ResponseWriter, r *http.Request, api gateway.API) {
	if !AllowMethod(w, r, http.MethodPost) {
		return
	}
	body, perr := readBody(r, h.MaxRequestBody)
	if perr != nil {
		writeAPIError(w, api, perr)
		observeRequest(api.String(), "", perr.Status)
		return
	}
	o := &gateway.Outcome{Header: w.Header()}
	r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer).Map((*outcome)(o).placeholder)
	c := gateway.Call{API: api, Body: body, Header: r.Header, Key: requestKey(r), Sink: responseSink{w}, Path: r.URL.Path, Log: h.logger}
	h.app.gw.Serve(r.Context(), &c, o)
	if o.Settled {
		logSettled(r, o)
	}
	if o.Streamed || o.Status == 0 {
		return
	}
	if o.Err != nil {
		delete(w.Header(), "Content-Encoding")
	}
	WriteJSON(w, o.Status, o.Body)
}

// responseSink is the client's connection as a stream's sink: the
// response writer, flushed through http.ResponseController.
type responseSink struct{ w http.ResponseWriter }

func (s responseSink) WriteHeader(status int)      { s.w.WriteHeader(status) }
func (s responseSink) Write(p []byte) (int, error) { return s.w.Write(p) }
func (s responseSink) Flush() error                { return http.NewResponseController(s.w).Flush() }

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
	ids := h.app.gw.ModelIDs()
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
	for _, m := range h.app.gw.ModelIDs() {
		if m.ID == id {
			WriteJSON(w, http.StatusOK, h.appendModel(nil, m))
			return
		}
	}
	writeError(w, gateway.ModelNotFound(id))
}

func (h *Handler) appendModel(b []byte, m gateway.ModelID) []byte {
	b = append(b, `{"id":`...)
	b = providers.AppendString(b, m.ID)
	b = append(b, `,"object":"model","created":`...)
	b = strconv.AppendInt(b, h.created, 10)
	b = append(b, `,"owned_by":`...)
	b = providers.AppendString(b, m.Owner)
	return append(b, '}')
}

// serveStoredResponse answers GET and DELETE /v1/responses/{id} and GET
// /v1/responses/{id}/input_items for the key's owner
// (gateway.StoredResponse).
func (h *Handler) serveStoredResponse(w http.ResponseWriter, r *http.Request, rest string) {
	who, ok := owner(w, r)
	if !ok {
		return
	}
	id, sub, _ := strings.Cut(rest, "/")
	if sub != "" && sub != "input_items" {
		writeError(w, notFound("path", "no such path: "+r.URL.Path))
		return
	}
	methods := []string{http.MethodGet, http.MethodDelete}
	if sub != "" {
		methods = methods[:1]
	}
	if !AllowMethod(w, r, methods...) {
		return
	}
	o := &gateway.Outcome{Header: w.Header()}
	h.app.gw.StoredResponse(r.Context(), gateway.StoredRequest{Method: r.Method, Owner: who, ID: id, Items: sub != "",
		Query: r.URL.Query(), Header: r.Header}, o)
	if o.Err != nil {
		delete(w.Header(), "Content-Encoding")
	}
	WriteJSON(w, o.Status, o.Body)
}

// serveAnthropicModels answers GET /v1/models and /v1/models/{id} in
// Anthropic's shape, for a client that sent anthropic-version.
func (h *Handler) serveAnthropicModels(w http.ResponseWriter, r *http.Request, id string) {
	ids := h.app.gw.ModelIDs()
	names := make([]string, len(ids))
	for i, m := range ids {
		names[i] = m.ID
	}
	if id != "" {
		for _, n := range names {
			if n == id {
				WriteJSON(w, http.StatusOK, messages.ModelInfo(id))
				return
			}
		}
		writeAPIError(w, gateway.APIMessages, gateway.ModelNotFound(id))
		return
	}
	page, err := messages.ParseModelPage(r.URL.Query())
	if err != nil {
		writeAPIError(w, gateway.APIMessages, gateway.AsProviderError(err))
		return
	}
	WriteJSON(w, http.StatusOK, messages.ModelList(names, page))
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.Validator             = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
)

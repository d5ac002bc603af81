package caddymodule

import (
	"errors"
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/modelgate/modelgate/providers"
)

// serveChat answers POST /v1/chat/completions: validate, route, translate,
// and send to each target in turn until one answers.
func (h *Handler) serveChat(w http.ResponseWriter, r *http.Request) {
	body, perr := readBody(r, h.MaxRequestBody)
	if perr != nil {
		writeError(w, perr)
		return
	}
	info, err := providers.ValidateChat(body)
	if err != nil {
		writeError(w, asProviderError(err))
		return
	}
	targets := h.app.resolve(info.Model)
	if len(targets) == 0 {
		writeError(w, modelNotFound(info.Model))
		return
	}

	repl := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	var last *failure
	for i, t := range targets {
		repl.Set("http.modelgate.provider", t.provider.name)
		repl.Set("http.modelgate.model", t.model)
		if t.provider.chat == nil {
			last = &failure{err: &providers.Error{
				Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "unsupported_endpoint",
				Message: "provider " + t.provider.name + " does not serve chat completions",
			}}
			continue
		}
		preq, err := t.provider.chat.ChatRequest(body, t.model)
		if err != nil {
			writeError(w, asProviderError(err))
			return
		}
		f := t.provider.forward(w, r, preq, info)
		if f == nil {
			return
		}
		last = f
		if i < len(targets)-1 {
			h.logger.Warn("provider failed; trying the next target",
				zap.String("provider", t.provider.name),
				zap.String("model", t.model),
				zap.Int("status", f.err.Status),
				zap.String("error", f.err.Message))
		}
	}
	last.write(w)
}

// asProviderError returns err as a unified error; anything that is not one
// already is an internal error whose text stays in the server.
func asProviderError(err error) *providers.Error {
	var pe *providers.Error
	if errors.As(err, &pe) {
		return pe
	}
	return &providers.Error{Status: http.StatusInternalServerError, Type: "server_error",
		Message: "the request could not be translated"}
}

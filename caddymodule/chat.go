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
		writeChatError(w, "", perr)
		return
	}
	info, err := providers.ValidateChat(body)
	if err != nil {
		writeChatError(w, "", asProviderError(err))
		return
	}
	targets := h.app.resolve(info.Model)
	if len(targets) == 0 {
		writeChatError(w, "", modelNotFound(info.Model))
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
			writeChatError(w, t.provider.name, asProviderError(err))
			return
		}
		status, f := t.provider.forward(w, r, preq, info)
		if f == nil {
			observeRequest(endpointChat, t.provider.name, status)
			return
		}
		last = f
		if r.Context().Err() != nil {
			return // the client has gone: nobody waits for another target
		}
		msg := "provider failed"
		if i < len(targets)-1 {
			metrics.fallbacks.WithLabelValues(t.provider.name).Inc()
			msg = "provider failed; trying the next target"
		}
		h.logger.Warn(msg,
			zap.String("provider", t.provider.name),
			zap.String("model", t.model),
			zap.Int("status", f.err.Status),
			zap.String("error", f.err.Message),
			zap.NamedError("cause", f.cause))
	}
	last.write(w)
	observeRequest(endpointChat, "", last.err.Status)
}

// endpointChat is the endpoint label of chat completions in metrics.
const endpointChat = "chat_completions"

// writeChatError answers a chat request that reached no provider.
func writeChatError(w http.ResponseWriter, provider string, e *providers.Error) {
	writeError(w, e)
	observeRequest(endpointChat, provider, e.Status)
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

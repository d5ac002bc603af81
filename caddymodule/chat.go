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
		writeEndpointError(w, endpointChat, "", perr)
		return
	}
	info, err := providers.ValidateChat(body)
	if err != nil {
		writeEndpointError(w, endpointChat, "", asProviderError(err))
		return
	}
	if !requestKey(r).allows(info.Model) {
		writeEndpointError(w, endpointChat, "", modelNotAllowed(info.Model))
		return
	}
	targets := h.app.resolve(info.Model)
	if len(targets) == 0 {
		writeEndpointError(w, endpointChat, "", modelNotFound(info.Model))
		return
	}

	h.tryTargets(w, r, endpointChat, targets, func(p *provider, model string) (providers.Request, exchange, error) {
		if p.chat == nil {
			return providers.Request{}, exchange{}, errUnsupported
		}
		preq, err := p.chat.ChatRequest(body, model)
		ex := exchange{stream: info.Stream, translate: p.chat.ChatResponse, mapError: p.chat.Error}
		if info.Stream {
			ex.tr = p.chat.ChatStream(providers.StreamOptions{IncludeUsage: info.IncludeUsage})
		}
		return preq, ex, err
	})
}

// errUnsupported is what a target's prepare function returns when the
// provider does not serve the endpoint.
var errUnsupported = errors.New("the provider does not serve this endpoint")

// tryTargets sends the request to each target in turn, as prepare
// translates it for that target's provider, until one answers; it writes the
// last failure when none does. A translation error is the client's (400) and
// ends the request.
func (h *Handler) tryTargets(w http.ResponseWriter, r *http.Request, endpoint string, targets []target,
	prepare func(p *provider, model string) (providers.Request, exchange, error)) {
	repl := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	var last *failure
	for i, t := range targets {
		repl.Set("http.modelgate.provider", t.provider.name)
		repl.Set("http.modelgate.model", t.model)
		preq, ex, err := prepare(t.provider, t.model)
		if errors.Is(err, errUnsupported) {
			last = &failure{err: &providers.Error{
				Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "unsupported_endpoint",
				Message: "provider " + t.provider.name + " does not serve " + endpoint,
			}}
			continue
		}
		if err != nil {
			writeEndpointError(w, endpoint, t.provider.name, asProviderError(err))
			return
		}
		status, f := t.provider.forward(w, r, preq, ex)
		if f == nil {
			observeRequest(endpoint, t.provider.name, status)
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
			zap.String("endpoint", endpoint),
			zap.String("provider", t.provider.name),
			zap.String("model", t.model),
			zap.Int("status", f.err.Status),
			zap.String("error", f.err.Message),
			zap.NamedError("cause", f.cause))
	}
	last.write(w)
	observeRequest(endpoint, "", last.err.Status)
}

// endpointChat is the endpoint label of chat completions in metrics.
const endpointChat = "chat_completions"

// writeEndpointError answers a request that reached no provider.
func writeEndpointError(w http.ResponseWriter, endpoint, provider string, e *providers.Error) {
	writeError(w, e)
	observeRequest(endpoint, provider, e.Status)
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

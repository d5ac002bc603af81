package caddygateway

import (
	"errors"
	"net/http"
	"strings"

	"go.uber.org/zap"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/messages"
	"github.com/modelgate/modelgate/providers/sse"
)

// This file serves Anthropic's Messages API (see docs/design/hub-and-pass-through.md), for Claude
// Code and the Anthropic SDKs:
//
//	POST /v1/messages               a message, streamed or not
//	POST /v1/messages/count_tokens  the input tokens a request would take
//
// A model on a provider that speaks the Messages API itself (Anthropic)
// gets the request passed through untouched but for the model — thinking
// signatures, cache_control, anthropic-beta and anthropic-version
// included — and its answer back as it was sent. Any other chat provider
// gets the request translated through the chat hub and the answer
// translated back, event by event. Every error is in Anthropic's shape.

// messagesAPI writes errors as Anthropic's API does:
// {"type":"error","error":{"type","message"}}, and event: error in streams.
var messagesAPI = &api{
	writeError: func(w http.ResponseWriter, e *providers.Error) {
		w.Header().Del("Content-Encoding")
		WriteJSON(w, messages.ErrorStatus(e), messages.ErrorBody(e))
	},
	streamError: messages.AppendErrorEvent,
	ends: func(ev []byte) bool {
		name, _ := sse.Fields(ev)
		return string(name) == "message_stop" || string(name) == "error"
	},
}

var (
	endpointMessages    = endpoint{label: "messages", serves: speaksMessages, api: messagesAPI, usage: messagesUsage}
	endpointCountTokens = endpoint{label: "messages_count_tokens", serves: speaksMessages, api: messagesAPI, free: true}
)

// speaksMessages reports whether a provider serves the Messages API:
// natively, or through its chat translator.
func speaksMessages(p *provider) bool { return p.Messages != nil || p.Chat != nil }

// isMessagesPath reports whether path belongs to the Messages API, whose
// errors take Anthropic's shape (modelgate_auth's too).
func isMessagesPath(path string) bool {
	return path == "/v1/messages" || strings.HasPrefix(path, "/v1/messages/")
}

// apiForPath is the error shape of the API a path belongs to.
func apiForPath(path string) *api {
	if isMessagesPath(path) {
		return messagesAPI
	}
	return openAIAPI
}

// messages serves POST /v1/messages.
func (d *dispatcher) messages(w http.ResponseWriter, r *http.Request, body []byte, key *Key, log *zap.Logger) {
	info, err := messages.Validate(body)
	if err != nil {
		writeEndpointError(w, endpointMessages, "", asProviderError(err))
		return
	}
	d.serve(w, r, key, &call{endpoint: endpointMessages, model: info.Model, body: body, log: log,
		prepare: func(p *provider, model string) (providers.Request, exchange, error) {
			if p.Messages != nil {
				preq, err := p.Messages.NativeRequest("/messages", body, model, r.Header)
				if !errors.Is(err, providers.ErrNotNative) {
					return preq, exchange{stream: info.Stream, translate: passThrough, mapError: nativeError(p)}, err
				}
			}
			if p.Chat == nil {
				return providers.Request{}, exchange{}, notServed(p, endpointMessages)
			}
			tr := messages.Chat{Inner: p.Chat}
			preq, err := tr.ChatRequest(body, model)
			ex := exchange{stream: info.Stream, mapError: tr.Error,
				translate: func(answer []byte) ([]byte, error) {
					out, err := tr.ChatResponse(answer)
					if err == nil {
						out = withModel(out, model)
					}
					return out, err
				}}
			if info.Stream {
				ex.tr = tr.ChatStream(providers.StreamOptions{IncludeUsage: true, Model: model})
			}
			return preq, ex, err
		}})
}

// countTokens serves POST /v1/messages/count_tokens: Anthropic counts its
// own; for any other provider the gateway estimates (providers/messages'
// EstimateTokens: the README says how).
func (d *dispatcher) countTokens(w http.ResponseWriter, r *http.Request, body []byte, key *Key, log *zap.Logger) {
	info, err := messages.ValidateCountTokens(body)
	if err != nil {
		writeEndpointError(w, endpointCountTokens, "", asProviderError(err))
		return
	}
	d.serve(w, r, key, &call{endpoint: endpointCountTokens, model: info.Model, log: log,
		prepare: func(p *provider, model string) (providers.Request, exchange, error) {
			if p.Messages != nil {
				preq, err := p.Messages.NativeRequest("/messages/count_tokens", body, model, r.Header)
				if !errors.Is(err, providers.ErrNotNative) {
					return preq, exchange{translate: passThrough, mapError: nativeError(p)}, err
				}
			}
			out, err := messages.CountTokens(body)
			return providers.Request{}, exchange{answer: out}, err
		}})
}

// notServed is the error of a provider that serves an endpoint natively
// for some models only, asked for another.
func notServed(p *provider, e endpoint) *providers.Error {
	return &providers.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "unsupported_endpoint",
		Message: "provider " + p.name + " does not serve " + e.label + " for this model"}
}

// passThrough is the translation of a native API's answer: none.
func passThrough(answer []byte) ([]byte, error) { return answer, nil }

// nativeError maps a provider's failed answer in its native API: through
// its chat translator's mapping when it has one, which knows the API's
// error shape, else as OpenAI-shaped bodies are read.
func nativeError(p *provider) func(int, http.Header, []byte) *providers.Error {
	if p.Chat != nil {
		return p.chatErrorMapper()
	}
	return func(status int, _ http.Header, body []byte) *providers.Error {
		return providers.ErrorFromBody(status, body)
	}
}

// serveAnthropicModels answers GET /v1/models and /v1/models/{id} in
// Anthropic's shape, for a client that sent anthropic-version.
func (h *Handler) serveAnthropicModels(w http.ResponseWriter, r *http.Request, id string) {
	ids := h.app.dispatch.modelIDs()
	names := make([]string, len(ids))
	for i, m := range ids {
		names[i] = m.id
	}
	if id != "" {
		for _, n := range names {
			if n == id {
				WriteJSON(w, http.StatusOK, messages.ModelInfo(id))
				return
			}
		}
		messagesAPI.writeError(w, modelNotFound(id))
		return
	}
	page, err := messages.ParseModelPage(r.URL.Query())
	if err != nil {
		messagesAPI.writeError(w, asProviderError(err))
		return
	}
	WriteJSON(w, http.StatusOK, messages.ModelList(names, page))
}

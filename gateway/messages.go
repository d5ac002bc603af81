package gateway

import (
	"context"
	"errors"
	"net/http"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/messages"
)

// This file serves Anthropic's Messages API
// (docs/design/hub-and-pass-through.md), for Claude Code and the Anthropic
// SDKs:
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
	errorBody:   func(e *providers.Error) (int, []byte) { return messages.ErrorStatus(e), messages.ErrorBody(e) },
	streamError: messages.AppendErrorEvent,
}

var (
	endpointMessages    = &endpoint{label: "messages", serves: speaksMessages, api: messagesAPI}
	endpointCountTokens = &endpoint{label: "messages_count_tokens", serves: speaksMessages, api: messagesAPI, free: true}
)

// speaksMessages reports whether a provider serves the Messages API:
// natively, or through its chat translator.
func speaksMessages(p *Provider) bool { return p.Messages != nil || p.Chat != nil }

// messages serves POST /v1/messages.
func (g *Gateway) messages(ctx context.Context, c *Call, o *Outcome) {
	body := c.Body
	info, err := messages.Validate(body)
	if err != nil {
		o.fail(messagesAPI, asProviderError(err))
		return
	}
	g.serve(ctx, c, o, &request{endpoint: endpointMessages, model: info.Model, body: body, stream: info.Stream,
		guarded: func(masked []byte) error { body = masked; return nil },
		prepare: func(p *Provider, model string) (providers.Request, exchange, error) {
			if p.Messages != nil {
				preq, err := p.Messages.NativeRequest("/messages", body, model, c.Header)
				if !errors.Is(err, providers.ErrNotNative) {
					ex := exchange{stream: info.Stream, mapError: nativeError(p),
						translate: func(answer []byte) ([]byte, Usage, error) { return answer, messages.AnswerUsage(answer), nil }}
					if info.Stream {
						ex.tr = messages.NewRelay()
					}
					return preq, ex, err
				}
			}
			if p.Chat == nil {
				return providers.Request{}, exchange{}, notServed(p, endpointMessages)
			}
			tr := messages.Chat{Inner: p.Chat}
			preq, err := tr.ChatRequest(body, model)
			ex := exchange{stream: info.Stream, mapError: tr.Error,
				translate: func(answer []byte) ([]byte, Usage, error) {
					out, used, err := tr.ChatResponse(answer)
					if err == nil {
						out = withModel(out, model)
					}
					return out, used, err
				}}
			if info.Stream {
				ex.tr = tr.ChatStream(providers.StreamOptions{IncludeUsage: true, Model: model})
			}
			return preq, ex, err
		}})
}

// countTokens serves POST /v1/messages/count_tokens: Anthropic counts its
// own; for any other provider the gateway estimates (providers/messages'
// EstimateTokens: docs/api/messages.md says how).
func (g *Gateway) countTokens(ctx context.Context, c *Call, o *Outcome) {
	body := c.Body
	info, err := messages.ValidateCountTokens(body)
	if err != nil {
		o.fail(messagesAPI, asProviderError(err))
		return
	}
	g.serve(ctx, c, o, &request{endpoint: endpointCountTokens, model: info.Model,
		guarded: func(masked []byte) error { body = masked; return nil },
		prepare: func(p *Provider, model string) (providers.Request, exchange, error) {
			if p.Messages != nil {
				preq, err := p.Messages.NativeRequest("/messages/count_tokens", body, model, c.Header)
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
func notServed(p *Provider, e *endpoint) *providers.Error {
	return &providers.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "unsupported_endpoint",
		Message: "provider " + p.Name + " does not serve " + e.label + " for this model"}
}

// passThrough is the translation of a native API's answer: none, and
// nothing read of it.
func passThrough(answer []byte) ([]byte, Usage, error) { return answer, Usage{}, nil }

// nativeError maps a provider's failed answer in its native API: through
// its chat translator's mapping when it has one, which knows the API's
// error shape, else as OpenAI-shaped bodies are read.
func nativeError(p *Provider) func(int, http.Header, []byte) *providers.Error {
	if p.Chat != nil {
		return p.chatErrorMapper()
	}
	return func(status int, _ http.Header, body []byte) *providers.Error {
		return providers.ErrorFromBody(status, body)
	}
}

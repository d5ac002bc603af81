// Package openai is the translator for providers that speak OpenAI's chat
// completions API natively: OpenAI itself and the many compatible servers
// (Groq, Mistral, Together, Fireworks, DeepSeek, OpenRouter, xAI, vLLM,
// Ollama, …). Requests pass through with only the model name replaced;
// answers and streams pass through untouched; errors are normalised into
// OpenAI's exact error shape.
package openai

import (
	"net/http"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/modelgate/modelgate/providers"
)

// Chat is the OpenAI-compatible chat translator. The zero value is ready.
type Chat struct{}

// ChatRequest replaces the body's model with the provider's model name.
func (Chat) ChatRequest(body []byte, model string) (providers.Request, error) {
	req := providers.Request{Path: "/chat/completions", Body: body}
	if gjson.GetBytes(body, "model").Str != model {
		b, err := sjson.SetBytes(body, "model", model)
		if err != nil {
			return req, err
		}
		req.Body = b
	}
	return req, nil
}

// ChatResponse returns the body unchanged: it is already unified.
func (Chat) ChatResponse(body []byte) ([]byte, error) { return body, nil }

// ChatStream returns nil: the provider's events are already unified chunks.
func (Chat) ChatStream(providers.StreamOptions) providers.StreamTranslator { return nil }

// Error normalises an OpenAI-style error body. Compatible servers differ in
// small ways (vLLM sends an integer code, some omit type or param, a proxy
// in front may answer with HTML); the client always gets all four keys,
// string codes, and never a non-JSON body.
func (Chat) Error(status int, body []byte) *providers.Error {
	return errorFromBody(status, body)
}

// errorFromBody maps an error body in OpenAI's shape, or anything else, to a
// unified error with the given status.
func errorFromBody(status int, body []byte) *providers.Error {
	e := &providers.Error{Status: status, Type: providers.TypeForStatus(status)}
	var msg gjson.Result
	if gjson.ValidBytes(body) {
		root := gjson.ParseBytes(body)
		eo := root.Get("error")
		switch {
		case eo.IsObject():
			msg = eo.Get("message")
			if t := eo.Get("type"); t.Type == gjson.String && t.Str != "" {
				e.Type = t.Str
			}
			switch c := eo.Get("code"); c.Type {
			case gjson.String:
				e.Code = c.Str
			case gjson.Number:
				if c.Int() != int64(status) {
					e.Code = c.Raw
				}
			}
			if p := eo.Get("param"); p.Type == gjson.String {
				e.Param = p.Str
			}
		case eo.Type == gjson.String:
			msg = eo
		default:
			msg = root.Get("message")
			if !msg.Exists() {
				msg = root.Get("detail")
			}
		}
	}
	if msg.Type == gjson.String && msg.Str != "" {
		e.Message = msg.Str
	} else {
		e.Message = "the provider answered " + http.StatusText(status)
	}
	return e
}

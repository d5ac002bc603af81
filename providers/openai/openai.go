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
	// gjson.GetBytes would copy the model it finds; reading body as a string
	// in place costs nothing, and the result is dropped before we return.
	m := gjson.Get(providers.InPlace(body), "model")
	switch {
	case m.Str == model:
	case m.Type == gjson.String && m.Index > 0 && plain(model):
		// The model's string, found once, is replaced where it stands:
		// the bytes sjson.SetBytes writes (which finds it again, and
		// allocates more), in one copy of the body.
		b := make([]byte, 0, len(body)-len(m.Raw)+len(model)+2)
		b = append(b, body[:m.Index]...)
		b = append(b, '"')
		b = append(b, model...)
		b = append(b, '"')
		req.Body = append(b, body[m.Index+len(m.Raw):]...)
	default:
		b, err := sjson.SetBytes(body, "model", model)
		if err != nil {
			return req, err
		}
		req.Body = b
	}
	return req, nil
}

// plain reports whether s is written in a JSON string as it is, by every
// encoder: printable ASCII without a quote or a backslash.
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// ChatResponse returns the body unchanged, it is already unified, and
// the usage it carries.
func (Chat) ChatResponse(body []byte) ([]byte, providers.Used, error) {
	return body, providers.ReadAnswerUsage(body), nil
}

// ChatStream returns nil: the provider's events are already unified chunks,
// which the gateway relays (Relay).
func (Chat) ChatStream(providers.StreamOptions) providers.StreamTranslator { return nil }

// Error normalises an OpenAI-style error body. Compatible servers differ in
// small ways (vLLM sends an integer code, some omit type or param, a proxy
// in front may answer with HTML); the client always gets all four keys,
// string codes, and never a non-JSON body.
func (Chat) Error(status int, _ http.Header, body []byte) *providers.Error {
	return providers.ErrorFromBody(status, body)
}

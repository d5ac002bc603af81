// Package openai is the translator for providers that speak OpenAI's chat
// completions API natively: OpenAI itself and the many compatible servers
// (Groq, Mistral, Together, Fireworks, DeepSeek, OpenRouter, xAI, vLLM,
// Ollama, …). Requests pass through with only the model name replaced;
// answers and streams pass through untouched; errors are normalised into
// OpenAI's exact error shape.
package openai

import (
	"bytes"
	"net/http"
	"strconv"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/modelgate/modelgate/providers"
)

// Chat is the OpenAI-compatible chat translator. The zero value is ready.
type Chat struct {
	// CacheControl passes prompt caching markers (cache_control, on
	// messages, content parts and tools) on to the provider, for servers
	// that read them (OpenRouter, for Claude). Without it they are left
	// out: OpenAI's API has none, and servers that check the body (Azure
	// OpenAI) refuse the request. The hub carries them when a request came
	// through the Messages or Responses API.
	CacheControl bool
}

// ChatRequest replaces the body's model with the provider's model name,
// and leaves out prompt caching markers unless c.CacheControl.
func (c Chat) ChatRequest(body []byte, model string) (providers.Request, error) {
	if !c.CacheControl && bytes.Contains(body, []byte(`"cache_control"`)) {
		b, err := stripCacheControl(body)
		if err != nil {
			return providers.Request{}, err
		}
		body = b
	}
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

// stripCacheControl returns body without the cache_control members of its
// messages, their content parts and its tools.
func stripCacheControl(body []byte) ([]byte, error) {
	var paths []string
	add := func(prefix string, v gjson.Result) {
		if v.Get("cache_control").Exists() {
			paths = append(paths, prefix+".cache_control")
		}
	}
	root := gjson.ParseBytes(body)
	for i, m := range root.Get("messages").Array() {
		p := "messages." + strconv.Itoa(i)
		add(p, m)
		for j, part := range m.Get("content").Array() {
			if part.IsObject() {
				add(p+".content."+strconv.Itoa(j), part)
			}
		}
	}
	for i, t := range root.Get("tools").Array() {
		add("tools."+strconv.Itoa(i), t)
	}
	for _, p := range paths {
		b, err := sjson.DeleteBytes(body, p)
		if err != nil {
			return nil, err
		}
		body = b
	}
	return body, nil
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

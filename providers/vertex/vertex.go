// Package vertex serves chat and the Messages API on Google Cloud's
// Vertex AI for the two publishers whose models the gateway speaks to
// there: Google's Gemini models through generateContent (package gemini)
// and Anthropic's Claude models through rawPredict with Anthropic's own
// Messages body (anthropic.Vertex). The model's name picks the publisher:
// a name that starts with "claude-" (claude-sonnet-4-5@20250929), or
// publishers/anthropic/models/{name}, is Anthropic's; every other name is
// Google's (or names its publisher or endpoint as package gemini reads it).
package vertex

import (
	"net/http"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/anthropic"
	"github.com/modelgate/modelgate/providers/gemini"
)

// anthropicPrefix is the resource prefix of Anthropic's models.
const anthropicPrefix = "publishers/anthropic/models/"

// Claude returns the name of an Anthropic model on Vertex AI, and whether
// model is one.
func Claude(model string) (string, bool) {
	if m, ok := strings.CutPrefix(model, anthropicPrefix); ok {
		return m, true
	}
	return model, strings.HasPrefix(model, "claude-")
}

// Chat translates chat for Vertex AI: Claude models to Anthropic's
// translator (rawPredict), the others to Gemini's.
type Chat struct {
	Google gemini.Chat
	Claude anthropic.Vertex
}

// ChatRequest translates a unified chat request for model's publisher.
func (c Chat) ChatRequest(body []byte, model string) (providers.Request, error) {
	if m, ok := Claude(model); ok {
		if c.Claude.Project == "" {
			return providers.Request{}, noProject(model)
		}
		return c.Claude.ChatRequest(body, m)
	}
	return c.Google.ChatRequest(body, model)
}

// ChatResponse translates an answer, which is Anthropic's message
// ("type":"message") for Claude and Google's GenerateContentResponse
// otherwise.
func (c Chat) ChatResponse(body []byte) ([]byte, providers.Used, error) {
	if isMessage(body) {
		return c.Claude.ChatResponse(body)
	}
	return c.Google.ChatResponse(body)
}

// ChatStream returns the translator of the model's publisher.
func (c Chat) ChatStream(opts providers.StreamOptions) providers.StreamTranslator {
	if _, ok := Claude(opts.Model); ok {
		return c.Claude.ChatStream(opts)
	}
	return c.Google.ChatStream(opts)
}

// Error maps an error answer: Anthropic's shape ("type":"error") when
// Claude answered, else Google's, which Vertex AI itself answers in.
func (c Chat) Error(status int, header http.Header, body []byte) *providers.Error {
	if providers.ValidJSON(body) && gjson.GetBytes(body, "type").Str == "error" {
		return c.Claude.Error(status, header, body)
	}
	return c.Google.Error(status, header, body)
}

// isMessage reports whether an answer is Anthropic's message.
func isMessage(body []byte) bool {
	return providers.ValidJSON(body) && gjson.GetBytes(body, "type").Str == "message"
}

// Messages passes the Messages API through to Claude models on Vertex AI
// (anthropic.Vertex); other models' requests get providers.ErrNotNative,
// so the gateway translates them for Gemini through the chat hub.
type Messages struct {
	Claude anthropic.Vertex
}

// NativeRequest returns the rawPredict request for a Claude model.
func (m Messages) NativeRequest(path string, body []byte, model string, header http.Header) (providers.Request, error) {
	name, ok := Claude(model)
	if !ok {
		return providers.Request{}, providers.ErrNotNative
	}
	if m.Claude.Project == "" {
		return providers.Request{}, noProject(model)
	}
	return m.Claude.NativeRequest(path, body, name, header)
}

// noProject is the error for a Claude model on a provider in express mode
// (an API key, no project), which serves Google's models only.
func noProject(model string) *providers.Error {
	return providers.UnsupportedBecause("model", "Vertex AI serves "+model+" to a project: express mode (an API key) serves Google's models only; configure the provider with a project and credentials")
}

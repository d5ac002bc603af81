package messages

import (
	"net/http"

	"github.com/modelgate/modelgate/providers"
)

// Chat adapts a provider's chat translator to the Messages API: it takes
// Messages request bodies and gives Messages answers and event streams,
// translating through the hub on both sides. With it the gateway serves
// /v1/messages for a provider exactly as it serves /v1/chat/completions:
// Validate the body, then use Chat{Inner: provider's translator} where the
// chat endpoint uses the translator itself, and render errors with
// ErrorStatus and ErrorBody.
type Chat struct {
	// Inner is the provider's own chat translator.
	Inner providers.Chat
}

var _ providers.Chat = Chat{}

// ChatRequest translates a Messages body (checked by Validate) into the
// hub, checks the hub request as the chat endpoint would, and has the
// provider's translator rewrite it for model.
func (c Chat) ChatRequest(body []byte, model string) (providers.Request, error) {
	hub, err := ToChat(body)
	if err != nil {
		return providers.Request{}, err
	}
	if _, err := providers.ValidateChat(hub); err != nil {
		return providers.Request{}, err
	}
	return c.Inner.ChatRequest(hub, model)
}

// ChatResponse translates the provider's answer into the hub, then into a
// Message, and returns the usage the Message carries.
func (c Chat) ChatResponse(body []byte) ([]byte, providers.Used, error) {
	hub, _, err := c.Inner.ChatResponse(body)
	if err != nil {
		return nil, providers.Used{}, err
	}
	return fromChat(hub)
}

// ChatStream returns a translator from the provider's stream to
// Anthropic's events. The provider's stream is always asked for usage
// (ToChat sets stream_options.include_usage), whatever opts says;
// opts.Model names the message when the provider's events do not.
func (c Chat) ChatStream(opts providers.StreamOptions) providers.StreamTranslator {
	opts.IncludeUsage = true
	return Wrap(c.Inner.ChatStream(opts), opts.Model)
}

// Error maps the provider's failed answer into the unified error, as the
// provider's translator does; ErrorStatus and ErrorBody put it in
// Anthropic's shape.
func (c Chat) Error(status int, header http.Header, body []byte) *providers.Error {
	return c.Inner.Error(status, header, body)
}

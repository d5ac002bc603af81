// Package anthropic translates modelgate's unified (OpenAI-shaped) chat
// completions to and from Anthropic's Messages API (POST /v1/messages):
// request bodies, answers, server-sent event streams and errors.
//
// Like every translator it works on bytes: it reads JSON with gjson and
// writes it by appending, copying raw JSON values through where it can.
package anthropic

import (
	"net/http"
	"time"

	"github.com/modelgate/modelgate/providers"
)

// providerName names the provider type in unsupported-parameter errors.
const providerName = "anthropic"

const (
	// DefaultMaxTokens is sent as max_tokens when neither the client nor
	// Chat.MaxTokens gives one; Anthropic requires the field.
	DefaultMaxTokens = 4096

	// DefaultVersion is the anthropic-version header sent when Chat.Version
	// is empty.
	DefaultVersion = "2023-06-01"
)

// Chat is the translator for Anthropic's Messages API. The zero value is
// ready to use, and a Chat is safe for concurrent use.
type Chat struct {
	// MaxTokens is sent as max_tokens when the client gives neither
	// max_completion_tokens nor max_tokens. Zero means DefaultMaxTokens.
	MaxTokens int

	// Version is the anthropic-version header. Empty means DefaultVersion.
	Version string

	// Models overrides, by the provider's exact model name, what
	// FeaturesFor derives from the name: whether the model takes
	// output_config.format and how it takes extended thinking.
	Models map[string]Features

	// Now returns the time for "created"; nil means time.Now.
	Now func() time.Time
}

var _ providers.Chat = Chat{}

func (c Chat) now() time.Time { return providers.Now(c.Now) }

// Error maps an Anthropic error answer, {"type":"error","error":{"type",
// "message"}}, to the unified error. The status is kept, except that
// Anthropic's non-standard 529 (overloaded) becomes 503. A body that is not
// Anthropic's (or any) JSON never reaches the message.
func (Chat) Error(status int, _ http.Header, body []byte) *providers.Error {
	typ, msg := providers.ErrorTypeMessage(body)
	if msg == "" {
		msg = "the provider answered " + statusText(status)
	}
	return mapError(status, typ, msg)
}

// mapError builds the unified error for an Anthropic error type (possibly
// empty or unknown) that came with status.
func mapError(status int, typ, msg string) *providers.Error {
	e := &providers.Error{Status: status, Message: msg}
	switch {
	case status == 529:
		e.Status = http.StatusServiceUnavailable
		if typ == "" {
			typ = "overloaded_error"
		}
	case status == http.StatusRequestEntityTooLarge && typ == "":
		typ = "request_too_large" // Cloudflare's page, in front of the API
	}
	switch typ {
	case "invalid_request_error":
		e.Type, e.Code = typ, typ
		if contextTooLong(msg) {
			e.Code = "context_length_exceeded"
		}
	case "authentication_error", "permission_error", "not_found_error":
		e.Type, e.Code = typ, typ
	case "rate_limit_error":
		e.Type, e.Code = typ, "rate_limit_exceeded"
	case "request_too_large":
		e.Type, e.Code = "invalid_request_error", "request_too_large"
	case "api_error":
		e.Type, e.Code = "server_error", "api_error"
	case "overloaded_error":
		e.Type, e.Code = "server_error", "overloaded"
	case "timeout_error":
		e.Type, e.Code = "server_error", "timeout"
	default: // billing_error, new types, or none at all
		e.Type, e.Code = providers.TypeForStatus(e.Status), typ
	}
	return e
}

// contextTooLong reports whether an invalid_request_error's message says
// the prompt does not fit the model's context window, as Anthropic words
// it: "prompt is too long: 208310 tokens > 200000 maximum", or "input
// length and `max_tokens` exceed context limit: 187254 + 20000 > 200000,
// decrease input length or `max_tokens` and try again".
func contextTooLong(msg string) bool {
	return indexFold(msg, "prompt is too long") >= 0 || indexFold(msg, "exceed context limit") >= 0
}

// statusText names an HTTP status for messages, including Anthropic's 529.
func statusText(status int) string {
	if status == 529 {
		return "529 Overloaded"
	}
	return providers.StatusText(status)
}

// finishReason maps an Anthropic stop_reason to OpenAI's finish_reason.
// Unknown and missing reasons become "stop".
func finishReason(stop string) string {
	switch stop {
	case "max_tokens", "model_context_window_exceeded":
		return "length"
	case "tool_use":
		return "tool_calls"
	case "refusal":
		return "content_filter"
	default: // end_turn, stop_sequence, pause_turn, null, new reasons
		return "stop"
	}
}

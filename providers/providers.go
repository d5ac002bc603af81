// Package providers holds modelgate's unified API, which is OpenAI's wire
// format, and the contracts that every provider translator fulfils.
//
// Each provider family lives in its own subpackage (openai, anthropic, …) and
// translates unified request bodies into its own and its answers back, as
// bytes: translators read JSON with gjson, never unmarshalling whole bodies
// into structs, and write it through the writer of package jsonw, which
// keeps JSON's grammar, and the typed writers of this package for the
// unified shapes (Chunks, Completion, Usage, Error, the embeddings list and
// the rerank result).
//
// Nothing here knows about Caddy or about how a request reaches the provider;
// the gateway's core (package gateway) sends the translated request through
// the provider's upstream and feeds the answer back into the translator,
// which returns what the answer used as data (Used).
package providers

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/modelgate/modelgate/providers/sse"
)

// Request is one upstream call prepared by a translator.
type Request struct {
	// Method is the HTTP method; empty means POST.
	Method string

	// Path is appended to the provider's base URL path, e.g.
	// "/chat/completions" or "/v1/messages", and sent as it is written: it
	// is an escaped path. It may hold the model, as Gemini's
	// "/models/gemini-2.5-flash:generateContent" does; the translator
	// escapes what needs escaping (url.PathEscape, or as the provider's
	// SDK escapes it: Bedrock's "/model/us.anthropic.claude-…-v1%3A0/converse"
	// reaches the provider, and its signature, with the %3A).
	Path string

	// Query is the upstream request's query string without the "?", already
	// encoded (url.Values.Encode), e.g. "alt=sse" or
	// "api-version=2024-10-21". Empty: none.
	Query string

	// Body is the provider's own request body.
	Body []byte

	// Header holds provider headers the call needs besides authentication
	// and Content-Type (for example anthropic-version). May be nil. The
	// host only reads it: a translator may return one map for many
	// requests.
	Header http.Header

	// Framing is how a streamed answer to this request is cut into events.
	// Nil: server-sent events (SSE).
	Framing Framing

	// Upload, when set, is the body instead of Body: Length bytes read
	// from it as the request goes out, never held whole (the records
	// file of a native batch).
	Upload io.Reader
	Length int64
}

// An Answer is a provider's answer to a request a native batch API sends:
// its status, headers and body, read as it arrives. The caller closes
// Body.
type Answer struct {
	Status int
	Header http.Header
	Body   io.ReadCloser
}

// Send carries one request of a native batch API to the provider: the
// host sends it through the provider's upstream (its reverse_proxy, with
// its credentials), to its base URL joined with req.Path and req.Query,
// and returns the answer as it comes. An error means there is no answer.
type Send func(ctx context.Context, req Request) (Answer, error)

// Framing cuts a provider's streamed answer into events as its bytes
// arrive. Server-sent events are the default (SSE); a provider whose
// streams are framed otherwise, as AWS's binary event stream is, supplies
// its own in the Request. A framing may also take off an envelope the
// provider wraps events in: Bedrock's InvokeModelWithResponseStream sends
// each of Anthropic's server-sent events base64-encoded in an event-stream
// message, and its framing for a passed-through Messages stream hands on
// the server-sent event itself, as Anthropic would have sent it.
type Framing interface {
	// IsStream reports whether a successful answer with this Content-Type
	// is a stream in this framing (rather than, say, a JSON body).
	IsStream(contentType string) bool

	// Cut returns the first complete event in buf and the bytes after it;
	// ok is false while buf holds no complete event yet. An error means
	// the stream is corrupt and cannot be read further. The event may be
	// a slice of buf or bytes of the framing's own (a decoded message).
	Cut(buf []byte) (event, rest []byte, ok bool, err error)
}

// SSE is the server-sent events framing: an event is the lines before a
// blank line, passed to the StreamTranslator without that blank line.
var SSE Framing = sseFraming{}

type sseFraming struct{}

func (sseFraming) IsStream(contentType string) bool {
	mt, _, _ := strings.Cut(contentType, ";")
	return strings.EqualFold(strings.TrimSpace(mt), "text/event-stream")
}

func (sseFraming) Cut(buf []byte) (event, rest []byte, ok bool, err error) {
	event, rest, ok = sse.Cut(buf)
	return event, rest, ok, nil
}

// Chat translates chat completions for one provider family.
//
// Implementations are safe for concurrent use; per-stream state lives in the
// StreamTranslator that ChatStream returns.
type Chat interface {
	// ChatRequest rewrites a unified chat request body, already checked by
	// ValidateChat, into the provider's request for model, the provider's own
	// name of the model. A body the provider cannot express gets an *Error
	// with a 4xx status.
	ChatRequest(body []byte, model string) (Request, error)

	// ChatResponse translates a successful (2xx), non-streaming provider
	// body into a unified chat.completion object, and returns what the
	// answer used: the usage the completion carries (not Known when it
	// carries none).
	ChatResponse(body []byte) ([]byte, Used, error)

	// ChatStream returns a translator for one streamed answer, or nil when
	// the provider's server-sent events are already unified chunks and pass
	// through untouched (the gateway then relays them with openai.Relay,
	// which reads their usage).
	ChatStream(opts StreamOptions) StreamTranslator

	// Error maps a provider's failed answer (status >= 400), its headers
	// and body, into the unified error. It never copies a non-JSON body (an
	// HTML error page, say) to the client. The headers are all the
	// provider's, its rate-limit headers among them (a successful
	// answer's lose those in the gateway's transport).
	Error(status int, header http.Header, body []byte) *Error
}

// StreamOptions are the client's wishes for one streamed answer.
type StreamOptions struct {
	// IncludeUsage mirrors the client's stream_options.include_usage: a
	// final chunk with empty choices and the usage totals precedes data:
	// [DONE], and every other chunk carries "usage": null. Whatever it
	// says, the translator reports the usage it saw (StreamTranslator.Usage).
	IncludeUsage bool

	// Model is the provider's name of the model the request went to, for
	// the chunks' "model" when the provider's own events do not name it
	// (Bedrock's do not).
	Model string
}

// StreamTranslator turns one provider's server-sent events into unified
// chat.completion.chunk events, one upstream event at a time, so that nothing
// is held back longer than the event it belongs to.
type StreamTranslator interface {
	// Event translates one complete upstream event, as the request's
	// Framing cut it (for SSE: its lines without the blank line that ends
	// it), and appends the resulting unified events, each ending in a blank
	// line, to dst. The event's bytes are the caller's, valid only during the
	// call (they may be reverse_proxy's read buffer): a translator that keeps
	// anything of an event for later copies it.
	Event(dst, event []byte) ([]byte, error)

	// Close is called once when the upstream body has ended and appends
	// whatever the unified stream still owes the client: data: [DONE] after a
	// complete answer, an error event after a cut-off one.
	Close(dst []byte) []byte

	// Usage returns what the answer used, as the provider's events told
	// it: Known once the stream has given its usage whole (when the client
	// asked for usage, what its usage chunk carries), not Known for a
	// stream cut off before.
	Usage() Used
}

// StreamEnder is a StreamTranslator that tells when it has ended the unified
// stream (written its last event, or an error event) before the provider's
// body ends. The gateway then drops whatever the provider still sends, a
// frame its Framing cannot read included, rather than follow the end with
// an error event; Close is still called. Every translator of this module
// implements it. For one that does not, a frame that cannot be read always
// ends the stream with an error event.
type StreamEnder interface {
	Ended() bool
}

// StreamEnded reports whether tr has ended its unified stream.
func StreamEnded(tr StreamTranslator) bool {
	e, ok := tr.(StreamEnder)
	return ok && e.Ended()
}

// A Relay is a StreamTranslator that passes the provider's events on as
// they are, in the API the client speaks (a pass-through), reading them
// for their usage and for the end of the answer, and taking out only what
// the client did not ask for. Ended reports whether the client has the
// whole answer (the API's last event, or an error event); Close appends
// the API's error event to a stream the provider closed before that. A
// stream the provider broke off is ended by the gateway instead, with an
// error event of its own, without Close.
type Relay interface {
	StreamTranslator
	StreamEnder

	// Passes reports whether seg, whole events each ending in a blank
	// line "\n\n", may reach the client as it is — nothing in it to read
	// or to take out — and if so notes what it must of it (whether it
	// ends the answer), as Event would. The gateway then writes seg
	// itself, without cutting it into events or copying it.
	Passes(seg []byte) bool
}

// Native passes a request in a provider's own API through untouched but
// for the model: OpenAI's Responses API to OpenAI and Azure OpenAI,
// Anthropic's Messages API to Anthropic (docs/design/hub-and-pass-through.md). What the gateway
// does not understand — new fields, thinking signatures, cache_control,
// beta headers — reaches the provider as the client sent it, and the answer,
// stream or not, comes back as the provider sent it.
type Native interface {
	// NativeRequest returns the upstream request for body, the client's
	// request to path of its API ("/responses", "/messages",
	// "/messages/count_tokens"), for model, the provider's own name of the
	// model: body with only its model replaced, and the client headers in
	// header the API needs (anthropic-version, anthropic-beta).
	//
	// A provider that serves the API for some models or paths only (Claude
	// among Bedrock's models, say) returns ErrNotNative for the others:
	// the gateway then serves the request as for a provider without the
	// native API, through the chat hub (for count_tokens: its estimate).
	NativeRequest(path string, body []byte, model string, header http.Header) (Request, error)
}

// ErrNotNative is NativeRequest's answer for a request its provider does
// not take in its native API (see Native).
var ErrNotNative = errors.New("providers: the provider does not serve this request in its native API")

// Now returns now(), or time.Now() when now is nil: the time of a
// translator whose clock (its Now field, which tests set) is optional.
func Now(now func() time.Time) time.Time {
	if now != nil {
		return now()
	}
	return time.Now()
}

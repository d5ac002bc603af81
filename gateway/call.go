package gateway

import (
	"net/http"

	"go.uber.org/zap"

	"github.com/modelgate/modelgate/providers"
)

// API is one endpoint of the unified API.
type API uint8

// The APIs a call can be made to. APIFiles is no call the gateway serves:
// an upload counts against requests per minute (Admit).
const (
	APIChat        API = iota + 1 // POST /v1/chat/completions
	APIEmbeddings                 // POST /v1/embeddings
	APIRerank                     // POST /v1/rerank
	APIResponses                  // POST /v1/responses
	APIMessages                   // POST /v1/messages
	APICountTokens                // POST /v1/messages/count_tokens
	APIFiles                      // POST /v1/files
)

// String is the API's label in metrics and messages.
func (a API) String() string { return endpointOf(a).label }

// Anthropic reports whether the API speaks Anthropic's conventions: its
// error shape and rate-limit headers (the Messages API's).
func (a API) Anthropic() bool { return endpointOf(a).api == messagesAPI }

// ErrorBody is e as the API writes an error: its status and its body
// (OpenAI's shape, or Anthropic's on the Messages API).
func (a API) ErrorBody(e *providers.Error) (status int, body []byte) {
	return endpointOf(a).apiOf().errorBody(e)
}

// A Call is one request to the unified API, as the core serves it.
type Call struct {
	API API

	// Body is the client's body, read and size-checked by the host.
	Body []byte

	// Header holds the client's headers, of which a native API passes on
	// what it names (anthropic-version, anthropic-beta).
	Header http.Header

	// Key is the authenticated caller; nil: nobody (only internal tools).
	Key *Key

	// Sink is where a streamed answer goes; nil: nowhere (batch lines,
	// which never stream).
	Sink Sink

	// Batch is set for a batch line: no rate limits, its ids for logs.
	Batch *BatchLine

	// Path is the request's path, for what the gateway reports of it
	// (a key found in its body is "seen in POST <path>").
	Path string

	Log *zap.Logger // nil: the gateway's
}

// A BatchLine is the batch and line a call runs for.
type BatchLine struct {
	BatchID, CustomID string
}

// A Sink is where a streamed answer goes: the client's connection.
type Sink interface {
	// WriteHeader sends the status line with the outcome's Header.
	WriteHeader(status int)
	// Write sends events.
	Write(p []byte) (int, error)
	// Flush sends what was written at once.
	Flush() error
}

// Usage is what a call used, as data.
type Usage = providers.Used

// A Target is one provider and the provider's own name for the model.
type Target struct {
	Provider *Provider
	Model    string
}

// String is the target as logs name it: "<provider>/<model>"; "" for the
// zero Target.
func (t Target) String() string {
	if t.Provider == nil {
		return ""
	}
	return t.Provider.Name + "/" + t.Model
}

package respcache

import (
	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/messages"
	"github.com/modelgate/modelgate/providers/responses"
)

// Replay appends to dst the stream of a stored answer, body, in its API,
// for a request that asks for a stream: chat chunks (and the usage chunk
// when includeUsage, the client's stream_options.include_usage), Messages
// events or Responses events, as the hubs write them. The stream is the
// translation of the complete answer: each part of it whole in one delta.
// Embeddings and rerank answers do not stream: an error.
func Replay(dst []byte, api API, body []byte, includeUsage bool) ([]byte, error) {
	switch api {
	case Chat:
		return providers.ReplayChat(dst, body, includeUsage)
	case Messages:
		return messages.Replay(dst, body)
	case Responses:
		return responses.Replay(dst, body)
	}
	return dst, &providers.Error{Status: 400, Type: "invalid_request_error", Code: "unsupported_parameter",
		Message: string(api) + " answers do not stream"}
}

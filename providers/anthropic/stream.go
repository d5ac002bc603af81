package anthropic

import (
	"errors"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/sse"
)

// ChatStream returns a translator for one streamed answer.
func (c Chat) ChatStream(opts providers.StreamOptions) providers.StreamTranslator {
	return &stream{chat: c, includeUsage: opts.IncludeUsage}
}

// toolBlock links an Anthropic content block to its OpenAI tool call index.
type toolBlock struct {
	block int64 // Anthropic's content block index
	call  int   // OpenAI's tool_calls index: the count of earlier tool blocks
}

// stream translates one Anthropic event stream into unified chunks.
//
// Anthropic sends message_start, then for each content block a
// content_block_start, deltas and a content_block_stop, then message_delta
// (stop reason and usage) and message_stop; ping may come at any time, and
// an error event may end the stream early.
type stream struct {
	chat         Chat
	includeUsage bool

	// head opens every chunk: {"id":…,"object":…,"created":…,"model":…,
	// It is built at message_start (or the first event, if that is missing).
	head   []byte
	tools  []toolBlock
	finish string // mapped finish_reason; "" until message_delta gives one
	usage  usage
	done   bool // message_stop seen or error emitted: nothing more follows
}

var errMalformed = errors.New("anthropic: stream event data is not a JSON object")

// Event translates one upstream event.
func (s *stream) Event(dst, event []byte) ([]byte, error) {
	if s.done {
		return dst, nil
	}
	name, data := sse.Fields(event)
	if len(data) == 0 {
		return dst, nil // a comment, or an event without data
	}
	if !providers.ValidJSON(data) {
		return dst, errMalformed
	}
	v := gjson.ParseBytes(data)
	if !v.IsObject() {
		return dst, errMalformed
	}
	typ := v.Get("type").Str
	if typ == "" {
		typ = string(name)
	}

	switch typ {
	case "message_start":
		if s.head != nil {
			return dst, nil // a repeated message_start carries nothing new
		}
		msg := v.Get("message")
		s.start(msg.Get("id"), msg.Get("model"))
		s.usage.set(msg.Get("usage"))
		dst = s.openChunk(dst)
		dst = append(dst, `{"role":"assistant","content":""}`...)
		return s.closeChunk(dst, ""), nil

	case "content_block_start":
		block := v.Get("content_block")
		switch block.Get("type").Str {
		case "tool_use":
			k := len(s.tools)
			s.tools = append(s.tools, toolBlock{block: v.Get("index").Int(), call: k})
			dst = s.openChunk(dst)
			dst = append(dst, `{"tool_calls":[{"index":`...)
			dst = providers.AppendInt(dst, int64(k))
			dst = append(dst, `,"id":`...)
			dst = appendRawString(dst, block.Get("id"))
			dst = append(dst, `,"type":"function","function":{"name":`...)
			dst = appendRawString(dst, block.Get("name"))
			dst = append(dst, `,"arguments":""}}]}`...)
			return s.closeChunk(dst, ""), nil
		case "text":
			return s.content(dst, block.Get("text")), nil
		}

	case "content_block_delta":
		delta := v.Get("delta")
		switch delta.Get("type").Str {
		case "text_delta":
			return s.content(dst, delta.Get("text")), nil
		case "input_json_delta":
			part := delta.Get("partial_json")
			if part.Type != gjson.String || part.Str == "" {
				return dst, nil
			}
			index := v.Get("index").Int()
			for _, t := range s.tools {
				if t.block != index {
					continue
				}
				dst = s.openChunk(dst)
				dst = append(dst, `{"tool_calls":[{"index":`...)
				dst = providers.AppendInt(dst, int64(t.call))
				dst = append(dst, `,"function":{"arguments":`...)
				dst = append(dst, part.Raw...)
				dst = append(dst, "}}]}"...)
				return s.closeChunk(dst, ""), nil
			}
		}
		// thinking_delta, signature_delta, citations_delta: nothing to say.

	case "message_delta":
		if r := v.Get("delta.stop_reason"); r.Type == gjson.String {
			s.finish = finishReason(r.Str)
		}
		s.usage.set(v.Get("usage"))

	case "message_stop":
		s.done = true
		finish := s.finish
		if finish == "" {
			finish = "stop"
		}
		dst = s.openChunk(dst)
		dst = append(dst, "{}"...)
		dst = s.closeChunk(dst, finish)
		if s.includeUsage {
			dst = append(dst, "data: "...)
			dst = append(dst, s.head...)
			dst = append(dst, `"choices":[],"usage":`...)
			dst = s.usage.append(dst)
			dst = append(dst, "}\n\n"...)
		}
		return append(dst, sse.Done...), nil

	case "error":
		s.done = true
		e := v.Get("error")
		typ, msg := e.Get("type").Str, e.Get("message").Str
		if msg == "" {
			msg = "the provider reported an error in its stream"
		}
		return sse.AppendData(dst, mapError(streamErrorStatus(typ), typ, msg).JSON()), nil
	}
	// ping, content_block_stop, and event types this code does not know.
	return dst, nil
}

// Close appends an error event when the upstream stream ended before
// message_stop (or an error event) and nothing otherwise: [DONE] was sent
// with message_stop.
func (s *stream) Close(dst []byte) []byte {
	if s.done {
		return dst
	}
	s.done = true
	e := providers.Error{
		Type:    "server_error",
		Code:    "stream_incomplete",
		Message: "the provider's stream ended before the answer was complete",
	}
	return sse.AppendData(dst, e.JSON())
}

// start builds the head shared by all chunks.
func (s *stream) start(id, model gjson.Result) {
	h := make([]byte, 0, 96+len(id.Raw)+len(model.Raw))
	h = append(h, `{"id":`...)
	h = appendRawString(h, id)
	h = append(h, `,"object":"chat.completion.chunk","created":`...)
	h = providers.AppendInt(h, s.chat.now().Unix())
	h = append(h, `,"model":`...)
	h = appendRawString(h, model)
	s.head = append(h, ',')
}

// openChunk appends a chunk up to its delta.
func (s *stream) openChunk(dst []byte) []byte {
	if s.head == nil {
		s.start(gjson.Result{}, gjson.Result{})
	}
	dst = append(dst, "data: "...)
	dst = append(dst, s.head...)
	return append(dst, `"choices":[{"index":0,"delta":`...)
}

// closeChunk appends the rest of a chunk after its delta; finish is its
// finish_reason, or "" for null.
func (s *stream) closeChunk(dst []byte, finish string) []byte {
	dst = append(dst, `,"logprobs":null,"finish_reason":`...)
	if finish == "" {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, '"')
		dst = append(dst, finish...)
		dst = append(dst, '"')
	}
	dst = append(dst, "}]"...)
	if s.includeUsage {
		dst = append(dst, `,"usage":null`...)
	}
	return append(dst, "}\n\n"...)
}

// content appends a chunk with a content delta, unless text is empty.
func (s *stream) content(dst []byte, text gjson.Result) []byte {
	if text.Type != gjson.String || text.Str == "" {
		return dst
	}
	dst = s.openChunk(dst)
	dst = append(dst, `{"content":`...)
	dst = append(dst, text.Raw...)
	dst = append(dst, '}')
	return s.closeChunk(dst, "")
}

// streamErrorStatus is the status Anthropic gives an error type, which an
// error event inside a stream lacks.
func streamErrorStatus(typ string) int {
	switch typ {
	case "invalid_request_error":
		return 400
	case "authentication_error":
		return 401
	case "permission_error":
		return 403
	case "not_found_error":
		return 404
	case "request_too_large":
		return 413
	case "rate_limit_error":
		return 429
	case "timeout_error":
		return 504
	case "overloaded_error":
		return 529
	default:
		return 500
	}
}

package messages

import (
	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/jsonw"
)

// Replay appends to dst the Messages event stream of a complete Message,
// message (a body of type "message"): what a client would have read had
// it been streamed. message_start carries the Message without its content
// and stop reason; each content block follows whole: its
// content_block_start (the block empty: text "", tool input {}), one
// delta with all its content (text_delta after its citations_delta
// events, thinking_delta and signature_delta, input_json_delta of the
// input) and content_block_stop; a block of another type (a server tool's
// result) comes whole in its content_block_start. message_delta (the stop
// reason and sequence, the usage) and message_stop end it. A response
// cache replays a stored answer so to a request that asks for a stream. A
// body that is not a Message is an error, and nothing is appended.
func Replay(dst, message []byte) ([]byte, error) {
	if !providers.ValidJSON(message) {
		return dst, errNotMessage
	}
	m := gjson.ParseBytes(message)
	content := m.Get("content")
	if !m.IsObject() || m.Get("type").Str != "message" || !content.IsArray() {
		return dst, errNotMessage
	}
	var s Stream
	out := s.replayStart(dst, m)
	i := int64(0)
	content.ForEach(func(_, b gjson.Result) bool {
		out = s.replayBlock(out, i, b)
		i++
		return true
	})
	const typ = "message_delta"
	w := s.begin(out, typ)
	o := s.head(&w, typ)
	d := o.Object("delta")
	rawOrNull(d, "stop_reason", m.Get("stop_reason"))
	rawOrNull(d, "stop_sequence", m.Get("stop_sequence"))
	d.End()
	if u := m.Get("usage"); u.IsObject() {
		o.Compact("usage", u.Raw)
	}
	out = s.end(&w, o, out)
	const stop = "message_stop"
	w = s.begin(out, stop)
	o = s.head(&w, stop)
	out = s.end(&w, o, out)
	if s.done { // the writer failed: the stream ends with its error event
		return dst, errNotMessage
	}
	return out, nil
}

var errNotMessage = &providers.Error{Status: 500, Type: "server_error", Code: "internal_error",
	Message: "the stored answer is not a Message"}

// rawOrNull writes the member k: v as it is (compacted), or null when v
// is missing.
func rawOrNull(o jsonw.Object, k string, v gjson.Result) {
	if v.Exists() {
		o.Compact(k, v.Raw)
	} else {
		o.Null(k)
	}
}

// replayStart appends message_start: the Message's members in their order,
// its content empty and its stop reason and sequence null.
func (s *Stream) replayStart(dst []byte, m gjson.Result) []byte {
	const typ = "message_start"
	w := s.begin(dst, typ)
	o := s.head(&w, typ)
	msg := o.Object("message")
	m.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "content":
			msg.Array("content").End()
		case "stop_reason", "stop_sequence":
			msg.Null(k.Str)
		default:
			msg.Compact(k.Str, v.Raw)
		}
		return true
	})
	msg.End()
	return s.end(&w, o, dst)
}

// replayBlock appends the events of content block i, b.
func (s *Stream) replayBlock(dst []byte, i int64, b gjson.Result) []byte {
	typ := b.Get("type").Str
	const start = "content_block_start"
	w := s.begin(dst, start)
	o := s.head(&w, start)
	o.Int("index", i)
	cb := o.Object("content_block")
	switch typ {
	case "text":
		cb.Str("type", "text")
		cb.Str("text", "")
		if b.Get("citations").IsArray() {
			cb.Array("citations").End()
		}
	case "thinking":
		cb.Str("type", "thinking")
		cb.Str("thinking", "")
		cb.Str("signature", "")
	case "tool_use", "server_tool_use", "mcp_tool_use":
		b.ForEach(func(k, v gjson.Result) bool {
			if k.Str == "input" {
				cb.Object("input").End()
			} else {
				cb.Compact(k.Str, v.Raw)
			}
			return true
		})
	default:
		b.ForEach(func(k, v gjson.Result) bool {
			cb.Compact(k.Str, v.Raw)
			return true
		})
	}
	cb.End()
	dst = s.end(&w, o, dst)

	switch typ {
	case "text":
		b.Get("citations").ForEach(func(_, c gjson.Result) bool {
			dst = s.replayDelta(dst, i, "citations_delta", "citation", c.Raw)
			return true
		})
		if t := b.Get("text"); t.Type == gjson.String && t.Str != "" {
			dst = s.replayDelta(dst, i, "text_delta", "text", t.Raw)
		}
	case "thinking":
		if t := b.Get("thinking"); t.Type == gjson.String && t.Str != "" {
			dst = s.replayDelta(dst, i, "thinking_delta", "thinking", t.Raw)
		}
		if sig := b.Get("signature"); sig.Type == gjson.String && sig.Str != "" {
			dst = s.replayDelta(dst, i, "signature_delta", "signature", sig.Raw)
		}
	case "tool_use", "server_tool_use", "mcp_tool_use":
		if in := b.Get("input"); in.IsObject() {
			if js := providers.CompactJSON(in.Raw); js != "{}" {
				dst = s.blockDelta(dst, i, "input_json_delta", "partial_json", jsonw.Plain(js))
			}
		}
	}

	const stop = "content_block_stop"
	w = s.begin(dst, stop)
	o = s.head(&w, stop)
	o.Int("index", i)
	return s.end(&w, o, dst)
}

// replayDelta appends a content_block_delta of block i: a delta of type
// typ whose member key is raw, a JSON value (compacted).
func (s *Stream) replayDelta(dst []byte, i int64, typ, key, raw string) []byte {
	const event = "content_block_delta"
	w := s.begin(dst, event)
	o := s.head(&w, event)
	o.Int("index", i)
	d := o.Object("delta")
	d.Str("type", typ)
	d.Compact(key, raw)
	d.End()
	return s.end(&w, o, dst)
}

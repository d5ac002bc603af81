package anthropic

import (
	"bytes"
	"errors"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/sse"
)

// ChatStream returns a translator for one streamed answer.
func (c Chat) ChatStream(opts providers.StreamOptions) providers.StreamTranslator {
	return &stream{chat: c, includeUsage: opts.IncludeUsage}
}

// Kinds of content blocks the stream keeps state for.
const (
	blockTool     = iota // tool_use: a tool call
	blockJSON            // tool_use of the response_format tool: content
	blockThinking        // thinking: reasoning_content, then a thinking block
)

// block is the state of one Anthropic content block.
type block struct {
	index int64 // Anthropic's content block index
	kind  int
	call  int // blockTool: OpenAI's tool_calls index, the count of earlier calls

	// blockTool, blockJSON: the input's JSON so far is compacted as it
	// arrives, as ChatResponse compacts the whole input; input says
	// whether any of it went out.
	compact providers.JSONCompactor
	input   bool

	// blockThinking: the text and signature so far, and whether the
	// thinking block went out.
	text, signature []byte
	sent            bool
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
	head    []byte
	blocks  []block
	calls   int    // tool calls sent
	finish  string // mapped finish_reason; "" until message_delta gives one
	usage   usage
	done    bool   // message_stop seen or error emitted: nothing more follows
	scratch []byte // reused by compaction
}

var errMalformed = errors.New("anthropic: stream event data is not a JSON object")

// find returns the state of content block index, or nil.
func (s *stream) find(index int64) *block {
	for i := len(s.blocks) - 1; i >= 0; i-- {
		if s.blocks[i].index == index {
			return &s.blocks[i]
		}
	}
	return nil
}

// Event translates one upstream event.
func (s *stream) Event(dst, event []byte) ([]byte, error) {
	if s.done {
		return dst, nil
	}
	name, data := sse.Fields(event)
	if len(data) == 0 {
		return dst, nil // a comment, or an event without data
	}
	if text, ok := textDelta(data); ok {
		return s.content(dst, providers.InPlace(text)), nil
	}
	if !providers.ValidJSON(data) {
		return dst, errMalformed
	}
	// Read in place: nothing read from data outlives this call (what the
	// stream keeps, its head and a thinking block's text and signature,
	// is copied).
	v := gjson.Parse(providers.InPlace(data))
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
		index := v.Get("index").Int()
		cb := v.Get("content_block")
		switch cb.Get("type").Str {
		case "tool_use":
			if isJSONTool(cb) {
				s.blocks = append(s.blocks, block{index: index, kind: blockJSON})
				return dst, nil
			}
			k := s.calls
			s.calls++
			s.blocks = append(s.blocks, block{index: index, kind: blockTool, call: k})
			dst = s.openChunk(dst)
			dst = append(dst, `{"tool_calls":[{"index":`...)
			dst = providers.AppendInt(dst, int64(k))
			dst = append(dst, `,"id":`...)
			dst = providers.AppendRawString(dst, cb.Get("id"))
			dst = append(dst, `,"type":"function","function":{"name":`...)
			dst = providers.AppendRawString(dst, cb.Get("name"))
			dst = append(dst, `,"arguments":""}}]}`...)
			return s.closeChunk(dst, ""), nil
		case "text":
			return s.content(dst, stringLiteral(cb.Get("text"))), nil
		case "thinking":
			s.blocks = append(s.blocks, block{index: index, kind: blockThinking})
			t := &s.blocks[len(s.blocks)-1]
			t.signature = append(t.signature, cb.Get("signature").Str...)
			return s.thinking(dst, t, cb.Get("thinking")), nil
		case "redacted_thinking":
			// It comes whole, with no deltas.
			dst = s.openChunk(dst)
			dst = append(dst, `{"thinking_blocks":[`...)
			dst = appendRedactedBlock(dst, cb.Get("data"))
			dst = append(dst, "]}"...)
			return s.closeChunk(dst, ""), nil
		}

	case "content_block_delta":
		delta := v.Get("delta")
		switch delta.Get("type").Str {
		case "text_delta":
			return s.content(dst, stringLiteral(delta.Get("text"))), nil
		case "input_json_delta":
			part := delta.Get("partial_json")
			if part.Type != gjson.String || part.Str == "" {
				return dst, nil
			}
			t := s.find(v.Get("index").Int())
			if t == nil || t.kind == blockThinking {
				return dst, nil
			}
			var changed bool
			if s.scratch, changed = t.compact.Compact(s.scratch[:0], part.Str); !changed {
				return s.input(dst, t, part.Raw), nil
			}
			if len(s.scratch) == 0 {
				return dst, nil // only whitespace
			}
			return s.input(dst, t, string(providers.AppendString(nil, string(s.scratch)))), nil
		case "thinking_delta":
			if t := s.find(v.Get("index").Int()); t != nil && t.kind == blockThinking {
				return s.thinking(dst, t, delta.Get("thinking")), nil
			}
		case "signature_delta":
			if t := s.find(v.Get("index").Int()); t != nil && t.kind == blockThinking {
				t.signature = append(t.signature, delta.Get("signature").Str...)
			}
		}
		// citations_delta and new kinds: nothing to say.

	case "content_block_stop":
		t := s.find(v.Get("index").Int())
		if t != nil && t.kind != blockThinking && !t.input {
			// No input came, or only "": the input is {}, as in an
			// answer that is not streamed.
			return s.input(dst, t, `"{}"`), nil
		}
		// A thinking block is complete, signature and all, at its stop.
		if t != nil && t.kind == blockThinking && !t.sent {
			t.sent = true
			dst = s.openChunk(dst)
			dst = append(dst, `{"thinking_blocks":[`...)
			text := providers.AppendString(s.scratch[:0], string(t.text))
			sig := gjson.Result{Type: gjson.String, Raw: string(providers.AppendString(nil, string(t.signature)))}
			dst = appendThinkingBlock(dst, string(text), sig)
			dst = append(dst, "]}"...)
			return s.closeChunk(dst, ""), nil
		}

	case "message_delta":
		if r := v.Get("delta.stop_reason"); r.Type == gjson.String {
			s.finish = finishReason(r.Str)
		}
		s.usage.set(v.Get("usage"))

	case "message_stop":
		s.done = true
		finish := s.finish
		switch {
		case finish == "":
			finish = "stop"
		case finish == "tool_calls" && s.calls == 0:
			finish = "stop" // only the response_format tool was called
		}
		dst = s.openChunk(dst)
		dst = append(dst, "{}"...)
		dst = s.closeChunk(dst, finish)
		if s.includeUsage {
			dst = providers.AppendUsageChunk(dst, s.head, s.usage.unified())
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
	// ping, and event types this code does not know.
	return dst, nil
}

// The form of a text delta as Anthropic writes it, its keys in this order:
// textDeltaHead, the block's index, textDeltaText, the text (a JSON
// string), "}}".
const (
	textDeltaHead = `{"type":"content_block_delta","index":`
	textDeltaText = `,"delta":{"type":"text_delta","text":`
)

// textDelta returns the text (a JSON string literal, a slice of data) of a
// text delta in the form Anthropic writes,
// nearly every event of a stream, read by that form rather than looked up
// key by key (which took half the time of translating one); ok is false
// for any other event, and for a text delta written otherwise, which Event
// reads in the general way to the same chunk. The text is checked as
// ValidJSON would check it in data; the rest of data is the form itself.
func textDelta(data []byte) (text []byte, ok bool) {
	rest, ok := bytes.CutPrefix(data, []byte(textDeltaHead))
	if !ok {
		return text, false
	}
	// The index: a JSON number without sign, fraction or exponent, which
	// a text delta does not use.
	digits := 0
	for digits < len(rest) && '0' <= rest[digits] && rest[digits] <= '9' {
		digits++
	}
	if digits == 0 || (rest[0] == '0' && digits > 1) {
		return text, false
	}
	rest, ok = bytes.CutPrefix(rest[digits:], []byte(textDeltaText))
	if !ok {
		return text, false
	}
	raw, ok := bytes.CutSuffix(rest, []byte("}}"))
	// One valid JSON string, and nothing else before the "}}".
	if !ok || len(raw) < 2 || raw[0] != '"' || !gjson.ValidBytes(raw) {
		return text, false
	}
	return raw, true
}

// stringLiteral is v's JSON text if v is a string, else "" (which content
// leaves out, as it does an empty string).
func stringLiteral(v gjson.Result) string {
	if v.Type != gjson.String {
		return `""`
	}
	return v.Raw
}

// input appends a chunk with a piece of tool input, a JSON string: an
// arguments delta of a tool call, or a content delta for the
// response_format tool.
func (s *stream) input(dst []byte, t *block, piece string) []byte {
	t.input = true
	dst = s.openChunk(dst)
	if t.kind == blockJSON {
		dst = append(dst, `{"content":`...)
		dst = append(dst, piece...)
		dst = append(dst, '}')
	} else {
		dst = append(dst, `{"tool_calls":[{"index":`...)
		dst = providers.AppendInt(dst, int64(t.call))
		dst = append(dst, `,"function":{"arguments":`...)
		dst = append(dst, piece...)
		dst = append(dst, "}}]}"...)
	}
	return s.closeChunk(dst, "")
}

// thinking appends a chunk with a reasoning_content delta for text, a
// JSON string, and adds it to the block's text; empty text adds nothing.
func (s *stream) thinking(dst []byte, t *block, text gjson.Result) []byte {
	if text.Type != gjson.String || text.Str == "" {
		return dst
	}
	t.text = append(t.text, text.Str...)
	dst = s.openChunk(dst)
	dst = append(dst, `{"reasoning_content":`...)
	dst = append(dst, text.Raw...)
	dst = append(dst, '}')
	return s.closeChunk(dst, "")
}

// Close appends an error event when the upstream stream ended before
// message_stop (or an error event) and nothing otherwise: [DONE] was sent
// with message_stop.
// Ended implements providers.StreamEnder.
func (s *stream) Ended() bool { return s.done }

var _ providers.StreamEnder = (*stream)(nil)

func (s *stream) Close(dst []byte) []byte {
	if s.done {
		return dst
	}
	s.done = true
	return providers.AppendStreamIncomplete(dst)
}

// start builds the head shared by all chunks.
func (s *stream) start(id, model gjson.Result) {
	h := make([]byte, 0, 96+len(id.Raw)+len(model.Raw))
	h = append(h, `{"id":`...)
	h = providers.AppendRawString(h, id)
	h = append(h, `,"object":"chat.completion.chunk","created":`...)
	h = providers.AppendInt(h, s.chat.now().Unix())
	h = append(h, `,"model":`...)
	h = providers.AppendRawString(h, model)
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
	dst = append(dst, `,"logprobs":null`...)
	return providers.AppendChunkEnd(dst, finish, s.includeUsage)
}

// content appends a chunk with a content delta, text (a JSON string
// literal), unless it is empty.
func (s *stream) content(dst []byte, text string) []byte {
	if text == `""` {
		return dst
	}
	dst = s.openChunk(dst)
	dst = append(dst, `{"content":`...)
	dst = append(dst, text...)
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

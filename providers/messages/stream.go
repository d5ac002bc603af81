package messages

import (
	"bytes"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/sse"
)

// Ping is Anthropic's keep-alive event. The gateway may send it on a slow
// upstream (every 15 s or so) to keep proxies from closing the stream;
// Anthropic's SDKs skip it.
var Ping = []byte("event: ping\ndata: {\"type\":\"ping\"}\n\n")

// Kinds of content block.
const (
	blockNone = iota
	blockText
	blockThinking
	blockTool
)

// toolBlock links a hub tool call (its index in tool_calls) to the
// content block that carries it.
type toolBlock struct {
	call  int64
	block int64
}

// Stream translates one hub chunk stream (chat.completion.chunk events,
// data: [DONE] at the end) into Anthropic's Messages event stream, one hub
// event at a time:
//
//	message_start                     at the first chunk (usage so far: the
//	                                  hub gives its usage only at the end)
//	content_block_start, ping         the first block is followed by a ping,
//	                                  as Anthropic's streams have it
//	content_block_delta               text_delta (content), thinking_delta
//	                                  (reasoning_content), signature_delta (a
//	                                  completed thinking block's signature),
//	                                  input_json_delta (tool call arguments)
//	content_block_stop                when the next block opens or the
//	                                  answer ends
//	message_delta, message_stop       at data: [DONE], with stop_reason,
//	                                  stop_sequence and the whole usage
//
// Each tool call is its own tool_use block; thinking text opens a thinking
// block that a thinking_blocks delta (the hub's signed block) completes
// with its signature; a redacted_thinking block comes whole. A hub error
// event becomes an Anthropic error event, and a stream that ends without
// a finish_reason (cut off) ends with an error event too, never silently.
//
// A Stream implements providers.StreamTranslator; its Event never returns
// an error: an event it cannot read ends the stream with an error event in
// Anthropic's shape, so that the client never gets a chunk in another
// API's shape.
type Stream struct {
	// Model names the message when the hub's chunks do not (the
	// provider's name of the model the request went to); optional.
	Model string

	id, model   []byte // JSON strings for message_start
	started     bool
	done        bool
	finished    bool // a finish_reason was seen
	pinged      bool
	next        int64 // index of the next content block
	open        int   // kind of the open block
	openAt      int64
	thinkingLen int // bytes of reasoning text in the open, unsigned thinking block
	tools       []toolBlock
	finish      string
	stopSeq     gjson.Result
	refusal     bool
	usage       usage
}

var _ providers.StreamTranslator = (*Stream)(nil)

// NewStream returns a translator for one hub stream; model names the
// message when the chunks do not (it may be empty).
func NewStream(model string) *Stream { return &Stream{Model: model} }

// Wrap returns a translator from a provider's own stream to Anthropic's:
// inner (the provider's chat translator, from its ChatStream, or nil when
// the provider's events are hub chunks already) and then a Stream. The
// provider's ChatStream must have been asked for usage
// (StreamOptions.IncludeUsage), as ToChat asks the provider. model names
// the message when the chunks do not (it may be empty).
func Wrap(inner providers.StreamTranslator, model string) providers.StreamTranslator {
	if inner == nil {
		return NewStream(model)
	}
	return &wrapped{inner: inner, s: Stream{Model: model}}
}

type wrapped struct {
	inner providers.StreamTranslator
	s     Stream
	buf   []byte
}

// Event translates one provider event into hub chunks and those into
// Anthropic events.
func (w *wrapped) Event(dst, event []byte) ([]byte, error) {
	if w.s.done {
		return dst, nil
	}
	var err error
	w.buf, err = w.inner.Event(w.buf[:0], event)
	dst = w.s.events(dst, w.buf)
	if err != nil {
		dst = w.s.fail(dst, &providers.Error{Status: 502, Type: "server_error", Code: "bad_upstream_event",
			Message: "the provider sent an event that could not be translated"})
	}
	return dst, nil
}

// Ended implements providers.StreamEnder.
func (w *wrapped) Ended() bool { return w.s.done }

var _ providers.StreamEnder = (*wrapped)(nil)

// Close ends both translations.
func (w *wrapped) Close(dst []byte) []byte {
	if !w.s.done {
		w.buf = w.inner.Close(w.buf[:0])
		dst = w.s.events(dst, w.buf)
	}
	return w.s.Close(dst)
}

// events translates the complete hub events in buf.
func (s *Stream) events(dst, buf []byte) []byte {
	for !s.done {
		ev, rest, ok := sse.Cut(buf)
		if !ok {
			break
		}
		dst, _ = s.Event(dst, ev)
		buf = rest
	}
	return dst
}

var doneData = []byte("[DONE]")

// Event translates one hub event: its lines without the blank line that
// ends it.
func (s *Stream) Event(dst, event []byte) ([]byte, error) {
	if s.done {
		return dst, nil
	}
	name, data := sse.Fields(event)
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return dst, nil // a comment (keep-alive), or an event without data
	}
	if bytes.Equal(data, doneData) {
		return s.end(dst), nil
	}
	if !providers.ValidJSON(data) {
		return s.fail(dst, &providers.Error{Status: 502, Type: "server_error", Code: "bad_upstream_event",
			Message: "the provider sent an event that is not JSON"}), nil
	}
	v := gjson.ParseBytes(data)
	if !v.IsObject() {
		return s.fail(dst, &providers.Error{Status: 502, Type: "server_error", Code: "bad_upstream_event",
			Message: "the provider sent an event that is not a JSON object"}), nil
	}
	// One pass over the chunk; the first of duplicate keys counts, as
	// gjson's Get reads.
	var id, model, choices, usage, errObj gjson.Result
	v.ForEach(func(key, val gjson.Result) bool {
		var field *gjson.Result
		switch key.Str {
		case "id":
			field = &id
		case "model":
			field = &model
		case "choices":
			field = &choices
		case "usage":
			field = &usage
		case "error":
			field = &errObj
		default:
			return true
		}
		if !field.Exists() {
			*field = val
		}
		return true
	})
	if errObj.Exists() && errObj.Type != gjson.Null {
		return s.fail(dst, streamError(errObj)), nil
	}
	if string(name) == "error" {
		return s.fail(dst, streamError(v)), nil
	}

	if !s.started {
		s.usage.set(usage)
		dst = s.start(dst, id, model)
	}
	choices.ForEach(func(_, c gjson.Result) bool {
		var index, delta, finish, stopReason gjson.Result
		c.ForEach(func(key, val gjson.Result) bool {
			var field *gjson.Result
			switch key.Str {
			case "index":
				field = &index
			case "delta":
				field = &delta
			case "finish_reason":
				field = &finish
			case "stop_reason":
				field = &stopReason
			default:
				return true
			}
			if !field.Exists() {
				*field = val
			}
			return true
		})
		if index.Exists() && index.Int() != 0 {
			return true // only the first choice: ToChat never asks for more
		}
		dst = s.delta(dst, delta)
		if finish.Type == gjson.String && finish.Str != "" {
			s.finished = true
			s.finish = finish.Str
			if stopReason.Type == gjson.String {
				s.stopSeq = stopReason // gjson.ParseBytes copied the event: it outlives it
			}
			dst = s.closeBlock(dst)
		}
		return false
	})
	s.usage.set(usage)
	return dst, nil
}

// delta translates one choice's delta.
func (s *Stream) delta(dst []byte, d gjson.Result) []byte {
	if !d.IsObject() {
		return dst
	}
	var reasoningContent, reasoning, thinkingBlocks, content, refusal, toolCalls gjson.Result
	d.ForEach(func(key, val gjson.Result) bool {
		var field *gjson.Result
		switch key.Str {
		case "reasoning_content":
			field = &reasoningContent
		case "reasoning":
			field = &reasoning
		case "thinking_blocks":
			field = &thinkingBlocks
		case "content":
			field = &content
		case "refusal":
			field = &refusal
		case "tool_calls":
			field = &toolCalls
		default:
			return true
		}
		if !field.Exists() {
			*field = val
		}
		return true
	})
	r := reasoningContent
	if r.Type != gjson.String {
		r = reasoning
	}
	if r.Type == gjson.String && r.Str != "" {
		if s.open != blockThinking {
			dst = s.openBlock(dst, blockThinking, `{"type":"thinking","thinking":"","signature":""}`)
			s.thinkingLen = 0
		}
		dst = s.thinkingDelta(dst, r.Raw)
		s.thinkingLen += len(r.Str)
	}
	thinkingBlocks.ForEach(func(_, tb gjson.Result) bool {
		dst = s.thinkingBlock(dst, tb)
		return true
	})
	if content.Type == gjson.String && content.Str != "" {
		dst = s.text(dst, content.Raw)
	}
	if refusal.Type == gjson.String && refusal.Str != "" {
		s.refusal = true
		dst = s.text(dst, refusal.Raw)
	}
	k := int64(0)
	toolCalls.ForEach(func(_, tc gjson.Result) bool {
		idx := k
		if i := tc.Get("index"); i.Type == gjson.Number {
			idx = i.Int()
		}
		k++
		dst = s.toolCall(dst, idx, tc)
		return true
	})
	return dst
}

// thinkingBlock completes or adds a block from the hub's thinking_blocks.
func (s *Stream) thinkingBlock(dst []byte, tb gjson.Result) []byte {
	switch tb.Get("type").Str {
	case "thinking":
		text, sig := tb.Get("thinking"), tb.Get("signature")
		if s.open == blockThinking {
			// The block's text has streamed as reasoning_content; send
			// what did not.
			if len(text.Str) > s.thinkingLen {
				rest := providers.AppendString(nil, text.Str[s.thinkingLen:])
				dst = s.thinkingDelta(dst, string(rest))
			}
		} else {
			dst = s.openBlock(dst, blockThinking, `{"type":"thinking","thinking":"","signature":""}`)
			if text.Type == gjson.String && text.Str != "" {
				dst = s.thinkingDelta(dst, text.Raw)
			}
		}
		if sig.Type == gjson.String && sig.Str != "" {
			dst = s.eventHead(dst, "content_block_delta")
			dst = providers.AppendInt(dst, s.openAt)
			dst = append(dst, `,"delta":{"type":"signature_delta","signature":`...)
			dst = append(dst, sig.Raw...)
			dst = append(dst, "}}\n\n"...)
		}
		return s.closeBlock(dst)
	case "redacted_thinking":
		b := make([]byte, 0, 48+len(tb.Get("data").Raw))
		b = append(b, `{"type":"redacted_thinking","data":`...)
		b = providers.AppendRawString(b, tb.Get("data"))
		b = append(b, '}')
		dst = s.openBlock(dst, blockThinking, string(b))
		return s.closeBlock(dst)
	}
	return dst
}

// thinkingDelta appends a thinking_delta for raw, a JSON string.
func (s *Stream) thinkingDelta(dst []byte, raw string) []byte {
	dst = s.eventHead(dst, "content_block_delta")
	dst = providers.AppendInt(dst, s.openAt)
	dst = append(dst, `,"delta":{"type":"thinking_delta","thinking":`...)
	dst = append(dst, raw...)
	return append(dst, "}}\n\n"...)
}

// text appends a text_delta for raw, a JSON string, opening a text block
// when none is open.
func (s *Stream) text(dst []byte, raw string) []byte {
	if s.open != blockText {
		dst = s.openBlock(dst, blockText, `{"type":"text","text":""}`)
	}
	dst = s.eventHead(dst, "content_block_delta")
	dst = providers.AppendInt(dst, s.openAt)
	dst = append(dst, `,"delta":{"type":"text_delta","text":`...)
	dst = append(dst, raw...)
	return append(dst, "}}\n\n"...)
}

// toolCall translates one tool call delta: the first for a call opens its
// tool_use block, arguments fragments become input_json_delta.
func (s *Stream) toolCall(dst []byte, call int64, tc gjson.Result) []byte {
	fn := tc.Get("function")
	block := int64(-1)
	for _, t := range s.tools {
		if t.call == call {
			block = t.block
			break
		}
	}
	if block < 0 {
		b := make([]byte, 0, 64+len(tc.Get("id").Raw)+len(fn.Get("name").Raw))
		b = append(b, `{"type":"tool_use","id":`...)
		b = appendToolID(b, tc.Get("id"))
		b = append(b, `,"name":`...)
		b = providers.AppendRawString(b, fn.Get("name"))
		b = append(b, `,"input":{}}`...)
		dst = s.openBlock(dst, blockTool, string(b))
		block = s.openAt
		s.tools = append(s.tools, toolBlock{call: call, block: block})
	}
	if args := fn.Get("arguments"); args.Type == gjson.String && args.Str != "" {
		dst = s.eventHead(dst, "content_block_delta")
		dst = providers.AppendInt(dst, block)
		dst = append(dst, `,"delta":{"type":"input_json_delta","partial_json":`...)
		dst = append(dst, args.Raw...)
		dst = append(dst, "}}\n\n"...)
	}
	return dst
}

// eventHead appends an event's first line and its data up to its index
// (or, for message events, up to the end of "type").
func (s *Stream) eventHead(dst []byte, typ string) []byte {
	dst = append(dst, "event: "...)
	dst = append(dst, typ...)
	dst = append(dst, "\ndata: {\"type\":\""...)
	dst = append(dst, typ...)
	dst = append(dst, '"')
	switch typ {
	case "content_block_start", "content_block_delta", "content_block_stop":
		dst = append(dst, `,"index":`...)
	}
	return dst
}

// openBlock closes the open block and opens a new one of kind, whose
// content_block is start.
func (s *Stream) openBlock(dst []byte, kind int, start string) []byte {
	dst = s.closeBlock(dst)
	s.open, s.openAt = kind, s.next
	s.next++
	dst = s.eventHead(dst, "content_block_start")
	dst = providers.AppendInt(dst, s.openAt)
	dst = append(dst, `,"content_block":`...)
	dst = append(dst, start...)
	dst = append(dst, "}\n\n"...)
	if !s.pinged {
		s.pinged = true
		dst = append(dst, Ping...)
	}
	return dst
}

// closeBlock appends content_block_stop for the open block, if any.
func (s *Stream) closeBlock(dst []byte) []byte {
	if s.open == blockNone {
		return dst
	}
	s.open = blockNone
	dst = s.eventHead(dst, "content_block_stop")
	dst = providers.AppendInt(dst, s.openAt)
	return append(dst, "}\n\n"...)
}

// start appends message_start.
func (s *Stream) start(dst []byte, id, model gjson.Result) []byte {
	s.started = true
	s.id = appendMessageID(s.id[:0], id)
	if (model.Type != gjson.String || model.Str == "") && s.Model != "" {
		s.model = providers.AppendString(s.model[:0], s.Model)
	} else {
		s.model = providers.AppendRawString(s.model[:0], model)
	}
	dst = s.eventHead(dst, "message_start")
	dst = append(dst, `,"message":{"id":`...)
	dst = append(dst, s.id...)
	dst = append(dst, `,"type":"message","role":"assistant","model":`...)
	dst = append(dst, s.model...)
	dst = append(dst, `,"content":[],"stop_reason":null,"stop_sequence":null,"usage":`...)
	dst = s.usage.append(dst)
	return append(dst, "}}\n\n"...)
}

// end appends what ends a complete answer: the open block's stop,
// message_delta with the stop reason and usage, and message_stop.
func (s *Stream) end(dst []byte) []byte {
	if !s.started {
		dst = s.start(dst, gjson.Result{}, gjson.Result{})
	}
	s.done = true
	dst = s.closeBlock(dst)
	stop, seq := mapStop(s.finish, s.stopSeq, len(s.tools) > 0, s.refusal)
	dst = s.eventHead(dst, "message_delta")
	dst = append(dst, `,"delta":{"stop_reason":"`...)
	dst = append(dst, stop...)
	dst = append(dst, `","stop_sequence":`...)
	if seq.Exists() {
		dst = append(dst, seq.Raw...)
	} else {
		dst = append(dst, "null"...)
	}
	dst = append(dst, `},"usage":`...)
	dst = s.usage.append(dst)
	dst = append(dst, "}\n\n"...)
	dst = s.eventHead(dst, "message_stop")
	return append(dst, "}\n\n"...)
}

// fail ends the stream with an error event.
func (s *Stream) fail(dst []byte, e *providers.Error) []byte {
	s.done = true
	return AppendErrorEvent(dst, e)
}

// Close is called once when the provider's stream has ended. A stream
// without data: [DONE] that has a finish_reason ends as a complete answer
// (the usage that may follow the finish is then what was seen); one
// without a finish_reason was cut off and ends with an error event.
// Ended implements providers.StreamEnder.
func (s *Stream) Ended() bool { return s.done }

var _ providers.StreamEnder = (*Stream)(nil)

func (s *Stream) Close(dst []byte) []byte {
	switch {
	case s.done:
		return dst
	case s.finished:
		return s.end(dst)
	}
	return s.fail(dst, providers.StreamIncomplete())
}

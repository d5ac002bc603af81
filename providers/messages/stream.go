package messages

import (
	"bytes"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/jsonw"
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
	used        providers.Used // the usage last written (message_start, message_delta)
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

// Usage implements providers.StreamTranslator: the usage of the Messages
// stream.
func (w *wrapped) Usage() providers.Used { return w.s.Usage() }

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
		return s.finishMessage(dst), nil
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
			dst = s.openBlock(dst, blockThinking, blockStart{typ: "thinking"})
			s.thinkingLen = 0
		}
		dst = s.thinkingDelta(dst, jsonw.Lit(r.Raw))
		s.thinkingLen += len(r.Str)
	}
	thinkingBlocks.ForEach(func(_, tb gjson.Result) bool {
		dst = s.thinkingBlock(dst, tb)
		return true
	})
	if content.Type == gjson.String && content.Str != "" {
		dst = s.text(dst, jsonw.Lit(content.Raw))
	}
	if refusal.Type == gjson.String && refusal.Str != "" {
		s.refusal = true
		dst = s.text(dst, jsonw.Lit(refusal.Raw))
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
				dst = s.thinkingDelta(dst, jsonw.Plain(text.Str[s.thinkingLen:]))
			}
		} else {
			dst = s.openBlock(dst, blockThinking, blockStart{typ: "thinking"})
			if text.Type == gjson.String && text.Str != "" {
				dst = s.thinkingDelta(dst, jsonw.Lit(text.Raw))
			}
		}
		if sig.Type == gjson.String && sig.Str != "" {
			const typ = "content_block_delta"
			w := s.begin(dst, typ)
			o := s.head(&w, typ)
			o.Int("index", s.openAt)
			d := o.Object("delta")
			d.Str("type", "signature_delta")
			d.Raw("signature", sig.Raw)
			d.End()
			dst = s.end(&w, o, dst)
		}
		return s.closeBlock(dst)
	case "redacted_thinking":
		dst = s.openBlock(dst, blockThinking, blockStart{typ: "redacted_thinking", data: jsonw.StrOf(tb.Get("data"))})
		return s.closeBlock(dst)
	}
	return dst
}

// thinkingDelta appends a thinking_delta of text.
func (s *Stream) thinkingDelta(dst []byte, text jsonw.Text) []byte {
	return s.blockDelta(dst, s.openAt, "thinking_delta", "thinking", text)
}

// blockDelta appends a content_block_delta of block index: a delta of type typ
// whose field key is text.
func (s *Stream) blockDelta(dst []byte, index int64, typ, key string, text jsonw.Text) []byte {
	const event = "content_block_delta"
	w := s.begin(dst, event)
	o := s.head(&w, event)
	o.Int("index", index)
	d := o.Object("delta")
	d.Str("type", typ)
	d.Text(key, text)
	d.End()
	return s.end(&w, o, dst)
}

// text appends a text_delta, opening a text block when none is open.
func (s *Stream) text(dst []byte, text jsonw.Text) []byte {
	if s.open != blockText {
		dst = s.openBlock(dst, blockText, blockStart{typ: "text"})
	}
	return s.blockDelta(dst, s.openAt, "text_delta", "text", text)
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
		dst = s.openBlock(dst, blockTool, blockStart{typ: "tool_use", id: toolID(tc.Get("id")), name: jsonw.StrOf(fn.Get("name"))})
		block = s.openAt
		s.tools = append(s.tools, toolBlock{call: call, block: block})
	}
	if args := fn.Get("arguments"); args.Type == gjson.String && args.Str != "" {
		dst = s.blockDelta(dst, block, "input_json_delta", "partial_json", jsonw.Lit(args.Raw))
	}
	return dst
}

// blockStart is the content_block of a content_block_start: a block of
// type typ, empty but for a tool_use block's id and name and a
// redacted_thinking block's data.
type blockStart struct {
	typ            string
	id, name, data jsonw.Text
}

func (b blockStart) write(v jsonw.Value) {
	o := v.Object()
	o.Str("type", b.typ)
	switch b.typ {
	case "text":
		o.Str("text", "")
	case "thinking":
		o.Str("thinking", "")
		o.Str("signature", "")
	case "redacted_thinking":
		o.Text("data", b.data)
	case "tool_use":
		o.Text("id", b.id)
		o.Text("name", b.name)
		o.Object("input").End()
	}
	o.End()
}

// begin appends an event's first line and the name of its data field, and
// returns the writer of its data; head writes the data's type and end
// finishes the event.
func (s *Stream) begin(dst []byte, typ string) jsonw.Writer {
	dst = append(dst, "event: "...)
	dst = append(dst, typ...)
	dst = append(dst, "\ndata: "...)
	return jsonw.New(dst)
}

// head opens the data of an event of type typ and writes its type.
func (s *Stream) head(w *jsonw.Writer, typ string) jsonw.Object {
	o := w.Object()
	o.Str("type", typ)
	return o
}

// end closes o, the data of the event w writes, and ends the event; start
// is the buffer before it. A misuse of the writer, a bug no input can
// cause, is not sent as broken JSON: the event becomes the error event
// that ends the stream.
func (s *Stream) end(w *jsonw.Writer, o jsonw.Object, start []byte) []byte {
	o.End()
	b, err := w.Finish()
	if err != nil {
		s.done = true
		return AppendErrorEvent(start, &providers.Error{Status: 500, Type: "server_error", Code: "internal_error",
			Message: "the gateway failed to write its answer"})
	}
	return append(b, "\n\n"...)
}

// openBlock closes the open block and opens a new one of kind, whose
// content_block is start.
func (s *Stream) openBlock(dst []byte, kind int, start blockStart) []byte {
	dst = s.closeBlock(dst)
	s.open, s.openAt = kind, s.next
	s.next++
	const typ = "content_block_start"
	w := s.begin(dst, typ)
	o := s.head(&w, typ)
	o.Int("index", s.openAt)
	start.write(o.Key("content_block"))
	dst = s.end(&w, o, dst)
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
	const typ = "content_block_stop"
	w := s.begin(dst, typ)
	o := s.head(&w, typ)
	o.Int("index", s.openAt)
	return s.end(&w, o, dst)
}

// start appends message_start.
func (s *Stream) start(dst []byte, id, model gjson.Result) []byte {
	s.started = true
	s.id = literal(s.id[:0], messageID(id))
	if (model.Type != gjson.String || model.Str == "") && s.Model != "" {
		s.model = literal(s.model[:0], jsonw.Plain(s.Model))
	} else {
		s.model = literal(s.model[:0], jsonw.StrOf(model))
	}
	const typ = "message_start"
	w := s.begin(dst, typ)
	o := s.head(&w, typ)
	m := o.Object("message")
	m.Text("id", jsonw.Lit(providers.InPlace(s.id)))
	m.Str("type", "message")
	m.Str("role", "assistant")
	m.Text("model", jsonw.Lit(providers.InPlace(s.model)))
	m.Array("content").End()
	m.Null("stop_reason")
	m.Null("stop_sequence")
	s.usage.write(m.Key("usage"))
	s.used = s.usage.used()
	m.End()
	return s.end(&w, o, dst)
}

// literal appends the JSON literal of t to b.
func literal(b []byte, t jsonw.Text) []byte {
	w := jsonw.New(b)
	w.Value().Text(t)
	b, _ = w.Finish() // one value: no misuse
	return b
}

// finishMessage appends what ends a complete answer: the open block's stop,
// message_delta with the stop reason and usage, and message_stop.
func (s *Stream) finishMessage(dst []byte) []byte {
	if !s.started {
		dst = s.start(dst, gjson.Result{}, gjson.Result{})
	}
	s.done = true
	dst = s.closeBlock(dst)
	stop, seq := mapStop(s.finish, s.stopSeq, len(s.tools) > 0, s.refusal)
	const typ = "message_delta"
	w := s.begin(dst, typ)
	o := s.head(&w, typ)
	d := o.Object("delta")
	d.Str("stop_reason", stop)
	if seq.Exists() {
		d.Raw("stop_sequence", seq.Raw)
	} else {
		d.Null("stop_sequence")
	}
	d.End()
	s.usage.write(o.Key("usage"))
	s.used = s.usage.used()
	dst = s.end(&w, o, dst)
	const stopTyp = "message_stop"
	w = s.begin(dst, stopTyp)
	o = s.head(&w, stopTyp)
	return s.end(&w, o, dst)
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

// Usage implements providers.StreamTranslator: the usage the stream's
// events last carried (message_start, then message_delta), as
// ReadEventUsage reads them; not Known before message_start.
func (s *Stream) Usage() providers.Used { return s.used }

var _ providers.StreamEnder = (*Stream)(nil)

func (s *Stream) Close(dst []byte) []byte {
	switch {
	case s.done:
		return dst
	case s.finished:
		return s.finishMessage(dst)
	}
	return s.fail(dst, providers.StreamIncomplete())
}

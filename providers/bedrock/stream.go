package bedrock

import (
	"encoding/base64"
	"errors"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/sse"
)

// ChatStream returns a translator for one ConverseStream answer, whose
// events EventStream cuts.
func (c Chat) ChatStream(opts providers.StreamOptions) providers.StreamTranslator {
	return &stream{chat: c, includeUsage: opts.IncludeUsage}
}

// Kinds of content block in a stream.
const (
	blockTool      = iota // a tool call of the client's
	blockJSON             // the structured output tool: its input is content
	blockReasoning        // reasoningContent
)

// block is one content block of the answer that needs state.
type block struct {
	index int64 // Converse's contentBlockIndex
	kind  int
	call  int                     // blockTool: OpenAI's tool_calls index
	json  providers.JSONCompactor // blockTool, blockJSON: the input's whitespace state

	// blockReasoning: the text, signature and redacted bytes so far, for
	// the thinking block sent when the block stops.
	text, signature, redacted []byte
}

// stream translates one ConverseStream into unified chunks.
//
// ConverseStream sends messageStart, then content blocks, each a
// contentBlockStart (tool calls only), deltas and a contentBlockStop, then
// messageStop (the stop reason) and metadata (usage, metrics), in which
// the answer ends. An exception message (throttlingException, …) may end
// it early.
type stream struct {
	chat         Chat
	includeUsage bool

	// head opens every chunk: {"id":…,"object":…,"created":…,"model":…,
	head      []byte
	blocks    []block
	calls     int    // tool calls of the client's so far
	jsonCalls int    // structured output tool calls so far
	finish    string // mapped finish_reason; "" until messageStop
	stopped   bool   // messageStop seen
	done      bool   // metadata or an error sent: nothing more follows
	usage     usage
}

var errNotObject = errors.New("bedrock: stream event payload is not a JSON object")

// Event translates one event-stream message, as EventStream cut and
// decoded it.
func (s *stream) Event(dst, event []byte) ([]byte, error) {
	kind, name, payload, err := parseEvent(event)
	if err != nil {
		return dst, err
	}
	if s.done {
		return dst, nil
	}
	switch kind {
	case kindEvent:
		return s.event(dst, name, payload)
	case kindException:
		var text string
		if providers.ValidJSON(payload) {
			text = gjson.GetBytes(payload, "message").Str
		}
		return s.fail(dst, name, text), nil
	case kindError:
		return s.fail(dst, name, string(payload)), nil
	case kindUntyped:
		return dst, errors.New("bedrock: stream message without :message-type")
	}
	return dst, nil // message types this code does not know
}

// fail appends the error event that ends the stream for an exception of
// type typ.
func (s *stream) fail(dst []byte, typ, msg string) []byte {
	s.done = true
	if msg == "" {
		msg = "the provider reported an error in its stream"
		if typ != "" {
			msg += " (" + typ + ")"
		}
	}
	return sse.AppendData(dst, mapError(0, typ, msg).JSON())
}

// event translates an event message of type typ.
func (s *stream) event(dst []byte, typ string, payload []byte) ([]byte, error) {
	if typ == "" {
		return dst, errors.New("bedrock: stream event without :event-type")
	}
	var v gjson.Result
	if len(payload) > 0 {
		if !providers.ValidJSON(payload) {
			return dst, errNotObject
		}
		v = gjson.ParseBytes(payload)
		if !v.IsObject() {
			return dst, errNotObject
		}
	}

	switch typ {
	case "messageStart":
		if s.head != nil {
			return dst, nil // a repeated messageStart carries nothing new
		}
		dst = s.openChunk(dst)
		dst = append(dst, `{"role":"assistant","content":""}`...)
		return s.closeChunk(dst, ""), nil

	case "contentBlockStart":
		tu := v.Get("start.toolUse")
		if !tu.IsObject() {
			return dst, nil // tool results, images: nothing for the client
		}
		index := v.Get("contentBlockIndex").Int()
		name := tu.Get("name")
		if name.Str == JSONToolName {
			s.blocks = append(s.blocks, block{index: index, kind: blockJSON})
			s.jsonCalls++
			return dst, nil
		}
		k := s.calls
		s.calls++
		s.blocks = append(s.blocks, block{index: index, kind: blockTool, call: k})
		dst = s.openChunk(dst)
		dst = append(dst, `{"tool_calls":[{"index":`...)
		dst = providers.AppendInt(dst, int64(k))
		dst = append(dst, `,"id":`...)
		dst = providers.AppendRawString(dst, tu.Get("toolUseId"))
		dst = append(dst, `,"type":"function","function":{"name":`...)
		dst = providers.AppendRawString(dst, name)
		dst = append(dst, `,"arguments":""}}]}`...)
		return s.closeChunk(dst, ""), nil

	case "contentBlockDelta":
		return s.delta(dst, v.Get("contentBlockIndex").Int(), v.Get("delta")), nil

	case "contentBlockStop":
		return s.stopBlock(dst, v.Get("contentBlockIndex").Int()), nil

	case "messageStop":
		if s.stopped {
			return dst, nil
		}
		s.stopped = true
		s.finish = finalFinish(finishReason(v.Get("stopReason").Str), s.calls, s.jsonCalls)
		dst = s.openChunk(dst)
		dst = append(dst, "{}"...)
		return s.closeChunk(dst, s.finish), nil

	case "metadata":
		s.usage.set(v.Get("usage"))
		if !s.stopped {
			return dst, nil // usage so far; the answer goes on
		}
		s.done = true
		if s.includeUsage {
			dst = providers.AppendUsageChunk(dst, s.head, s.usage.unified())
		}
		return append(dst, sse.Done...), nil
	}
	// Event types this code does not know.
	return dst, nil
}

// find returns the state of the content block at index, or nil.
func (s *stream) find(index int64) *block {
	for i := range s.blocks {
		if s.blocks[i].index == index {
			return &s.blocks[i]
		}
	}
	return nil
}

// delta translates a contentBlockDelta.
func (s *stream) delta(dst []byte, index int64, d gjson.Result) []byte {
	if text := d.Get("text"); text.Type == gjson.String {
		return s.content(dst, text.Raw, text.Str == "")
	}
	if rc := d.Get("reasoningContent"); rc.IsObject() {
		return s.reasoningDelta(dst, index, rc)
	}
	input := d.Get("toolUse.input")
	if input.Type != gjson.String || input.Str == "" {
		return dst // citations, images, tool results: nothing for the client
	}
	bl := s.find(index)
	if bl == nil || bl.kind == blockReasoning {
		return dst // input for a block that did not start as a tool call
	}
	// Tool input goes out without insignificant whitespace, so that the
	// streamed and the non-streamed answer agree byte for byte.
	frag, _ := bl.json.Append(nil, input.Str)
	if len(frag) == 0 {
		return dst
	}
	if bl.kind == blockJSON {
		return s.content(dst, string(providers.AppendString(nil, string(frag))), false)
	}
	dst = s.openChunk(dst)
	dst = append(dst, `{"tool_calls":[{"index":`...)
	dst = providers.AppendInt(dst, int64(bl.call))
	dst = append(dst, `,"function":{"arguments":`...)
	dst = providers.AppendString(dst, string(frag))
	dst = append(dst, "}}]}"...)
	return s.closeChunk(dst, "")
}

// reasoningDelta translates reasoning text (sent at once as
// reasoning_content) and collects the signature and redacted content for
// the block's thinking block.
func (s *stream) reasoningDelta(dst []byte, index int64, rc gjson.Result) []byte {
	bl := s.find(index)
	if bl == nil {
		s.blocks = append(s.blocks, block{index: index, kind: blockReasoning})
		bl = &s.blocks[len(s.blocks)-1]
	}
	if bl.kind != blockReasoning {
		return dst
	}
	if sig := rc.Get("signature"); sig.Type == gjson.String {
		bl.signature = append(bl.signature, sig.Str...)
	}
	if red := rc.Get("redactedContent"); red.Type == gjson.String {
		bl.redacted = append(bl.redacted, decodeBlob(red.Str)...)
	}
	text := rc.Get("text")
	if text.Type != gjson.String || text.Str == "" {
		return dst
	}
	bl.text = append(bl.text, text.Str...)
	dst = s.openChunk(dst)
	dst = append(dst, `{"reasoning_content":`...)
	dst = append(dst, text.Raw...)
	dst = append(dst, '}')
	return s.closeChunk(dst, "")
}

// stopBlock sends a reasoning block's thinking block when it is signed or
// redacted.
func (s *stream) stopBlock(dst []byte, index int64) []byte {
	bl := s.find(index)
	if bl == nil || bl.kind != blockReasoning {
		return dst
	}
	var tb []byte
	switch {
	case len(bl.signature) > 0:
		tb = append(tb, `{"type":"thinking","thinking":`...)
		tb = providers.AppendString(tb, string(bl.text))
		tb = append(tb, `,"signature":`...)
		tb = providers.AppendString(tb, string(bl.signature))
		tb = append(tb, '}')
	case len(bl.redacted) > 0:
		tb = append(tb, `{"type":"redacted_thinking","data":"`...)
		tb = base64.StdEncoding.AppendEncode(tb, bl.redacted)
		tb = append(tb, `"}`...)
	default:
		return dst
	}
	bl.text, bl.signature, bl.redacted = nil, nil, nil
	dst = s.openChunk(dst)
	dst = append(dst, `{"thinking_blocks":[`...)
	dst = append(dst, tb...)
	dst = append(dst, "]}"...)
	return s.closeChunk(dst, "")
}

// Close appends an error event when the stream ended before its metadata
// event (or an exception), and nothing otherwise: [DONE] was sent with the
// metadata.
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
func (s *stream) start() {
	id := s.chat.newID()
	h := make([]byte, 0, 96+len(id))
	h = append(h, `{"id":`...)
	h = providers.AppendString(h, id)
	h = append(h, `,"object":"chat.completion.chunk","created":`...)
	h = providers.AppendInt(h, s.chat.now().Unix())
	h = append(h, `,"model":"",`...)
	s.head = h
}

// openChunk appends a chunk up to its delta.
func (s *stream) openChunk(dst []byte) []byte {
	if s.head == nil {
		s.start()
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

// content appends a chunk with a content delta whose JSON string is raw,
// unless the text is empty.
func (s *stream) content(dst []byte, raw string, empty bool) []byte {
	if empty || raw == `""` {
		return dst
	}
	dst = s.openChunk(dst)
	dst = append(dst, `{"content":`...)
	dst = append(dst, raw...)
	dst = append(dst, '}')
	return s.closeChunk(dst, "")
}

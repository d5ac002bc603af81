package bedrock

import (
	"encoding/base64"
	"errors"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/jsonw"
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

	chunks    providers.Chunks
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
	return s.chunks.Error(dst, mapError(0, typ, msg))
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
		if s.chunks.Started() {
			return dst, nil // a repeated messageStart carries nothing new
		}
		s.start()
		return s.chunks.Role(dst, 0), nil

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
		s.start()
		return s.chunks.ToolCallStart(dst, 0, k, jsonw.StrOf(tu.Get("toolUseId")), jsonw.StrOf(name)), nil

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
		s.start()
		return s.chunks.Finish(dst, 0, s.finish), nil

	case "metadata":
		s.usage.set(v.Get("usage"))
		if !s.stopped {
			return dst, nil // usage so far; the answer goes on
		}
		s.done = true
		return s.chunks.End(dst, s.usage.unified()), nil
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
	s.start()
	if bl.kind == blockJSON {
		return s.chunks.Content(dst, 0, jsonw.Plain(providers.InPlace(frag)))
	}
	return s.chunks.ToolCallArguments(dst, 0, bl.call, jsonw.Plain(providers.InPlace(frag)))
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
	s.start()
	return s.chunks.Reasoning(dst, 0, jsonw.Lit(text.Raw))
}

// stopBlock sends a reasoning block's thinking block when it is signed or
// redacted.
func (s *stream) stopBlock(dst []byte, index int64) []byte {
	bl := s.find(index)
	if bl == nil || bl.kind != blockReasoning {
		return dst
	}
	s.start()
	switch {
	case len(bl.signature) > 0:
		dst = s.chunks.ThinkingBlock(dst, 0, jsonw.Plain(providers.InPlace(bl.text)), jsonw.Plain(providers.InPlace(bl.signature)))
	case len(bl.redacted) > 0:
		dst = s.chunks.RedactedThinking(dst, 0, jsonw.Plain(base64.StdEncoding.EncodeToString(bl.redacted)))
	default:
		return dst
	}
	bl.text, bl.signature, bl.redacted = nil, nil, nil
	return dst
}

// Close appends an error event when the stream ended before its metadata
// event (or an exception), and nothing otherwise: [DONE] was sent with the
// metadata.
// Ended implements providers.StreamEnder.
func (s *stream) Ended() bool { return s.done }

var _ providers.StreamEnder = (*stream)(nil)

// Usage implements providers.StreamTranslator: the usage the stream's end
// carried.
func (s *stream) Usage() providers.Used { return s.chunks.Used() }

func (s *stream) Close(dst []byte) []byte {
	if s.done {
		return dst
	}
	s.done = true
	return s.chunks.Incomplete(dst)
}

// start starts the chunks, when they have not started: Bedrock's
// stream names neither the answer nor the model, so the id is made up and
// the model left empty.
func (s *stream) start() {
	if !s.chunks.Started() {
		s.chunks.Start(providers.Head{ID: jsonw.Plain(s.chat.newID()), Created: s.chat.now().Unix(), Model: jsonw.Plain("")}, s.includeUsage)
	}
}

// content appends a chunk with a content delta whose JSON string is raw,
// unless the text is empty.
func (s *stream) content(dst []byte, raw string, empty bool) []byte {
	if empty || raw == `""` {
		return dst
	}
	s.start()
	return s.chunks.Content(dst, 0, jsonw.Lit(raw))
}

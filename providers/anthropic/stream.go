package anthropic

import (
	"bytes"
	"errors"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/jsonw"
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

	// chunks writes the unified events; it is started at message_start
	// (or the first event, if that is missing).
	chunks  providers.Chunks
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
		if s.chunks.Started() {
			return dst, nil // a repeated message_start carries nothing new
		}
		msg := v.Get("message")
		s.start(msg.Get("id"), msg.Get("model"))
		s.usage.set(msg.Get("usage"))
		return s.chunks.Role(dst, 0), nil

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
			s.ensureStarted()
			return s.chunks.ToolCallStart(dst, 0, k, jsonw.StrOf(cb.Get("id")), jsonw.StrOf(cb.Get("name"))), nil
		case "text":
			return s.content(dst, stringLiteral(cb.Get("text"))), nil
		case "thinking":
			s.blocks = append(s.blocks, block{index: index, kind: blockThinking})
			t := &s.blocks[len(s.blocks)-1]
			t.signature = append(t.signature, cb.Get("signature").Str...)
			return s.thinking(dst, t, cb.Get("thinking")), nil
		case "redacted_thinking":
			// It comes whole, with no deltas.
			s.ensureStarted()
			return s.chunks.RedactedThinking(dst, 0, jsonw.StrOf(cb.Get("data"))), nil
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
				return s.input(dst, t, jsonw.Lit(part.Raw)), nil
			}
			if len(s.scratch) == 0 {
				return dst, nil // only whitespace
			}
			return s.input(dst, t, jsonw.Plain(providers.InPlace(s.scratch))), nil
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
			return s.input(dst, t, jsonw.Plain("{}")), nil
		}
		// A thinking block is complete, signature and all, at its stop.
		if t != nil && t.kind == blockThinking && !t.sent {
			t.sent = true
			s.ensureStarted()
			return s.chunks.ThinkingBlock(dst, 0, jsonw.Plain(providers.InPlace(t.text)), jsonw.Plain(providers.InPlace(t.signature))), nil
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
		s.ensureStarted()
		dst = s.chunks.Finish(dst, 0, finish)
		return s.chunks.End(dst, s.usage.unified()), nil

	case "error":
		s.done = true
		e := v.Get("error")
		typ, msg := e.Get("type").Str, e.Get("message").Str
		if msg == "" {
			msg = "the provider reported an error in its stream"
		}
		return s.chunks.Error(dst, mapError(streamErrorStatus(typ), typ, msg)), nil
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
func (s *stream) input(dst []byte, t *block, piece jsonw.Text) []byte {
	t.input = true
	s.ensureStarted()
	if t.kind == blockJSON {
		return s.chunks.Content(dst, 0, piece)
	}
	return s.chunks.ToolCallArguments(dst, 0, t.call, piece)
}

// thinking appends a chunk with a reasoning_content delta for text, a
// JSON string, and adds it to the block's text; empty text adds nothing.
func (s *stream) thinking(dst []byte, t *block, text gjson.Result) []byte {
	if text.Type != gjson.String || text.Str == "" {
		return dst
	}
	t.text = append(t.text, text.Str...)
	s.ensureStarted()
	return s.chunks.Reasoning(dst, 0, jsonw.Lit(text.Raw))
}

// Close appends an error event when the upstream stream ended before
// message_stop (or an error event) and nothing otherwise: [DONE] was sent
// with message_stop.
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

// start starts the unified stream's chunks.
func (s *stream) start(id, model gjson.Result) {
	s.chunks.Start(providers.Head{ID: jsonw.StrOf(id), Created: s.chat.now().Unix(), Model: jsonw.StrOf(model)}, s.includeUsage)
}

// ensureStarted starts the chunks, with neither id nor model, when the
// stream did not begin with message_start.
func (s *stream) ensureStarted() {
	if !s.chunks.Started() {
		s.start(gjson.Result{}, gjson.Result{})
	}
}

// content appends a chunk with a content delta, text (a JSON string
// literal), unless it is empty.
func (s *stream) content(dst []byte, text string) []byte {
	if text == `""` {
		return dst
	}
	s.ensureStarted()
	return s.chunks.Content(dst, 0, jsonw.Lit(text))
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

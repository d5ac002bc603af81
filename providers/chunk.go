package providers

import (
	"github.com/modelgate/modelgate/providers/jsonw"
	"github.com/modelgate/modelgate/providers/sse"
)

// Head is what every chat.completion and chat.completion.chunk begins
// with, before its choices.
type Head struct {
	ID      jsonw.Text
	Created int64
	Model   jsonw.Text
}

// write writes the head's members, object among them, into o.
func (h Head) write(o jsonw.Object, object string) {
	o.Text("id", h.ID)
	o.Str("object", object)
	o.Int("created", h.Created)
	o.Text("model", h.Model)
}

// Chunks writes the events of one unified stream: chat.completion.chunk
// events of one choice's delta each, the usage chunk, data: [DONE] and
// the error event. Each method appends whole events, each ending in a
// blank line. Start comes before the first chunk; the error events need
// no Start.
type Chunks struct {
	head         jsonw.Members
	err          error // a misuse writing the head, delta0 or tail
	started      bool
	includeUsage bool
	used         Used // what End was given

	// delta0 is a chunk of choice 0 up to the inside of its delta; tail
	// closes the delta and ends the chunk with null logprobs and
	// finish_reason. Most chunks are these two around their delta.
	// content0 is delta0 with the key "content", which most chunks of
	// most streams carry alone.
	delta0, content0 jsonw.Head
	tail             jsonw.Tail
}

// Start fixes the head of the stream's chunks and whether the client asked
// for usage (stream_options.include_usage): then every chunk carries
// "usage": null and End writes the usage chunk.
func (c *Chunks) Start(h Head, includeUsage bool) {
	size := 96 + h.ID.Len() + h.Model.Len()
	buf := make([]byte, 0, 3*size+96) // the head, delta0, tail and content0
	w := jsonw.New(buf)
	o := w.Object()
	h.write(o, "chat.completion.chunk")
	o.End()
	c.head, c.err = w.Members()
	c.started, c.includeUsage = true, includeUsage
	if c.err != nil {
		return
	}

	b, _ := w.Finish()
	w = jsonw.New(b[len(b):])
	k, d := c.open(&w, 0)
	if c.delta0, c.err = w.Head(); c.err != nil {
		return
	}
	m := d.Mark()
	d.End()
	c.closeChunk(k, "", "")
	if c.tail, c.err = w.TailSince(m); c.err != nil {
		return
	}

	b, _ = w.Finish()
	w = jsonw.New(b[len(b):])
	_, d = c.open(&w, 0)
	d.Key("content")
	c.content0, c.err = w.Head() // the tail closes it as it closes delta0
}

// begin starts a chunk of choice, as far as the inside of its delta, which
// it returns; fast says the chunk is to end with done.
func (c *Chunks) begin(w *jsonw.Writer, choice int) (k chunk, delta jsonw.Object, fast bool) {
	if choice == 0 && c.err == nil {
		return k, w.Resume(c.delta0), true
	}
	k, delta = c.open(w, choice)
	return k, delta, false
}

// done ends a chunk that begin started: its delta, null logprobs and
// finish_reason, and usage null when the client asked for usage. start is
// dst before the event.
func (c *Chunks) done(w *jsonw.Writer, k chunk, delta jsonw.Object, fast bool, start []byte) []byte {
	if !fast {
		delta.End()
		return c.close(w, k, "", "", start)
	}
	w.Close(c.tail)
	return endEvent(w, start)
}

// Started reports whether Start was called.
func (c *Chunks) Started() bool { return c.started }

// IncludeUsage reports whether the client asked for usage.
func (c *Chunks) IncludeUsage() bool { return c.includeUsage }

// chunk is a chunk being written: its writer's objects, up to the choice's
// delta.
type chunk struct {
	root    jsonw.Object
	choices jsonw.Array
	choice  jsonw.Object
}

// open starts a chunk of choice: "data: ", the head, and the choice up to
// its delta, which it returns open.
func (c *Chunks) open(w *jsonw.Writer, choice int) (chunk, jsonw.Object) {
	var k chunk
	k.root = w.Object()
	k.root.Members(c.head)
	k.choices = k.root.Array("choices")
	k.choice = k.choices.Object()
	k.choice.Int("index", int64(choice))
	return k, k.choice.Object("delta")
}

// close ends a chunk after its delta: its logprobs (a JSON object; null
// when ""), finish_reason (null when ""), and usage null when the client
// asked for usage. start is dst before the event.
func (c *Chunks) close(w *jsonw.Writer, k chunk, logprobs, finish string, start []byte) []byte {
	c.closeChunk(k, logprobs, finish)
	if c.err != nil {
		return append(start, internalErrorEvent...)
	}
	return endEvent(w, start)
}

// closeChunk writes the rest of a chunk after its delta: see close.
func (c *Chunks) closeChunk(k chunk, logprobs, finish string) {
	if logprobs == "" {
		k.choice.Null("logprobs")
	} else {
		k.choice.Raw("logprobs", logprobs)
	}
	k.choice.StrOrNull("finish_reason", finish)
	k.choice.End()
	k.choices.End()
	if c.includeUsage {
		k.root.Null("usage")
	}
	k.root.End()
}

// Role appends the chunk that opens choice: the assistant's role and
// empty content.
func (c *Chunks) Role(dst []byte, choice int) []byte {
	w := jsonw.New(append(dst, "data: "...))
	k, d, fast := c.begin(&w, choice)
	d.Str("role", "assistant")
	d.Str("content", "")
	return c.done(&w, k, d, fast, dst)
}

// Refusal appends the only chunk of a choice the provider refused to
// answer: the role, null content, the refusal, and content_filter as the
// finish reason.
func (c *Chunks) Refusal(dst []byte, choice int, refusal string) []byte {
	w := jsonw.New(append(dst, "data: "...))
	k, d := c.open(&w, choice)
	d.Str("role", "assistant")
	d.Null("content")
	d.Str("refusal", refusal)
	d.End()
	return c.close(&w, k, "", "content_filter", dst)
}

// Content appends a chunk with a content delta.
func (c *Chunks) Content(dst []byte, choice int, text jsonw.Text) []byte {
	w := jsonw.New(append(dst, "data: "...))
	if choice == 0 && c.err == nil {
		w.ResumeValue(c.content0).Text(text)
		w.Close(c.tail)
		return endEvent(&w, dst)
	}
	k, d := c.open(&w, choice)
	d.Text("content", text)
	d.End()
	return c.close(&w, k, "", "", dst)
}

// ContentLogprobs appends a chunk with a content delta and logprobs, the
// logprobs object of its tokens (null when "") as the caller wrote it.
func (c *Chunks) ContentLogprobs(dst []byte, choice int, text jsonw.Text, logprobs string) []byte {
	w := jsonw.New(append(dst, "data: "...))
	k, d := c.open(&w, choice)
	d.Text("content", text)
	d.End()
	return c.close(&w, k, logprobs, "", dst)
}

// Reasoning appends a chunk with a reasoning_content delta.
func (c *Chunks) Reasoning(dst []byte, choice int, text jsonw.Text) []byte {
	w := jsonw.New(append(dst, "data: "...))
	k, d, fast := c.begin(&w, choice)
	d.Text("reasoning_content", text)
	return c.done(&w, k, d, fast, dst)
}

// ToolCallStart appends the chunk that starts tool call index of choice:
// its id, type and function name, and empty arguments, which
// ToolCallArguments deltas follow.
func (c *Chunks) ToolCallStart(dst []byte, choice, index int, id, name jsonw.Text) []byte {
	w := jsonw.New(append(dst, "data: "...))
	k, d, fast := c.begin(&w, choice)
	calls := d.Array("tool_calls")
	call := calls.Object()
	call.Int("index", int64(index))
	call.Text("id", id)
	call.Str("type", "function")
	fn := call.Object("function")
	fn.Text("name", name)
	fn.Str("arguments", "")
	fn.End()
	call.End()
	calls.End()
	return c.done(&w, k, d, fast, dst)
}

// ToolCallArguments appends a chunk with a piece of tool call index's
// arguments, a JSON text in pieces.
func (c *Chunks) ToolCallArguments(dst []byte, choice, index int, args jsonw.Text) []byte {
	w := jsonw.New(append(dst, "data: "...))
	k, d, fast := c.begin(&w, choice)
	calls := d.Array("tool_calls")
	call := calls.Object()
	call.Int("index", int64(index))
	fn := call.Object("function")
	fn.Text("arguments", args)
	fn.End()
	call.End()
	calls.End()
	return c.done(&w, k, d, fast, dst)
}

// ThinkingBlock appends a chunk whose delta holds one complete
// thinking_blocks entry: a thinking block's text and signature.
func (c *Chunks) ThinkingBlock(dst []byte, choice int, thinking, signature jsonw.Text) []byte {
	w := jsonw.New(append(dst, "data: "...))
	k, d, fast := c.begin(&w, choice)
	blocks := d.Array("thinking_blocks")
	WriteThinkingBlock(blocks, thinking, signature)
	blocks.End()
	return c.done(&w, k, d, fast, dst)
}

// RedactedThinking appends a chunk whose delta holds one
// redacted_thinking entry of thinking_blocks.
func (c *Chunks) RedactedThinking(dst []byte, choice int, data jsonw.Text) []byte {
	w := jsonw.New(append(dst, "data: "...))
	k, d, fast := c.begin(&w, choice)
	blocks := d.Array("thinking_blocks")
	WriteRedactedThinking(blocks, data)
	blocks.End()
	return c.done(&w, k, d, fast, dst)
}

// Logprobs appends a chunk of choice with an empty delta and logprobs, a
// logprobs object as the caller wrote it.
func (c *Chunks) Logprobs(dst []byte, choice int, logprobs string) []byte {
	w := jsonw.New(append(dst, "data: "...))
	k, d := c.open(&w, choice)
	d.End()
	return c.close(&w, k, logprobs, "", dst)
}

// Finish appends the chunk that ends choice: an empty delta and the
// finish reason.
func (c *Chunks) Finish(dst []byte, choice int, reason string) []byte {
	w := jsonw.New(append(dst, "data: "...))
	k, d := c.open(&w, choice)
	d.End()
	return c.close(&w, k, "", reason, dst)
}

// End appends the end of a complete stream: the usage chunk (no choices,
// and u) when the client asked for usage, and data: [DONE]. Used reports
// u from then on.
func (c *Chunks) End(dst []byte, u Usage) []byte {
	c.used = u.Used()
	if c.includeUsage {
		w := jsonw.New(append(dst, "data: "...))
		o := w.Object()
		o.Members(c.head)
		o.Array("choices").End()
		u.Write(o.Key("usage"))
		o.End()
		if c.err != nil {
			dst = append(dst, internalErrorEvent...)
		} else {
			dst = endEvent(&w, dst)
		}
	}
	return append(dst, sse.Done...)
}

// Used returns the usage End was given, which the usage chunk carries (or
// would carry, had the client asked for it): not Known before End. A
// translator's StreamTranslator.Usage returns it.
func (c *Chunks) Used() Used { return c.used }

// Error appends the error event that ends a unified stream.
func (c *Chunks) Error(dst []byte, e *Error) []byte { return AppendErrorEvent(dst, e) }

// Incomplete appends the error event that ends a unified stream whose
// upstream stream ended before the answer was complete.
func (c *Chunks) Incomplete(dst []byte) []byte { return AppendErrorEvent(dst, StreamIncomplete()) }

// AppendErrorEvent appends the event data: {"error":{…}} for e, which ends
// a unified stream.
func AppendErrorEvent(dst []byte, e *Error) []byte {
	w := jsonw.New(append(dst, "data: "...))
	e.Write(w.Value())
	return endEvent(&w, dst)
}

// WriteThinkingBlock writes a thinking entry of thinking_blocks into a.
func WriteThinkingBlock(a jsonw.Array, thinking, signature jsonw.Text) {
	b := a.Object()
	b.Str("type", "thinking")
	b.Text("thinking", thinking)
	b.Text("signature", signature)
	b.End()
}

// WriteRedactedThinking writes a redacted_thinking entry of
// thinking_blocks into a.
func WriteRedactedThinking(a jsonw.Array, data jsonw.Text) {
	b := a.Object()
	b.Str("type", "redacted_thinking")
	b.Text("data", data)
	b.End()
}

// endEvent finishes the JSON of an event that w wrote after "data: " and
// ends the event with its blank line. start is the buffer before the
// event. A misuse of the writer, a bug no input can cause, is not sent as
// broken JSON: the event becomes the internal error event.
func endEvent(w *jsonw.Writer, start []byte) []byte {
	b, err := w.Finish()
	if err != nil {
		return append(start, internalErrorEvent...)
	}
	return append(b, "\n\n"...)
}

// internalErrorEvent is the error event that stands in for an event the
// gateway failed to write: internalError's event, as a test checks.
const internalErrorEvent = `data: {"error":{"message":"the gateway failed to write its answer","type":"server_error","param":null,"code":"internal_error"}}` + "\n\n"

// internalError is the error of internalErrorEvent.
func internalError() *Error {
	return &Error{Status: 500, Type: "server_error", Code: "internal_error",
		Message: "the gateway failed to write its answer"}
}

package providers

import (
	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers/jsonw"
	"github.com/modelgate/modelgate/providers/sse"
)

// ReplayChat appends to dst the unified stream of a complete answer,
// completion (a chat.completion body): the stream a client would have
// read had the answer been streamed, with the same id, created and model.
// Each choice in turn gets its role, then its reasoning_content, thinking
// blocks, content (with its logprobs), refusal, annotations and tool
// calls, each whole in one chunk, and its finish reason; the usage chunk
// follows when includeUsage (the client's stream_options.include_usage),
// then data: [DONE]. A response cache replays a stored answer so to a
// request that asks for a stream. A body that is not a chat.completion is
// an error, and nothing is appended.
func ReplayChat(dst, completion []byte, includeUsage bool) ([]byte, error) {
	if !ValidJSON(completion) {
		return dst, errNotCompletion
	}
	root := gjson.ParseBytes(completion)
	choices := root.Get("choices")
	if !root.IsObject() || !choices.IsArray() {
		return dst, errNotCompletion
	}
	var c Chunks
	c.Start(Head{ID: jsonw.StrOf(root.Get("id")), Created: root.Get("created").Int(), Model: jsonw.StrOf(root.Get("model"))}, includeUsage)
	out := dst
	choices.ForEach(func(_, ch gjson.Result) bool {
		out = c.replayChoice(out, ch)
		return true
	})
	return c.endRaw(out, root.Get("usage")), nil
}

var errNotCompletion = &Error{Status: 500, Type: "server_error", Code: "internal_error",
	Message: "the stored answer is not a chat completion"}

// replayChoice appends the chunks of one choice of a chat.completion.
func (c *Chunks) replayChoice(dst []byte, ch gjson.Result) []byte {
	i := int(ch.Get("index").Int())
	m := ch.Get("message")
	dst = c.Role(dst, i)
	if r := m.Get("reasoning_content"); r.Type == gjson.String && r.Str != "" {
		dst = c.Reasoning(dst, i, jsonw.StrOf(r))
	}
	m.Get("thinking_blocks").ForEach(func(_, b gjson.Result) bool {
		switch b.Get("type").Str {
		case "thinking":
			dst = c.ThinkingBlock(dst, i, jsonw.StrOf(b.Get("thinking")), jsonw.StrOf(b.Get("signature")))
		case "redacted_thinking":
			dst = c.RedactedThinking(dst, i, jsonw.StrOf(b.Get("data")))
		}
		return true
	})
	content := m.Get("content")
	lp := ch.Get("logprobs")
	switch {
	case content.Type == gjson.String && lp.IsObject():
		dst = c.ContentLogprobs(dst, i, jsonw.StrOf(content), CompactJSON(lp.Raw))
	case content.Type == gjson.String && content.Str != "":
		dst = c.Content(dst, i, jsonw.StrOf(content))
	case lp.IsObject():
		dst = c.Logprobs(dst, i, CompactJSON(lp.Raw))
	}
	if r := m.Get("refusal"); r.Type == gjson.String && r.Str != "" {
		dst = c.deltaRaw(dst, i, "refusal", r.Raw)
	}
	if a := m.Get("annotations"); a.IsArray() && a.Raw != "[]" {
		dst = c.deltaRaw(dst, i, "annotations", CompactJSON(a.Raw))
	}
	k := 0
	m.Get("tool_calls").ForEach(func(_, tc gjson.Result) bool {
		fn := tc.Get("function")
		dst = c.ToolCallStart(dst, i, k, jsonw.StrOf(tc.Get("id")), jsonw.StrOf(fn.Get("name")))
		if args := fn.Get("arguments"); args.Type == gjson.String && args.Str != "" {
			dst = c.ToolCallArguments(dst, i, k, jsonw.StrOf(args))
		}
		k++
		return true
	})
	return c.Finish(dst, i, ch.Get("finish_reason").Str)
}

// deltaRaw appends a chunk of choice whose delta is the one member key
// with the JSON value raw (compact).
func (c *Chunks) deltaRaw(dst []byte, choice int, key, raw string) []byte {
	w := jsonw.New(append(dst, "data: "...))
	k, d := c.open(&w, choice)
	d.Raw(key, raw)
	d.End()
	return c.close(&w, k, "", "", dst)
}

// endRaw is End with the usage object of a stored answer, as it is
// (compacted): its details too, which Usage does not hold. A usage that
// is not an object is all zeros.
func (c *Chunks) endRaw(dst []byte, usage gjson.Result) []byte {
	if !usage.IsObject() {
		return c.End(dst, Usage{})
	}
	if c.includeUsage {
		w := jsonw.New(append(dst, "data: "...))
		o := w.Object()
		o.Members(c.head)
		o.Array("choices").End()
		o.Compact("usage", usage.Raw)
		o.End()
		if c.err != nil {
			dst = append(dst, internalErrorEvent...)
		} else {
			dst = endEvent(&w, dst)
		}
	}
	return append(dst, sse.Done...)
}

// UsageRaw closes the choices and writes the usage object raw, as an
// answer or a stream gave it (compacted): its details too, which Usage
// does not hold.
func (c Completion) UsageRaw(raw string) {
	c.choices.End()
	c.root.Compact("usage", raw)
}

// Annotations writes the message's annotations, a JSON array as an answer
// or its stream gave it (compacted): url_citation entries.
func (m Message) Annotations(raw string) { m.msg.Compact("annotations", raw) }

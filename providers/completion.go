package providers

import (
	"github.com/modelgate/modelgate/providers/jsonw"
)

// Completion writes a unified chat.completion. StartCompletion writes its
// head; each Choice, written in turn, is a Message; Usage closes the
// choices and writes the usage; Finish ends it:
//
//	w := jsonw.New(dst)
//	c := providers.StartCompletion(&w, head)
//	m := c.Choice(0)
//	m.Content(text)
//	m.NullRefusal()
//	m.End("stop")
//	c.Usage(u)
//	return c.Finish()
type Completion struct {
	w       *jsonw.Writer
	root    jsonw.Object
	choices jsonw.Array
}

// StartCompletion writes into w the start of a chat.completion with head h,
// up to its choices.
func StartCompletion(w *jsonw.Writer, h Head) Completion {
	c := Completion{w: w, root: w.Object()}
	h.write(c.root, "chat.completion")
	c.choices = c.root.Array("choices")
	return c
}

// Choice opens the choice index and its message, from the assistant; the
// Message's methods write the message's members in the order of the
// unified shape: content, refusal, reasoning_content, thinking_blocks,
// tool_calls.
func (c Completion) Choice(index int64) Message {
	m := Message{choice: c.choices.Object()}
	m.choice.Int("index", index)
	m.msg = m.choice.Object("message")
	m.msg.Str("role", "assistant")
	return m
}

// ChoiceRaw is Choice with the index as the answer wrote it, a JSON
// number.
func (c Completion) ChoiceRaw(index string) Message {
	m := Message{choice: c.choices.Object()}
	m.choice.Raw("index", index)
	m.msg = m.choice.Object("message")
	m.msg.Str("role", "assistant")
	return m
}

// Usage closes the choices and writes the usage.
func (c Completion) Usage(u Usage) {
	c.choices.End()
	u.Write(c.root.Key("usage"))
}

// ServiceTier writes service_tier, after the usage.
func (c Completion) ServiceTier(tier string) { c.root.Str("service_tier", tier) }

// Finish closes the chat.completion and returns the writer's buffer, or
// the writer's misuse.
func (c Completion) Finish() ([]byte, error) {
	c.root.End()
	return c.w.Finish()
}

// Message is a choice of a chat.completion being written, its message
// open.
type Message struct {
	choice, msg jsonw.Object
}

// Content writes the message's content.
func (m Message) Content(t jsonw.Text) { m.msg.Text("content", t) }

// NullContent writes the message's content as null.
func (m Message) NullContent() { m.msg.Null("content") }

// JoinedContent writes the joined text as the content, null when j holds
// none.
func (m Message) JoinedContent(j *TextJoin) { j.Write(m.msg.Key("content")) }

// Refusal writes the message's refusal.
func (m Message) Refusal(t jsonw.Text) { m.msg.Text("refusal", t) }

// NullRefusal writes the message's refusal as null.
func (m Message) NullRefusal() { m.msg.Null("refusal") }

// Reasoning writes the message's reasoning_content.
func (m Message) Reasoning(t jsonw.Text) { m.msg.Text("reasoning_content", t) }

// JoinedReasoning writes the joined text as reasoning_content, null when
// j holds none.
func (m Message) JoinedReasoning(j *TextJoin) { j.Write(m.msg.Key("reasoning_content")) }

// ThinkingBlocks opens the message's thinking_blocks, whose entries
// WriteThinkingBlock and WriteRedactedThinking write; the caller ends it.
func (m Message) ThinkingBlocks() jsonw.Array { return m.msg.Array("thinking_blocks") }

// ToolCalls opens the message's tool_calls; the caller ends them.
func (m Message) ToolCalls() ToolCalls { return ToolCalls{a: m.msg.Array("tool_calls")} }

// End closes the message and the choice, with null logprobs and the
// finish reason.
func (m Message) End(finish string) {
	m.msg.End()
	m.choice.Null("logprobs")
	m.Finish(finish)
}

// Logprobs closes the message and returns the slot of the choice's
// logprobs, for the caller to write; Finish follows.
func (m Message) Logprobs() jsonw.Value {
	m.msg.End()
	return m.choice.Key("logprobs")
}

// Finish writes the finish reason after Logprobs and closes the choice.
func (m Message) Finish(finish string) {
	m.choice.Str("finish_reason", finish)
	m.choice.End()
}

// ToolCalls is the tool_calls of a message being written.
type ToolCalls struct{ a jsonw.Array }

// Call writes a function call: its id, name and arguments (a JSON text,
// as a string).
func (t ToolCalls) Call(id, name, arguments jsonw.Text) {
	c := t.a.Object()
	c.Text("id", id)
	c.Str("type", "function")
	fn := c.Object("function")
	fn.Text("name", name)
	fn.Text("arguments", arguments)
	fn.End()
	c.End()
}

// End closes the tool calls.
func (t ToolCalls) End() { t.a.End() }

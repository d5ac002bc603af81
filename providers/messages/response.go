package messages

import (
	"crypto/rand"
	"errors"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/jsonw"
)

var errNotCompletion = errors.New("messages: the provider's answer is not a chat.completion with a choice")

// FromChat translates a hub chat.completion into a Messages API message:
//
//	{"id":"msg_…","type":"message","role":"assistant","model":…,
//	 "content":[thinking…, text, tool_use…],
//	 "stop_reason":…,"stop_sequence":…,"usage":{…}}
//
// Content blocks come in Anthropic's order: the thinking blocks (the
// message's thinking_blocks exactly, signatures included; when there are
// none, its reasoning_content or reasoning as one thinking block with an
// empty signature, which no provider can verify and none is invented for),
// then the text (or the refusal), then a tool_use block per tool call, its
// input the parsed arguments ({} when they are empty or not a JSON object).
// The id is the hub's prefixed with msg_ (kept when it already has it).
// stop_reason and usage as mapStop and appendUsage say.
func FromChat(body []byte) ([]byte, error) {
	out, _, err := fromChat(body)
	return out, err
}

// fromChat is FromChat, returning also the usage the Message carries.
func fromChat(body []byte) ([]byte, providers.Used, error) {
	if !providers.ValidJSON(body) {
		return nil, providers.Used{}, errNotCompletion
	}
	root := gjson.ParseBytes(body)
	choice := root.Get("choices.0")
	msg := choice.Get("message")
	if !root.IsObject() || !msg.IsObject() {
		return nil, providers.Used{}, errNotCompletion
	}

	w := jsonw.New(make([]byte, 0, len(body)+128))
	o := w.Object()
	o.Text("id", messageID(root.Get("id")))
	o.Str("type", "message")
	o.Str("role", "assistant")
	o.Text("model", jsonw.StrOf(root.Get("model")))
	content := o.Array("content")
	writeThinking(content, msg)
	refusal := msg.Get("refusal")
	if refusal.Type == gjson.String && refusal.Str != "" {
		writeTextBlock(content, refusal)
	} else {
		writeContentText(content, msg.Get("content"))
	}
	calls := 0
	msg.Get("tool_calls").ForEach(func(_, call gjson.Result) bool {
		if call.Get("type").Str != "" && call.Get("type").Str != "function" {
			return true
		}
		fn := call.Get("function")
		tu := content.Object()
		tu.Str("type", "tool_use")
		tu.Text("id", toolID(call.Get("id")))
		tu.Text("name", jsonw.StrOf(fn.Get("name")))
		writeInput(tu.Key("input"), fn.Get("arguments"))
		tu.End()
		calls++
		return true
	})
	content.End()

	stop, seq := mapStop(choice.Get("finish_reason").Str, choice.Get("stop_reason"), calls > 0,
		refusal.Type == gjson.String && refusal.Str != "")
	o.Str("stop_reason", stop)
	if seq.Exists() {
		o.Raw("stop_sequence", seq.Raw)
	} else {
		o.Null("stop_sequence")
	}
	var u usage
	u.set(root.Get("usage"))
	u.write(o.Key("usage"))
	o.End()
	out, err := w.Finish()
	return out, u.used(), err
}

// writeThinking writes the thinking blocks of a hub message (or delta):
// its thinking_blocks, or failing those its reasoning text as one thinking
// block without a signature.
func writeThinking(content jsonw.Array, msg gjson.Result) {
	blocks := 0
	msg.Get("thinking_blocks").ForEach(func(_, tb gjson.Result) bool {
		if writeThinkingBlock(content, tb) {
			blocks++
		}
		return true
	})
	if blocks > 0 {
		return
	}
	if r := reasoningText(msg); r.Str != "" {
		b := content.Object()
		b.Str("type", "thinking")
		b.Raw("thinking", r.Raw)
		b.Str("signature", "")
		b.End()
	}
}

// writeThinkingBlock writes one of the hub's thinking_blocks as an
// Anthropic block, and reports whether it was one.
func writeThinkingBlock(content jsonw.Array, tb gjson.Result) bool {
	switch tb.Get("type").Str {
	case "thinking":
		b := content.Object()
		b.Str("type", "thinking")
		b.Text("thinking", jsonw.StrOf(tb.Get("thinking")))
		b.Text("signature", jsonw.StrOf(tb.Get("signature")))
		b.End()
		return true
	case "redacted_thinking":
		b := content.Object()
		b.Str("type", "redacted_thinking")
		b.Text("data", jsonw.StrOf(tb.Get("data")))
		b.End()
		return true
	}
	return false
}

// reasoningText is a hub message's or delta's reasoning text:
// reasoning_content (DeepSeek, vLLM, LiteLLM), else reasoning (newer vLLM,
// OpenRouter).
func reasoningText(msg gjson.Result) gjson.Result {
	if r := msg.Get("reasoning_content"); r.Type == gjson.String {
		return r
	}
	if r := msg.Get("reasoning"); r.Type == gjson.String {
		return r
	}
	return gjson.Result{}
}

// writeTextBlock writes a text block for a non-empty JSON string.
func writeTextBlock(content jsonw.Array, text gjson.Result) {
	if text.Type != gjson.String || text.Str == "" {
		return
	}
	b := content.Object()
	b.Str("type", "text")
	b.Raw("text", text.Raw)
	b.End()
}

// writeContentText writes the text block for a hub message's content: a
// string, or text (and refusal) parts joined.
func writeContentText(content jsonw.Array, c gjson.Result) {
	if c.Type == gjson.String {
		writeTextBlock(content, c)
		return
	}
	var sb strings.Builder
	c.ForEach(func(_, part gjson.Result) bool {
		switch part.Get("type").Str {
		case "text":
			sb.WriteString(part.Get("text").Str)
		case "refusal":
			sb.WriteString(part.Get("refusal").Str)
		}
		return true
	})
	if sb.Len() == 0 {
		return
	}
	b := content.Object()
	b.Str("type", "text")
	b.Str("text", sb.String())
	b.End()
}

// writeInput writes a tool_use block's input for a tool call's arguments
// string: the JSON object it holds, compacted, or {} when it is empty or
// not an object (arguments cut off by max_tokens, say).
func writeInput(v jsonw.Value, args gjson.Result) {
	s := strings.TrimSpace(args.Str)
	if s == "" || s[0] != '{' || !providers.ValidJSON([]byte(s)) {
		v.Object().End()
		return
	}
	v.Compact(s)
}

// mapStop maps the hub's finish_reason to Anthropic's stop_reason, and
// returns the stop sequence that ended the answer where the hub says
// which (vLLM's choices[].stop_reason holds the matched stop string):
//
//	stop            end_turn, or stop_sequence with the sequence when known,
//	                or tool_use when the message has tool calls
//	length          max_tokens
//	tool_calls,
//	function_call   tool_use
//	content_filter  refusal
//	(a refusal)     refusal
//	null or other   end_turn
func mapStop(finish string, stopReason gjson.Result, calls, refusal bool) (string, gjson.Result) {
	switch {
	case finish == "length":
		return "max_tokens", gjson.Result{}
	case finish == "tool_calls" || finish == "function_call":
		return "tool_use", gjson.Result{}
	case finish == "content_filter" || refusal:
		return "refusal", gjson.Result{}
	case calls:
		return "tool_use", gjson.Result{}
	case finish == "stop" && stopReason.Type == gjson.String && stopReason.Str != "":
		return "stop_sequence", stopReason
	default:
		return "end_turn", gjson.Result{}
	}
}

// usage is the hub's token accounting, kept as Anthropic reports it.
type usage struct {
	prompt, completion, cached, cacheCreation, reasoning int64
	cacheCreation1h                                      int64 // of cacheCreation, for an hour
	hasReasoning, split                                  bool  // split: the 1-hour writes are told apart
}

// set updates u with the counts in a hub usage object. Counts it lacks
// keep their value.
func (u *usage) set(v gjson.Result) {
	if !v.IsObject() {
		return
	}
	v.ForEach(func(key, n gjson.Result) bool {
		if n.Type != gjson.Number && n.Type != gjson.JSON {
			return true
		}
		switch key.Str {
		case "prompt_tokens":
			u.prompt = n.Int()
		case "completion_tokens":
			u.completion = n.Int()
		case "prompt_tokens_details":
			if c := n.Get("cached_tokens"); c.Type == gjson.Number {
				u.cached = c.Int()
			}
			if w := n.Get("cache_write_tokens"); w.Type == gjson.Number {
				u.cacheCreation = w.Int()
			}
			if h := n.Get("cache_write_1h_tokens"); h.Type == gjson.Number {
				u.cacheCreation1h, u.split = h.Int(), true
			}
		case "completion_tokens_details":
			if r := n.Get("reasoning_tokens"); r.Type == gjson.Number {
				u.reasoning, u.hasReasoning = r.Int(), true
			}
		case "cache_creation_input_tokens": // LiteLLM's field, where a provider reports cache writes
			u.cacheCreation = n.Int()
		}
		return true
	})
}

// write writes Anthropic's usage: input_tokens excludes the cache reads
// (prompt_tokens_details.cached_tokens, which become
// cache_read_input_tokens) and writes (prompt_tokens_details.
// cache_write_tokens, or LiteLLM's cache_creation_input_tokens, which
// become cache_creation_input_tokens; 0 where the provider reports none),
// and where the hub tells the 1-hour writes apart, cache_creation splits
// them by ttl; reasoning tokens, where reported, are
// output_tokens_details.thinking_tokens.
func (u *usage) write(v jsonw.Value) {
	o := v.Object()
	o.Int("input_tokens", max(u.prompt-u.cached-u.cacheCreation, 0))
	o.Int("cache_creation_input_tokens", u.cacheCreation)
	o.Int("cache_read_input_tokens", u.cached)
	if u.split {
		h := min(u.cacheCreation1h, u.cacheCreation)
		cc := o.Object("cache_creation")
		cc.Int("ephemeral_5m_input_tokens", u.cacheCreation-h)
		cc.Int("ephemeral_1h_input_tokens", h)
		cc.End()
	}
	o.Int("output_tokens", u.completion)
	if u.hasReasoning {
		d := o.Object("output_tokens_details")
		d.Int("thinking_tokens", min(u.reasoning, u.completion))
		d.End()
	}
	o.End()
}

// used is the usage write writes, as data: what ReadUsage reads back of
// it (input_tokens with the cache's tokens is the prompt; the one-hour
// writes where cache_creation tells them apart).
func (u *usage) used() providers.Used {
	in := max(u.prompt-u.cached-u.cacheCreation, 0)
	used := providers.Used{Prompt: in + u.cached + u.cacheCreation, Cached: u.cached, CacheWrite: u.cacheCreation,
		Completion: u.completion, Known: true}
	if u.split {
		used.CacheWrite1h = min(u.cacheCreation1h, u.cacheCreation)
	}
	return used
}

// messageID is the message id: the hub's id prefixed with msg_, or a new
// one when the hub gave none.
func messageID(id gjson.Result) jsonw.Text {
	if id.Type != gjson.String || id.Str == "" {
		return jsonw.Plain(providers.InPlace(randomID())).Prefixed("msg_")
	}
	if strings.HasPrefix(id.Str, "msg_") {
		return jsonw.Lit(id.Raw)
	}
	return jsonw.Lit(id.Raw).Prefixed("msg_")
}

// toolID is a tool call's id, or a new toolu_ one when the hub gave none
// (Anthropic's tool_result needs an id to answer).
func toolID(id gjson.Result) jsonw.Text {
	if id.Type == gjson.String && id.Str != "" {
		return jsonw.Lit(id.Raw)
	}
	return jsonw.Plain(providers.InPlace(randomID())).Prefixed("toolu_")
}

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// randomID is 24 random base62 characters.
func randomID() []byte {
	var raw [24]byte
	_, _ = rand.Read(raw[:])
	for i, c := range raw {
		raw[i] = base62[int(c)%len(base62)]
	}
	return raw[:]
}

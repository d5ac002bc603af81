package messages

import (
	"crypto/rand"
	"errors"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
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
	if !providers.ValidJSON(body) {
		return nil, errNotCompletion
	}
	root := gjson.ParseBytes(body)
	choice := root.Get("choices.0")
	msg := choice.Get("message")
	if !root.IsObject() || !msg.IsObject() {
		return nil, errNotCompletion
	}

	b := make([]byte, 0, len(body)+128)
	b = append(b, `{"id":`...)
	b = appendMessageID(b, root.Get("id"))
	b = append(b, `,"type":"message","role":"assistant","model":`...)
	b = providers.AppendRawString(b, root.Get("model"))
	b = append(b, `,"content":[`...)
	n := 0
	b = appendThinking(b, msg, &n)
	refusal := msg.Get("refusal")
	if refusal.Type == gjson.String && refusal.Str != "" {
		b = appendTextBlock(b, refusal, &n)
	} else {
		b = appendContentText(b, msg.Get("content"), &n)
	}
	calls := 0
	msg.Get("tool_calls").ForEach(func(_, call gjson.Result) bool {
		if call.Get("type").Str != "" && call.Get("type").Str != "function" {
			return true
		}
		fn := call.Get("function")
		b = sepN(b, &n)
		b = append(b, `{"type":"tool_use","id":`...)
		b = appendToolID(b, call.Get("id"))
		b = append(b, `,"name":`...)
		b = providers.AppendRawString(b, fn.Get("name"))
		b = append(b, `,"input":`...)
		b = appendInput(b, fn.Get("arguments"))
		b = append(b, '}')
		calls++
		return true
	})
	b = append(b, ']')

	stop, seq := mapStop(choice.Get("finish_reason").Str, choice.Get("stop_reason"), calls > 0,
		refusal.Type == gjson.String && refusal.Str != "")
	b = append(b, `,"stop_reason":"`...)
	b = append(b, stop...)
	b = append(b, `","stop_sequence":`...)
	if seq.Exists() {
		b = append(b, seq.Raw...)
	} else {
		b = append(b, "null"...)
	}
	var u usage
	u.set(root.Get("usage"))
	b = append(b, `,"usage":`...)
	b = u.append(b)
	return append(b, '}'), nil
}

// appendThinking appends the thinking blocks of a hub message (or delta):
// its thinking_blocks, or failing those its reasoning text as one thinking
// block without a signature.
func appendThinking(b []byte, msg gjson.Result, n *int) []byte {
	blocks := 0
	msg.Get("thinking_blocks").ForEach(func(_, tb gjson.Result) bool {
		var ok bool
		b, ok = appendThinkingBlock(b, tb, n)
		if ok {
			blocks++
		}
		return true
	})
	if blocks > 0 {
		return b
	}
	if r := reasoningText(msg); r.Str != "" {
		b = sepN(b, n)
		b = append(b, `{"type":"thinking","thinking":`...)
		b = append(b, r.Raw...)
		b = append(b, `,"signature":""}`...)
	}
	return b
}

// appendThinkingBlock appends one of the hub's thinking_blocks as an
// Anthropic block, and reports whether it was one.
func appendThinkingBlock(b []byte, tb gjson.Result, n *int) ([]byte, bool) {
	switch tb.Get("type").Str {
	case "thinking":
		b = sepN(b, n)
		b = append(b, `{"type":"thinking","thinking":`...)
		b = providers.AppendRawString(b, tb.Get("thinking"))
		b = append(b, `,"signature":`...)
		b = providers.AppendRawString(b, tb.Get("signature"))
		return append(b, '}'), true
	case "redacted_thinking":
		b = sepN(b, n)
		b = append(b, `{"type":"redacted_thinking","data":`...)
		b = providers.AppendRawString(b, tb.Get("data"))
		return append(b, '}'), true
	}
	return b, false
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

// appendTextBlock appends a text block for a non-empty JSON string.
func appendTextBlock(b []byte, text gjson.Result, n *int) []byte {
	if text.Type != gjson.String || text.Str == "" {
		return b
	}
	b = sepN(b, n)
	b = append(b, `{"type":"text","text":`...)
	b = append(b, text.Raw...)
	return append(b, '}')
}

// appendContentText appends the text block for a hub message's content: a
// string, or text (and refusal) parts joined.
func appendContentText(b []byte, content gjson.Result, n *int) []byte {
	if content.Type == gjson.String {
		return appendTextBlock(b, content, n)
	}
	var sb strings.Builder
	content.ForEach(func(_, part gjson.Result) bool {
		switch part.Get("type").Str {
		case "text":
			sb.WriteString(part.Get("text").Str)
		case "refusal":
			sb.WriteString(part.Get("refusal").Str)
		}
		return true
	})
	if sb.Len() == 0 {
		return b
	}
	b = sepN(b, n)
	b = append(b, `{"type":"text","text":`...)
	b = providers.AppendString(b, sb.String())
	return append(b, '}')
}

// appendInput appends a tool_use block's input for a tool call's arguments
// string: the JSON object it holds, compacted, or {} when it is empty or
// not an object (arguments cut off by max_tokens, say).
func appendInput(b []byte, args gjson.Result) []byte {
	s := strings.TrimSpace(args.Str)
	if s == "" || s[0] != '{' || !providers.ValidJSON([]byte(s)) {
		return append(b, "{}"...)
	}
	return append(b, providers.CompactJSON(s)...)
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
	hasReasoning                                         bool
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

// append appends Anthropic's usage: input_tokens excludes the cache reads
// (prompt_tokens_details.cached_tokens, which become
// cache_read_input_tokens) and writes (cache_creation_input_tokens, which
// the hub carries only where a provider reports it, as LiteLLM does, and
// is 0 otherwise); reasoning tokens, where reported, are
// output_tokens_details.thinking_tokens.
func (u *usage) append(b []byte) []byte {
	input := max(u.prompt-u.cached-u.cacheCreation, 0)
	b = append(b, `{"input_tokens":`...)
	b = providers.AppendInt(b, input)
	b = append(b, `,"cache_creation_input_tokens":`...)
	b = providers.AppendInt(b, u.cacheCreation)
	b = append(b, `,"cache_read_input_tokens":`...)
	b = providers.AppendInt(b, u.cached)
	b = append(b, `,"output_tokens":`...)
	b = providers.AppendInt(b, u.completion)
	if u.hasReasoning {
		b = append(b, `,"output_tokens_details":{"thinking_tokens":`...)
		b = providers.AppendInt(b, min(u.reasoning, u.completion))
		b = append(b, '}')
	}
	return append(b, '}')
}

// appendMessageID appends the message id: the hub's id prefixed with
// msg_, or a new one when the hub gave none.
func appendMessageID(b []byte, id gjson.Result) []byte {
	if id.Type != gjson.String || id.Str == "" {
		return append(append(append(b, `"msg_`...), randomID()...), '"')
	}
	if strings.HasPrefix(id.Str, "msg_") {
		return append(b, id.Raw...)
	}
	b = append(b, `"msg_`...)
	return append(b, id.Raw[1:]...)
}

// appendToolID appends a tool call's id, or a new toolu_ one when the hub
// gave none (Anthropic's tool_result needs an id to answer).
func appendToolID(b []byte, id gjson.Result) []byte {
	if id.Type == gjson.String && id.Str != "" {
		return append(b, id.Raw...)
	}
	return append(append(append(b, `"toolu_`...), randomID()...), '"')
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

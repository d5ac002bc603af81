package providers

import (
	"strings"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers/jsonw"
)

// ReadMembers calls set with each member of the JSON object body, in
// order, and stops at the first error, which it returns: the one pass
// over a request in which a translator records the fields it reads and
// refuses those it cannot express.
func ReadMembers(body []byte, set func(key string, v gjson.Result) error) error {
	var err error
	gjson.ParseBytes(body).ForEach(func(key, v gjson.Result) bool {
		err = set(key.Str, v)
		return err == nil
	})
	return err
}

// ChatMessage holds the fields of one unified chat message that the
// translators read. The zero gjson.Result stands for an absent field.
type ChatMessage struct {
	Role                                           string
	Content, ToolCalls, ToolCallID, ThinkingBlocks gjson.Result

	// ReasoningContent and Reasoning are the reasoning text a client
	// sends back on an assistant message, which few providers take.
	ReasoningContent, Reasoning gjson.Result

	// CacheControl is the message's own cache_control, a prompt caching
	// marker for Anthropic (and Claude elsewhere) on a message as a whole:
	// a tool message's result, or a message whose content is a string.
	// Content parts, tool calls and tools carry their own.
	CacheControl gjson.Result
}

// ReadChatMessage reads the unified message m. Like gjson's Get, which
// ValidateChat uses, it takes the first of duplicate keys.
func ReadChatMessage(m gjson.Result) ChatMessage {
	var msg ChatMessage
	var role gjson.Result
	m.ForEach(func(key, v gjson.Result) bool {
		if f := msg.member(key.Str, &role); f != nil && !f.Exists() {
			*f = v
		}
		return true
	})
	msg.Role = role.Str
	return msg
}

// member is where ReadChatMessage keeps the member named key (role, which
// the message keeps as a string, in role), or nil for a member it leaves
// out.
func (msg *ChatMessage) member(key string, role *gjson.Result) *gjson.Result {
	switch key {
	case "role":
		return role
	case "content":
		return &msg.Content
	case "tool_calls":
		return &msg.ToolCalls
	case "tool_call_id":
		return &msg.ToolCallID
	case "thinking_blocks":
		return &msg.ThinkingBlocks
	case "reasoning_content":
		return &msg.ReasoningContent
	case "reasoning":
		return &msg.Reasoning
	case "cache_control":
		return &msg.CacheControl
	}
	return nil
}

// AppendChatMessages appends the messages of the array v, a unified
// request's "messages", to msgs (see ReadChatMessage).
func AppendChatMessages(msgs []ChatMessage, v gjson.Result) []ChatMessage {
	v.ForEach(func(_, m gjson.Result) bool {
		msgs = append(msgs, ReadChatMessage(m))
		return true
	})
	return msgs
}

// WantsAudio reports whether modalities, a request's "modalities", asks
// for audio output.
func WantsAudio(modalities gjson.Result) bool {
	audio := false
	modalities.ForEach(func(_, m gjson.Result) bool {
		audio = m.Str == "audio"
		return !audio
	})
	return audio
}

// NoEquivalent refuses, with a 400 naming the field, the top-level fields
// of a unified chat request that no translated provider can express: audio
// output (audio; modalities asking for audio), web search, and the
// deprecated functions and function_call. Any other field gets nil. key
// may point into the request body: the error keeps a copy.
func NoEquivalent(key string, v gjson.Result, provider string) error {
	switch key {
	case "audio", "functions", "function_call", "web_search_options":
		if v.Exists() && v.Type != gjson.Null {
			return Unsupported(strings.Clone(key), provider)
		}
	case "modalities":
		if WantsAudio(v) {
			return UnsupportedBecause("modalities", "audio output is not supported by provider type "+provider)
		}
	}
	return nil
}

// WriteStops writes the member key, the array of the non-empty strings of
// stop, a unified request's "stop" (a string or an array of strings), as
// the request wrote them, and returns how many there are. When there are
// none it writes nothing.
func WriteStops(o jsonw.Object, key string, stop gjson.Result) int {
	n := 0
	eachStop(stop, func(gjson.Result) { n++ })
	if n == 0 {
		return 0
	}
	a := o.Array(key)
	eachStop(stop, func(s gjson.Result) { a.Raw(s.Raw) })
	a.End()
	return n
}

// eachStop calls f for each non-empty string of stop.
func eachStop(stop gjson.Result, f func(gjson.Result)) {
	switch {
	case stop.Type == gjson.String:
		if stop.Str != "" {
			f(stop)
		}
	case stop.IsArray():
		stop.ForEach(func(_, s gjson.Result) bool {
			if s.Type == gjson.String && s.Str != "" {
				f(s)
			}
			return true
		})
	}
}

// PartText is the text of a text or refusal content part.
func PartText(part gjson.Result) gjson.Result {
	if part.Get("type").Str == "refusal" {
		return part.Get("refusal")
	}
	return part.Get("text")
}

// WriteSystemTexts writes into a a {"text":…} object for every non-empty
// text of the system and developer messages of msgs, in order (content a
// string, or text and refusal parts), and returns how many.
func WriteSystemTexts(a jsonw.Array, msgs []ChatMessage) (n int) {
	for i := range msgs {
		if msgs[i].Role != "system" && msgs[i].Role != "developer" {
			continue
		}
		eachText(msgs[i].Content, func(text gjson.Result) {
			o := a.Object()
			o.Raw("text", text.Raw)
			o.End()
			n++
		})
	}
	return n
}

// eachText calls f for each non-empty text of content: a string, or text
// and refusal parts.
func eachText(content gjson.Result, f func(gjson.Result)) {
	add := func(text gjson.Result) {
		if text.Type == gjson.String && text.Str != "" {
			f(text)
		}
	}
	if content.Type == gjson.String {
		add(content)
		return
	}
	content.ForEach(func(_, part gjson.Result) bool {
		add(PartText(part))
		return true
	})
}

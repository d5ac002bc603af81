package providers

import "github.com/tidwall/gjson"

// ChatMessage holds the fields of one unified chat message that the
// translators read. The zero gjson.Result stands for an absent field.
type ChatMessage struct {
	Role                                           string
	Content, ToolCalls, ToolCallID, ThinkingBlocks gjson.Result
}

// AppendChatMessages appends the messages of the array v, a unified
// request's "messages", to msgs. Like gjson's Get, which ValidateChat
// uses, it takes the first of duplicate keys. Other fields
// (reasoning_content and reasoning among them) it leaves out.
func AppendChatMessages(msgs []ChatMessage, v gjson.Result) []ChatMessage {
	v.ForEach(func(_, m gjson.Result) bool {
		var msg ChatMessage
		var role gjson.Result
		m.ForEach(func(key, v gjson.Result) bool {
			var field *gjson.Result
			switch key.Str {
			case "role":
				field = &role
			case "content":
				field = &msg.Content
			case "tool_calls":
				field = &msg.ToolCalls
			case "tool_call_id":
				field = &msg.ToolCallID
			case "thinking_blocks":
				field = &msg.ThinkingBlocks
			default:
				return true
			}
			if !field.Exists() {
				*field = v
			}
			return true
		})
		msg.Role = role.Str
		msgs = append(msgs, msg)
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

package anthropic

import (
	"errors"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
)

// ChatResponse translates an Anthropic message into a unified
// chat.completion: text blocks are joined into content, tool_use blocks
// become tool_calls, thinking blocks are left out, and cache reads and
// writes count as prompt tokens.
func (c Chat) ChatResponse(body []byte) ([]byte, error) {
	if !providers.ValidJSON(body) {
		return nil, errors.New("anthropic: the message is not valid JSON")
	}
	root := gjson.ParseBytes(body)
	content := root.Get("content")
	if !root.IsObject() || !content.IsArray() {
		return nil, errors.New("anthropic: the answer is not a message with content")
	}

	b := make([]byte, 0, len(body)+256)
	b = append(b, `{"id":`...)
	b = appendRawString(b, root.Get("id"))
	b = append(b, `,"object":"chat.completion","created":`...)
	b = providers.AppendInt(b, c.now().Unix())
	b = append(b, `,"model":`...)
	b = appendRawString(b, root.Get("model"))
	b = append(b, `,"choices":[{"index":0,"message":{"role":"assistant","content":`...)
	b = appendText(b, content)
	b = append(b, `,"refusal":null`...)
	b = appendToolCalls(b, content)
	b = append(b, `},"logprobs":null,"finish_reason":"`...)
	b = append(b, finishReason(root.Get("stop_reason").Str)...)
	b = append(b, `"}],"usage":`...)

	var u usage
	u.set(root.Get("usage"))
	b = u.append(b)
	return append(b, '}'), nil
}

// appendText appends the message's text: its text blocks joined, or null
// when it has none.
func appendText(b []byte, content gjson.Result) []byte {
	var first gjson.Result
	var joined strings.Builder
	n := 0
	content.ForEach(func(_, block gjson.Result) bool {
		if block.Get("type").Str != "text" {
			return true
		}
		text := block.Get("text")
		switch n {
		case 0:
			first = text
		case 1:
			joined.WriteString(first.Str)
			fallthrough
		default:
			joined.WriteString(text.Str)
		}
		n++
		return true
	})
	switch {
	case n == 0:
		return append(b, "null"...)
	case n == 1:
		return appendRawString(b, first)
	default:
		return providers.AppendString(b, joined.String())
	}
}

// appendToolCalls appends ,"tool_calls":[…] for the message's tool_use
// blocks, and nothing when there are none.
func appendToolCalls(b []byte, content gjson.Result) []byte {
	n := 0
	content.ForEach(func(_, block gjson.Result) bool {
		if block.Get("type").Str != "tool_use" {
			return true
		}
		if n == 0 {
			b = append(b, `,"tool_calls":[`...)
		} else {
			b = append(b, ',')
		}
		n++
		b = append(b, `{"id":`...)
		b = appendRawString(b, block.Get("id"))
		b = append(b, `,"type":"function","function":{"name":`...)
		b = appendRawString(b, block.Get("name"))
		b = append(b, `,"arguments":`...)
		if input := block.Get("input"); input.IsObject() {
			b = providers.AppendString(b, compactJSON(input.Raw))
		} else {
			b = append(b, `"{}"`...)
		}
		b = append(b, "}}"...)
		return true
	})
	if n > 0 {
		b = append(b, ']')
	}
	return b
}

// usage is Anthropic's token accounting.
type usage struct {
	input, output, cacheRead, cacheCreation int64
}

// set updates u with the counts present in an Anthropic usage object.
// Counts it lacks keep their value: a stream's message_delta may repeat
// only some of them. Anthropic's output_tokens is cumulative, so replacing
// it is right.
func (u *usage) set(v gjson.Result) {
	v.ForEach(func(key, n gjson.Result) bool {
		if n.Type != gjson.Number {
			return true
		}
		switch key.Str {
		case "input_tokens":
			u.input = n.Int()
		case "output_tokens":
			u.output = n.Int()
		case "cache_read_input_tokens":
			u.cacheRead = n.Int()
		case "cache_creation_input_tokens":
			u.cacheCreation = n.Int()
		}
		return true
	})
}

// append appends the unified usage object.
func (u *usage) append(b []byte) []byte {
	prompt := u.input + u.cacheRead + u.cacheCreation
	b = append(b, `{"prompt_tokens":`...)
	b = providers.AppendInt(b, prompt)
	b = append(b, `,"completion_tokens":`...)
	b = providers.AppendInt(b, u.output)
	b = append(b, `,"total_tokens":`...)
	b = providers.AppendInt(b, prompt+u.output)
	b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
	b = providers.AppendInt(b, u.cacheRead)
	return append(b, "}}"...)
}

package bedrock

import (
	"encoding/base64"
	"errors"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
)

// ChatResponse translates a Converse answer into a unified
// chat.completion: text blocks are joined into content, toolUse blocks
// become tool_calls (the structured output tool's input becomes content),
// reasoningContent blocks become reasoning_content and, where signed or
// redacted, thinking_blocks, and cache reads and writes count as prompt
// tokens.
//
// Converse names neither the answer nor the model: the id is generated and
// "model" is empty, for the host to fill in with the model it routed to.
func (c Chat) ChatResponse(body []byte) ([]byte, error) {
	if !providers.ValidJSON(body) {
		return nil, errors.New("bedrock: the answer is not valid JSON")
	}
	root := gjson.ParseBytes(body)
	content := root.Get("output.message.content")
	if !root.IsObject() || !content.IsArray() {
		return nil, errors.New("bedrock: the answer is not a Converse output message")
	}

	b := make([]byte, 0, len(body)+256)
	b = append(b, `{"id":`...)
	b = providers.AppendString(b, c.newID())
	b = append(b, `,"object":"chat.completion","created":`...)
	b = providers.AppendInt(b, c.now().Unix())
	b = append(b, `,"model":"","choices":[{"index":0,"message":{"role":"assistant","content":`...)
	b = appendContent(b, content)
	b = appendReasoning(b, content)
	b = append(b, `,"refusal":null`...)
	b, calls, jsonCalls := appendToolCalls(b, content)
	b = append(b, `},"logprobs":null,"finish_reason":"`...)
	b = append(b, finalFinish(finishReason(root.Get("stopReason").Str), calls, jsonCalls)...)
	b = append(b, `"}],"usage":`...)

	var u usage
	u.set(root.Get("usage"))
	b = u.unified().Append(b)
	return append(b, '}'), nil
}

// appendContent appends the message's content: its text blocks, and the
// input of structured output tool calls, joined in order; null when there
// is none.
func appendContent(b []byte, content gjson.Result) []byte {
	var first gjson.Result
	var joined []byte
	n := 0
	content.ForEach(func(_, block gjson.Result) bool {
		var text gjson.Result
		if t := block.Get("text"); t.Type == gjson.String {
			text = t
		} else if tu := block.Get("toolUse"); tu.IsObject() && tu.Get("name").Str == JSONToolName {
			input := tu.Get("input")
			if !input.IsObject() {
				return true
			}
			s := providers.CompactJSON(input.Raw)
			text = gjson.Result{Type: gjson.String, Str: s}
		} else {
			return true
		}
		if n == 0 {
			first = text
		} else {
			if n == 1 {
				joined = append(joined, first.Str...)
			}
			joined = append(joined, text.Str...)
		}
		n++
		return true
	})
	switch {
	case n == 0:
		return append(b, "null"...)
	case n == 1 && first.Raw != "":
		return append(b, first.Raw...)
	case n == 1:
		return providers.AppendString(b, first.Str)
	default:
		return providers.AppendString(b, string(joined))
	}
}

// appendReasoning appends ,"reasoning_content":… (the reasoning texts
// joined) and ,"thinking_blocks":[…] (the signed and the redacted ones, in
// order), each only when there is one.
func appendReasoning(b []byte, content gjson.Result) []byte {
	var text []byte
	texts, blocks := 0, 0
	content.ForEach(func(_, block gjson.Result) bool {
		if rt := block.Get("reasoningContent.reasoningText.text"); rt.Type == gjson.String {
			text = append(text, rt.Str...)
			texts++
		}
		return true
	})
	if texts > 0 {
		b = append(b, `,"reasoning_content":`...)
		b = providers.AppendString(b, string(text))
	}
	content.ForEach(func(_, block gjson.Result) bool {
		rc := block.Get("reasoningContent")
		if !rc.IsObject() {
			return true
		}
		rt, red := rc.Get("reasoningText"), rc.Get("redactedContent")
		sig := rt.Get("signature")
		switch {
		case sig.Type == gjson.String && sig.Str != "":
			b = openBlocks(b, &blocks)
			b = append(b, `{"type":"thinking","thinking":`...)
			b = providers.AppendRawString(b, rt.Get("text"))
			b = append(b, `,"signature":`...)
			b = append(b, sig.Raw...)
			b = append(b, '}')
		case red.Type == gjson.String && red.Str != "":
			b = openBlocks(b, &blocks)
			b = append(b, `{"type":"redacted_thinking","data":`...)
			b = append(b, red.Raw...)
			b = append(b, '}')
		}
		return true
	})
	if blocks > 0 {
		b = append(b, ']')
	}
	return b
}

func openBlocks(b []byte, n *int) []byte {
	if *n == 0 {
		b = append(b, `,"thinking_blocks":[`...)
	} else {
		b = append(b, ',')
	}
	*n++
	return b
}

// appendToolCalls appends ,"tool_calls":[…] for the message's toolUse
// blocks other than the structured output tool's, and nothing when there
// are none. It returns how many calls it wrote and how many structured
// output calls it left out.
func appendToolCalls(b []byte, content gjson.Result) ([]byte, int, int) {
	n, jsonCalls := 0, 0
	content.ForEach(func(_, block gjson.Result) bool {
		tu := block.Get("toolUse")
		if !tu.IsObject() {
			return true
		}
		name := tu.Get("name")
		if name.Str == JSONToolName {
			jsonCalls++
			return true
		}
		if n == 0 {
			b = append(b, `,"tool_calls":[`...)
		} else {
			b = append(b, ',')
		}
		n++
		b = append(b, `{"id":`...)
		b = providers.AppendRawString(b, tu.Get("toolUseId"))
		b = append(b, `,"type":"function","function":{"name":`...)
		b = providers.AppendRawString(b, name)
		b = append(b, `,"arguments":`...)
		if input := tu.Get("input"); input.IsObject() {
			b = providers.AppendString(b, providers.CompactJSON(input.Raw))
		} else {
			b = append(b, `"{}"`...)
		}
		b = append(b, "}}"...)
		return true
	})
	if n > 0 {
		b = append(b, ']')
	}
	return b, n, jsonCalls
}

// usage is Converse's token accounting.
type usage struct {
	input, output, cacheRead, cacheWrite int64
	cacheReported                        bool // cacheReadInputTokens was given
}

// set records the counts present in a Converse usage object.
func (u *usage) set(v gjson.Result) {
	v.ForEach(func(key, n gjson.Result) bool {
		if n.Type != gjson.Number {
			return true
		}
		switch key.Str {
		case "inputTokens":
			u.input = n.Int()
		case "outputTokens":
			u.output = n.Int()
		case "cacheReadInputTokens":
			u.cacheRead = n.Int()
			u.cacheReported = true
		case "cacheWriteInputTokens":
			u.cacheWrite = n.Int()
		}
		return true
	})
}

// unified is the unified usage: prompt tokens include cache reads and
// writes, which Converse counts apart from inputTokens.
func (u *usage) unified() providers.Usage {
	prompt := u.input + u.cacheRead + u.cacheWrite
	return providers.Usage{
		Prompt: prompt, Completion: u.output, Total: prompt + u.output,
		Cached: u.cacheRead, HasCached: u.cacheReported,
	}
}

// decodeBlob decodes a Converse blob (standard base64); invalid data
// yields nil.
func decodeBlob(s string) []byte {
	d, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil
	}
	return d
}

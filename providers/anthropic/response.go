package anthropic

import (
	"errors"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
)

// ChatResponse translates an Anthropic message into a unified
// chat.completion: text blocks, and the input of the response_format tool,
// are joined into content; thinking blocks into reasoning_content, and
// with their signatures (and redacted_thinking blocks) into
// thinking_blocks; other tool_use blocks become tool_calls. Cache reads and
// writes count as prompt tokens.
func (c Chat) ChatResponse(body []byte) ([]byte, error) {
	if !providers.ValidJSON(body) {
		return nil, errors.New("anthropic: the message is not valid JSON")
	}
	// One walk of the message and one of its content read every field the
	// answer needs (the first of duplicates, as gjson's Get takes); the
	// body is read in place, and the answer copies what it keeps.
	root := gjson.Parse(providers.InPlace(body))
	if !root.IsObject() {
		return nil, errors.New("anthropic: the answer is not a message with content")
	}
	var id, model, content, stopReason, usageObj gjson.Result
	providers.EachMember(root.Raw, func(key string, v gjson.Result) bool {
		var f *gjson.Result
		switch key {
		case "id":
			f = &id
		case "model":
			f = &model
		case "content":
			f = &content
		case "stop_reason":
			f = &stopReason
		case "usage":
			f = &usageObj
		}
		if f != nil && !f.Exists() {
			*f = v
		}
		return true
	})
	if !content.IsArray() {
		return nil, errors.New("anthropic: the answer is not a message with content")
	}
	var stack [4]contentBlock
	blocks := readBlocks(stack[:0], content)

	b := make([]byte, 0, len(body)+256)
	b = append(b, `{"id":`...)
	b = providers.AppendRawString(b, id)
	b = append(b, `,"object":"chat.completion","created":`...)
	b = providers.AppendInt(b, c.now().Unix())
	b = append(b, `,"model":`...)
	b = providers.AppendRawString(b, model)
	b = append(b, `,"choices":[{"index":0,"message":{"role":"assistant","content":`...)
	b = appendText(b, blocks)
	b = append(b, `,"refusal":null`...)
	b = appendReasoning(b, blocks)
	b, calls := appendToolCalls(b, blocks)
	b = append(b, `},"logprobs":null,"finish_reason":"`...)
	finish := finishReason(stopReason.Str)
	if finish == "tool_calls" && calls == 0 {
		finish = "stop" // only the response_format tool was called
	}
	b = append(b, finish...)
	b = append(b, `"}],"usage":`...)

	var u usage
	u.set(usageObj)
	b = u.unified().Append(b)
	return append(b, '}'), nil
}

// contentBlock holds the fields of a content block that the answer reads;
// the zero gjson.Result stands for an absent one.
type contentBlock struct {
	typ, text, id, name, input, thinking, signature, data gjson.Result
}

// readBlocks appends the blocks of content, an array, to dst, each read in
// one walk.
func readBlocks(dst []contentBlock, content gjson.Result) []contentBlock {
	providers.EachElement(content.Raw, func(v gjson.Result) bool {
		var blk contentBlock
		if !v.IsObject() {
			dst = append(dst, blk) // a block of no type, skipped
			return true
		}
		providers.EachMember(v.Raw, func(key string, x gjson.Result) bool {
			var f *gjson.Result
			switch key {
			case "type":
				f = &blk.typ
			case "text":
				f = &blk.text
			case "id":
				f = &blk.id
			case "name":
				f = &blk.name
			case "input":
				f = &blk.input
			case "thinking":
				f = &blk.thinking
			case "signature":
				f = &blk.signature
			case "data":
				f = &blk.data
			}
			if f != nil && !f.Exists() {
				*f = x
			}
			return true
		})
		dst = append(dst, blk)
		return true
	})
	return dst
}

// isJSONTool reports whether a tool_use block is a call of the tool that
// carries a response_format.
func isJSONTool(block gjson.Result) bool {
	return block.Get("name").Str == jsonToolName
}

// isJSONTool is isJSONTool for a block read.
func (blk *contentBlock) isJSONTool() bool { return blk.name.Str == jsonToolName }

// appendText appends the message's content: its text blocks and the input
// of response_format tool calls, joined in order, or null when it has
// none.
func appendText(b []byte, blocks []contentBlock) []byte {
	var j providers.TextJoin
	for i := range blocks {
		blk := &blocks[i]
		switch blk.typ.Str {
		case "text":
			j.Add(blk.text)
		case "tool_use":
			if blk.isJSONTool() {
				j.Add(jsonToolText(blk.input))
			}
		}
	}
	return j.Append(b)
}

// jsonToolText is the input of a response_format tool call as a JSON
// string result: the input's JSON text, compacted.
func jsonToolText(input gjson.Result) gjson.Result {
	if !input.IsObject() && !input.IsArray() {
		return gjson.Result{Type: gjson.String, Str: "{}", Raw: `"{}"`}
	}
	s := providers.CompactJSON(input.Raw)
	return gjson.Result{Type: gjson.String, Str: s, Raw: string(providers.AppendString(nil, s))}
}

// appendReasoning appends ,"reasoning_content":…,"thinking_blocks":[…]
// for the message's thinking and redacted_thinking blocks, and nothing
// when it has none. reasoning_content joins the thinking text;
// thinking_blocks keeps every block with its signature (or data), in
// order, for the client to send back.
func appendReasoning(b []byte, blocks []contentBlock) []byte {
	var texts providers.TextJoin
	n := 0
	for i := range blocks {
		switch blocks[i].typ.Str {
		case "thinking":
			texts.Add(blocks[i].thinking)
			n++
		case "redacted_thinking":
			n++
		}
	}
	if n == 0 {
		return b
	}
	if texts.Len() > 0 {
		b = append(b, `,"reasoning_content":`...)
		b = texts.Append(b)
	}
	b = append(b, `,"thinking_blocks":[`...)
	n = 0
	for i := range blocks {
		blk := &blocks[i]
		switch blk.typ.Str {
		case "thinking":
			b = sep(b, &n)
			text := blk.thinking
			if text.Type != gjson.String {
				text = gjson.Result{Type: gjson.String, Raw: `""`}
			}
			b = appendThinkingBlock(b, text.Raw, blk.signature)
		case "redacted_thinking":
			b = sep(b, &n)
			b = appendRedactedBlock(b, blk.data)
		}
	}
	return append(b, ']')
}

// appendThinkingBlock appends a thinking block of thinking_blocks; text is
// the thinking as a JSON string.
func appendThinkingBlock(b []byte, text string, signature gjson.Result) []byte {
	b = append(b, `{"type":"thinking","thinking":`...)
	b = append(b, text...)
	b = append(b, `,"signature":`...)
	b = providers.AppendRawString(b, signature)
	return append(b, '}')
}

// appendRedactedBlock appends a redacted_thinking block of thinking_blocks.
func appendRedactedBlock(b []byte, data gjson.Result) []byte {
	b = append(b, `{"type":"redacted_thinking","data":`...)
	b = providers.AppendRawString(b, data)
	return append(b, '}')
}

// appendToolCalls appends ,"tool_calls":[…] for the message's tool_use
// blocks other than response_format tool calls, and nothing when there are
// none. It returns how many it appended.
func appendToolCalls(b []byte, blocks []contentBlock) ([]byte, int) {
	n := 0
	for i := range blocks {
		blk := &blocks[i]
		if blk.typ.Str != "tool_use" || blk.isJSONTool() {
			continue
		}
		if n == 0 {
			b = append(b, `,"tool_calls":[`...)
		} else {
			b = append(b, ',')
		}
		n++
		b = append(b, `{"id":`...)
		b = providers.AppendRawString(b, blk.id)
		b = append(b, `,"type":"function","function":{"name":`...)
		b = providers.AppendRawString(b, blk.name)
		b = append(b, `,"arguments":`...)
		if blk.input.IsObject() {
			b = providers.AppendString(b, providers.CompactJSON(blk.input.Raw))
		} else {
			b = append(b, `"{}"`...)
		}
		b = append(b, "}}"...)
	}
	if n > 0 {
		b = append(b, ']')
	}
	return b, n
}

// usage is Anthropic's token accounting.
type usage struct {
	input, output, cacheRead, cacheCreation, thinking int64

	// cached and reasoning say whether Anthropic reported cache counts
	// and thinking tokens: the details objects are written only then.
	cached, reasoning bool
}

// set updates u with the counts present in an Anthropic usage object.
// Counts it lacks keep their value: a stream's message_delta may repeat
// only some of them. Anthropic's counts there are cumulative, so replacing
// them is right.
func (u *usage) set(v gjson.Result) {
	v.ForEach(func(key, n gjson.Result) bool {
		if key.Str == "output_tokens_details" {
			if t := n.Get("thinking_tokens"); t.Type == gjson.Number {
				u.thinking, u.reasoning = t.Int(), true
			}
			return true
		}
		if n.Type != gjson.Number {
			return true
		}
		switch key.Str {
		case "input_tokens":
			u.input = n.Int()
		case "output_tokens":
			u.output = n.Int()
		case "cache_read_input_tokens":
			u.cacheRead, u.cached = n.Int(), true
		case "cache_creation_input_tokens":
			u.cacheCreation, u.cached = n.Int(), true
		}
		return true
	})
}

// unified is the unified usage: prompt tokens are input tokens plus cache
// reads and writes (Anthropic counts them apart), of which the cache reads
// are cached_tokens; completion tokens are output tokens, thinking
// included, of which the thinking tokens are reasoning_tokens where
// Anthropic reports them.
func (u *usage) unified() providers.Usage {
	prompt := u.input + u.cacheRead + u.cacheCreation
	return providers.Usage{
		Prompt: prompt, Completion: u.output, Total: prompt + u.output,
		Cached: u.cacheRead, HasCached: u.cached,
		Reasoning: u.thinking, HasReasoning: u.reasoning,
	}
}

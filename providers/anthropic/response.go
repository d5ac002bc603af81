package anthropic

import (
	"errors"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/jsonw"
)

// ChatResponse translates an Anthropic message into a unified
// chat.completion: text blocks, and the input of the response_format tool,
// are joined into content; thinking blocks into reasoning_content, and
// with their signatures (and redacted_thinking blocks) into
// thinking_blocks; other tool_use blocks become tool_calls. Cache reads and
// writes count as prompt tokens.
func (c Chat) ChatResponse(body []byte) ([]byte, providers.Used, error) {
	if !providers.ValidJSON(body) {
		return nil, providers.Used{}, errors.New("anthropic: the message is not valid JSON")
	}
	// One walk of the message and one of its content read every field the
	// answer needs (the first of duplicates, as gjson's Get takes); the
	// body is read in place, and the answer copies what it keeps.
	root := gjson.Parse(providers.InPlace(body))
	if !root.IsObject() {
		return nil, providers.Used{}, errors.New("anthropic: the answer is not a message with content")
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
		return nil, providers.Used{}, errors.New("anthropic: the answer is not a message with content")
	}
	var stack [4]contentBlock
	blocks := readBlocks(stack[:0], content)

	w := jsonw.New(make([]byte, 0, len(body)+256))
	comp := providers.StartCompletion(&w, providers.Head{ID: jsonw.StrOf(id), Created: c.now().Unix(), Model: jsonw.StrOf(model)})
	m := comp.Choice(0)
	writeText(m, blocks)
	m.NullRefusal()
	writeReasoning(m, blocks)
	calls := writeToolCalls(m, blocks)
	finish := finishReason(stopReason.Str)
	if finish == "tool_calls" && calls == 0 {
		finish = "stop" // only the response_format tool was called
	}
	m.End(finish)

	var u usage
	u.set(usageObj)
	used := u.unified()
	comp.Usage(used)
	out, err := comp.Finish()
	return out, used.Used(), err
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

// writeText writes the message's content: its text blocks and the input
// of response_format tool calls, joined in order, or null when it has
// none.
func writeText(m providers.Message, blocks []contentBlock) {
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
	m.JoinedContent(&j)
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

// writeReasoning writes reasoning_content and thinking_blocks for the
// message's thinking and redacted_thinking blocks, and nothing when it has
// none. reasoning_content joins the thinking text; thinking_blocks keeps
// every block with its signature (or data), in order, for the client to
// send back.
func writeReasoning(m providers.Message, blocks []contentBlock) {
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
		return
	}
	if texts.Len() > 0 {
		m.JoinedReasoning(&texts)
	}
	tb := m.ThinkingBlocks()
	for i := range blocks {
		blk := &blocks[i]
		switch blk.typ.Str {
		case "thinking":
			providers.WriteThinkingBlock(tb, jsonw.StrOf(blk.thinking), jsonw.StrOf(blk.signature))
		case "redacted_thinking":
			providers.WriteRedactedThinking(tb, jsonw.StrOf(blk.data))
		}
	}
	tb.End()
}

// writeToolCalls writes tool_calls for the message's tool_use blocks
// other than response_format tool calls, and nothing when there are none.
// It returns how many it wrote.
func writeToolCalls(m providers.Message, blocks []contentBlock) int {
	n := 0
	var calls providers.ToolCalls
	for i := range blocks {
		blk := &blocks[i]
		if blk.typ.Str != "tool_use" || blk.isJSONTool() {
			continue
		}
		if n == 0 {
			calls = m.ToolCalls()
		}
		n++
		args := jsonw.Plain("{}")
		if blk.input.IsObject() {
			args = jsonw.Plain(providers.CompactJSON(blk.input.Raw))
		}
		calls.Call(jsonw.StrOf(blk.id), jsonw.StrOf(blk.name), args)
	}
	if n > 0 {
		calls.End()
	}
	return n
}

// usage is Anthropic's token accounting.
type usage struct {
	input, output, cacheRead, cacheCreation, thinking int64
	cacheCreation1h                                   int64 // of cacheCreation, for an hour

	// cached and reasoning say whether Anthropic reported cache counts
	// and thinking tokens: the details objects are written only then;
	// written, whether it reported cache writes; split, whether it told
	// the 1-hour writes apart (cache_creation).
	cached, written, split, reasoning bool
}

// set updates u with the counts present in an Anthropic usage object.
// Counts it lacks keep their value: a stream's message_delta may repeat
// only some of them. Anthropic's counts there are cumulative, so replacing
// them is right.
func (u *usage) set(v gjson.Result) {
	v.ForEach(func(key, n gjson.Result) bool {
		switch key.Str {
		case "output_tokens_details":
			if t := n.Get("thinking_tokens"); t.Type == gjson.Number {
				u.thinking, u.reasoning = t.Int(), true
			}
			return true
		case "cache_creation":
			if h := n.Get("ephemeral_1h_input_tokens"); h.Type == gjson.Number {
				u.cacheCreation1h, u.split = h.Int(), true
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
			u.cacheCreation, u.cached, u.written = n.Int(), true, true
		}
		return true
	})
}

// unified is the unified usage: prompt tokens are input tokens plus cache
// reads and writes (Anthropic counts them apart), of which the cache reads
// are cached_tokens and the writes cache_write_tokens (the 1-hour ones
// cache_write_1h_tokens, where Anthropic tells them apart); completion
// tokens are output tokens, thinking included, of which the thinking
// tokens are reasoning_tokens where Anthropic reports them.
func (u *usage) unified() providers.Usage {
	prompt := u.input + u.cacheRead + u.cacheCreation
	return providers.Usage{
		Prompt: prompt, Completion: u.output, Total: prompt + u.output,
		Cached: u.cacheRead, HasCached: u.cached,
		CacheWrite: u.cacheCreation, HasCacheWrite: u.written,
		CacheWrite1h: min(u.cacheCreation1h, u.cacheCreation), HasCacheWrite1h: u.split && u.written,
		Reasoning: u.thinking, HasReasoning: u.reasoning,
	}
}

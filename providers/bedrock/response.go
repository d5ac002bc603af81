package bedrock

import (
	"encoding/base64"
	"errors"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/jsonw"
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
func (c Chat) ChatResponse(body []byte) ([]byte, providers.Used, error) {
	if !providers.ValidJSON(body) {
		return nil, providers.Used{}, errors.New("bedrock: the answer is not valid JSON")
	}
	root := gjson.ParseBytes(body)
	content := root.Get("output.message.content")
	if !root.IsObject() || !content.IsArray() {
		return nil, providers.Used{}, errors.New("bedrock: the answer is not a Converse output message")
	}

	w := jsonw.New(make([]byte, 0, len(body)+256))
	comp := providers.StartCompletion(&w, providers.Head{ID: jsonw.Plain(c.newID()), Created: c.now().Unix(), Model: jsonw.Plain("")})
	m := comp.Choice(0)
	writeContent(m, content)
	writeReasoning(m, content)
	m.NullRefusal()
	calls, jsonCalls := writeToolCalls(m, content)
	m.End(finalFinish(finishReason(root.Get("stopReason").Str), calls, jsonCalls))

	var u usage
	u.set(root.Get("usage"))
	used := u.unified()
	comp.Usage(used)
	out, err := comp.Finish()
	return out, used.Used(), err
}

// writeContent writes the message's content: its text blocks, and the
// input of structured output tool calls, joined in order; null when there
// is none.
func writeContent(m providers.Message, content gjson.Result) {
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
		m.NullContent()
	case n == 1 && first.Raw != "":
		m.Content(jsonw.Lit(first.Raw))
	case n == 1:
		m.Content(jsonw.Plain(first.Str))
	default:
		m.Content(jsonw.Plain(providers.InPlace(joined)))
	}
}

// writeReasoning writes reasoning_content (the reasoning texts joined) and
// thinking_blocks (the signed and the redacted ones, in order), each only
// when there is one.
func writeReasoning(m providers.Message, content gjson.Result) {
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
		m.Reasoning(jsonw.Plain(providers.InPlace(text)))
	}
	var tb jsonw.Array
	content.ForEach(func(_, block gjson.Result) bool {
		rc := block.Get("reasoningContent")
		if !rc.IsObject() {
			return true
		}
		rt, red := rc.Get("reasoningText"), rc.Get("redactedContent")
		sig := rt.Get("signature")
		switch {
		case sig.Type == gjson.String && sig.Str != "":
			if blocks++; blocks == 1 {
				tb = m.ThinkingBlocks()
			}
			providers.WriteThinkingBlock(tb, jsonw.StrOf(rt.Get("text")), jsonw.Lit(sig.Raw))
		case red.Type == gjson.String && red.Str != "":
			if blocks++; blocks == 1 {
				tb = m.ThinkingBlocks()
			}
			providers.WriteRedactedThinking(tb, jsonw.Lit(red.Raw))
		}
		return true
	})
	if blocks > 0 {
		tb.End()
	}
}

// writeToolCalls writes tool_calls for the message's toolUse blocks other
// than the structured output tool's, and nothing when there are none. It
// returns how many calls it wrote and how many structured output calls it
// left out.
func writeToolCalls(m providers.Message, content gjson.Result) (int, int) {
	n, jsonCalls := 0, 0
	var calls providers.ToolCalls
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
		if n++; n == 1 {
			calls = m.ToolCalls()
		}
		args := jsonw.Plain("{}")
		if input := tu.Get("input"); input.IsObject() {
			args = jsonw.Plain(providers.CompactJSON(input.Raw))
		}
		calls.Call(jsonw.StrOf(tu.Get("toolUseId")), jsonw.StrOf(name), args)
		return true
	})
	if n > 0 {
		calls.End()
	}
	return n, jsonCalls
}

// usage is Converse's token accounting.
type usage struct {
	input, output, cacheRead, cacheWrite int64
	cacheWrite1h                         int64 // of cacheWrite, for an hour (cacheDetails)
	cacheReported                        bool  // cacheReadInputTokens was given
	writeReported                        bool  // cacheWriteInputTokens was given
	detailed                             bool  // cacheDetails was given
}

// set records the counts present in a Converse usage object.
func (u *usage) set(v gjson.Result) {
	v.ForEach(func(key, n gjson.Result) bool {
		if key.Str == "cacheDetails" && n.IsArray() {
			// The cache writes by ttl: [{"ttl":"1h","inputTokens":…}, …].
			u.detailed, u.cacheWrite1h = true, 0
			n.ForEach(func(_, d gjson.Result) bool {
				if d.Get("ttl").Str == "1h" {
					u.cacheWrite1h += d.Get("inputTokens").Int()
				}
				return true
			})
			return true
		}
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
			u.writeReported = true
		}
		return true
	})
}

// unified is the unified usage: prompt tokens include cache reads and
// writes, which Converse counts apart from inputTokens; the writes are
// cache_write_tokens, of which those of cache points with a one-hour ttl
// cache_write_1h_tokens where Converse details them.
func (u *usage) unified() providers.Usage {
	prompt := u.input + u.cacheRead + u.cacheWrite
	return providers.Usage{
		Prompt: prompt, Completion: u.output, Total: prompt + u.output,
		Cached: u.cacheRead, HasCached: u.cacheReported,
		CacheWrite: u.cacheWrite, HasCacheWrite: u.writeReported,
		CacheWrite1h: min(u.cacheWrite1h, u.cacheWrite), HasCacheWrite1h: u.detailed && u.writeReported,
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

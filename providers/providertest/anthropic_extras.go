package providertest

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"
)

// This file holds what the Anthropic format does beyond plain chat:
// extended thinking with signed thinking blocks, JSON outputs
// (output_config.format) and prompt caching (cache_control).

// thinkingKey signs the thinking blocks the fake gives out, so that it can
// tell, as Anthropic does, a block it issued from one a client changed or
// made up. Each process has its own.
var thinkingKey = func() []byte {
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return k
}()

// thinkingSignature is the signature of a thinking block with text: an
// HMAC-SHA256 of the text, base64.
func thinkingSignature(text string) string {
	m := hmac.New(sha256.New, thinkingKey)
	m.Write([]byte("thinking\x00" + text))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// redactedData is the opaque data of a redacted_thinking block: a payload
// and its HMAC, base64.
func redactedData(payload string) string {
	m := hmac.New(sha256.New, thinkingKey)
	m.Write([]byte("redacted\x00" + payload))
	return base64.StdEncoding.EncodeToString(append([]byte(payload+"\x00"), m.Sum(nil)...))
}

// redactedOK reports whether data is redacted_thinking data the fake gave
// out.
func redactedOK(data string) bool {
	raw, err := base64.StdEncoding.DecodeString(data)
	if err != nil || len(raw) < sha256.Size+1 {
		return false
	}
	payload, mac := raw[:len(raw)-sha256.Size-1], raw[len(raw)-sha256.Size:]
	m := hmac.New(sha256.New, thinkingKey)
	m.Write([]byte("redacted\x00"))
	m.Write(payload)
	return raw[len(payload)] == 0 && hmac.Equal(mac, m.Sum(nil))
}

// anThinking is a request's thinking configuration.
type anThinking struct {
	on, budget bool // thinking is on; in the budget (type enabled) form
	// omitted is display "omitted": thinking blocks come with an empty
	// thinking text (no thinking_delta events) and a signature that
	// holds good for the block as it came, as at Anthropic.
	omitted bool
}

// checkThinking validates thinking and output_config and the rules that
// come with thinking: a budget of at least 1024 below max_tokens, no
// temperature but 1, top_p of at least 0.95, no top_k, and no forced tool
// with a budget.
func checkThinking(q *anRequest) (anThinking, string) {
	var t anThinking
	if th := q.thinking; th.Exists() {
		if !th.IsObject() {
			return t, "thinking: Input should be an object"
		}
		switch th.Get("type").Str {
		case "enabled":
			bt := th.Get("budget_tokens")
			if !isInt(bt, 1024) {
				return t, "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
			}
			if bt.Int() >= q.maxTokens.Int() {
				return t, "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#max-tokens-and-context-window-size"
			}
			t = anThinking{on: true, budget: true}
		case "adaptive":
			t.on = true
		case "disabled":
		default:
			return t, "thinking.type: Input should be 'enabled', 'disabled' or 'adaptive'"
		}
		if d := th.Get("display"); d.Exists() && d.Str != "summarized" && d.Str != "omitted" {
			return t, "thinking.display: Input should be 'summarized' or 'omitted'"
		}
		t.omitted = t.on && th.Get("display").Str == "omitted"
	}
	if oc := q.outputConfig; oc.Exists() {
		if !oc.IsObject() {
			return t, "output_config: Input should be an object"
		}
		var msg string
		oc.ForEach(func(k, v gjson.Result) bool {
			switch k.Str {
			case "effort":
				switch v.Str {
				case "low", "medium", "high", "xhigh", "max":
				default:
					msg = "output_config.effort: Input should be 'low', 'medium', 'high', 'xhigh' or 'max'"
				}
			case "format":
				if v.Get("type").Str != "json_schema" || !v.Get("schema").IsObject() {
					msg = "output_config.format: needs type json_schema and a schema object"
				} else {
					msg = checkOutputSchema("output_config.format.schema", v.Get("schema"), 0)
				}
			default:
				msg = "output_config." + k.Str + ": Extra inputs are not permitted"
			}
			return msg == ""
		})
		if msg != "" {
			return t, msg
		}
	}
	if !t.on {
		return t, ""
	}
	if v := q.temperature; v.Exists() && v.Num != 1 {
		return t, "`temperature` may only be set to 1 when thinking is enabled. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#feature-compatibility"
	}
	if v := q.topP; v.Exists() && v.Num < 0.95 {
		return t, "`top_p` must be greater than or equal to 0.95 or unset when thinking is enabled. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#feature-compatibility"
	}
	if q.topK.Exists() {
		return t, "`top_k` must be unset when thinking is enabled. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#feature-compatibility"
	}
	if typ := q.toolChoice.Get("type").Str; t.budget && (typ == "any" || typ == "tool") {
		return t, "Thinking may not be enabled when tool_choice forces tool use."
	}
	return t, ""
}

// outputSchemaKeys are the JSON Schema keywords Anthropic's JSON outputs
// take (anthropic-sdk-go schemautil.go's supportedSchemaKeys), with
// "definitions" beside "$defs".
var outputSchemaKeys = map[string]bool{
	"$ref": true, "$defs": true, "definitions": true, "type": true, "anyOf": true, "oneOf": true, "allOf": true,
	"description": true, "title": true, "enum": true, "const": true, "properties": true,
	"additionalProperties": true, "required": true, "items": true, "minItems": true, "format": true, "pattern": true,
}

// checkOutputSchema checks a JSON outputs schema as strictly as the
// subset Anthropic documents: only the supported keywords, and every
// object with properties closed with additionalProperties false.
func checkOutputSchema(p string, s gjson.Result, depth int) string {
	if depth > 32 || !s.IsObject() {
		return ""
	}
	var msg string
	s.ForEach(func(k, v gjson.Result) bool {
		if !outputSchemaKeys[k.Str] {
			msg = p + ": the schema keyword " + strconv.Quote(k.Str) + " is not supported in structured outputs"
			return false
		}
		switch k.Str {
		case "properties", "$defs", "definitions":
			v.ForEach(func(name, sub gjson.Result) bool {
				msg = checkOutputSchema(p+"."+k.Str+"."+name.Str, sub, depth+1)
				return msg == ""
			})
		case "anyOf", "oneOf", "allOf":
			for i, sub := range v.Array() {
				if msg = checkOutputSchema(p+"."+k.Str+"."+strconv.Itoa(i), sub, depth+1); msg != "" {
					break
				}
			}
		case "items":
			msg = checkOutputSchema(p+".items", v, depth+1)
		case "additionalProperties":
			if v.IsObject() {
				msg = checkOutputSchema(p+".additionalProperties", v, depth+1)
			}
		case "minItems":
			if v.Raw != "0" && v.Raw != "1" {
				msg = p + ".minItems: only 0 and 1 are supported"
			}
		}
		return msg == ""
	})
	if msg != "" {
		return msg
	}
	if s.Get("properties").IsObject() && s.Get("additionalProperties").Type != gjson.False {
		return p + ": For 'object' type, 'additionalProperties' must be explicitly set to false"
	}
	return ""
}

// checkThinkingBlock checks a thinking or redacted_thinking block sent
// back: it must be one the fake gave out, unchanged.
func checkThinkingBlock(bp string, b gjson.Result) string {
	if b.Get("type").Str == "redacted_thinking" {
		if d := b.Get("data"); d.Type != gjson.String || !redactedOK(d.Str) {
			return bp + ".data: Invalid `data` in `redacted_thinking` block"
		}
		return ""
	}
	text, sig := b.Get("thinking"), b.Get("signature")
	if text.Type != gjson.String || sig.Type != gjson.String {
		return bp + ": thinking blocks need thinking and signature"
	}
	if !hmac.Equal([]byte(sig.Str), []byte(thinkingSignature(text.Str))) {
		return bp + ".signature: Invalid `signature` in `thinking` block"
	}
	return ""
}

// checkThinkingTurn enforces Anthropic's rule for tool loops with thinking
// on: when the request ends with tool results, the assistant turn with the
// tool_use blocks they answer must start with its thinking block.
func checkThinkingTurn(msgs []gjson.Result) string {
	n := len(msgs)
	if n < 2 || msgs[n-1].Get("role").Str != "user" {
		return ""
	}
	results := false
	for _, b := range msgs[n-1].Get("content").Array() {
		results = results || b.Get("type").Str == "tool_result"
	}
	if !results {
		return ""
	}
	first := msgs[n-2].Get("content.0")
	if typ := first.Get("type").Str; typ != "thinking" && typ != "redacted_thinking" {
		return "messages." + strconv.Itoa(n-2) + ".content.0.type: Expected `thinking` or `redacted_thinking`, but found `" + typ +
			"`. When `thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you include thinking blocks from previous turns. To avoid this requirement, disable `thinking`. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking" //nolint:misspell // Anthropic's message, verbatim
	}
	return ""
}

// checkCacheControl checks a cache_control marker.
func checkCacheControl(p string, cc gjson.Result) string {
	if !cc.Exists() {
		return ""
	}
	if cc.Get("type").Str != "ephemeral" {
		return p + ".cache_control.type: Input should be 'ephemeral'"
	}
	if ttl := cc.Get("ttl"); ttl.Exists() && ttl.Str != "5m" && ttl.Str != "1h" {
		return p + ".cache_control.ttl: Input should be '5m' or '1h'"
	}
	return ""
}

// maxCacheBreakpoints is how many blocks may carry cache_control.
const maxCacheBreakpoints = 4

// cacheUsage works out the prompt cache for a request, as Anthropic's
// does: the prompt up to the last block marked with cache_control (the
// whole prompt with the top-level marker) is the cached prefix; the first
// request with a prefix writes it (cache_creation_input_tokens), later
// ones within its lifetime (five minutes, or the marker's ttl) read it
// (cache_read_input_tokens). Token counts are word counts, as everywhere
// in the fake; unlike Anthropic, any length is cached.
func (s *Server) cacheUsage(q *anRequest, promptWords int) (input, created, read int) {
	h := sha256.New()
	h.Write([]byte(q.model.Str + "\x00"))
	words, prefixWords := 0, -1
	var ttl time.Duration
	mark := func(cc gjson.Result, raw string) {
		h.Write([]byte(raw))
		if cc.Exists() {
			prefixWords = words
			ttl = 5 * time.Minute
			if cc.Get("ttl").Str == "1h" {
				ttl = time.Hour
			}
		}
	}
	var prefix [32]byte
	sum := func() { h.Sum(prefix[:0]) }
	for _, t := range q.tools.Array() {
		mark(t.Get("cache_control"), t.Raw)
		if t.Get("cache_control").Exists() {
			sum()
		}
	}
	blocks := func(c gjson.Result) {
		if c.Type == gjson.String {
			words += s.promptTokens(c.Str)
			mark(gjson.Result{}, c.Raw)
			return
		}
		for _, b := range c.Array() {
			switch b.Get("type").Str {
			case "text":
				words += s.promptTokens(b.Get("text").Str)
			case "tool_result":
				words += s.promptTokens(contentText(b.Get("content")))
			}
			mark(b.Get("cache_control"), b.Raw)
			if b.Get("cache_control").Exists() {
				sum()
			}
		}
	}
	blocks(q.system)
	for _, m := range q.msgs {
		h.Write([]byte(m.Get("role").Str))
		blocks(m.Get("content"))
	}
	if cc := q.cacheControl; cc.Exists() {
		prefixWords, ttl = words, 5*time.Minute
		if cc.Get("ttl").Str == "1h" {
			ttl = time.Hour
		}
		sum()
	}
	if prefixWords < 0 {
		return promptWords, 0, 0
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.caches == nil {
		s.caches = map[[32]byte]time.Time{}
	}
	hit := s.caches[prefix].After(now)
	s.caches[prefix] = now.Add(ttl)
	if hit {
		return promptWords - prefixWords, 0, prefixWords
	}
	return promptWords - prefixWords, prefixWords, 0
}

// thinkingText is what the fake model thinks before it answers.
func thinkingText(userText string, results []string) string {
	if len(results) > 0 {
		return "The tools said: " + strings.Join(results, " ")
	}
	return "Thinking about: " + userText
}

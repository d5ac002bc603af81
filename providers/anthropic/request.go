package anthropic

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
)

// request holds the unified request fields the translation reads. The zero
// gjson.Result stands for an absent field.
type request struct {
	messages, maxTokens, maxCompletionTokens, stop, temperature, topP, stream gjson.Result
	tools, toolChoice, parallelToolCalls, user, safetyIdentifier              gjson.Result
	reasoningEffort, responseFormat, promptCacheRetention                     gjson.Result
}

// set records one top-level field of the unified request, or rejects it
// when Anthropic cannot express it. Fields not listed are dropped.
func (r *request) set(key string, v gjson.Result) error {
	switch key {
	case "messages":
		r.messages = v
	case "max_tokens":
		r.maxTokens = v
	case "max_completion_tokens":
		r.maxCompletionTokens = v
	case "stop":
		r.stop = v
	case "temperature":
		r.temperature = v
	case "top_p":
		r.topP = v
	case "stream":
		r.stream = v
	case "tools":
		r.tools = v
	case "tool_choice":
		r.toolChoice = v
	case "parallel_tool_calls":
		r.parallelToolCalls = v
	case "user":
		r.user = v
	case "safety_identifier":
		r.safetyIdentifier = v
	case "n":
		if v.Type == gjson.Number && v.Int() > 1 {
			return providers.Unsupported("n", providerName)
		}
	case "logprobs":
		if v.Type == gjson.True {
			return providers.Unsupported("logprobs", providerName)
		}
	case "response_format":
		r.responseFormat = v
	case "reasoning_effort":
		r.reasoningEffort = v
	case "prompt_cache_retention":
		r.promptCacheRetention = v
	case "web_search_options":
		if v.IsObject() {
			return providers.UnsupportedBecause("web_search_options", "web_search_options is not supported by provider type "+providerName+
				": Anthropic's web search is a server tool whose results and citations this translation does not carry")
		}
	default:
		return providers.NoEquivalent(key, v, providerName)
	}
	return nil
}

// defaultVersionHeader is the header of every request at the default
// version, made once (the host only reads a request's Header).
var defaultVersionHeader = http.Header{"Anthropic-Version": {DefaultVersion}}

// versionHeader is the header of a request at version (empty: the
// default).
func versionHeader(version string) http.Header {
	if version == "" || version == DefaultVersion {
		return defaultVersionHeader
	}
	return http.Header{"Anthropic-Version": {version}}
}

// ChatRequest translates a unified chat request, already checked by
// providers.ValidateChat, into a Messages API request for model.
//
// System and developer messages become the top-level system; tool results
// become user turns; consecutive messages of the same resulting role merge
// into one turn; thinking_blocks on assistant messages come back as the
// signed thinking blocks they were. reasoning_effort becomes extended
// thinking and response_format Anthropic's JSON outputs or a forced tool,
// as the model's Features say. Features Anthropic lacks (n > 1, logprobs,
// audio, file and audio parts, non-function tools) and web_search_options
// are rejected with a 400; parameters without an equivalent (seed,
// penalties, logit_bias, store, service_tier, …) are dropped.
func (c Chat) ChatRequest(body []byte, model string) (providers.Request, error) {
	req := providers.Request{Path: "/v1/messages", Header: versionHeader(c.Version)}

	var r request
	if err := providers.ReadMembers(body, r.set); err != nil {
		return req, err
	}

	feats := c.features(model)
	think, err := thinkingFor(r.reasoningEffort, feats.Thinking)
	if err != nil {
		return req, err
	}
	format, err := formatFor(r.responseFormat, feats.StructuredOutputs)
	if err != nil {
		return req, err
	}

	b := make([]byte, 0, len(body)+256)
	b = append(b, `{"model":`...)
	b = providers.AppendString(b, model)

	b = append(b, `,"max_tokens":`...)
	b = providers.AppendInt(b, c.maxTokensFor(r, think))

	var stack [16]message
	msgs := providers.AppendChatMessages(stack[:0], r.messages)
	if b, err = appendMessages(b, msgs); err != nil {
		return req, err
	}
	b = appendSystem(b, msgs)
	b = appendStop(b, r.stop)

	// Extended thinking takes neither a temperature nor a top_p below 0.95.
	if t := r.temperature; t.Type == gjson.Number && !think.on() {
		b = append(b, `,"temperature":`...)
		if t.Num > 1 {
			b = append(b, '1') // Anthropic's range is 0–1, OpenAI's 0–2.
		} else {
			b = append(b, t.Raw...)
		}
	}
	if p := r.topP; p.Type == gjson.Number {
		b = append(b, `,"top_p":`...)
		if think.on() && p.Num < 0.95 {
			b = append(b, "0.95"...)
		} else {
			b = append(b, p.Raw...)
		}
	}
	if r.stream.Type == gjson.True {
		b = append(b, `,"stream":true`...)
	}

	b, haveTools, err := appendTools(b, r.tools, &format, feats.StructuredOutputs)
	if err != nil {
		return req, err
	}
	if b, err = appendToolChoice(b, r.toolChoice, r.parallelToolCalls.Type == gjson.False,
		haveTools, format.kind == formatTool, think.on()); err != nil {
		return req, err
	}

	b = think.append(b)
	if think.effort != "" || format.kind == formatNative {
		b = append(b, `,"output_config":{`...)
		if think.effort != "" {
			b = append(b, `"effort":"`...)
			b = append(b, think.effort...)
			b = append(b, '"')
			if format.kind == formatNative {
				b = append(b, ',')
			}
		}
		if format.kind == formatNative {
			b = append(b, `"format":{"type":"json_schema","schema":`...)
			b = appendOutputSchema(b, format.schema)
			b = append(b, '}')
		}
		b = append(b, '}')
	}

	if b, err = appendCacheRetention(b, r.promptCacheRetention); err != nil {
		return req, err
	}

	user := r.safetyIdentifier
	if user.Type != gjson.String || user.Str == "" {
		user = r.user
	}
	if user.Type == gjson.String && user.Str != "" {
		b = append(b, `,"metadata":{"user_id":`...)
		b = append(b, user.Raw...)
		b = append(b, '}')
	}

	req.Body = append(b, '}')
	return req, nil
}

// features are the Features of model: Chat.Models' entry, or what
// FeaturesFor derives from the name.
func (c Chat) features(model string) Features {
	if f, ok := c.Models[model]; ok {
		return f
	}
	return FeaturesFor(model)
}

// maxTokensFor is the max_tokens to send: the client's
// max_completion_tokens or max_tokens, else Chat.MaxTokens, else
// DefaultMaxTokens. Like OpenAI's, Anthropic's max_tokens counts thinking
// too, and it must exceed a thinking budget: when it does not, the budget
// is added to it, so the answer keeps the room the client asked for.
func (c Chat) maxTokensFor(r request, think thinking) int64 {
	var n int64
	switch {
	case r.maxCompletionTokens.Type == gjson.Number:
		n = r.maxCompletionTokens.Int()
	case r.maxTokens.Type == gjson.Number:
		n = r.maxTokens.Int()
	case c.MaxTokens > 0:
		n = int64(c.MaxTokens)
	default:
		n = DefaultMaxTokens
	}
	if think.budget > 0 && n <= think.budget {
		n += think.budget
	}
	return n
}

// thinking is the extended thinking a request asks for; the zero value is
// none.
type thinking struct {
	budget int64  // > 0: {"type":"enabled","budget_tokens":budget}
	effort string // != "": {"type":"adaptive"} and output_config.effort
}

func (t thinking) on() bool { return t.budget > 0 || t.effort != "" }

func (t thinking) append(b []byte) []byte {
	switch {
	case t.budget > 0:
		b = append(b, `,"thinking":{"type":"enabled","budget_tokens":`...)
		b = providers.AppendInt(b, t.budget)
		return append(b, '}')
	case t.effort != "":
		return append(b, `,"thinking":{"type":"adaptive"}`...)
	}
	return b
}

// Thinking budgets for reasoning_effort on models that take
// ThinkingBudget: LiteLLM's (low 1024, medium 2048, high 4096), with
// minimal at Anthropic's minimum of 1024 and the budget doubling above
// high.
const (
	budgetLow    = 1024
	budgetMedium = 2048
	budgetHigh   = 4096
	budgetXHigh  = 8192
	budgetMax    = 16384
)

// thinkingFor maps reasoning_effort to extended thinking for a model that
// takes it in the given mode. "none" (and no value) is no thinking.
func thinkingFor(effort gjson.Result, mode ThinkingMode) (thinking, error) {
	if effort.Type != gjson.String {
		return thinking{}, nil // absent or null
	}
	var budget int64
	switch effort.Str {
	case "none":
		return thinking{}, nil
	case "minimal", "low":
		budget = budgetLow
	case "medium":
		budget = budgetMedium
	case "high":
		budget = budgetHigh
	case "xhigh":
		budget = budgetXHigh
	case "max":
		budget = budgetMax
	default:
		return thinking{}, providers.InvalidParam("reasoning_effort",
			"reasoning_effort must be one of none, minimal, low, medium, high, xhigh, max")
	}
	if mode == ThinkingAdaptive {
		if effort.Str == "minimal" {
			return thinking{effort: "low"}, nil // Anthropic's lowest effort
		}
		return thinking{effort: effort.Str}, nil
	}
	return thinking{budget: budget}, nil
}

// jsonToolName is the tool that carries a response_format on models
// without output_config.format (LiteLLM's name for it). Its input becomes
// the message content, so client tools may not take the name.
const jsonToolName = "json_tool_call"

// How a response_format is sent.
const (
	formatNone   = iota // text, or none given
	formatNative        // output_config.format
	formatTool          // the forced tool jsonToolName
)

// format is a request's response_format as Anthropic gets it.
type format struct {
	kind        int
	schema      gjson.Result // json_schema.schema; zero: any JSON object
	name, descr gjson.Result // json_schema.name and description
}

// formatFor reads response_format. json_schema goes to output_config.format
// when the model takes it (native); json_object, and json_schema on other
// models, go through a tool whose input schema is the schema (or any
// object), since Anthropic's JSON outputs take no open object schema.
func formatFor(rf gjson.Result, native bool) (format, error) {
	if !rf.IsObject() {
		return format{}, nil
	}
	switch typ := rf.Get("type").Str; typ {
	case "text":
		return format{}, nil
	case "json_object":
		return format{kind: formatTool}, nil
	case "json_schema":
		js := rf.Get("json_schema")
		if !js.IsObject() {
			return format{}, providers.InvalidParam("response_format.json_schema",
				"response_format json_schema needs a json_schema object")
		}
		f := format{kind: formatTool, schema: js.Get("schema"), name: js.Get("name"), descr: js.Get("description")}
		switch {
		case f.schema.Type == gjson.Null || !f.schema.Exists():
			f.schema = gjson.Result{}
		case !f.schema.IsObject():
			return format{}, providers.InvalidParam("response_format.json_schema.schema",
				"response_format.json_schema.schema must be a JSON Schema object")
		case native:
			f.kind = formatNative
		default:
			if t := f.schema.Get("type"); t.Exists() && t.Str != "object" {
				return format{}, providers.InvalidParam("response_format.json_schema.schema",
					"on this model the schema is sent as a tool's input schema, which must be of type \"object\"")
			}
		}
		return f, nil
	default:
		return format{}, providers.UnsupportedBecause("response_format",
			"response_format of type "+strconv.Quote(typ)+" is not supported by provider type "+providerName)
	}
}

// appendJSONTool appends the tool that carries a response_format.
func appendJSONTool(b []byte, f *format) []byte {
	b = append(b, `{"name":"`+jsonToolName+`","description":`...)
	descr := "Give your final answer by calling this tool: its input is the answer, as JSON"
	if f.name.Type == gjson.String && f.name.Str != "" {
		descr += " of the form " + strconv.Quote(f.name.Str)
	}
	descr += "."
	if f.descr.Type == gjson.String && f.descr.Str != "" {
		descr += " " + f.descr.Str
	}
	b = providers.AppendString(b, descr)
	b = append(b, `,"input_schema":`...)
	b = appendSchema(b, f.schema)
	return append(b, '}')
}

// appendCacheRetention appends a top-level cache_control for
// prompt_cache_retention: Anthropic caches only what a request marks, and
// the top-level marker caches the prompt up to its last cacheable block.
// "in_memory" is Anthropic's default five minutes, "24h" its longest, one
// hour.
func appendCacheRetention(b []byte, v gjson.Result) ([]byte, error) {
	if v.Type != gjson.String {
		return b, nil
	}
	switch v.Str {
	case "in_memory", "in-memory":
		return append(b, `,"cache_control":{"type":"ephemeral"}`...), nil
	case "24h":
		return append(b, `,"cache_control":{"type":"ephemeral","ttl":"1h"}`...), nil
	}
	return b, providers.InvalidParam("prompt_cache_retention", "prompt_cache_retention must be in_memory or 24h")
}

// message is a unified message as the translation reads it.
type message = providers.ChatMessage

// Message kinds: the role a unified message takes in Anthropic's request.
const (
	kindSystem = iota
	kindUser
	kindAssistant
)

// kindOf maps a unified role, which ValidateChat has checked, to its kind.
func kindOf(role string) int {
	switch role {
	case "system", "developer":
		return kindSystem
	case "assistant":
		return kindAssistant
	default: // user, tool
		return kindUser
	}
}

// appendMessages appends "messages": every non-system message, with runs of
// messages that take the same Anthropic role merged into one turn.
func appendMessages(b []byte, msgs []message) ([]byte, error) {
	b = append(b, `,"messages":[`...)
	turns := 0
	for i := 0; i < len(msgs); {
		kind := kindOf(msgs[i].Role)
		if kind == kindSystem {
			i++
			continue
		}
		// The turn runs until the next message of the other role; system
		// messages in between are hoisted and do not break it.
		end, n := i+1, 1
		for ; end < len(msgs); end++ {
			k := kindOf(msgs[end].Role)
			if k == kindSystem {
				continue
			}
			if k != kind {
				break
			}
			n++
		}

		if turns > 0 {
			b = append(b, ',')
		}
		turns++
		if kind == kindUser {
			b = append(b, `{"role":"user","content":`...)
		} else {
			b = append(b, `{"role":"assistant","content":`...)
		}

		if n == 1 {
			if s, ok := plainContent(&msgs[i]); ok {
				b = append(b, s.Raw...)
				b = append(b, '}')
				i = end
				continue
			}
		}

		open := len(b)
		b = append(b, '[')
		blocks := 0
		for j := i; j < end; j++ {
			var err error
			switch m := &msgs[j]; m.Role {
			case "assistant":
				b, err = appendAssistantBlocks(b, m, j, &blocks)
			case "tool":
				b = appendToolResult(b, m, &blocks)
			case "user":
				b, err = appendUserBlocks(b, m, j, &blocks)
			}
			if err != nil {
				return b, err
			}
		}
		if blocks == 0 {
			// Only empty text: Anthropic accepts an empty string (as a
			// final assistant prefill), never an empty text block.
			b = append(b[:open], `""`...)
		} else {
			b = append(b, ']')
		}
		b = append(b, '}')
		i = end
	}
	return append(b, ']'), nil
}

// plainContent reports whether a message that forms a turn on its own can
// keep a plain string as content, and returns that string.
func plainContent(m *message) (gjson.Result, bool) {
	content := m.Content
	if content.Type != gjson.String {
		return content, false
	}
	switch m.Role {
	case "user":
		return content, true
	case "tool":
		return content, false
	default: // assistant: only without tool calls and thinking blocks
		tb := m.ThinkingBlocks
		noThinking := !tb.Exists() || tb.Type == gjson.Null || tb.IsArray() && !nonEmpty(tb)
		return content, noThinking && !nonEmpty(m.ToolCalls)
	}
}

// nonEmpty reports whether v is an array with an element.
func nonEmpty(v gjson.Result) bool {
	found := false
	if v.IsArray() {
		v.ForEach(func(_, _ gjson.Result) bool {
			found = true
			return false
		})
	}
	return found
}

// sep appends the comma before a block after the first and counts blocks.
func sep(b []byte, n *int) []byte {
	if *n > 0 {
		b = append(b, ',')
	}
	*n++
	return b
}

// appendTextBlock appends {"type":"text","text":…} for a JSON string v,
// unless it is empty: Anthropic rejects empty text blocks.
func appendTextBlock(b []byte, v gjson.Result, n *int) []byte {
	return appendTextBlockCache(b, v, gjson.Result{}, n)
}

// appendTextBlockCache is appendTextBlock with the content part's
// cache_control, copied when it is an object.
func appendTextBlockCache(b []byte, v, cache gjson.Result, n *int) []byte {
	if v.Str == "" {
		return b
	}
	b = sep(b, n)
	b = append(b, `{"type":"text","text":`...)
	b = append(b, v.Raw...)
	b = appendCacheControl(b, cache)
	return append(b, '}')
}

// appendCacheControl appends ,"cache_control":… for a content part's or
// tool's cache_control object (LiteLLM's convention for Anthropic's prompt
// caching markers), and nothing otherwise.
func appendCacheControl(b []byte, cache gjson.Result) []byte {
	if !cache.IsObject() {
		return b
	}
	b = append(b, `,"cache_control":`...)
	return append(b, cache.Raw...)
}

// appendTextParts appends text blocks for content that is a string or an
// array of text (or refusal) parts.
func appendTextParts(b []byte, content gjson.Result, n *int) []byte {
	if content.Type == gjson.String {
		return appendTextBlock(b, content, n)
	}
	content.ForEach(func(_, part gjson.Result) bool {
		b = appendTextBlockCache(b, providers.PartText(part), part.Get("cache_control"), n)
		return true
	})
	return b
}

// appendUserBlocks appends the blocks of user message i.
func appendUserBlocks(b []byte, m *message, i int, n *int) ([]byte, error) {
	content := m.Content
	if content.Type == gjson.String {
		return appendTextBlock(b, content, n), nil
	}
	var err error
	j := 0
	content.ForEach(func(_, part gjson.Result) bool {
		switch typ := part.Get("type").Str; typ {
		case "image_url":
			b, err = appendImage(b, part.Get("image_url.url"), part.Get("cache_control"), i, j, n)
		case "input_audio", "file":
			err = providers.UnsupportedBecause(partParam(i, j)+".type",
				typ+" content parts are not supported by provider type "+providerName)
		default: // text, refusal
			b = appendTextBlockCache(b, providers.PartText(part), part.Get("cache_control"), n)
		}
		j++
		return err == nil
	})
	return b, err
}

func partParam(i, j int) string {
	return "messages[" + strconv.Itoa(i) + "].content[" + strconv.Itoa(j) + "]"
}

// appendImage appends an image block for an image_url part: a base64 source
// for a data URL, a url source otherwise.
func appendImage(b []byte, url, cache gjson.Result, i, j int, n *int) ([]byte, error) {
	u := url.Str
	if len(u) < 5 || !strings.EqualFold(u[:5], "data:") {
		b = sep(b, n)
		b = append(b, `{"type":"image","source":{"type":"url","url":`...)
		b = append(b, url.Raw...)
		b = append(b, '}')
		b = appendCacheControl(b, cache)
		return append(b, '}'), nil
	}
	meta, data, ok := strings.Cut(u[5:], ",")
	media, _, _ := strings.Cut(meta, ";")
	if !ok || media == "" || !strings.HasSuffix(meta, ";base64") {
		return b, providers.InvalidParam(partParam(i, j)+".image_url.url",
			"an image data URL must look like data:<media type>;base64,<data>")
	}
	b = sep(b, n)
	b = append(b, `{"type":"image","source":{"type":"base64","media_type":`...)
	b = providers.AppendString(b, media)
	b = append(b, `,"data":`...)
	b = providers.AppendString(b, data)
	b = append(b, '}')
	b = appendCacheControl(b, cache)
	return append(b, '}'), nil
}

// appendAssistantBlocks appends the blocks of assistant message i: its
// thinking blocks, then its text, then a tool_use block per tool call.
func appendAssistantBlocks(b []byte, m *message, i int, n *int) ([]byte, error) {
	b, err := appendThinkingBlocks(b, m.ThinkingBlocks, i, n)
	if err != nil {
		return b, err
	}
	b = appendTextParts(b, m.Content, n)
	j := 0
	m.ToolCalls.ForEach(func(_, call gjson.Result) bool {
		fn := call.Get("function")
		input := strings.TrimSpace(fn.Get("arguments").Str)
		if input == "" {
			input = "{}"
		} else if input[0] != '{' || !gjson.Valid(input) {
			err = providers.InvalidParam(
				"messages["+strconv.Itoa(i)+"].tool_calls["+strconv.Itoa(j)+"].function.arguments",
				"function.arguments must be a JSON object encoded as a string")
			return false
		}
		b = sep(b, n)
		b = append(b, `{"type":"tool_use","id":`...)
		b = providers.AppendRawString(b, call.Get("id"))
		b = append(b, `,"name":`...)
		b = providers.AppendRawString(b, fn.Get("name"))
		b = append(b, `,"input":`...)
		b = append(b, input...)
		b = append(b, '}')
		j++
		return true
	})
	return b, err
}

// appendThinkingBlocks appends the thinking and redacted_thinking blocks a
// client sent back in an assistant message's thinking_blocks, exactly as
// Anthropic gave them: the thinking text, signature and data are copied
// as the client encoded them, so they decode to the same bytes.
func appendThinkingBlocks(b []byte, tb gjson.Result, i int, n *int) ([]byte, error) {
	if !tb.Exists() || tb.Type == gjson.Null {
		return b, nil
	}
	p := "messages[" + strconv.Itoa(i) + "].thinking_blocks"
	if !tb.IsArray() {
		return b, providers.InvalidParam(p, "thinking_blocks must be an array")
	}
	var err error
	j := 0
	tb.ForEach(func(_, block gjson.Result) bool {
		bp := p + "[" + strconv.Itoa(j) + "]"
		j++
		switch block.Get("type").Str {
		case "thinking":
			text, sig := block.Get("thinking"), block.Get("signature")
			if text.Type != gjson.String || sig.Type != gjson.String {
				err = providers.InvalidParam(bp, "a thinking block needs thinking and signature strings")
				return false
			}
			b = sep(b, n)
			b = append(b, `{"type":"thinking","thinking":`...)
			b = append(b, text.Raw...)
			b = append(b, `,"signature":`...)
			b = append(b, sig.Raw...)
			b = append(b, '}')
		case "redacted_thinking":
			data := block.Get("data")
			if data.Type != gjson.String {
				err = providers.InvalidParam(bp, "a redacted_thinking block needs a data string")
				return false
			}
			b = sep(b, n)
			b = append(b, `{"type":"redacted_thinking","data":`...)
			b = append(b, data.Raw...)
			b = append(b, '}')
		default:
			err = providers.InvalidParam(bp+".type", "a thinking block's type must be thinking or redacted_thinking")
			return false
		}
		return true
	})
	return b, err
}

// appendToolResult appends the tool_result block for a tool message.
func appendToolResult(b []byte, m *message, n *int) []byte {
	b = sep(b, n)
	b = append(b, `{"type":"tool_result","tool_use_id":`...)
	b = providers.AppendRawString(b, m.ToolCallID)
	switch content := m.Content; {
	case content.Type == gjson.String:
		b = append(b, `,"content":`...)
		b = append(b, content.Raw...)
	case content.IsArray():
		at := len(b)
		b = append(b, `,"content":[`...)
		parts := 0
		b = appendTextParts(b, content, &parts)
		if parts == 0 {
			b = b[:at] // content is optional
		} else {
			b = append(b, ']')
		}
	}
	return append(b, '}')
}

// appendSystem appends the top-level "system" made of all system and
// developer messages: a plain string when there is exactly one and its
// content is a string, else an array of text blocks in order.
func appendSystem(b []byte, msgs []message) []byte {
	count := 0
	var sole gjson.Result
	for i := range msgs {
		if kindOf(msgs[i].Role) == kindSystem {
			count++
			sole = msgs[i].Content
		}
	}
	if count == 0 {
		return b
	}
	if count == 1 && sole.Type == gjson.String {
		b = append(b, `,"system":`...)
		return append(b, sole.Raw...)
	}
	at := len(b)
	b = append(b, `,"system":[`...)
	blocks := 0
	for i := range msgs {
		if kindOf(msgs[i].Role) == kindSystem {
			b = appendTextParts(b, msgs[i].Content, &blocks)
		}
	}
	if blocks == 0 {
		return b[:at]
	}
	return append(b, ']')
}

// appendStop appends stop_sequences for a stop string or array; empty
// sequences are left out.
func appendStop(b []byte, stop gjson.Result) []byte {
	at := len(b)
	b = append(b, `,"stop_sequences":`...)
	if b, n := providers.AppendStops(b, stop); n > 0 {
		return b
	}
	return b[:at]
}

// appendTools appends "tools": the client's function tools, then the tool
// that carries a response_format, if f needs one. function.strict becomes
// Anthropic's strict tool use where the model has it (strict says so; it
// comes with JSON outputs) and is dropped elsewhere. It reports whether the
// client gave tools. Other tool types, and a client tool named like the
// response_format tool, are rejected.
func appendTools(b []byte, tools gjson.Result, f *format, strict bool) ([]byte, bool, error) {
	at := len(b)
	b = append(b, `,"tools":[`...)
	n := 0
	var err error
	tools.ForEach(func(_, t gjson.Result) bool {
		if typ := t.Get("type").Str; typ != "function" {
			err = providers.UnsupportedBecause("tools["+strconv.Itoa(n)+"].type",
				typ+" tools are not supported by provider type "+providerName)
			return false
		}
		fn := t.Get("function")
		name := fn.Get("name")
		if name.Str == jsonToolName {
			err = providers.InvalidParam("tools["+strconv.Itoa(n)+"].function.name",
				"the tool name %s is reserved for response_format on provider type %s", jsonToolName, providerName)
			return false
		}
		b = sep(b, &n)
		b = append(b, `{"name":`...)
		b = providers.AppendRawString(b, name)
		if d := fn.Get("description"); d.Type == gjson.String && d.Str != "" {
			b = append(b, `,"description":`...)
			b = append(b, d.Raw...)
		}
		b = append(b, `,"input_schema":`...)
		b = appendSchema(b, fn.Get("parameters"))
		if strict && fn.Get("strict").Type == gjson.True {
			b = append(b, `,"strict":true`...)
		}
		b = appendCacheControl(b, t.Get("cache_control"))
		b = append(b, '}')
		return true
	})
	if err != nil {
		return b, false, err
	}
	haveTools := n > 0
	if f.kind == formatTool {
		b = sep(b, &n)
		b = appendJSONTool(b, f)
	}
	if n == 0 {
		return b[:at], false, nil
	}
	return append(b, ']'), haveTools, nil
}

// appendSchema appends a tool's input_schema. Anthropic requires an object
// schema with "type"; OpenAI allows parameters to be left out or to be {}
// for a function without arguments.
func appendSchema(b []byte, params gjson.Result) []byte {
	if !params.IsObject() {
		return append(b, `{"type":"object"}`...)
	}
	if params.Get("type").Exists() {
		return append(b, params.Raw...)
	}
	b = append(b, `{"type":"object"`...)
	if inner := strings.TrimSpace(params.Raw[1 : len(params.Raw)-1]); inner != "" {
		b = append(b, ',')
		b = append(b, inner...)
	}
	return append(b, '}')
}

// appendToolChoice appends tool_choice. disableParallel mirrors
// parallel_tool_calls: false; haveTools says whether the client sent
// tools, since Anthropic accepts tool_choice only with tools; jsonTool that
// the response_format tool was sent. That tool is forced when the client
// gave no tools or tool_choice none — or, since Anthropic refuses forced
// tools with extended thinking, offered with auto when thinking is on.
func appendToolChoice(b []byte, tc gjson.Result, disableParallel, haveTools, jsonTool, thinking bool) ([]byte, error) {
	var choice, name string
	switch {
	case tc.Type == gjson.String:
		choice = tc.Str
	case tc.IsObject():
		if tc.Get("type").Str != "function" {
			return b, providers.UnsupportedBecause("tool_choice",
				"tool_choice of type "+strconv.Quote(tc.Get("type").Str)+" is not supported by provider type "+providerName)
		}
		choice, name = "function", tc.Get("function.name").Raw
	}
	if !haveTools {
		if choice == "required" || choice == "function" {
			return b, providers.InvalidParam("tool_choice", "tool_choice %q needs tools", choice)
		}
		if !jsonTool {
			return b, nil // "none", "auto" or nothing: no tools is the same thing.
		}
	}
	if jsonTool && (!haveTools || choice == "none") {
		if thinking {
			choice = "auto"
		} else {
			choice, name = "function", `"`+jsonToolName+`"`
		}
	}

	switch choice {
	case "none":
		return append(b, `,"tool_choice":{"type":"none"}`...), nil
	case "required":
		b = append(b, `,"tool_choice":{"type":"any"`...)
	case "function":
		b = append(b, `,"tool_choice":{"type":"tool","name":`...)
		b = append(b, name...)
	case "auto":
		b = append(b, `,"tool_choice":{"type":"auto"`...)
	default: // none given
		if !disableParallel {
			return b, nil
		}
		b = append(b, `,"tool_choice":{"type":"auto"`...)
	}
	if disableParallel {
		b = append(b, `,"disable_parallel_tool_use":true`...)
	}
	return append(b, '}'), nil
}

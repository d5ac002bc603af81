package anthropic

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/jsonw"
)

// request holds the unified request fields the translation reads. The zero
// gjson.Result stands for an absent field.
type request struct {
	messages, maxTokens, maxCompletionTokens, stop, temperature, topP, stream gjson.Result
	tools, toolChoice, parallelToolCalls, user, safetyIdentifier              gjson.Result
	reasoningEffort, responseFormat, promptCacheRetention                     gjson.Result
	webSearch                                                                 gjson.Result
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
			r.webSearch = v
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
// audio, file and audio parts, non-function tools) are rejected with a
// 400; web_search_options becomes Anthropic's web search tool; parameters without an equivalent (seed,
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

	w := jsonw.New(make([]byte, 0, len(body)+256))
	o := w.Object()
	o.Str("model", model)
	o.Int("max_tokens", c.maxTokensFor(r, think))

	var stack [16]message
	msgs := providers.AppendChatMessages(stack[:0], r.messages)
	if err = writeMessages(o, msgs); err != nil {
		return req, err
	}
	writeSystem(o, msgs)
	providers.WriteStops(o, "stop_sequences", r.stop)

	// Extended thinking takes neither a temperature nor a top_p below 0.95.
	if t := r.temperature; t.Type == gjson.Number && !think.on() {
		if t.Num > 1 {
			o.Int("temperature", 1) // Anthropic's range is 0–1, OpenAI's 0–2.
		} else {
			o.Raw("temperature", t.Raw)
		}
	}
	if p := r.topP; p.Type == gjson.Number {
		if think.on() && p.Num < 0.95 {
			o.Raw("top_p", "0.95")
		} else {
			o.Raw("top_p", p.Raw)
		}
	}
	if r.stream.Type == gjson.True {
		o.Bool("stream", true)
	}

	haveTools, err := writeTools(o, r.tools, r.webSearch, &format, feats.StructuredOutputs)
	if err != nil {
		return req, err
	}
	if err = writeToolChoice(o, r.toolChoice, r.parallelToolCalls.Type == gjson.False,
		haveTools, format.kind == formatTool, think.on()); err != nil {
		return req, err
	}

	think.write(o)
	if think.effort != "" || format.kind == formatNative {
		oc := o.Object("output_config")
		if think.effort != "" {
			oc.Str("effort", think.effort)
		}
		if format.kind == formatNative {
			f := oc.Object("format")
			f.Str("type", "json_schema")
			writeOutputSchema(f.Key("schema"), format.schema)
			f.End()
		}
		oc.End()
	}

	if err = writeCacheRetention(o, r.promptCacheRetention); err != nil {
		return req, err
	}

	user := r.safetyIdentifier
	if user.Type != gjson.String || user.Str == "" {
		user = r.user
	}
	if user.Type == gjson.String && user.Str != "" {
		md := o.Object("metadata")
		md.Raw("user_id", user.Raw)
		md.End()
	}

	o.End()
	req.Body, err = w.Finish()
	return req, err
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

// write writes the thinking member, if any.
func (t thinking) write(o jsonw.Object) {
	switch {
	case t.budget > 0:
		th := o.Object("thinking")
		th.Str("type", "enabled")
		th.Int("budget_tokens", t.budget)
		th.End()
	case t.effort != "":
		th := o.Object("thinking")
		th.Str("type", "adaptive")
		th.End()
	}
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

// writeJSONTool writes the tool that carries a response_format.
func writeJSONTool(a jsonw.Array, f *format) {
	t := a.Object()
	t.Str("name", jsonToolName)
	descr := "Give your final answer by calling this tool: its input is the answer, as JSON"
	if f.name.Type == gjson.String && f.name.Str != "" {
		descr += " of the form " + strconv.Quote(f.name.Str)
	}
	descr += "."
	if f.descr.Type == gjson.String && f.descr.Str != "" {
		descr += " " + f.descr.Str
	}
	t.Str("description", descr)
	writeSchema(t.Key("input_schema"), f.schema)
	t.End()
}

// writeCacheRetention writes a top-level cache_control for
// prompt_cache_retention: Anthropic caches only what a request marks, and
// the top-level marker caches the prompt up to its last cacheable block.
// "in_memory" is Anthropic's default five minutes, "24h" its longest, one
// hour.
func writeCacheRetention(o jsonw.Object, v gjson.Result) error {
	if v.Type != gjson.String {
		return nil
	}
	switch v.Str {
	case "in_memory", "in-memory":
		cc := o.Object("cache_control")
		cc.Str("type", "ephemeral")
		cc.End()
		return nil
	case "24h":
		cc := o.Object("cache_control")
		cc.Str("type", "ephemeral")
		cc.Str("ttl", "1h")
		cc.End()
		return nil
	}
	return providers.InvalidParam("prompt_cache_retention", "prompt_cache_retention must be in_memory or 24h")
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

// writeMessages writes "messages": every non-system message, with runs of
// messages that take the same Anthropic role merged into one turn.
func writeMessages(o jsonw.Object, msgs []message) error {
	turns := o.Array("messages")
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

		turn := turns.Object()
		if kind == kindUser {
			turn.Str("role", "user")
		} else {
			turn.Str("role", "assistant")
		}
		content := turn.Key("content")

		if n == 1 {
			if s, ok := plainContent(&msgs[i]); ok {
				content.Raw(s.Raw)
				turn.End()
				i = end
				continue
			}
		}

		mark := content.Mark()
		blocks := blockList{a: content.Array()}
		for j := i; j < end; j++ {
			var err error
			switch m := &msgs[j]; m.Role {
			case "assistant":
				err = writeAssistantBlocks(&blocks, m, j)
			case "tool":
				writeToolResult(&blocks, m)
			case "user":
				err = writeUserBlocks(&blocks, m, j)
			}
			if err != nil {
				return err
			}
		}
		if blocks.n == 0 {
			// Only empty text: Anthropic accepts an empty string (as a
			// final assistant prefill), never an empty text block.
			mark.Rewind()
			content.Str("")
		} else {
			blocks.a.End()
		}
		turn.End()
		i = end
	}
	turns.End()
	return nil
}

// plainContent reports whether a message that forms a turn on its own can
// keep a plain string as content, and returns that string.
func plainContent(m *message) (gjson.Result, bool) {
	content := m.Content
	if content.Type != gjson.String || m.CacheControl.IsObject() {
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

// blockList is an array of content blocks being written, and how many it
// holds.
type blockList struct {
	a jsonw.Array
	n int
}

// block opens the next block.
func (l *blockList) block() jsonw.Object {
	l.n++
	return l.a.Object()
}

// writeTextBlockCache writes {"type":"text","text":…} for a JSON string
// v, unless it is empty (Anthropic rejects empty text blocks), with the
// content part's cache_control, copied when it is an object.
func writeTextBlockCache(l *blockList, v, cache gjson.Result) {
	if v.Str == "" {
		return
	}
	b := l.block()
	b.Str("type", "text")
	b.Raw("text", v.Raw)
	writeCacheControl(b, cache)
	b.End()
}

// writeCacheControl writes cache_control for a content part's or tool's
// cache_control object (LiteLLM's convention for Anthropic's prompt
// caching markers), and nothing otherwise.
func writeCacheControl(o jsonw.Object, cache gjson.Result) {
	if cache.IsObject() {
		o.Raw("cache_control", cache.Raw)
	}
}

// writeTextParts writes text blocks for content that is a string or an
// array of text (or refusal) parts; cache is the message's cache_control,
// which a string becomes a marked block with.
func writeTextParts(l *blockList, content, cache gjson.Result) {
	if content.Type == gjson.String {
		writeTextBlockCache(l, content, cache)
		return
	}
	n, last := len(content.Array()), cache
	j := 0
	content.ForEach(func(_, part gjson.Result) bool {
		j++
		writeTextBlockCache(l, providers.PartText(part), partCache(part, last, j == n))
		return true
	})
}

// partCache is the cache_control of a content part: its own, or for the
// last part of a message, the message's (msg), which marks the message's
// last block.
func partCache(part, msg gjson.Result, last bool) gjson.Result {
	if c := part.Get("cache_control"); c.IsObject() || !last {
		return c
	}
	return msg
}

// writeUserBlocks writes the blocks of user message i.
func writeUserBlocks(l *blockList, m *message, i int) error {
	content := m.Content
	if content.Type == gjson.String {
		writeTextBlockCache(l, content, m.CacheControl)
		return nil
	}
	var err error
	j := 0
	n := len(content.Array())
	content.ForEach(func(_, part gjson.Result) bool {
		cache := partCache(part, m.CacheControl, j == n-1)
		switch typ := part.Get("type").Str; typ {
		case "image_url":
			err = writeImage(l, part.Get("image_url.url"), cache, i, j)
		case "input_audio", "file":
			err = providers.UnsupportedBecause(partParam(i, j)+".type",
				typ+" content parts are not supported by provider type "+providerName)
		default: // text, refusal
			writeTextBlockCache(l, providers.PartText(part), cache)
		}
		j++
		return err == nil
	})
	return err
}

func partParam(i, j int) string {
	return "messages[" + strconv.Itoa(i) + "].content[" + strconv.Itoa(j) + "]"
}

// writeImage writes an image block for an image_url part: a base64 source
// for a data URL, a url source otherwise.
func writeImage(l *blockList, url, cache gjson.Result, i, j int) error {
	u := url.Str
	if len(u) < 5 || !strings.EqualFold(u[:5], "data:") {
		b := l.block()
		b.Str("type", "image")
		src := b.Object("source")
		src.Str("type", "url")
		src.Raw("url", url.Raw)
		src.End()
		writeCacheControl(b, cache)
		b.End()
		return nil
	}
	meta, data, ok := strings.Cut(u[5:], ",")
	media, _, _ := strings.Cut(meta, ";")
	if !ok || media == "" || !strings.HasSuffix(meta, ";base64") {
		return providers.InvalidParam(partParam(i, j)+".image_url.url",
			"an image data URL must look like data:<media type>;base64,<data>")
	}
	b := l.block()
	b.Str("type", "image")
	src := b.Object("source")
	src.Str("type", "base64")
	src.Str("media_type", media)
	src.Str("data", data)
	src.End()
	writeCacheControl(b, cache)
	b.End()
	return nil
}

// writeAssistantBlocks writes the blocks of assistant message i: its
// thinking blocks, then its text, then a tool_use block per tool call.
func writeAssistantBlocks(l *blockList, m *message, i int) error {
	if err := writeThinkingBlocks(l, m.ThinkingBlocks, i); err != nil {
		return err
	}
	calls := len(m.ToolCalls.Array())
	textCache := m.CacheControl
	if calls > 0 {
		textCache = gjson.Result{} // the last tool_use block is the message's last
	}
	writeTextParts(l, m.Content, textCache)
	j := 0
	var err error
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
		b := l.block()
		b.Str("type", "tool_use")
		b.Text("id", jsonw.StrOf(call.Get("id")))
		b.Text("name", jsonw.StrOf(fn.Get("name")))
		b.Raw("input", input)
		if cc := call.Get("cache_control"); cc.IsObject() {
			writeCacheControl(b, cc)
		} else if j == calls-1 {
			writeCacheControl(b, m.CacheControl)
		}
		b.End()
		j++
		return true
	})
	return err
}

// writeThinkingBlocks writes the thinking and redacted_thinking blocks a
// client sent back in an assistant message's thinking_blocks, exactly as
// Anthropic gave them: the thinking text, signature and data are copied
// as the client encoded them, so they decode to the same bytes.
func writeThinkingBlocks(l *blockList, tb gjson.Result, i int) error {
	if !tb.Exists() || tb.Type == gjson.Null {
		return nil
	}
	p := "messages[" + strconv.Itoa(i) + "].thinking_blocks"
	if !tb.IsArray() {
		return providers.InvalidParam(p, "thinking_blocks must be an array")
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
			b := l.block()
			b.Str("type", "thinking")
			b.Raw("thinking", text.Raw)
			b.Raw("signature", sig.Raw)
			b.End()
		case "redacted_thinking":
			data := block.Get("data")
			if data.Type != gjson.String {
				err = providers.InvalidParam(bp, "a redacted_thinking block needs a data string")
				return false
			}
			b := l.block()
			b.Str("type", "redacted_thinking")
			b.Raw("data", data.Raw)
			b.End()
		default:
			err = providers.InvalidParam(bp+".type", "a thinking block's type must be thinking or redacted_thinking")
			return false
		}
		return true
	})
	return err
}

// writeToolResult writes the tool_result block for a tool message, with
// the message's cache_control.
func writeToolResult(l *blockList, m *message) {
	b := l.block()
	b.Str("type", "tool_result")
	b.Text("tool_use_id", jsonw.StrOf(m.ToolCallID))
	switch content := m.Content; {
	case content.Type == gjson.String:
		b.Raw("content", content.Raw)
	case content.IsArray():
		mark := b.Mark()
		parts := blockList{a: b.Array("content")}
		writeTextParts(&parts, content, gjson.Result{})
		if parts.n == 0 {
			mark.Rewind() // content is optional
		} else {
			parts.a.End()
		}
	}
	writeCacheControl(b, m.CacheControl)
	b.End()
}

// writeSystem writes the top-level "system" made of all system and
// developer messages: a plain string when there is exactly one, its
// content a string and no cache_control on it, else an array of text
// blocks in order.
func writeSystem(o jsonw.Object, msgs []message) {
	count := 0
	var sole gjson.Result
	marked := false
	for i := range msgs {
		if kindOf(msgs[i].Role) == kindSystem {
			count++
			sole = msgs[i].Content
			marked = marked || msgs[i].CacheControl.IsObject()
		}
	}
	if count == 0 {
		return
	}
	if count == 1 && sole.Type == gjson.String && !marked {
		o.Raw("system", sole.Raw)
		return
	}
	mark := o.Mark()
	blocks := blockList{a: o.Array("system")}
	for i := range msgs {
		if kindOf(msgs[i].Role) == kindSystem {
			writeTextParts(&blocks, msgs[i].Content, msgs[i].CacheControl)
		}
	}
	if blocks.n == 0 {
		mark.Rewind()
		return
	}
	blocks.a.End()
}

// writeTools writes "tools": the client's function tools, then the tool
// that carries a response_format, if f needs one. function.strict becomes
// Anthropic's strict tool use where the model has it (strict says so; it
// comes with JSON outputs) and is dropped elsewhere. It reports whether the
// client gave tools. Other tool types, and a client tool named like the
// response_format tool, are rejected. webSearch, the request's
// web_search_options, adds Anthropic's web search server tool.
func writeTools(o jsonw.Object, tools, webSearch gjson.Result, f *format, strict bool) (bool, error) {
	mark := o.Mark()
	list := o.Array("tools")
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
		if name.Str == webSearchName && webSearch.Exists() {
			err = providers.InvalidParam("tools["+strconv.Itoa(n)+"].function.name",
				"the tool name %s is Anthropic's web search tool's, which web_search_options asks for", webSearchName)
			return false
		}
		n++
		tool := list.Object()
		tool.Text("name", jsonw.StrOf(name))
		if d := fn.Get("description"); d.Type == gjson.String && d.Str != "" {
			tool.Raw("description", d.Raw)
		}
		writeSchema(tool.Key("input_schema"), fn.Get("parameters"))
		if strict && fn.Get("strict").Type == gjson.True {
			tool.Bool("strict", true)
		}
		writeCacheControl(tool, t.Get("cache_control"))
		tool.End()
		return true
	})
	if err != nil {
		return false, err
	}
	haveTools := n > 0
	if webSearch.Exists() {
		n++
		writeWebSearchTool(list, webSearch)
	}
	if f.kind == formatTool {
		n++
		writeJSONTool(list, f)
	}
	if n == 0 {
		mark.Rewind()
		return false, nil
	}
	list.End()
	return haveTools, nil
}

// webSearchName is the name of Anthropic's web search tool.
const webSearchName = "web_search"

// writeWebSearchTool writes Anthropic's web search server tool for the
// unified request's web_search_options: its user_location
// ({"type":"approximate","approximate":{city, region, country,
// timezone}}) becomes the tool's, and allowed_domains, which the
// Responses translation passes on from a web_search tool's filters,
// restricts the search. search_context_size has no equivalent.
func writeWebSearchTool(a jsonw.Array, ws gjson.Result) {
	t := a.Object()
	t.Str("type", "web_search_20250305")
	t.Str("name", webSearchName)
	if loc := ws.Get("user_location.approximate"); loc.IsObject() {
		ul := t.Object("user_location")
		ul.Str("type", "approximate")
		for _, k := range [...]string{"city", "region", "country", "timezone"} {
			if v := loc.Get(k); v.Type == gjson.String && v.Str != "" {
				ul.Raw(k, v.Raw)
			}
		}
		ul.End()
	}
	if d := ws.Get("allowed_domains"); d.IsArray() && d.Get("0").Exists() {
		t.Compact("allowed_domains", d.Raw)
	}
	t.End()
}

// writeSchema writes a tool's input_schema. Anthropic requires an object
// schema with "type"; OpenAI allows parameters to be left out or to be {}
// for a function without arguments.
func writeSchema(v jsonw.Value, params gjson.Result) {
	switch {
	case !params.IsObject():
		o := v.Object()
		o.Str("type", "object")
		o.End()
	case params.Get("type").Exists():
		v.Raw(params.Raw)
	default:
		o := v.Object()
		o.Str("type", "object")
		o.RawMembers(strings.TrimSpace(params.Raw[1 : len(params.Raw)-1]))
		o.End()
	}
}

// writeToolChoice writes tool_choice. disableParallel mirrors
// parallel_tool_calls: false; haveTools says whether the client sent
// tools, since Anthropic accepts tool_choice only with tools; jsonTool that
// the response_format tool was sent. That tool is forced when the client
// gave no tools or tool_choice none — or, since Anthropic refuses forced
// tools with extended thinking, offered with auto when thinking is on.
func writeToolChoice(o jsonw.Object, tc gjson.Result, disableParallel, haveTools, jsonTool, thinking bool) error {
	var choice string
	var name jsonw.Text
	switch {
	case tc.Type == gjson.String:
		choice = tc.Str
	case tc.IsObject():
		if tc.Get("type").Str != "function" {
			return providers.UnsupportedBecause("tool_choice",
				"tool_choice of type "+strconv.Quote(tc.Get("type").Str)+" is not supported by provider type "+providerName)
		}
		choice, name = "function", jsonw.StrOf(tc.Get("function.name"))
	}
	if !haveTools {
		if choice == "required" || choice == "function" {
			return providers.InvalidParam("tool_choice", "tool_choice %q needs tools", choice)
		}
		if !jsonTool {
			return nil // "none", "auto" or nothing: no tools is the same thing.
		}
	}
	if jsonTool && (!haveTools || choice == "none") {
		if thinking {
			choice = "auto"
		} else {
			choice, name = "function", jsonw.Plain(jsonToolName)
		}
	}

	var typ string
	switch choice {
	case "none", "auto":
		typ = choice
	case "required":
		typ = "any"
	case "function":
		typ = "tool"
	default: // none given
		if !disableParallel {
			return nil
		}
		typ = "auto"
	}
	c := o.Object("tool_choice")
	c.Str("type", typ)
	if typ == "tool" {
		c.Text("name", name)
	}
	if disableParallel && typ != "none" {
		c.Bool("disable_parallel_tool_use", true)
	}
	c.End()
	return nil
}

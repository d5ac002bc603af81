package cohere

import (
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
)

// Thinking token budgets sent for reasoning_effort. Cohere's reasoning
// models take thinking {type, token_budget}; "high" (and "xhigh") enable
// thinking without a budget, the model's own default.
const (
	BudgetMinimal = 1024
	BudgetLow     = 2048
	BudgetMedium  = 8192
)

// Cohere's sampling ranges (cohere-go V2ChatRequest): p in [0.01, 0.99],
// k in [0, 500], frequency and presence penalties in [0, 1].
const (
	minP, maxP = 0.01, 0.99
	maxK       = 500
)

// request holds the unified request fields the translation reads. The zero
// gjson.Result stands for an absent field.
type request struct {
	messages, maxTokens, maxCompletionTokens, stop, temperature, topP, topK gjson.Result
	seed, frequencyPenalty, presencePenalty, logprobs, topLogprobs, stream  gjson.Result
	tools, toolChoice, responseFormat, reasoningEffort                      gjson.Result
}

// set records one top-level field of the unified request, or rejects it
// when Cohere cannot express it. Fields not listed are dropped: user,
// safety_identifier, metadata, store, service_tier, prompt_cache_key,
// prompt_cache_retention, logit_bias, verbosity, prediction,
// parallel_tool_calls, stream_options (the gateway frames the stream).
// Of duplicate keys the first counts.
func (r *request) set(key string, v gjson.Result) error {
	var field *gjson.Result
	switch key {
	case "messages":
		field = &r.messages
	case "max_tokens":
		field = &r.maxTokens
	case "max_completion_tokens":
		field = &r.maxCompletionTokens
	case "stop":
		field = &r.stop
	case "temperature":
		field = &r.temperature
	case "top_p":
		field = &r.topP
	case "top_k": // not OpenAI's, but vLLM's and others' extension
		field = &r.topK
	case "seed":
		field = &r.seed
	case "frequency_penalty":
		field = &r.frequencyPenalty
	case "presence_penalty":
		field = &r.presencePenalty
	case "logprobs":
		field = &r.logprobs
	case "top_logprobs":
		field = &r.topLogprobs
	case "stream":
		field = &r.stream
	case "tools":
		field = &r.tools
	case "tool_choice":
		field = &r.toolChoice
	case "response_format":
		field = &r.responseFormat
	case "reasoning_effort":
		field = &r.reasoningEffort
	case "n":
		if v.Type == gjson.Number && v.Int() > 1 {
			return providers.UnsupportedBecause("n", "n > 1 is not supported by provider type "+providerName+": it returns one choice")
		}
	default:
		return providers.NoEquivalent(key, v, providerName)
	}
	if field != nil && !field.Exists() {
		*field = v
	}
	return nil
}

// ChatRequest translates a unified chat request, already checked by
// providers.ValidateChat, into a Cohere /v2/chat request for model.
//
// Messages keep their order and roles (developer becomes system); sampling
// parameters are brought into Cohere's ranges; tools, tool_choice,
// response_format and reasoning_effort map as the package documentation
// says. Features Cohere lacks (n > 1, top_logprobs, audio, file and audio
// parts, non-function tools, web search) are rejected with a 400.
func (c Chat) ChatRequest(body []byte, model string) (providers.Request, error) {
	req := providers.Request{Path: Path}

	var r request
	err := providers.ReadMembers(body, r.set)
	if err != nil {
		return req, err
	}

	b := make([]byte, 0, len(body)+256)
	b = append(b, `{"model":`...)
	b = providers.AppendString(b, model)
	if b, err = appendMessages(b, r.messages); err != nil {
		return req, err
	}
	// cohere-go always sends stream, false for Chat and true for ChatStream.
	if r.stream.Type == gjson.True {
		b = append(b, `,"stream":true`...)
	} else {
		b = append(b, `,"stream":false`...)
	}

	switch {
	case r.maxCompletionTokens.Type == gjson.Number:
		b = append(b, `,"max_tokens":`...)
		b = providers.AppendInt(b, r.maxCompletionTokens.Int())
	case r.maxTokens.Type == gjson.Number:
		b = append(b, `,"max_tokens":`...)
		b = providers.AppendInt(b, r.maxTokens.Int())
	}
	if t := r.temperature; t.Type == gjson.Number {
		b = append(b, `,"temperature":`...)
		if t.Num < 0 {
			b = append(b, '0')
		} else {
			b = append(b, t.Raw...)
		}
	}
	if p := r.topP; p.Type == gjson.Number {
		b = append(b, `,"p":`...)
		b = strconv.AppendFloat(b, min(max(p.Num, minP), maxP), 'g', -1, 64)
	}
	if k := r.topK; k.Exists() && k.Type != gjson.Null {
		if k.Type != gjson.Number || k.Num != float64(int64(k.Num)) || k.Num < 0 || k.Num > maxK {
			return req, providers.InvalidParam("top_k", "top_k must be an integer from 0 to %d", maxK)
		}
		b = append(b, `,"k":`...)
		b = providers.AppendInt(b, int64(k.Num))
	}
	b = appendStop(b, r.stop)
	if r.seed.Type == gjson.Number {
		b = append(b, `,"seed":`...)
		b = providers.AppendInt(b, r.seed.Int())
	}
	b = appendPenalty(b, "frequency_penalty", r.frequencyPenalty)
	b = appendPenalty(b, "presence_penalty", r.presencePenalty)
	if r.topLogprobs.Type == gjson.Number && r.topLogprobs.Int() > 0 {
		return req, providers.UnsupportedBecause("top_logprobs",
			"top_logprobs is not supported by provider type "+providerName+": it reports no alternative tokens")
	}
	if r.logprobs.Type == gjson.True {
		b = append(b, `,"logprobs":true`...)
	}

	if b, err = appendTools(b, r.tools, r.toolChoice); err != nil {
		return req, err
	}
	if b, err = appendResponseFormat(b, r.responseFormat); err != nil {
		return req, err
	}
	if b, err = appendThinking(b, r.reasoningEffort); err != nil {
		return req, err
	}

	req.Body = append(b, '}')
	return req, nil
}

// appendPenalty appends a frequency or presence penalty brought into
// Cohere's range [0, 1]: OpenAI's negative penalties (which reward
// repetition) have no Cohere equivalent and are left out, which is
// Cohere's default of 0; values above 1 become 1.
func appendPenalty(b []byte, name string, v gjson.Result) []byte {
	if v.Type != gjson.Number || !(v.Num > 0) {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, `":`...)
	if v.Num >= 1 {
		return append(b, '1')
	}
	return append(b, v.Raw...)
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

// message is a unified message as the translation reads it.
type message = providers.ChatMessage

// appendMessages appends "messages", one Cohere message per unified one.
func appendMessages(b []byte, messages gjson.Result) ([]byte, error) {
	b = append(b, `,"messages":[`...)
	i := 0
	var err error
	messages.ForEach(func(_, v gjson.Result) bool {
		if i > 0 {
			b = append(b, ',')
		}
		m := providers.ReadChatMessage(v)
		switch m.Role {
		case "system", "developer":
			b = append(b, `{"role":"system","content":`...)
			b = appendTextContent(b, m.Content)
			b = append(b, '}')
		case "user":
			b, err = appendUser(b, &m, i)
		case "assistant":
			b = appendAssistant(b, &m)
		case "tool":
			b = append(b, `{"role":"tool","tool_call_id":`...)
			b = providers.AppendRawString(b, m.ToolCallID)
			b = append(b, `,"content":`...)
			b = appendTextContent(b, m.Content)
			b = append(b, '}')
		}
		i++
		return err == nil
	})
	return append(b, ']'), err
}

// appendTextContent appends content that is a string (as it is) or an array
// of text (or refusal) parts, as Cohere's text content items. An empty
// array becomes "".
func appendTextContent(b []byte, content gjson.Result) []byte {
	if content.Type == gjson.String {
		return append(b, content.Raw...)
	}
	at := len(b)
	b = append(b, '[')
	n := 0
	content.ForEach(func(_, part gjson.Result) bool {
		if n > 0 {
			b = append(b, ',')
		}
		n++
		b = append(b, `{"type":"text","text":`...)
		b = providers.AppendRawString(b, providers.PartText(part))
		b = append(b, '}')
		return true
	})
	if n == 0 {
		return append(b[:at], `""`...)
	}
	return append(b, ']')
}

func partParam(i, j int) string {
	return "messages[" + strconv.Itoa(i) + "].content[" + strconv.Itoa(j) + "]"
}

// appendUser appends user message i: text and image_url parts as Cohere's
// content items; audio and file parts are rejected.
func appendUser(b []byte, m *message, i int) ([]byte, error) {
	b = append(b, `{"role":"user","content":`...)
	content := m.Content
	if content.Type == gjson.String {
		b = append(b, content.Raw...)
		return append(b, '}'), nil
	}
	b = append(b, '[')
	j := 0
	var err error
	content.ForEach(func(_, part gjson.Result) bool {
		if j > 0 {
			b = append(b, ',')
		}
		switch typ := part.Get("type").Str; typ {
		case "image_url":
			b, err = appendImage(b, part.Get("image_url"), i, j)
		case "input_audio", "file":
			err = providers.UnsupportedBecause(partParam(i, j)+".type",
				typ+" content parts are not supported by provider type "+providerName)
		default: // text
			b = append(b, `{"type":"text","text":`...)
			b = providers.AppendRawString(b, providers.PartText(part))
			b = append(b, '}')
		}
		j++
		return err == nil
	})
	if j == 0 {
		// An empty array: Cohere wants some content.
		b = append(b[:len(b)-1], `""`...)
		return append(b, '}'), err
	}
	return append(b, "]}"...), err
}

// appendImage appends an image_url content item. Cohere takes the URL as
// OpenAI gives it: a base64 data URL or an http(s) URL, which Cohere
// fetches itself; detail (auto, low, high) passes through.
func appendImage(b []byte, img gjson.Result, i, j int) ([]byte, error) {
	url := img.Get("url")
	u := url.Str
	switch {
	case hasPrefixFold(u, "https://"), hasPrefixFold(u, "http://"):
	case hasPrefixFold(u, "data:"):
		meta, data, ok := strings.Cut(u[5:], ",")
		if !ok || !hasPrefixFold(meta, "image/") || !strings.HasSuffix(meta, ";base64") || data == "" {
			return b, providers.InvalidParam(partParam(i, j)+".image_url.url",
				"an image data URL must look like data:image/<type>;base64,<data>")
		}
	default:
		return b, providers.InvalidParam(partParam(i, j)+".image_url.url",
			"an image URL must be an http(s) URL or a base64 data URL")
	}
	b = append(b, `{"type":"image_url","image_url":{"url":`...)
	b = append(b, url.Raw...)
	if d := img.Get("detail"); d.Type == gjson.String {
		switch d.Str {
		case "auto", "low", "high":
			b = append(b, `,"detail":`...)
			b = append(b, d.Raw...)
		default:
			return b, providers.InvalidParam(partParam(i, j)+".image_url.detail",
				"image_url.detail must be auto, low or high")
		}
	}
	return append(b, "}}"...), nil
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// appendAssistant appends an assistant message. With tool calls, its text
// is Cohere's tool_plan; without, its content. Reasoning the client sends
// back (reasoning_content, or reasoning) becomes a thinking content item
// ahead of any text, where Cohere's own answer had it.
func appendAssistant(b []byte, m *message) []byte {
	b = append(b, `{"role":"assistant"`...)
	calls := m.ToolCalls.IsArray() && m.ToolCalls.Get("0").Exists()
	thinking := m.ReasoningContent
	if thinking.Type != gjson.String || thinking.Str == "" {
		thinking = m.Reasoning
	}
	haveThinking := thinking.Type == gjson.String && thinking.Str != ""
	content := m.Content

	if calls {
		if plan := joinedText(content); plan != "" {
			b = append(b, `,"tool_plan":`...)
			b = providers.AppendString(b, plan)
		}
		if haveThinking {
			b = append(b, `,"content":[{"type":"thinking","thinking":`...)
			b = append(b, thinking.Raw...)
			b = append(b, "}]"...)
		}
		b = append(b, `,"tool_calls":[`...)
		n := 0
		m.ToolCalls.ForEach(func(_, call gjson.Result) bool {
			if n > 0 {
				b = append(b, ',')
			}
			n++
			fn := call.Get("function")
			b = append(b, `{"id":`...)
			b = providers.AppendRawString(b, call.Get("id"))
			b = append(b, `,"type":"function","function":{"name":`...)
			b = providers.AppendRawString(b, fn.Get("name"))
			b = append(b, `,"arguments":`...)
			if a := fn.Get("arguments"); a.Type == gjson.String && strings.TrimSpace(a.Str) != "" {
				b = append(b, a.Raw...)
			} else {
				b = append(b, `"{}"`...)
			}
			b = append(b, "}}"...)
			return true
		})
		b = append(b, ']')
		return append(b, '}')
	}

	if !content.Exists() || content.Type == gjson.Null {
		// ValidateChat allows this only with tool calls; an empty
		// tool_calls array leaves a message with nothing to say.
		content = gjson.Result{Type: gjson.String, Raw: `""`}
	}
	b = append(b, `,"content":`...)
	if !haveThinking {
		b = appendTextContent(b, content)
		return append(b, '}')
	}
	b = append(b, `[{"type":"thinking","thinking":`...)
	b = append(b, thinking.Raw...)
	b = append(b, '}')
	if content.Type == gjson.String {
		if content.Str != "" {
			b = append(b, `,{"type":"text","text":`...)
			b = append(b, content.Raw...)
			b = append(b, '}')
		}
	} else {
		content.ForEach(func(_, part gjson.Result) bool {
			b = append(b, `,{"type":"text","text":`...)
			b = providers.AppendRawString(b, providers.PartText(part))
			b = append(b, '}')
			return true
		})
	}
	return append(b, "]}"...)
}

// joinedText is the text of content that is a string or an array of text
// (or refusal) parts, joined.
func joinedText(content gjson.Result) string {
	if content.Type == gjson.String {
		return content.Str
	}
	var s strings.Builder
	content.ForEach(func(_, part gjson.Result) bool {
		s.WriteString(providers.PartText(part).Str)
		return true
	})
	return s.String()
}

// appendTools appends tools, strict_tools and tool_choice.
//
// Cohere's tool_choice is REQUIRED or NONE (left out: the model chooses).
// OpenAI's named choice, {"type":"function","function":{"name"}}, becomes
// the one named tool with REQUIRED; allowed_tools becomes its subset of the
// tools, with REQUIRED when its mode is "required". strict on any tool
// turns on Cohere's strict_tools, which applies to every tool.
func appendTools(b []byte, tools, choice gjson.Result) ([]byte, error) {
	var mode string   // "", "none", "auto" or "required"
	var only []string // names the choice allows; nil: all
	switch {
	case choice.Type == gjson.String:
		mode = choice.Str
	case choice.IsObject():
		switch typ := choice.Get("type").Str; typ {
		case "function":
			mode, only = "required", []string{choice.Get("function.name").Str}
		case "allowed_tools":
			at := choice.Get("allowed_tools")
			switch mode = at.Get("mode").Str; mode {
			case "auto", "required":
			default:
				return b, providers.InvalidParam("tool_choice.allowed_tools.mode",
					"allowed_tools.mode must be auto or required")
			}
			only = []string{}
			at.Get("tools").ForEach(func(_, t gjson.Result) bool {
				only = append(only, t.Get("function.name").Str)
				return true
			})
		default:
			return b, providers.UnsupportedBecause("tool_choice",
				"tool_choice of type "+strconv.Quote(typ)+" is not supported by provider type "+providerName)
		}
	}

	at := len(b)
	b = append(b, `,"tools":[`...)
	n, i := 0, 0
	strict := false
	var err error
	found := make([]bool, len(only))
	tools.ForEach(func(_, t gjson.Result) bool {
		defer func() { i++ }()
		if typ := t.Get("type").Str; typ != "function" {
			err = providers.UnsupportedBecause("tools["+strconv.Itoa(i)+"].type",
				typ+" tools are not supported by provider type "+providerName)
			return false
		}
		fn := t.Get("function")
		name := fn.Get("name")
		if only != nil {
			k := indexOf(only, name.Str)
			if k < 0 {
				return true
			}
			found[k] = true
		}
		if n > 0 {
			b = append(b, ',')
		}
		n++
		b = append(b, `{"type":"function","function":{"name":`...)
		b = providers.AppendRawString(b, name)
		if d := fn.Get("description"); d.Type == gjson.String && d.Str != "" {
			b = append(b, `,"description":`...)
			b = append(b, d.Raw...)
		}
		b = append(b, `,"parameters":`...)
		if p := fn.Get("parameters"); p.IsObject() {
			b = append(b, p.Raw...)
		} else {
			b = append(b, `{"type":"object","properties":{}}`...)
		}
		b = append(b, "}}"...)
		strict = strict || fn.Get("strict").Type == gjson.True
		return true
	})
	if err != nil {
		return b, err
	}
	for k, ok := range found {
		if !ok {
			return b, providers.InvalidParam("tool_choice",
				"tool_choice names the function %q, which is not among the tools", only[k])
		}
	}
	if n == 0 {
		b = b[:at]
		if mode == "required" {
			return b, providers.InvalidParam("tool_choice", "tool_choice %q needs tools", choiceName(choice))
		}
		return b, nil // "none", "auto" or nothing: no tools is the same thing
	}
	b = append(b, ']')
	if strict {
		b = append(b, `,"strict_tools":true`...)
	}
	switch mode {
	case "required":
		b = append(b, `,"tool_choice":"REQUIRED"`...)
	case "none":
		b = append(b, `,"tool_choice":"NONE"`...)
	}
	return b, nil
}

func indexOf(names []string, name string) int {
	for k, n := range names {
		if n == name {
			return k
		}
	}
	return -1
}

// choiceName names a tool_choice in messages.
func choiceName(choice gjson.Result) string {
	if choice.Type == gjson.String {
		return choice.Str
	}
	return choice.Get("type").Str
}

// appendResponseFormat appends Cohere's response_format: json_object as it
// is, json_schema as json_object with the schema (Cohere always holds the
// output to a given schema, so strict needs nothing more). text is Cohere's
// default and is left out.
func appendResponseFormat(b []byte, rf gjson.Result) ([]byte, error) {
	if !rf.IsObject() {
		return b, nil
	}
	switch typ := rf.Get("type").Str; typ {
	case "text":
		return b, nil
	case "json_object":
		return append(b, `,"response_format":{"type":"json_object"}`...), nil
	case "json_schema":
		b = append(b, `,"response_format":{"type":"json_object"`...)
		if s := rf.Get("json_schema.schema"); s.IsObject() {
			b = append(b, `,"json_schema":`...)
			b = append(b, s.Raw...)
		}
		return append(b, '}'), nil
	default:
		return b, providers.UnsupportedBecause("response_format",
			"response_format of type "+strconv.Quote(typ)+" is not supported by provider type "+providerName)
	}
}

// appendThinking appends Cohere's thinking for reasoning_effort: "none"
// disables thinking; minimal, low and medium enable it with the budgets
// BudgetMinimal, BudgetLow and BudgetMedium; high and xhigh enable it with
// no budget. Without reasoning_effort Cohere's default holds (thinking on
// for the models that have it).
func appendThinking(b []byte, effort gjson.Result) ([]byte, error) {
	if effort.Type != gjson.String {
		return b, nil
	}
	budget := 0
	switch effort.Str {
	case "none":
		return append(b, `,"thinking":{"type":"disabled"}`...), nil
	case "minimal":
		budget = BudgetMinimal
	case "low":
		budget = BudgetLow
	case "medium":
		budget = BudgetMedium
	case "high", "xhigh":
	default:
		return b, providers.InvalidParam("reasoning_effort",
			"reasoning_effort must be none, minimal, low, medium or high")
	}
	b = append(b, `,"thinking":{"type":"enabled"`...)
	if budget > 0 {
		b = append(b, `,"token_budget":`...)
		b = providers.AppendInt(b, int64(budget))
	}
	return append(b, '}'), nil
}

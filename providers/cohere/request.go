package cohere

import (
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/jsonw"
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

	w := jsonw.New(make([]byte, 0, len(body)+256))
	o := w.Object()
	o.Str("model", model)
	if err = writeMessages(o, r.messages); err != nil {
		return req, err
	}
	// cohere-go always sends stream, false for Chat and true for ChatStream.
	o.Bool("stream", r.stream.Type == gjson.True)

	switch {
	case r.maxCompletionTokens.Type == gjson.Number:
		o.Int("max_tokens", r.maxCompletionTokens.Int())
	case r.maxTokens.Type == gjson.Number:
		o.Int("max_tokens", r.maxTokens.Int())
	}
	if t := r.temperature; t.Type == gjson.Number {
		if t.Num < 0 {
			o.Int("temperature", 0)
		} else {
			o.Raw("temperature", t.Raw)
		}
	}
	if p := r.topP; p.Type == gjson.Number {
		o.Float("p", min(max(p.Num, minP), maxP))
	}
	if k := r.topK; k.Exists() && k.Type != gjson.Null {
		if k.Type != gjson.Number || k.Num != float64(int64(k.Num)) || k.Num < 0 || k.Num > maxK {
			return req, providers.InvalidParam("top_k", "top_k must be an integer from 0 to %d", maxK)
		}
		o.Int("k", int64(k.Num))
	}
	providers.WriteStops(o, "stop_sequences", r.stop)
	if r.seed.Type == gjson.Number {
		o.Int("seed", r.seed.Int())
	}
	writePenalty(o, "frequency_penalty", r.frequencyPenalty)
	writePenalty(o, "presence_penalty", r.presencePenalty)
	if r.topLogprobs.Type == gjson.Number && r.topLogprobs.Int() > 0 {
		return req, providers.UnsupportedBecause("top_logprobs",
			"top_logprobs is not supported by provider type "+providerName+": it reports no alternative tokens")
	}
	if r.logprobs.Type == gjson.True {
		o.Bool("logprobs", true)
	}

	if err = writeTools(o, r.tools, r.toolChoice); err != nil {
		return req, err
	}
	if err = writeResponseFormat(o, r.responseFormat); err != nil {
		return req, err
	}
	if err = writeThinking(o, r.reasoningEffort); err != nil {
		return req, err
	}

	o.End()
	req.Body, err = w.Finish()
	return req, err
}

// writePenalty writes a frequency or presence penalty brought into
// Cohere's range [0, 1]: OpenAI's negative penalties (which reward
// repetition) have no Cohere equivalent and are left out, which is
// Cohere's default of 0; values above 1 become 1.
func writePenalty(o jsonw.Object, name string, v gjson.Result) {
	if v.Type != gjson.Number || !(v.Num > 0) {
		return
	}
	if v.Num >= 1 {
		o.Int(name, 1)
	} else {
		o.Raw(name, v.Raw)
	}
}

// message is a unified message as the translation reads it.
type message = providers.ChatMessage

// writeMessages writes "messages", one Cohere message per unified one.
func writeMessages(o jsonw.Object, messages gjson.Result) error {
	list := o.Array("messages")
	i := 0
	var err error
	messages.ForEach(func(_, v gjson.Result) bool {
		m := providers.ReadChatMessage(v)
		switch m.Role {
		case "system", "developer":
			mo := list.Object()
			mo.Str("role", "system")
			writeTextContent(mo.Key("content"), m.Content)
			mo.End()
		case "user":
			err = writeUser(list.Object(), &m, i)
		case "assistant":
			writeAssistant(list.Object(), &m)
		case "tool":
			mo := list.Object()
			mo.Str("role", "tool")
			mo.Text("tool_call_id", jsonw.StrOf(m.ToolCallID))
			writeTextContent(mo.Key("content"), m.Content)
			mo.End()
		}
		i++
		return err == nil
	})
	if err != nil {
		return err
	}
	list.End()
	return nil
}

// writeTextContent writes content that is a string (as it is) or an
// array of text (or refusal) parts, as Cohere's text content items. An
// empty array becomes "".
func writeTextContent(v jsonw.Value, content gjson.Result) {
	if content.Type == gjson.String {
		v.Raw(content.Raw)
		return
	}
	mark := v.Mark()
	items := v.Array()
	n := 0
	content.ForEach(func(_, part gjson.Result) bool {
		n++
		writeTextItem(items, jsonw.StrOf(providers.PartText(part)))
		return true
	})
	if n == 0 {
		mark.Rewind()
		v.Str("")
		return
	}
	items.End()
}

// writeTextItem writes a text content item.
func writeTextItem(a jsonw.Array, text jsonw.Text) {
	it := a.Object()
	it.Str("type", "text")
	it.Text("text", text)
	it.End()
}

func partParam(i, j int) string {
	return "messages[" + strconv.Itoa(i) + "].content[" + strconv.Itoa(j) + "]"
}

// writeUser writes user message i into mo: text and image_url parts as
// Cohere's content items; audio and file parts are rejected.
func writeUser(mo jsonw.Object, m *message, i int) error {
	mo.Str("role", "user")
	content := m.Content
	if content.Type == gjson.String {
		mo.Raw("content", content.Raw)
		mo.End()
		return nil
	}
	v := mo.Key("content")
	mark := v.Mark()
	items := v.Array()
	j := 0
	var err error
	content.ForEach(func(_, part gjson.Result) bool {
		switch typ := part.Get("type").Str; typ {
		case "image_url":
			err = writeImage(items, part.Get("image_url"), i, j)
		case "input_audio", "file":
			err = providers.UnsupportedBecause(partParam(i, j)+".type",
				typ+" content parts are not supported by provider type "+providerName)
		default: // text
			writeTextItem(items, jsonw.StrOf(providers.PartText(part)))
		}
		j++
		return err == nil
	})
	if err != nil {
		return err
	}
	if j == 0 {
		// An empty array: Cohere wants some content.
		mark.Rewind()
		v.Str("")
	} else {
		items.End()
	}
	mo.End()
	return nil
}

// writeImage writes an image_url content item. Cohere takes the URL as
// OpenAI gives it: a base64 data URL or an http(s) URL, which Cohere
// fetches itself; detail (auto, low, high) passes through.
func writeImage(items jsonw.Array, img gjson.Result, i, j int) error {
	url := img.Get("url")
	u := url.Str
	switch {
	case hasPrefixFold(u, "https://"), hasPrefixFold(u, "http://"):
	case hasPrefixFold(u, "data:"):
		meta, data, ok := strings.Cut(u[5:], ",")
		if !ok || !hasPrefixFold(meta, "image/") || !strings.HasSuffix(meta, ";base64") || data == "" {
			return providers.InvalidParam(partParam(i, j)+".image_url.url",
				"an image data URL must look like data:image/<type>;base64,<data>")
		}
	default:
		return providers.InvalidParam(partParam(i, j)+".image_url.url",
			"an image URL must be an http(s) URL or a base64 data URL")
	}
	d := img.Get("detail")
	if d.Type == gjson.String {
		switch d.Str {
		case "auto", "low", "high":
		default:
			return providers.InvalidParam(partParam(i, j)+".image_url.detail",
				"image_url.detail must be auto, low or high")
		}
	}
	it := items.Object()
	it.Str("type", "image_url")
	iu := it.Object("image_url")
	iu.Raw("url", url.Raw)
	if d.Type == gjson.String {
		iu.Raw("detail", d.Raw)
	}
	iu.End()
	it.End()
	return nil
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// writeAssistant writes an assistant message into mo. With tool calls,
// its text is Cohere's tool_plan; without, its content. Reasoning the
// client sends back (reasoning_content, or reasoning) becomes a thinking
// content item ahead of any text, where Cohere's own answer had it.
func writeAssistant(mo jsonw.Object, m *message) {
	mo.Str("role", "assistant")
	calls := m.ToolCalls.IsArray() && m.ToolCalls.Get("0").Exists()
	thinking := m.ReasoningContent
	if thinking.Type != gjson.String || thinking.Str == "" {
		thinking = m.Reasoning
	}
	haveThinking := thinking.Type == gjson.String && thinking.Str != ""
	content := m.Content

	if calls {
		if plan := joinedText(content); plan != "" {
			mo.Str("tool_plan", plan)
		}
		if haveThinking {
			items := mo.Array("content")
			writeThinkingItem(items, thinking)
			items.End()
		}
		list := mo.Array("tool_calls")
		m.ToolCalls.ForEach(func(_, call gjson.Result) bool {
			fn := call.Get("function")
			c := list.Object()
			c.Text("id", jsonw.StrOf(call.Get("id")))
			c.Str("type", "function")
			f := c.Object("function")
			f.Text("name", jsonw.StrOf(fn.Get("name")))
			if a := fn.Get("arguments"); a.Type == gjson.String && strings.TrimSpace(a.Str) != "" {
				f.Raw("arguments", a.Raw)
			} else {
				f.Str("arguments", "{}")
			}
			f.End()
			c.End()
			return true
		})
		list.End()
		mo.End()
		return
	}

	if !content.Exists() || content.Type == gjson.Null {
		// ValidateChat allows this only with tool calls; an empty
		// tool_calls array leaves a message with nothing to say.
		content = gjson.Result{Type: gjson.String, Raw: `""`}
	}
	if !haveThinking {
		writeTextContent(mo.Key("content"), content)
		mo.End()
		return
	}
	items := mo.Array("content")
	writeThinkingItem(items, thinking)
	if content.Type == gjson.String {
		if content.Str != "" {
			writeTextItem(items, jsonw.Lit(content.Raw))
		}
	} else {
		content.ForEach(func(_, part gjson.Result) bool {
			writeTextItem(items, jsonw.StrOf(providers.PartText(part)))
			return true
		})
	}
	items.End()
	mo.End()
}

// writeThinkingItem writes a thinking content item for the JSON string
// thinking.
func writeThinkingItem(a jsonw.Array, thinking gjson.Result) {
	it := a.Object()
	it.Str("type", "thinking")
	it.Raw("thinking", thinking.Raw)
	it.End()
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

// writeTools writes tools, strict_tools and tool_choice.
//
// Cohere's tool_choice is REQUIRED or NONE (left out: the model chooses).
// OpenAI's named choice, {"type":"function","function":{"name"}}, becomes
// the one named tool with REQUIRED; allowed_tools becomes its subset of the
// tools, with REQUIRED when its mode is "required". strict on any tool
// turns on Cohere's strict_tools, which applies to every tool.
func writeTools(o jsonw.Object, tools, choice gjson.Result) error {
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
				return providers.InvalidParam("tool_choice.allowed_tools.mode",
					"allowed_tools.mode must be auto or required")
			}
			only = []string{}
			at.Get("tools").ForEach(func(_, t gjson.Result) bool {
				only = append(only, t.Get("function.name").Str)
				return true
			})
		default:
			return providers.UnsupportedBecause("tool_choice",
				"tool_choice of type "+strconv.Quote(typ)+" is not supported by provider type "+providerName)
		}
	}

	mark := o.Mark()
	list := o.Array("tools")
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
		n++
		tool := list.Object()
		tool.Str("type", "function")
		f := tool.Object("function")
		f.Text("name", jsonw.StrOf(name))
		if d := fn.Get("description"); d.Type == gjson.String && d.Str != "" {
			f.Raw("description", d.Raw)
		}
		if p := fn.Get("parameters"); p.IsObject() {
			f.Raw("parameters", p.Raw)
		} else {
			ps := f.Object("parameters")
			ps.Str("type", "object")
			ps.Object("properties").End()
			ps.End()
		}
		f.End()
		tool.End()
		strict = strict || fn.Get("strict").Type == gjson.True
		return true
	})
	if err != nil {
		return err
	}
	for k, ok := range found {
		if !ok {
			return providers.InvalidParam("tool_choice",
				"tool_choice names the function %q, which is not among the tools", only[k])
		}
	}
	if n == 0 {
		mark.Rewind()
		if mode == "required" {
			return providers.InvalidParam("tool_choice", "tool_choice %q needs tools", choiceName(choice))
		}
		return nil // "none", "auto" or nothing: no tools is the same thing
	}
	list.End()
	if strict {
		o.Bool("strict_tools", true)
	}
	switch mode {
	case "required":
		o.Str("tool_choice", "REQUIRED")
	case "none":
		o.Str("tool_choice", "NONE")
	}
	return nil
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

// writeResponseFormat writes Cohere's response_format: json_object as it
// is, json_schema as json_object with the schema (Cohere always holds the
// output to a given schema, so strict needs nothing more). text is
// Cohere's default and is left out.
func writeResponseFormat(o jsonw.Object, rf gjson.Result) error {
	if !rf.IsObject() {
		return nil
	}
	switch typ := rf.Get("type").Str; typ {
	case "text":
		return nil
	case "json_object", "json_schema":
		f := o.Object("response_format")
		f.Str("type", "json_object")
		if s := rf.Get("json_schema.schema"); typ == "json_schema" && s.IsObject() {
			f.Raw("json_schema", s.Raw)
		}
		f.End()
		return nil
	default:
		return providers.UnsupportedBecause("response_format",
			"response_format of type "+strconv.Quote(typ)+" is not supported by provider type "+providerName)
	}
}

// writeThinking writes Cohere's thinking for reasoning_effort: "none"
// disables thinking; minimal, low and medium enable it with the budgets
// BudgetMinimal, BudgetLow and BudgetMedium; high and xhigh enable it with
// no budget. Without reasoning_effort Cohere's default holds (thinking on
// for the models that have it).
func writeThinking(o jsonw.Object, effort gjson.Result) error {
	if effort.Type != gjson.String {
		return nil
	}
	budget := 0
	switch effort.Str {
	case "none":
		t := o.Object("thinking")
		t.Str("type", "disabled")
		t.End()
		return nil
	case "minimal":
		budget = BudgetMinimal
	case "low":
		budget = BudgetLow
	case "medium":
		budget = BudgetMedium
	case "high", "xhigh":
	default:
		return providers.InvalidParam("reasoning_effort",
			"reasoning_effort must be none, minimal, low, medium or high")
	}
	t := o.Object("thinking")
	t.Str("type", "enabled")
	if budget > 0 {
		t.Int("token_budget", int64(budget))
	}
	t.End()
	return nil
}

package gemini

import (
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/jsonw"
)

// toolChoice is a unified tool_choice, read.
type toolChoice struct {
	mode    string          // "", "none", "auto", "required" or "function"
	name    string          // the function tool_choice names
	allowed map[string]bool // allowed_tools: the functions the model may call; nil: all
}

func (c Chat) readToolChoice(tc gjson.Result) (toolChoice, error) {
	var ch toolChoice
	switch {
	case tc.Type == gjson.String:
		ch.mode = tc.Str
	case tc.IsObject():
		switch t := tc.Get("type").Str; t {
		case "function":
			ch.mode, ch.name = "function", tc.Get("function.name").Str
		case "allowed_tools":
			at := tc.Get("allowed_tools")
			switch ch.mode = at.Get("mode").Str; ch.mode {
			case "auto", "required":
			default:
				return ch, providers.InvalidParam("tool_choice.allowed_tools.mode", "allowed_tools.mode must be auto or required")
			}
			ch.allowed = map[string]bool{}
			at.Get("tools").ForEach(func(_, t gjson.Result) bool {
				if name := t.Get("function.name"); name.Type == gjson.String {
					ch.allowed[name.Str] = true
				}
				return true
			})
		default:
			return ch, c.unsupported("tool_choice", "tool_choice of type "+strconv.Quote(t)+" is not supported")
		}
	}
	return ch, nil
}

// writeTools writes tools (one tool holding a functionDeclaration per
// function tool, parameters as parametersJsonSchema, and Google Search for
// web_search_options) and toolConfig.
func (c Chat) writeTools(o jsonw.Object, r *request) error {
	ch, err := c.readToolChoice(r.toolChoice)
	if err != nil {
		return err
	}
	mark := o.Mark()
	tools := o.Array("tools")
	tool := tools.Object()
	decls := tool.Array("functionDeclarations")
	n, i := 0, 0
	found := ch.mode != "function"
	r.tools.ForEach(func(_, t gjson.Result) bool {
		if typ := t.Get("type").Str; typ != "function" {
			err = c.unsupported("tools["+strconv.Itoa(i)+"].type", typ+" tools are not supported")
			return false
		}
		i++
		fn := t.Get("function")
		name := fn.Get("name")
		if ch.allowed != nil && !ch.allowed[name.Str] {
			return true
		}
		found = found || name.Str == ch.name
		n++
		d := decls.Object()
		d.Text("name", jsonw.StrOf(name))
		if descr := fn.Get("description"); descr.Type == gjson.String && descr.Str != "" {
			d.Raw("description", descr.Raw)
		}
		writeParameters(d, fn.Get("parameters"))
		d.End()
		return true
	})
	if err != nil {
		return err
	}
	if n == 0 {
		mark.Rewind()
		switch {
		case ch.mode == "function" || ch.mode == "required" && ch.allowed == nil:
			return providers.InvalidParam("tool_choice", "tool_choice %q needs tools", ch.mode)
		case ch.allowed != nil && ch.mode == "required":
			return providers.InvalidParam("tool_choice.allowed_tools.tools", "allowed_tools names none of the tools")
		}
		// "none", "auto" or nothing: no tools is the same thing.
		if r.webSearch.Exists() {
			tools := o.Array("tools")
			writeGoogleSearch(tools)
			tools.End()
		}
		return nil
	}
	decls.End()
	tool.End()
	if r.webSearch.Exists() {
		writeGoogleSearch(tools)
	}
	tools.End()
	if !found {
		return providers.InvalidParam("tool_choice.function.name", "tool_choice names %q, which is not among the tools", ch.name)
	}

	var mode string
	switch ch.mode {
	case "none":
		mode = "NONE"
	case "auto":
		mode = "AUTO"
	case "required", "function":
		mode = "ANY"
	default:
		return nil
	}
	tc := o.Object("toolConfig")
	fcc := tc.Object("functionCallingConfig")
	fcc.Str("mode", mode)
	if ch.mode == "function" {
		names := fcc.Array("allowedFunctionNames")
		names.Str(ch.name)
		names.End()
	}
	fcc.End()
	tc.End()
	return nil
}

// writeGoogleSearch writes the tool of Grounding with Google Search,
// {"googleSearch":{}}, which the unified request's web_search_options
// asks for (it has no options the unified ones map to).
func writeGoogleSearch(tools jsonw.Array) {
	t := tools.Object()
	t.Object("googleSearch").End()
	t.End()
}

// writeParameters writes a declaration's parametersJsonSchema: the
// function's JSON Schema as it is, with "type":"object" added where it has
// no type (OpenAI allows that), and nothing for a function without
// parameters (none, null or {}).
//
// parametersJsonSchema, not the OpenAPI-subset parameters: it takes JSON
// Schema as OpenAI clients write it ($ref and $defs, anyOf, const,
// additionalProperties, type arrays), where parameters would need a lossy
// conversion, and Google's SDKs send it themselves for functions they
// describe (python-genai's from_callable with use_json_schema).
func writeParameters(o jsonw.Object, params gjson.Result) {
	if !params.IsObject() {
		return
	}
	inner := strings.TrimSpace(params.Raw[1 : len(params.Raw)-1])
	if inner == "" {
		return
	}
	if params.Get("type").Exists() {
		o.Raw("parametersJsonSchema", params.Raw)
		return
	}
	s := o.Object("parametersJsonSchema")
	s.Str("type", "object")
	s.RawMembers(inner)
	s.End()
}

// number writes the member name of g, v, when v is a number.
func number(g jsonw.Object, name string, v gjson.Result) {
	if v.Type == gjson.Number {
		g.Raw(name, v.Raw)
	}
}

// writeGenerationConfig writes generationConfig: sampling, length, stop
// sequences, candidates, penalties, seed, logprobs, structured output and
// thinking; nothing when none of them is set.
func (c Chat) writeGenerationConfig(o jsonw.Object, r *request, fam family) error {
	mark := o.Mark()
	g := o.Object("generationConfig")
	empty := g.Mark()
	number(g, "temperature", r.temperature)
	number(g, "topP", r.topP)
	if r.n.Type == gjson.Number && r.n.Int() > 1 {
		number(g, "candidateCount", r.n)
	}
	if r.maxCompletionTokens.Type == gjson.Number {
		number(g, "maxOutputTokens", r.maxCompletionTokens)
	} else {
		number(g, "maxOutputTokens", r.maxTokens)
	}
	providers.WriteStops(g, "stopSequences", r.stop)
	number(g, "presencePenalty", r.presencePenalty)
	number(g, "frequencyPenalty", r.frequencyPenalty)
	if r.seed.Type == gjson.Number {
		// Gemini's seed is 32 bits; larger seeds keep their low 32 bits,
		// so that the same seed still gives the same answer.
		g.Int("seed", int64(int32(r.seed.Int())))
	}
	if r.logprobs.Type == gjson.True {
		g.Bool("responseLogprobs", true)
		if r.topLogprobs.Type == gjson.Number && r.topLogprobs.Int() > 0 {
			number(g, "logprobs", r.topLogprobs)
		}
	}
	switch r.responseFormat.Get("type").Str {
	case "json_object":
		g.Str("responseMimeType", "application/json")
	case "json_schema":
		g.Str("responseMimeType", "application/json")
		if s := r.responseFormat.Get("json_schema.schema"); s.IsObject() {
			g.Raw("responseJsonSchema", s.Raw)
		}
	}
	if err := c.thinking(g, r.reasoningEffort, fam); err != nil {
		return err
	}
	if empty.Since() == 0 {
		mark.Rewind()
		return nil
	}
	g.End()
	return nil
}

// Thinking budgets (tokens) for Gemini 2.5 by reasoning_effort. They lie
// within every 2.5 model's range (Pro 128–32768, Flash 0–24576, Flash-Lite
// 512–24576, where 0 turns thinking off).
const (
	budgetMinimal = 512
	budgetLow     = 1024
	budgetMedium  = 8192
	budgetHigh    = 24576
	budgetProMin  = 128
	budgetProMax  = 32768
)

// thinking appends thinkingConfig for reasoning_effort: thinkingLevel for
// Gemini 3 and later, thinkingBudget for Gemini 2.5 and earlier, and
// includeThoughts so that thought summaries come back as reasoning. Pro
// models cannot stop thinking, so "none" gets their least; Gemini 3 Pro
// takes only LOW and HIGH, so "minimal" is LOW and "medium" HIGH there.
func (c Chat) thinking(g jsonw.Object, effort gjson.Result, fam family) error {
	if effort.Type != gjson.String {
		return nil
	}
	var (
		level  string
		budget int
	)
	switch effort.Str {
	case "none":
		level, budget = "MINIMAL", 0
		if fam.pro {
			level, budget = "LOW", budgetProMin
		}
	case "minimal":
		level, budget = "MINIMAL", budgetMinimal
		if fam.pro {
			level = "LOW"
		}
	case "low":
		level, budget = "LOW", budgetLow
	case "medium":
		level, budget = "MEDIUM", budgetMedium
		if fam.pro {
			level = "HIGH"
		}
	case "high", "xhigh":
		level, budget = "HIGH", budgetHigh
		if fam.pro && effort.Str == "xhigh" {
			budget = budgetProMax
		}
	default:
		return providers.InvalidParam("reasoning_effort",
			"reasoning_effort must be none, minimal, low, medium, high or xhigh")
	}
	tc := g.Object("thinkingConfig")
	tc.Bool("includeThoughts", effort.Str != "none")
	if fam.levels {
		tc.Str("thinkingLevel", level)
	} else {
		tc.Int("thinkingBudget", int64(budget))
	}
	tc.End()
	return nil
}

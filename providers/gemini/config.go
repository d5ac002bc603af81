package gemini

import (
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
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

// appendTools appends tools (one tool holding a functionDeclaration per
// function tool, parameters as parametersJsonSchema) and toolConfig.
func (c Chat) appendTools(b []byte, r *request) ([]byte, error) {
	ch, err := c.readToolChoice(r.toolChoice)
	if err != nil {
		return b, err
	}
	at := len(b)
	b = append(b, `,"tools":[{"functionDeclarations":[`...)
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
		if n > 0 {
			b = append(b, ',')
		}
		n++
		b = append(b, `{"name":`...)
		b = providers.AppendRawString(b, name)
		if d := fn.Get("description"); d.Type == gjson.String && d.Str != "" {
			b = append(b, `,"description":`...)
			b = append(b, d.Raw...)
		}
		b = appendParameters(b, fn.Get("parameters"))
		b = append(b, '}')
		return true
	})
	if err != nil {
		return b, err
	}
	if n == 0 {
		b = b[:at]
		switch {
		case ch.mode == "function" || ch.mode == "required" && ch.allowed == nil:
			return b, providers.InvalidParam("tool_choice", "tool_choice %q needs tools", ch.mode)
		case ch.allowed != nil && ch.mode == "required":
			return b, providers.InvalidParam("tool_choice.allowed_tools.tools", "allowed_tools names none of the tools")
		}
		// "none", "auto" or nothing: no tools is the same thing.
		return b, nil
	}
	b = append(b, "]}]"...)
	if !found {
		return b, providers.InvalidParam("tool_choice.function.name", "tool_choice names %q, which is not among the tools", ch.name)
	}

	switch ch.mode {
	case "none":
		b = append(b, `,"toolConfig":{"functionCallingConfig":{"mode":"NONE"}}`...)
	case "auto":
		b = append(b, `,"toolConfig":{"functionCallingConfig":{"mode":"AUTO"}}`...)
	case "required":
		b = append(b, `,"toolConfig":{"functionCallingConfig":{"mode":"ANY"}}`...)
	case "function":
		b = append(b, `,"toolConfig":{"functionCallingConfig":{"mode":"ANY","allowedFunctionNames":[`...)
		b = providers.AppendString(b, ch.name)
		b = append(b, "]}}"...)
	}
	return b, nil
}

// appendParameters appends a declaration's parametersJsonSchema: the
// function's JSON Schema as it is, with "type":"object" added where it has
// no type (OpenAI allows that), and nothing for a function without
// parameters (none, null or {}).
//
// parametersJsonSchema, not the OpenAPI-subset parameters: it takes JSON
// Schema as OpenAI clients write it ($ref and $defs, anyOf, const,
// additionalProperties, type arrays), where parameters would need a lossy
// conversion, and Google's SDKs send it themselves for functions they
// describe (python-genai's from_callable with use_json_schema).
func appendParameters(b []byte, params gjson.Result) []byte {
	if !params.IsObject() {
		return b
	}
	inner := strings.TrimSpace(params.Raw[1 : len(params.Raw)-1])
	if inner == "" {
		return b
	}
	b = append(b, `,"parametersJsonSchema":`...)
	if params.Get("type").Exists() {
		return append(b, params.Raw...)
	}
	b = append(b, `{"type":"object",`...)
	b = append(b, inner...)
	return append(b, '}')
}

// generationConfig writes the fields of generationConfig.
type generationConfig struct {
	b     []byte
	n     int
	start int
}

func (g *generationConfig) field(name string) {
	if g.n == 0 {
		g.start = len(g.b)
		g.b = append(g.b, `,"generationConfig":{`...)
	} else {
		g.b = append(g.b, ',')
	}
	g.n++
	g.b = append(g.b, '"')
	g.b = append(g.b, name...)
	g.b = append(g.b, `":`...)
}

func (g *generationConfig) number(name string, v gjson.Result) {
	if v.Type == gjson.Number {
		g.field(name)
		g.b = append(g.b, v.Raw...)
	}
}

// appendGenerationConfig appends generationConfig: sampling, length, stop
// sequences, candidates, penalties, seed, logprobs, structured output and
// thinking.
func (c Chat) appendGenerationConfig(b []byte, r *request, fam family) ([]byte, error) {
	g := generationConfig{b: b}
	g.number("temperature", r.temperature)
	g.number("topP", r.topP)
	if r.n.Type == gjson.Number && r.n.Int() > 1 {
		g.number("candidateCount", r.n)
	}
	if r.maxCompletionTokens.Type == gjson.Number {
		g.number("maxOutputTokens", r.maxCompletionTokens)
	} else {
		g.number("maxOutputTokens", r.maxTokens)
	}
	g.appendStop(r.stop)
	g.number("presencePenalty", r.presencePenalty)
	g.number("frequencyPenalty", r.frequencyPenalty)
	if r.seed.Type == gjson.Number {
		// Gemini's seed is 32 bits; larger seeds keep their low 32 bits,
		// so that the same seed still gives the same answer.
		g.field("seed")
		g.b = strconv.AppendInt(g.b, int64(int32(r.seed.Int())), 10)
	}
	if r.logprobs.Type == gjson.True {
		g.field("responseLogprobs")
		g.b = append(g.b, "true"...)
		if r.topLogprobs.Type == gjson.Number && r.topLogprobs.Int() > 0 {
			g.number("logprobs", r.topLogprobs)
		}
	}
	switch r.responseFormat.Get("type").Str {
	case "json_object":
		g.field("responseMimeType")
		g.b = append(g.b, `"application/json"`...)
	case "json_schema":
		g.field("responseMimeType")
		g.b = append(g.b, `"application/json"`...)
		if s := r.responseFormat.Get("json_schema.schema"); s.IsObject() {
			g.field("responseJsonSchema")
			g.b = append(g.b, s.Raw...)
		}
	}
	if err := c.thinking(&g, r.reasoningEffort, fam); err != nil {
		return g.b, err
	}
	if g.n > 0 {
		g.b = append(g.b, '}')
	}
	return g.b, nil
}

// appendStop appends stopSequences for a stop string or array; empty
// sequences are left out.
func (g *generationConfig) appendStop(stop gjson.Result) {
	at, n, start := len(g.b), g.n, g.start
	g.field("stopSequences")
	var k int
	if g.b, k = providers.AppendStops(g.b, stop); k == 0 {
		g.b, g.n, g.start = g.b[:at], n, start
	}
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
func (c Chat) thinking(g *generationConfig, effort gjson.Result, fam family) error {
	if effort.Type != gjson.String {
		return nil
	}
	var level string
	budget := -1
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
	g.field("thinkingConfig")
	if effort.Str == "none" {
		g.b = append(g.b, `{"includeThoughts":false,`...)
	} else {
		g.b = append(g.b, `{"includeThoughts":true,`...)
	}
	if fam.levels {
		g.b = append(g.b, `"thinkingLevel":"`...)
		g.b = append(g.b, level...)
		g.b = append(g.b, `"}`...)
	} else {
		g.b = append(g.b, `"thinkingBudget":`...)
		g.b = strconv.AppendInt(g.b, int64(budget), 10)
		g.b = append(g.b, '}')
	}
	return nil
}

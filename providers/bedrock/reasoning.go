package bedrock

import (
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/jsonw"
)

// family is what a model id says about the model behind it: its provider
// ("anthropic", "amazon", "openai", …) and the rest of its name
// ("claude-sonnet-4-5-20250929-v1:0"). An id Bedrock does not spell out,
// an application inference profile or provisioned throughput ARN, has an
// empty provider.
type family struct {
	provider, name string
}

// providers Bedrock hosts models of; the first segment of a model id.
var modelProviders = map[string]bool{
	"anthropic": true, "amazon": true, "meta": true, "mistral": true, "cohere": true, "ai21": true,
	"deepseek": true, "openai": true, "qwen": true, "writer": true, "google": true, "nvidia": true,
	"minimax": true, "moonshot": true, "moonshotai": true, "zai": true, "twelvelabs": true, "stability": true,
	"luma": true,
}

// baseFamily is the family of model, or of the model base names for it
// (Chat.BaseModels, Embeddings.BaseModels).
func baseFamily(base map[string]string, model string) family {
	if m, ok := base[model]; ok {
		model = m
	}
	return familyOf(model)
}

// familyOf reads a model id, an inference profile id ("us.anthropic.…",
// "global.anthropic.…") or an ARN naming either.
func familyOf(model string) family {
	m := model
	if strings.HasPrefix(m, "arn:") {
		i := strings.LastIndexByte(m, '/')
		if i < 0 {
			return family{}
		}
		m = m[i+1:]
	}
	first, rest, ok := strings.Cut(m, ".")
	if !ok {
		return family{}
	}
	if modelProviders[first] {
		return family{first, rest}
	}
	// A cross-region inference profile's geography: us., eu., apac., …
	second, rest, ok := strings.Cut(rest, ".")
	if ok && modelProviders[second] {
		return family{second, rest}
	}
	return family{}
}

// thinking is what reasoning_effort adds to the request.
type thinking struct {
	kind   int    // what additionalModelRequestFields holds
	budget int64  // thinkBudget: Claude's budget_tokens
	level  string // thinkNova, thinkOSS: the effort of three levels
	effort string // outputConfig.effort
}

// What a thinking puts in additionalModelRequestFields.
const (
	thinkNone     = iota
	thinkAdaptive // Claude's thinking {type: adaptive}
	thinkBudget   // Claude's thinking {type: enabled, budget_tokens}
	thinkNova     // Nova 2's reasoningConfig
	thinkOSS      // gpt-oss's reasoning_effort
)

// write writes additionalModelRequestFields for t, if it has any.
func (t thinking) write(o jsonw.Object) {
	if t.kind == thinkNone {
		return
	}
	f := o.Object("additionalModelRequestFields")
	switch t.kind {
	case thinkAdaptive:
		th := f.Object("thinking")
		th.Str("type", "adaptive")
		th.End()
	case thinkBudget:
		th := f.Object("thinking")
		th.Str("type", "enabled")
		th.Int("budget_tokens", t.budget)
		th.End()
	case thinkNova:
		rc := f.Object("reasoningConfig")
		rc.Str("type", "enabled")
		rc.Str("maxReasoningEffort", t.level)
		rc.End()
	case thinkOSS:
		f.Str("reasoning_effort", t.level)
	}
	f.End()
}

// Thinking budgets of Claude models that take thinking {type: enabled,
// budget_tokens}, by reasoning_effort: LiteLLM's budgets, with Anthropic's
// minimum of 1024 for minimal, and xhigh doubling high.
var claudeBudgets = map[string]int64{
	"minimal": 1024, "low": 1024, "medium": 2048, "high": 4096, "xhigh": 8192,
}

// budgetHeadroom is the answer's room above the thinking budget when the
// client set no max tokens: Claude needs max_tokens above budget_tokens.
const budgetHeadroom = 4096

// planReasoning maps reasoning_effort to the model family's reasoning
// configuration:
//
//   - Claude models with adaptive thinking (4.6 and later, Mythos, Fable):
//     additionalModelRequestFields.thinking {type: adaptive} and
//     outputConfig.effort (minimal as low);
//   - older Claude models: thinking {type: enabled, budget_tokens} from
//     claudeBudgets, keeping max tokens above the budget;
//   - Amazon Nova 2: reasoningConfig {type: enabled, maxReasoningEffort}
//     (low, medium, high);
//   - OpenAI's gpt-oss: reasoning_effort (low, medium, high);
//   - other families: nothing (DeepSeek R1 always reasons; the rest have
//     no documented switch), nor for "none".
//
// maxTokens is the client's limit (0: none) and may be raised.
func planReasoning(fam family, effort gjson.Result, maxTokens *int64) (thinking, error) {
	var t thinking
	if effort.Type != gjson.String || effort.Str == "" || effort.Str == "none" {
		return t, nil
	}
	e := effort.Str
	switch e {
	case "minimal", "low", "medium", "high", "xhigh":
	default:
		return t, providers.InvalidParam("reasoning_effort",
			"reasoning_effort must be none, minimal, low, medium, high or xhigh, not %q", e)
	}
	// Three levels for the families that have three.
	three := e
	switch e {
	case "minimal":
		three = "low"
	case "xhigh":
		three = "high"
	}

	switch {
	case fam.provider == "anthropic" && claudeAdaptive(fam.name):
		t.kind = thinkAdaptive
		t.effort = e
		if e == "minimal" {
			t.effort = "low"
		}
	case fam.provider == "anthropic":
		budget := claudeBudgets[e]
		switch {
		case *maxTokens == 0:
			*maxTokens = budget + budgetHeadroom
		case *maxTokens <= budget:
			if *maxTokens <= claudeBudgets["minimal"] {
				return t, providers.InvalidParam("max_completion_tokens",
					"with reasoning_effort, Claude needs more than %d max tokens: its thinking budget is at least %d",
					claudeBudgets["minimal"], claudeBudgets["minimal"])
			}
			budget = *maxTokens - 1
		}
		t.kind, t.budget = thinkBudget, budget
	case fam.provider == "amazon" && strings.HasPrefix(fam.name, "nova-2"):
		t.kind, t.level = thinkNova, three
	case fam.provider == "openai" && strings.HasPrefix(fam.name, "gpt-oss"):
		t.kind, t.level = thinkOSS, three
	}
	return t, nil
}

// claudeAdaptive reports whether a Claude model (its name after
// "anthropic.") takes adaptive thinking: Mythos and Fable models, and
// Opus, Sonnet and Haiku from 4.6 on ("claude-opus-4-6-v1",
// "claude-sonnet-5"). Older names ("claude-3-7-sonnet-…",
// "claude-sonnet-4-5-20250929-v1:0") take a thinking budget.
func claudeAdaptive(name string) bool {
	rest, ok := strings.CutPrefix(name, "claude-")
	if !ok {
		return false
	}
	if strings.Contains(rest, "mythos") || strings.Contains(rest, "fable") {
		return true
	}
	parts := strings.Split(rest, "-")
	if len(parts) < 2 {
		return false
	}
	if _, err := strconv.Atoi(parts[0]); err == nil {
		return false // claude-3-7-sonnet: the old naming, before adaptive thinking
	}
	major, err := strconv.Atoi(parts[1])
	if err != nil {
		return false
	}
	minor := 0
	if len(parts) > 2 && len(parts[2]) <= 2 {
		minor, _ = strconv.Atoi(parts[2])
	}
	return major > 4 || major == 4 && minor >= 6
}

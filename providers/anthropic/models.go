package anthropic

import (
	"strings"
)

// ThinkingMode is how a model takes extended thinking.
type ThinkingMode string

const (
	// ThinkingBudget is thinking {"type":"enabled","budget_tokens":N}: the
	// only form Claude 4.5 and older models take.
	ThinkingBudget ThinkingMode = "budget"

	// ThinkingAdaptive is thinking {"type":"adaptive"} with
	// output_config.effort: the only form Opus 4.7, Mythos and the 5-series
	// take, and the recommended one on Opus 4.6 and Sonnet 4.6 (where the
	// budget form is deprecated).
	ThinkingAdaptive ThinkingMode = "adaptive"
)

// Features is what the translation needs to know about a model.
type Features struct {
	// StructuredOutputs says the model takes output_config.format, Anthropic's
	// own (GA, no beta header) JSON outputs. Without it, response_format is
	// sent as a forced tool whose input becomes the message content.
	StructuredOutputs bool `json:"structured_outputs,omitempty"`

	// Thinking is how reasoning_effort is sent. Empty means ThinkingBudget.
	Thinking ThinkingMode `json:"thinking,omitempty"`
}

// FeaturesFor derives a model's features from its name, as Anthropic names
// its models (claude-sonnet-4-5-20250929, claude-3-7-sonnet-latest,
// claude-opus-4-7, claude-sonnet-5, …; a prefix such as Bedrock's
// "anthropic." or a router's "anthropic/" is ignored, and dots count as
// dashes):
//
//   - version 4.5 and newer, and the Mythos family: StructuredOutputs
//     (output_config.format is GA on Haiku, Sonnet and Opus 4.5, Opus and
//     Sonnet 4.6, and the models after them);
//   - version 4.6 and newer, and Mythos: ThinkingAdaptive;
//   - everything else, including names that are not Claude's (an
//     Anthropic-compatible server's own models): neither, so
//     response_format goes through a forced tool and reasoning_effort
//     through a thinking budget, which every Messages implementation takes.
func FeaturesFor(model string) Features {
	family, major, minor, ok := parseModel(model)
	if !ok {
		return Features{}
	}
	if family == "mythos" && major == 0 {
		return Features{StructuredOutputs: true, Thinking: ThinkingAdaptive}
	}
	var f Features
	if major > 4 || major == 4 && minor >= 5 {
		f.StructuredOutputs = true
	}
	if major > 4 || major == 4 && minor >= 6 {
		f.Thinking = ThinkingAdaptive
	}
	return f
}

// parseModel reads a Claude model name: the family word (opus, sonnet,
// haiku, mythos, …) and the version. The major version is the first
// number of one or two digits after "claude"; the minor version is the
// number right after it, if it has one or two digits (a date of eight
// digits is not a version). ok is false for names without "claude".
func parseModel(model string) (family string, major, minor int, ok bool) {
	i := indexFold(model, "claude")
	if i < 0 {
		return "", 0, 0, false
	}
	rest := model[i+len("claude"):]
	haveMajor, wantMinor := false, false
	for rest != "" {
		// Cut the next field at a separator.
		end := strings.IndexAny(rest, "-._:@/")
		f := rest
		if end >= 0 {
			f, rest = rest[:end], rest[end+1:]
		} else {
			rest = ""
		}
		if f == "" {
			continue
		}
		n, isNum := smallNumber(f)
		switch {
		case wantMinor:
			wantMinor = false
			if isNum {
				minor = n
			}
		case isNum && !haveMajor:
			major, haveMajor, wantMinor = n, true, true
		}
		if !isNum && family == "" {
			for _, w := range families {
				if strings.EqualFold(f, w) {
					family = w
				}
			}
		}
	}
	return family, major, minor, true
}

// families are Claude's model family words, as opposed to tags such as
// "latest" or "v1".
var families = [...]string{"opus", "sonnet", "haiku", "mythos", "fable", "instant"}

// indexFold is strings.Index, ignoring ASCII case.
func indexFold(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if strings.EqualFold(s[i:i+len(sub)], sub) {
			return i
		}
	}
	return -1
}

// smallNumber parses a field of one or two decimal digits.
func smallNumber(f string) (int, bool) {
	if len(f) == 0 || len(f) > 2 {
		return 0, false
	}
	n := 0
	for _, c := range f {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

package providertest

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
)

// answer is what the fake model says.
type answer struct {
	words        []string // text answer, split into words
	tool         string   // name of the tool called, if any
	toolArgs     []byte   // its arguments, JSON
	promptTokens int
	truncated    bool
}

func (a *answer) completionTokens() int {
	if a.tool != "" {
		return 1
	}
	return len(a.words)
}

// decide builds the answer. userText is the text of the last user message;
// toolResult is the text of the tool results that end the conversation, if
// isToolResult; userLast says whether the conversation ends with a user
// message (not an assistant prefill). tools are the offered tools' names,
// chosen the one tool_choice names, toolsOff whether tool_choice is none.
func decide(userText, toolResult string, isToolResult, userLast bool, tools []string, chosen string, toolsOff bool, maxTokens int64, promptWords int) *answer {
	a := &answer{promptTokens: promptWords}
	switch {
	case !isToolResult && userLast && len(tools) > 0 && !toolsOff:
		a.tool = tools[0]
		if chosen != "" {
			a.tool = chosen
		}
		a.toolArgs = appendString(append([]byte(nil), `{"query":`...), userText)
		a.toolArgs = append(a.toolArgs, '}')
		return a
	case isToolResult:
		a.words = strings.Fields("tool said: " + toolResult)
	default:
		a.words = strings.Fields("echo: " + userText)
	}
	if maxTokens > 0 && int64(len(a.words)) > maxTokens {
		a.words = a.words[:maxTokens]
		a.truncated = true
	}
	return a
}

// text is the whole text answer.
func (a *answer) text() string { return strings.Join(a.words, " ") }

// chunkWord is the i-th word as a stream delta: words after the first keep
// their leading space.
func (a *answer) chunkWord(i int) string {
	if i == 0 {
		return a.words[0]
	}
	return " " + a.words[i]
}

// argFragments splits the tool arguments into three pieces, as providers
// stream them. The cuts fall on character boundaries: a piece that ended
// inside a UTF-8 sequence would not survive a JSON decoder.
func (a *answer) argFragments() []string {
	s := string(a.toolArgs)
	n := len(s)
	cut := func(i int) int {
		for i < n && !utf8.RuneStart(s[i]) {
			i++
		}
		return i
	}
	i, j := cut(n/3), cut(2*n/3)
	return []string{s[:i], s[i:j], s[j:]}
}

// countWords is len(strings.Fields(s)), without the slice.
func countWords(s string) int {
	n, inWord := 0, false
	for _, r := range s {
		if unicode.IsSpace(r) {
			inWord = false
		} else if !inWord {
			inWord = true
			n++
		}
	}
	return n
}

// validJSON reports whether body is valid UTF-8 JSON that nests at most
// providers.MaxDepth levels deep (deeper bodies would overflow gjson's
// recursive validator and end the process).
func validJSON(body []byte) bool { return utf8.Valid(body) && providers.ValidJSON(body) }

// appendString appends s as a JSON string (invalid UTF-8 becomes U+FFFD).
func appendString(dst []byte, s string) []byte { return providers.AppendString(dst, s) }

// contentText is the text of a message's content in either format: the
// string, or its text parts (blocks) joined with spaces.
func contentText(c gjson.Result) string {
	if c.Type == gjson.String {
		return c.Str
	}
	var parts []string
	for _, p := range c.Array() {
		if p.Get("type").Str == "text" {
			parts = append(parts, p.Get("text").Str)
		}
	}
	return strings.Join(parts, " ")
}

// isInt reports whether v is a JSON integer of at least min.
func isInt(v gjson.Result, min int64) bool {
	return v.Type == gjson.Number && !strings.ContainsAny(v.Raw, ".eE") && v.Int() >= min
}

// isSet reports whether a field is present and not null.
func isSet(v gjson.Result) bool { return v.Exists() && v.Type != gjson.Null }

// indexOf is the index of s in list, or -1.
func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}

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

// lastText is the text of a user turn's content the answer follows: the
// string, or its last text block. A client that puts context before the
// user's words in one turn (Claude Code's reminders, Codex's environment
// once translated) has the answer follow the words.
func lastText(c gjson.Result) string {
	if c.Type == gjson.String {
		return c.Str
	}
	text := ""
	for _, p := range c.Array() {
		if p.Get("type").Str == "text" {
			text = p.Get("text").Str
		}
	}
	return text
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

// Structured makes the answer a JSON instance of schema (a JSON Schema),
// as a model does when the request asks for structured output: its string
// fields hold text, its numbers the word count of text, booleans true,
// arrays one item, enums their first value; an open object (json_object
// mode, or a schema with no properties) is {"text": text}. Formats call it
// when the request asks for structured output in the provider's own terms
// (response_format, responseJsonSchema, output_format, a forced tool…), so
// a gateway's structured-output translation shows end to end.
func (a *answer) structured(schema gjson.Result, text string) {
	b := schemaInstance(nil, schema, schema, text, 0)
	a.words = strings.Fields(string(b))
	a.tool, a.toolArgs = "", nil
}

// toolInput is the input of a call of a tool whose input schema is
// schema, as a model fills it: the properties the schema requires, each
// an instance of its own schema (see Structured), or every property when
// it requires none.
func toolInput(schema gjson.Result, text string) []byte {
	req := schema.Get("required")
	if !req.IsArray() || len(req.Array()) == 0 {
		return schemaInstance(nil, schema, schema, text, 0)
	}
	b := []byte{'{'}
	for i, k := range req.Array() {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, k.Str)
		b = append(b, ':')
		p := schema.Get("properties." + gjsonEscape(k.Str))
		b = schemaInstance(b, schema, p, text, 1)
	}
	return append(b, '}')
}

// gjsonEscape escapes the characters of a gjson path in a key.
func gjsonEscape(k string) string {
	var sb strings.Builder
	for _, c := range k {
		if strings.ContainsRune(`.*?|#@\!=<>%`, c) {
			sb.WriteByte('\\')
		}
		sb.WriteRune(c)
	}
	return sb.String()
}

// textOnly reports whether model asks the fake to answer in text although
// tools are offered (the scripted model name no-tools): a turn an agent,
// which always offers its tools, completes without a tool call.
func textOnly(model string) bool { return strings.Contains(model, "no-tools") }

// SchemaInstance returns the JSON instance of schema that the fake's
// structured answers carry for text (see the package doc).
func SchemaInstance(schema, text string) []byte {
	s := gjson.Parse(schema)
	return schemaInstance(nil, s, s, text, 0)
}

func schemaInstance(b []byte, root, s gjson.Result, text string, depth int) []byte {
	if depth > 16 {
		return append(b, "null"...)
	}
	if ref := s.Get(`\$ref`).Str; ref != "" {
		path := strings.ReplaceAll(strings.TrimPrefix(ref, "#/"), "/", ".")
		return schemaInstance(b, root, root.Get(path), text, depth+1)
	}
	for _, k := range []string{"anyOf", "oneOf", "allOf"} {
		if alts := s.Get(k).Array(); len(alts) > 0 {
			for _, alt := range alts {
				if alt.Get("type").Str != "null" {
					return schemaInstance(b, root, alt, text, depth+1)
				}
			}
		}
	}
	if enum := s.Get("enum").Array(); len(enum) > 0 {
		return append(b, enum[0].Raw...)
	}
	if c := s.Get("const"); c.Exists() {
		return append(b, c.Raw...)
	}
	typ := s.Get("type")
	if typ.IsArray() {
		for _, t := range typ.Array() {
			if t.Str != "null" {
				typ = t
				break
			}
		}
	}
	switch typ.Str {
	case "string":
		return appendString(b, text)
	case "integer", "number":
		return providers.AppendInt(b, int64(countWords(text)))
	case "boolean":
		return append(b, "true"...)
	case "null":
		return append(b, "null"...)
	case "array":
		b = append(b, '[')
		b = schemaInstance(b, root, s.Get("items"), text, depth+1)
		return append(b, ']')
	}
	props := s.Get("properties")
	if !props.IsObject() || len(props.Map()) == 0 {
		b = append(b, `{"text":`...)
		return append(appendString(b, text), '}')
	}
	b = append(b, '{')
	n := 0
	props.ForEach(func(k, v gjson.Result) bool {
		if n > 0 {
			b = append(b, ',')
		}
		n++
		b = appendString(b, k.Str)
		b = append(b, ':')
		b = schemaInstance(b, root, v, text, depth+1)
		return true
	})
	return append(b, '}')
}

// chatConversation reads msgs, messages of OpenAI's shape ({role,
// content}, tool results in role "tool"), for decide: the prompt's token
// count (count of each content), the text of the last user message,
// whether the conversation ends with it, and the tool results that end
// it. text gives a content's text.
func chatConversation(msgs []gjson.Result, text func(gjson.Result) string, count func(string) int) (promptWords int, userText string, userLast bool, results []string) {
	for _, m := range msgs {
		t := text(m.Get("content"))
		promptWords += count(t)
		switch m.Get("role").Str {
		case "user":
			userText, userLast, results = t, true, results[:0]
		case "system", "developer":
			// Instructions, wherever a client puts them (Claude Code ends
			// its conversation with one for a model not Anthropic's): not a
			// turn.
		case "tool":
			userLast, results = false, append(results, t)
		default:
			userLast, results = false, results[:0]
		}
	}
	return promptWords, userText, userLast, results
}

package providers

import (
	"bytes"
	"strconv"
	"strings"
	"unsafe"

	"github.com/tidwall/gjson"
)

// ChatInfo is what the gateway needs to know about a unified chat request
// before it picks a provider.
type ChatInfo struct {
	Model        string
	Stream       bool
	IncludeUsage bool
}

// ValidateChat checks a unified chat request body thoroughly enough that a
// translator can trust its shape, and returns what routing needs. Errors are
// 400 invalid_request_error with param naming the offending field, as
// OpenAI's API names it (messages[2].role, say).
//
// Once the body is known to be valid JSON, it is read in place and each
// object once: its members are walked with Members and Elements (strings
// skipped many bytes at a time), the fields a check needs taken from that
// walk (the first of duplicates, as gjson's Get takes), and a field's path
// (messages[2].role) written only for an error.
func ValidateChat(body []byte) (ChatInfo, error) {
	var info ChatInfo
	if tooDeep(body, MaxDepth) {
		return info, &Error{Status: 400, Type: "invalid_request_error", Code: "invalid_json",
			Message: "the request body nests more than " + strconv.Itoa(MaxDepth) + " levels deep"}
	}
	if !gjson.ValidBytes(body) {
		return info, &Error{Status: 400, Type: "invalid_request_error", Code: "invalid_json",
			Message: "the request body is not valid JSON"}
	}
	if root := gjson.Parse(InPlace(body)); !root.IsObject() {
		return info, &Error{Status: 400, Type: "invalid_request_error", Code: "invalid_json",
			Message: "the request body must be a JSON object"}
	}

	var (
		err      error
		seen     uint8 // model, stream, stream_options: bits 1, 2, 4
		messages bool
	)
	eachMember(body, func(key string, v gjson.Result) bool {
		var bit uint8
		switch key {
		case "model":
			bit = 1
		case "stream":
			bit = 2
		case "stream_options":
			bit = 4
		case "messages":
			messages = true
		}
		if bit != 0 {
			// The gateway routes and frames the answer by these while
			// translators and upstreams may read another duplicate: one
			// each, so that all read the same.
			if seen&bit != 0 {
				err = InvalidParam(key, "%s must be given only once", key)
				return false
			}
			seen |= bit
		}
		err = checkChatField(key, v, &info)
		return err == nil
	})
	if err != nil {
		return info, err
	}
	if info.Model == "" {
		return info, InvalidParam("model", "you must provide a model parameter")
	}
	if !messages {
		return info, InvalidParam("messages", "messages is required")
	}
	// The body's bytes were read in place: the model is the caller's to
	// keep, whatever becomes of them.
	info.Model = strings.Clone(info.Model)
	return info, nil
}

// EachMember calls fn with each member of obj, a JSON object that
// ValidJSON accepted, in order: its key, unescaped, and its value, read in
// place (a string's Str unescaped), as gjson's ForEach would, in one walk
// that checks nothing again and passes over strings quickly. fn returns
// false to stop. The results are views of obj: the caller keeps none of
// their strings beyond its use of obj.
func EachMember(obj string, fn func(key string, v gjson.Result) bool) {
	members(bytesOf(obj), func(k, v []byte) bool { return fn(InPlace(k), value(v, true)) })
}

// EachElement is EachMember for the elements of arr, a JSON array that
// ValidJSON accepted (or the Raw of such an array within it).
func EachElement(arr string, fn func(v gjson.Result) bool) {
	elements(bytesOf(arr), func(_ int, v []byte) bool { return fn(value(v, true)) })
}

// eachMember is EachMember.
func eachMember(obj []byte, fn func(key string, v gjson.Result) bool) { EachMember(InPlace(obj), fn) }

// eachElement calls fn with each element of arr, a valid JSON array, read
// in place, and its index; fn returns false to stop.
func eachElement(arr string, fn func(i int, v gjson.Result) bool) {
	elements(bytesOf(arr), func(i int, v []byte) bool { return fn(i, value(v, true)) })
}

// fields sets each of out to the value of the first member of v named as
// the same index of names, as v.Get(names[i]) would, in one walk of v; a
// value that is not an object has none.
func fields(v gjson.Result, names []string, out []gjson.Result) {
	if !v.IsObject() {
		return
	}
	members(bytesOf(v.Raw), func(key, m []byte) bool {
		for i, n := range names {
			if string(key) == n && !out[i].Exists() {
				out[i] = value(m, textRead(n))
			}
		}
		return true
	})
}

// textRead reports whether a check reads the text of the member name of
// a message, part, tool or tool call, and not only its type: role, type
// and name.
func textRead(name string) bool { return name == "role" || name == "type" || name == "name" }

// value is gjson.Parse of v, a valid JSON value that members or elements
// found, in place, without a second look at a string without escapes or
// at a literal. A string with escapes is unescaped (a copy) only when str
// is set; otherwise its Str is empty, its type alone to be read: a
// message's content, often long and full of newlines, is not copied to
// be checked.
func value(v []byte, str bool) gjson.Result {
	raw := InPlace(v)
	switch v[0] {
	case '"':
		if !str {
			return gjson.Result{Type: gjson.String, Raw: raw}
		}
		if bytes.IndexByte(v, '\\') < 0 {
			return gjson.Result{Type: gjson.String, Raw: raw, Str: raw[1 : len(raw)-1]}
		}
	case '{', '[':
		return gjson.Result{Type: gjson.JSON, Raw: raw}
	case 't':
		return gjson.Result{Type: gjson.True, Raw: raw}
	case 'f':
		return gjson.Result{Type: gjson.False, Raw: raw}
	case 'n':
		return gjson.Result{Type: gjson.Null, Raw: raw}
	}
	return gjson.Parse(raw)
}

// members and elements walk a JSON object or array that is known to be
// valid (ValidateChat checked the whole body first), so, unlike Members
// and Elements, they check nothing and find where each value ends with
// the least work: short strings are passed over a byte at a time, long
// ones many bytes at a time.

// members calls fn with each member of obj, a valid JSON object: its key,
// unescaped, and its value's bytes. fn returns false to stop.
func members(obj []byte, fn func(key, value []byte) bool) {
	i := skipSpace(obj, 1+bytes.IndexByte(obj, '{'))
	for i < len(obj) && obj[i] == '"' {
		end := skipStr(obj, i)
		key := obj[i+1 : end-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			key = []byte(gjson.Parse(InPlace(obj[i:end])).Str)
		}
		start := skipSpace(obj, skipSpace(obj, end)+1) // past the colon
		end = skipVal(obj, start)
		if !fn(key, obj[start:end]) {
			return
		}
		if i = skipSpace(obj, end); i < len(obj) && obj[i] == ',' {
			i = skipSpace(obj, i+1)
		}
	}
}

// elements calls fn with the index and the bytes of each element of arr,
// a valid JSON array. fn returns false to stop.
func elements(arr []byte, fn func(i int, value []byte) bool) {
	i := skipSpace(arr, 1+bytes.IndexByte(arr, '['))
	for n := 0; i < len(arr) && arr[i] != ']'; n++ {
		end := skipVal(arr, i)
		if !fn(n, arr[i:end]) {
			return
		}
		if i = skipSpace(arr, end); i < len(arr) && arr[i] == ',' {
			i = skipSpace(arr, i+1)
		}
	}
}

// skipVal returns the index just past the valid JSON value at b[i]
// (SkipValue's, which checks the structure it passes over too).
func skipVal(b []byte, i int) int {
	if end := SkipValue(b, i); end >= 0 {
		return end
	}
	return len(b)
}

// skipStr returns the index just past the valid JSON string at b[i]
// (SkipString's, which reads a short string eight bytes at a time).
func skipStr(b []byte, i int) int {
	if end := SkipString(b, i); end >= 0 {
		return end
	}
	return len(b)
}

// field is v.Get(name) for a name without gjson's path syntax, where v
// is read in place.
func field(v gjson.Result, name string) gjson.Result {
	var out [1]gjson.Result
	fields(v, []string{name}, out[:])
	return out[0]
}

// bytesOf is s's bytes, in place: for reading only.
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// indexed is name[i], a path in an error.
func indexed(name string, i int) string { return name + "[" + strconv.Itoa(i) + "]" }

func checkChatField(key string, v gjson.Result, info *ChatInfo) error {
	switch key {
	case "model":
		if v.Type != gjson.String || v.Str == "" {
			return InvalidParam("model", "model must be a non-empty string")
		}
		info.Model = v.Str
	case "messages":
		return checkMessages(v)
	case "stream":
		if !IsBool(v) && v.Type != gjson.Null {
			return InvalidParam("stream", "stream must be a boolean")
		}
		info.Stream = v.Type == gjson.True
	case "stream_options":
		if v.Type == gjson.Null {
			return nil
		}
		if !v.IsObject() {
			return InvalidParam("stream_options", "stream_options must be an object")
		}
		iu := field(v, "include_usage")
		if iu.Exists() && !IsBool(iu) {
			return InvalidParam("stream_options.include_usage", "include_usage must be a boolean")
		}
		info.IncludeUsage = iu.Type == gjson.True
	case "temperature", "top_p", "frequency_penalty", "presence_penalty":
		if v.Type != gjson.Number && v.Type != gjson.Null {
			return InvalidParam(key, "%s must be a number", key)
		}
	case "max_tokens", "max_completion_tokens", "n", "seed", "top_logprobs":
		if v.Type == gjson.Null {
			return nil
		}
		if !IsInt(v) {
			return InvalidParam(key, "%s must be an integer", key)
		}
		switch key {
		case "n", "max_tokens", "max_completion_tokens":
			if v.Int() < 1 {
				return InvalidParam(key, "%s must be at least 1", key)
			}
		case "top_logprobs":
			if v.Int() < 0 {
				return InvalidParam(key, "%s must not be negative", key)
			}
		}
	case "stop":
		switch {
		case v.Type == gjson.Null, v.Type == gjson.String:
		case v.IsArray():
			var err error
			eachElement(v.Raw, func(i int, s gjson.Result) bool {
				if s.Type != gjson.String {
					err = InvalidParam(indexed("stop", i), "stop sequences must be strings")
				}
				return err == nil
			})
			return err
		default:
			return InvalidParam("stop", "stop must be a string or an array of strings")
		}
	case "tools":
		if v.Type == gjson.Null {
			return nil
		}
		if !v.IsArray() {
			return InvalidParam("tools", "tools must be an array")
		}
		var err error
		eachElement(v.Raw, func(i int, t gjson.Result) bool {
			err = checkTool(i, t)
			return err == nil
		})
		return err
	case "tool_choice":
		switch {
		case v.Type == gjson.Null:
		case v.Type == gjson.String:
			switch v.Str {
			case "none", "auto", "required":
			default:
				return InvalidParam("tool_choice", "tool_choice must be none, auto, required or an object")
			}
		case v.IsObject():
			var f [2]gjson.Result // type, function
			fields(v, []string{"type", "function"}, f[:])
			if f[0].Str == "function" && field(f[1], "name").Type != gjson.String {
				return InvalidParam("tool_choice.function.name", "tool_choice needs function.name")
			}
		default:
			return InvalidParam("tool_choice", "tool_choice must be a string or an object")
		}
	case "parallel_tool_calls", "logprobs", "store":
		if !IsBool(v) && v.Type != gjson.Null {
			return InvalidParam(key, "%s must be a boolean", key)
		}
	case "response_format":
		if v.Type != gjson.Null && (!v.IsObject() || field(v, "type").Type != gjson.String) {
			return InvalidParam("response_format", "response_format must be an object with a type")
		}
	case "user", "safety_identifier", "prompt_cache_key", "reasoning_effort", "service_tier":
		if v.Type != gjson.String && v.Type != gjson.Null {
			return InvalidParam(key, "%s must be a string", key)
		}
	case "metadata", "logit_bias":
		if v.Type != gjson.Null && !v.IsObject() {
			return InvalidParam(key, "%s must be an object", key)
		}
	}
	return nil
}

// checkTool checks tools[i].
func checkTool(i int, t gjson.Result) error {
	if !t.IsObject() {
		return InvalidParam(indexed("tools", i), "each tool must be an object")
	}
	var f [2]gjson.Result // type, function
	fields(t, []string{"type", "function"}, f[:])
	if typ := f[0]; typ.Type != gjson.String {
		return InvalidParam(indexed("tools", i)+".type", "tool type must be a string")
	} else if typ.Str == "function" {
		var fn [2]gjson.Result // name, parameters
		fields(f[1], []string{"name", "parameters"}, fn[:])
		if name := fn[0]; name.Type != gjson.String || name.Str == "" {
			return InvalidParam(indexed("tools", i)+".function.name", "a function tool needs function.name")
		}
		if ps := fn[1]; ps.Exists() && !ps.IsObject() && ps.Type != gjson.Null {
			return InvalidParam(indexed("tools", i)+".function.parameters", "function.parameters must be a JSON Schema object")
		}
	}
	return nil
}

// isChatRole reports whether role is one a unified chat message may have.
func isChatRole(role string) bool {
	switch role {
	case "system", "developer", "user", "assistant", "tool":
		return true
	}
	return false
}

func checkMessages(v gjson.Result) error {
	if !v.IsArray() {
		return InvalidParam("messages", "messages must be an array")
	}
	n := 0
	var err error
	eachElement(v.Raw, func(i int, m gjson.Result) bool {
		err = checkMessage(i, m)
		n++
		return err == nil
	})
	if err != nil {
		return err
	}
	if n == 0 {
		return InvalidParam("messages", "messages must contain at least one message")
	}
	return nil
}

// The fields of a message that checkMessage reads, in one walk of it.
var messageFields = []string{"role", "content", "tool_calls", "tool_call_id"}

func checkMessage(i int, m gjson.Result) error {
	if !m.IsObject() {
		return InvalidParam(indexed("messages", i), "each message must be an object")
	}
	var f [4]gjson.Result
	fields(m, messageFields, f[:])
	role, content, tc := f[0], f[1], f[2]
	if role.Type != gjson.String {
		return InvalidParam(indexed("messages", i)+".role", "each message needs a role")
	}
	if !isChatRole(role.Str) {
		return InvalidParam(indexed("messages", i)+".role", "unknown role %q: use system, developer, user, assistant or tool", role.Str)
	}
	switch role.Str {
	case "assistant":
		if !content.Exists() || content.Type == gjson.Null {
			if !tc.Exists() || tc.Type == gjson.Null || tc.IsArray() && emptyArray(tc) {
				return InvalidParam(indexed("messages", i)+".content", "an assistant message needs content or tool_calls")
			}
		} else if err := checkContent(i, content, false); err != nil {
			return err
		}
		if tc.Exists() && tc.Type != gjson.Null {
			if !tc.IsArray() {
				return InvalidParam(indexed("messages", i)+".tool_calls", "tool_calls must be an array")
			}
			var err error
			eachElement(tc.Raw, func(j int, c gjson.Result) bool {
				err = checkToolCall(i, j, c)
				return err == nil
			})
			return err
		}
	case "tool":
		if f[3].Type != gjson.String {
			return InvalidParam(indexed("messages", i)+".tool_call_id", "a tool message needs tool_call_id")
		}
		return checkContent(i, content, false)
	default:
		return checkContent(i, content, role.Str == "user")
	}
	return nil
}

// emptyArray reports whether v, an array, has no elements.
func emptyArray(v gjson.Result) bool {
	empty := true
	eachElement(v.Raw, func(int, gjson.Result) bool {
		empty = false
		return false
	})
	return empty
}

// checkToolCall checks messages[i].tool_calls[j].
func checkToolCall(i, j int, c gjson.Result) error {
	var f [2]gjson.Result // id, function
	fields(c, []string{"id", "function"}, f[:])
	if f[0].Type != gjson.String {
		return InvalidParam(toolCallPath(i, j)+".id", "a tool call needs an id")
	}
	var fn [2]gjson.Result // name, arguments
	fields(f[1], []string{"name", "arguments"}, fn[:])
	if fn[0].Type != gjson.String {
		return InvalidParam(toolCallPath(i, j)+".function.name", "a tool call needs function.name")
	}
	if a := fn[1]; a.Exists() && a.Type != gjson.String {
		return InvalidParam(toolCallPath(i, j)+".function.arguments", "function.arguments must be a JSON-encoded string")
	}
	return nil
}

func toolCallPath(i, j int) string { return indexed(indexed("messages", i)+".tool_calls", j) }

// The fields of a content part that checkContent reads.
var partFields = []string{"type", "text", "refusal", "image_url"}

// checkContent checks the content of messages[i].
func checkContent(i int, c gjson.Result, user bool) error {
	switch {
	case c.Type == gjson.String:
		return nil
	case c.IsArray():
		var err error
		eachElement(c.Raw, func(j int, part gjson.Result) bool {
			err = checkPart(i, j, part, user)
			return err == nil
		})
		return err
	case !c.Exists():
		return InvalidParam(indexed("messages", i)+".content", "content is required")
	default:
		return InvalidParam(indexed("messages", i)+".content", "content must be a string or an array of content parts")
	}
}

// checkPart checks messages[i].content[j].
func checkPart(i, j int, part gjson.Result, user bool) error {
	var f [4]gjson.Result
	fields(part, partFields, f[:])
	typ := f[0]
	if !part.IsObject() || typ.Type != gjson.String {
		return InvalidParam(partPath(i, j), "each content part must be an object with a type")
	}
	switch typ.Str {
	case "text":
		if f[1].Type != gjson.String {
			return InvalidParam(partPath(i, j)+".text", "a text part needs text")
		}
	case "refusal":
		if f[2].Type != gjson.String {
			return InvalidParam(partPath(i, j)+".refusal", "a refusal part needs refusal")
		}
	case "image_url", "input_audio", "file":
		if !user {
			return InvalidParam(partPath(i, j)+".type", "%s parts are only allowed in user messages", typ.Str)
		}
		if typ.Str == "image_url" && field(f[3], "url").Type != gjson.String {
			return InvalidParam(partPath(i, j)+".image_url.url", "an image_url part needs image_url.url")
		}
	default:
		return InvalidParam(partPath(i, j)+".type", "unknown content part type %q", typ.Str)
	}
	return nil
}

func partPath(i, j int) string { return indexed(indexed("messages", i)+".content", j) }

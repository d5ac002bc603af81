package providers

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// validateChatRef is ValidateChat as it was first written, with gjson's
// Get, ForEach and Array over the whole body: the reference that
// FuzzValidateChat holds ValidateChat to (the same answer, error for
// error, on any input).
func validateChatRef(body []byte) (ChatInfo, error) {
	var info ChatInfo
	if tooDeep(body, MaxDepth) {
		return info, &Error{Status: 400, Type: "invalid_request_error", Code: "invalid_json",
			Message: "the request body nests more than " + strconv.Itoa(MaxDepth) + " levels deep"}
	}
	if !gjson.ValidBytes(body) {
		return info, &Error{Status: 400, Type: "invalid_request_error", Code: "invalid_json",
			Message: "the request body is not valid JSON"}
	}
	root := gjson.ParseBytes(body)
	if !root.IsObject() {
		return info, &Error{Status: 400, Type: "invalid_request_error", Code: "invalid_json",
			Message: "the request body must be a JSON object"}
	}

	var err error
	seen := map[string]bool{}
	root.ForEach(func(key, v gjson.Result) bool {
		switch key.Str {
		case "model", "stream", "stream_options":
			// The gateway routes and frames the answer by these while
			// translators and upstreams may read another duplicate: one
			// each, so that all read the same.
			if seen[key.Str] {
				err = InvalidParam(key.Str, "%s must be given only once", key.Str)
				return false
			}
			seen[key.Str] = true
		}
		err = checkChatFieldRef(key.Str, v, &info)
		return err == nil
	})
	if err != nil {
		return info, err
	}
	if info.Model == "" {
		return info, InvalidParam("model", "you must provide a model parameter")
	}
	if !root.Get("messages").Exists() {
		return info, InvalidParam("messages", "messages is required")
	}
	return info, nil
}

func checkChatFieldRef(key string, v gjson.Result, info *ChatInfo) error {
	switch key {
	case "model":
		if v.Type != gjson.String || v.Str == "" {
			return InvalidParam("model", "model must be a non-empty string")
		}
		info.Model = v.Str
	case "messages":
		return checkMessagesRef(v)
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
		iu := v.Get("include_usage")
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
			for i, s := range v.Array() {
				if s.Type != gjson.String {
					return InvalidParam("stop["+strconv.Itoa(i)+"]", "stop sequences must be strings")
				}
			}
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
		for i, t := range v.Array() {
			p := "tools[" + strconv.Itoa(i) + "]"
			if !t.IsObject() {
				return InvalidParam(p, "each tool must be an object")
			}
			if typ := t.Get("type"); typ.Type != gjson.String {
				return InvalidParam(p+".type", "tool type must be a string")
			} else if typ.Str == "function" {
				if name := t.Get("function.name"); name.Type != gjson.String || name.Str == "" {
					return InvalidParam(p+".function.name", "a function tool needs function.name")
				}
				if ps := t.Get("function.parameters"); ps.Exists() && !ps.IsObject() && ps.Type != gjson.Null {
					return InvalidParam(p+".function.parameters", "function.parameters must be a JSON Schema object")
				}
			}
		}
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
			if v.Get("type").Str == "function" && v.Get("function.name").Type != gjson.String {
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
		if v.Type != gjson.Null && (!v.IsObject() || v.Get("type").Type != gjson.String) {
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

// Roles a unified chat message may have.
var chatRolesRef = map[string]bool{
	"system": true, "developer": true, "user": true, "assistant": true, "tool": true,
}

func checkMessagesRef(v gjson.Result) error {
	if !v.IsArray() {
		return InvalidParam("messages", "messages must be an array")
	}
	n := 0
	var err error
	v.ForEach(func(_, m gjson.Result) bool {
		err = checkMessageRef(n, m)
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

func checkMessageRef(i int, m gjson.Result) error {
	p := "messages[" + strconv.Itoa(i) + "]"
	if !m.IsObject() {
		return InvalidParam(p, "each message must be an object")
	}
	role := m.Get("role")
	if role.Type != gjson.String {
		return InvalidParam(p+".role", "each message needs a role")
	}
	if !chatRolesRef[role.Str] {
		return InvalidParam(p+".role", "unknown role %q: use system, developer, user, assistant or tool", role.Str)
	}
	content := m.Get("content")
	switch role.Str {
	case "assistant":
		tc := m.Get("tool_calls")
		if !content.Exists() || content.Type == gjson.Null {
			if !tc.Exists() || tc.Type == gjson.Null || tc.IsArray() && !tc.Get("0").Exists() {
				return InvalidParam(p+".content", "an assistant message needs content or tool_calls")
			}
		} else if err := checkContentRef(p, content, false); err != nil {
			return err
		}
		if tc.Exists() && tc.Type != gjson.Null {
			if !tc.IsArray() {
				return InvalidParam(p+".tool_calls", "tool_calls must be an array")
			}
			for j, c := range tc.Array() {
				cp := p + ".tool_calls[" + strconv.Itoa(j) + "]"
				if c.Get("id").Type != gjson.String {
					return InvalidParam(cp+".id", "a tool call needs an id")
				}
				if c.Get("function.name").Type != gjson.String {
					return InvalidParam(cp+".function.name", "a tool call needs function.name")
				}
				if a := c.Get("function.arguments"); a.Exists() && a.Type != gjson.String {
					return InvalidParam(cp+".function.arguments", "function.arguments must be a JSON-encoded string")
				}
			}
		}
	case "tool":
		if m.Get("tool_call_id").Type != gjson.String {
			return InvalidParam(p+".tool_call_id", "a tool message needs tool_call_id")
		}
		if err := checkContentRef(p, content, false); err != nil {
			return err
		}
	default:
		if err := checkContentRef(p, content, role.Str == "user"); err != nil {
			return err
		}
	}
	return nil
}

func checkContentRef(p string, c gjson.Result, user bool) error {
	switch {
	case c.Type == gjson.String:
		return nil
	case c.IsArray():
		for j, part := range c.Array() {
			pp := p + ".content[" + strconv.Itoa(j) + "]"
			typ := part.Get("type")
			if !part.IsObject() || typ.Type != gjson.String {
				return InvalidParam(pp, "each content part must be an object with a type")
			}
			switch typ.Str {
			case "text":
				if part.Get("text").Type != gjson.String {
					return InvalidParam(pp+".text", "a text part needs text")
				}
			case "refusal":
				if part.Get("refusal").Type != gjson.String {
					return InvalidParam(pp+".refusal", "a refusal part needs refusal")
				}
			case "image_url", "input_audio", "file":
				if !user {
					return InvalidParam(pp+".type", "%s parts are only allowed in user messages", typ.Str)
				}
				if typ.Str == "image_url" && part.Get("image_url.url").Type != gjson.String {
					return InvalidParam(pp+".image_url.url", "an image_url part needs image_url.url")
				}
			default:
				return InvalidParam(pp+".type", "unknown content part type %q", typ.Str)
			}
		}
		return nil
	case !c.Exists():
		return InvalidParam(p+".content", "content is required")
	default:
		return InvalidParam(p+".content", "content must be a string or an array of content parts")
	}
}

// FuzzValidateChat holds ValidateChat to validateChatRef: on any body, the
// same ChatInfo, or the same error (status, type, code, param, message).
func FuzzValidateChat(f *testing.F) {
	for _, s := range []string{
		msgs(user),
		`{"model":"oa\/gpt\u002d4o","mod\u0065l":"x","messages":` + user + `}`,
		withUser(`"stream":true,"stream_options":{"include_usage":true,"include_usage":false}`),
		withUser(`"stop":["a",1]`),
		withUser(`"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}},"function":{"name":""}},{"type":"custom"}]`),
		withUser(`"tool_choice":{"type":"function","function":{"name":1}}`),
		withUser(`"response_format":{"type":"json_object","type":1}`),
		msgs(`[{"role":"user","content":[{"type":"text","text":"what"},{"type":"image_url","image_url":{"url":"data:,"}},{"type":"file","file":{}}]}]`),
		msgs(`[{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},` +
			`{"role":"tool","tool_call_id":"c1","content":[{"type":"text","text":"42"}]},{"role":"assistant","content":[{"type":"refusal","refusal":"no"}],"tool_calls":[]}]`),
		msgs(`[{"role":"assistant","tool_calls":[ ]},{"role":"robot"}]`),
		msgs(`[{"role":"user","role":1,"content":"a","content":5}]`),
		msgs(`[{"role":"tool","tool_call_id":7,"tool_call_id":"c","content":"x"}]`),
		msgs(`[{"role":"assistant","tool_calls":[{"id":"a","function":[{"name":"f"}]},{"id":"b","function":{"name":"g","arguments":null}}]}]`),
		msgs(`[{"role":"user","content":[{"type":"image_url","image_url":"x"},{"type":"image_url","image_url":{"url":1}}]}]`),
		` {"model" : "m" , "messages" : [ { "role" : "user" , "content" : [ ] } ] } `,
		`{"messages":[],"model":"m"}`,
		`[{"model":"m"}]`,
		`{"model":"m","messages":` + user + `,"x":[[[{"a":"\"]}"}]]]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		info, err := ValidateChat(body)
		want, wantErr := validateChatRef(body)
		if info != want {
			t.Fatalf("%s: info %+v, want %+v", body, info, want)
		}
		var e, we *Error
		errors.As(err, &e)
		errors.As(wantErr, &we)
		if (e == nil) != (we == nil) || e != nil && *e != *we {
			t.Fatalf("%s: error %+v, want %+v", body, e, we)
		}
	})
}

// FuzzEachMember holds EachMember and EachElement to gjson's ForEach on
// any JSON that ValidJSON accepts: the same keys and values (type, raw
// text without surrounding space, string value), in order.
func FuzzEachMember(f *testing.F) {
	for _, s := range []string{
		`{}`, `[]`, ` { "a" : 1 , "b":[1,{"c":"d"}] ,"e":"x\"y\\","f":null,"g":true,"h":false,"i":-1.5e3 } `,
		`{"k\u0065y":"v\u00e9","":{"":[]}}`, `[1,"two",{"three":3},[4],null,true]`, `["\\\\\"",  "a\/b"]`,
	} {
		f.Add([]byte(s))
	}
	type member struct {
		key, raw, str string
		typ           gjson.Type
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !ValidJSON(b) {
			return
		}
		root := gjson.ParseBytes(b)
		var want, got []member
		root.ForEach(func(k, v gjson.Result) bool {
			want = append(want, member{k.Str, strings.TrimSpace(v.Raw), v.Str, v.Type})
			return true
		})
		switch {
		case root.IsObject():
			EachMember(string(b), func(k string, v gjson.Result) bool {
				got = append(got, member{k, v.Raw, v.Str, v.Type})
				return true
			})
		case root.IsArray():
			EachElement(string(b), func(v gjson.Result) bool {
				got = append(got, member{"", v.Raw, v.Str, v.Type})
				return true
			})
		default:
			return
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d members, want %d: %v, want %v", b, len(got), len(want), got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%s: member %d is %+v, want %+v", b, i, got[i], want[i])
			}
		}
	})
}

// TestSkipStr checks skipStr and SkipString against a byte-by-byte
// reference on strings with escapes at every position around the ends of
// their eight-byte words and of their first 32 bytes.
func TestSkipStr(t *testing.T) {
	for _, esc := range []string{`\\`, `\"`, `\\\"`, `\\\\`, `\u0022`, `\n`} {
		for n := range 48 {
			for _, tail := range []string{``, `a`, `\\`, `\"b`} {
				s := `"` + strings.Repeat("x", n) + esc + tail + `"`
				b := []byte(s + `,"next":1`)
				if !ValidJSON([]byte(s)) {
					t.Fatalf("%s is not a JSON string", s)
				}
				if got, want := skipStr(b, 0), skipStringReference(b, 0); got != want || got != len(s) {
					t.Errorf("%s: skipStr %d, the reference %d, want %d", s, got, want, len(s))
				}
				for cut := range len(s) { // unterminated
					if got := SkipString(b[:cut], 0); got != -1 {
						t.Errorf("%s cut at %d: %d, want -1", s, cut, got)
					}
				}
			}
		}
	}
}

// FuzzSkipString: SkipString finds the end the byte-by-byte reference
// finds, from any start, in any bytes.
func FuzzSkipString(f *testing.F) {
	f.Add([]byte(`"abc\"def\\"xyz"`), 0)
	f.Add([]byte(`x"0123456789abcdef0123456789abcdef\\\"0123456789"`), 1)
	f.Fuzz(func(t *testing.T, b []byte, i int) {
		if i < 0 || i >= len(b) || b[i] != '"' {
			return
		}
		if got, want := SkipString(b, i), skipStringReference(b, i); got != want {
			t.Fatalf("%q from %d: %d, want %d", b, i, got, want)
		}
	})
}

// skipStringReference is SkipString a byte at a time.
func skipStringReference(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '"':
			return j + 1
		case '\\':
			j++
		}
	}
	return -1
}

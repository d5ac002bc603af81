package guardrails

import (
	"bytes"
	"errors"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/jsonw"
)

// An API is one of the unified API's request and answer shapes.
type API uint8

// The APIs whose texts guards read.
const (
	Chat       API = iota // POST /v1/chat/completions
	Responses             // POST /v1/responses
	Messages              // POST /v1/messages (and count_tokens)
	Embeddings            // POST /v1/embeddings
	Rerank                // POST /v1/rerank
)

var apiNames = [...]string{"chat", "responses", "messages", "embeddings", "rerank"}

// String returns the API's name, as the webhook protocol sends it.
func (a API) String() string {
	if int(a) < len(apiNames) {
		return apiNames[a]
	}
	return "unknown"
}

// APIForPath returns the API served at path, as a batch line's url names
// it ("/v1/chat/completions").
func APIForPath(path string) (API, bool) {
	switch path {
	case "/v1/chat/completions":
		return Chat, true
	case "/v1/responses":
		return Responses, true
	case "/v1/messages", "/v1/messages/count_tokens":
		return Messages, true
	case "/v1/embeddings":
		return Embeddings, true
	case "/v1/rerank", "/v1/reranker":
		return Rerank, true
	}
	return 0, false
}

// ErrBadJSON is the error of a body the guards cannot read.
var ErrBadJSON = errors.New("the body is not valid JSON")

// maxDepth bounds the nesting the walker follows (tool inputs, object
// documents); a deeper body is refused rather than let through unread.
const maxDepth = 64

// A text is one JSON string of a body that guards read: its bytes in the
// body (quotes included) and its value.
type text struct {
	start, end int
	s          string
}

// walker gathers the texts of a body.
type walker struct {
	body  []byte
	texts []text
	err   error
}

// off is where v, a slice of w.body, starts in it.
func (w *walker) off(v []byte) int { return cap(w.body) - cap(v) }

// fail fails the walk: the body is not JSON. It returns -1, the length
// of a value that is none.
func (w *walker) fail() int {
	if w.err == nil {
		w.err = ErrBadJSON
	}
	return -1
}

// The walker reads each body in one pass (providers.WalkMembers and
// WalkElements): each of its functions reads the value at the start of
// v, a slice of the body from that value on, adds the texts in it, and
// returns its length; 0 when the value is not one it reads (the walk
// skips it), -1 when the body is not JSON (w.err says so).

// str adds the string at the start of v; other values (null, numbers)
// are no text.
func (w *walker) str(v []byte) int {
	if len(v) == 0 || v[0] != '"' {
		return 0
	}
	n := providers.SkipString(v, 0)
	if n < 0 {
		return w.fail()
	}
	s, ok := unquote(v[:n])
	if !ok {
		return w.fail()
	}
	start := w.off(v)
	w.texts = append(w.texts, text{start: start, end: start + n, s: s})
	return n
}

// members walks the members of the object at the start of v; any other
// value is skipped.
func (w *walker) members(v []byte, fn func(key, v []byte) int) int {
	if len(v) == 0 || v[0] != '{' {
		return 0
	}
	return w.walked(providers.WalkMembers(v, fn))
}

// elements walks the elements of the array at the start of v; any other
// value is skipped.
func (w *walker) elements(v []byte, fn func(v []byte) int) int {
	if len(v) == 0 || v[0] != '[' {
		return 0
	}
	return w.walked(providers.WalkElements(v, fn))
}

// walked is the length of a walked value, n, failing the walk when it
// is -1.
func (w *walker) walked(n int) int {
	if n < 0 {
		return w.fail()
	}
	return n
}

// leaves adds every string value at the start of v, at any depth (a
// tool's input, an object document); keys are not texts.
func (w *walker) leaves(v []byte, depth int) int {
	if depth > maxDepth {
		return w.fail()
	}
	switch {
	case len(v) == 0:
		return 0
	case v[0] == '"':
		return w.str(v)
	case v[0] == '{':
		return w.members(v, func(_, m []byte) int { return w.leaves(m, depth+1) })
	case v[0] == '[':
		return w.elements(v, func(e []byte) int { return w.leaves(e, depth+1) })
	}
	return 0
}

// content adds a content value: a string, or an array of parts and
// blocks (node).
func (w *walker) content(v []byte, depth int) int {
	switch {
	case len(v) == 0:
		return 0
	case v[0] == '"':
		return w.str(v)
	case v[0] == '[':
		if depth > maxDepth {
			return w.fail()
		}
		return w.elements(v, func(e []byte) int {
			if len(e) > 0 && e[0] == '"' {
				return w.str(e)
			}
			return w.node(e, depth+1)
		})
	}
	return 0
}

// node adds the texts of a message, content part, content block, output
// item or tool call, whichever API it comes from: its text, content
// (strings, parts, nested tool results), refusal, a function's arguments
// (a string of JSON), a tool's input (an object, or a custom tool's
// string), a tool's output, and the tool calls it holds. Signed thinking
// blocks, reasoning and media are not texts guards change.
func (w *walker) node(v []byte, depth int) int {
	if depth > maxDepth {
		return w.fail()
	}
	return w.members(v, func(key, m []byte) int {
		switch string(key) {
		case "text", "refusal", "arguments":
			return w.str(m)
		case "content", "output":
			return w.content(m, depth+1)
		case "input":
			return w.leaves(m, depth+1)
		case "tool_calls":
			return w.elements(m, func(e []byte) int { return w.node(e, depth+1) })
		case "function", "function_call":
			return w.node(m, depth+1)
		}
		return 0
	})
}

// request gathers the texts of a request body of api, an object
// (validObject).
func (w *walker) request(api API, body []byte) {
	w.top(body, func(key, v []byte) int {
		switch api {
		case Chat:
			if string(key) == "messages" {
				return w.elements(v, func(e []byte) int { return w.node(e, 1) })
			}
		case Responses:
			switch string(key) {
			case "instructions":
				return w.str(v)
			case "input":
				return w.content(v, 1)
			}
		case Messages:
			switch string(key) {
			case "system":
				return w.content(v, 1)
			case "messages":
				return w.elements(v, func(e []byte) int { return w.node(e, 1) })
			}
		case Embeddings:
			if string(key) == "input" {
				if n := w.str(v); n != 0 {
					return n
				}
				return w.elements(v, w.str) // strings; token arrays are no text
			}
		case Rerank:
			switch string(key) {
			case "query":
				return w.str(v)
			case "documents":
				return w.elements(v, func(e []byte) int { return w.leaves(e, 1) })
			}
		}
		return 0
	})
}

// answer gathers the texts of an answer body of api, an object.
func (w *walker) answer(api API, body []byte) {
	w.top(body, func(key, v []byte) int {
		switch {
		case api == Chat && string(key) == "choices":
			return w.elements(v, func(e []byte) int {
				return w.members(e, func(k, m []byte) int {
					if string(k) == "message" {
						return w.node(m, 2)
					}
					return 0
				})
			})
		case api == Responses && string(key) == "output":
			return w.elements(v, func(e []byte) int { return w.node(e, 1) })
		case api == Messages && string(key) == "content":
			return w.content(v, 1)
		}
		return 0
	})
}

// top walks the members of body, one object and JSON's spaces around it.
func (w *walker) top(body []byte, fn func(key, v []byte) int) {
	obj := bytes.TrimLeft(body, jsonSpaces)
	n := w.members(obj, fn)
	if n <= 0 || len(bytes.TrimLeft(obj[n:], jsonSpaces)) > 0 {
		w.fail()
	}
}

// jsonSpaces are the bytes JSON allows around a value.
const jsonSpaces = " \t\r\n"

// bodyTexts appends to dst the texts of body, a request (dir Request) or
// an answer of api.
func bodyTexts(api API, dir Direction, body []byte, dst []text) ([]text, error) {
	w := walker{body: body, texts: dst}
	if !validObject(body) {
		return nil, ErrBadJSON
	}
	if dir == Request {
		w.request(api, body)
	} else {
		w.answer(api, body)
	}
	return w.texts, w.err
}

// validObject reports whether body is a JSON object, surrounding spaces
// allowed (its members are checked as they are walked).
func validObject(body []byte) bool {
	b := bytes.TrimSpace(body)
	return len(b) >= 2 && b[0] == '{' && b[len(b)-1] == '}'
}

// rewrite returns body with each text whose value changed (vals[i] !=
// texts[i].s) written anew as a JSON string; every other byte is kept.
func rewrite(body []byte, texts []text, vals []string) []byte {
	out := make([]byte, 0, len(body)+64)
	last := 0
	for i, t := range texts {
		if vals[i] == t.s {
			continue
		}
		out = append(out, body[last:t.start]...)
		out = jsonw.AppendString(out, vals[i])
		last = t.end
	}
	return append(out, body[last:]...)
}

// unquote returns the value of the JSON string raw (quotes included), and
// false when raw is not one. A string without escapes is returned in
// place, without copying: it must not outlive raw's bytes unchanged. One
// with escapes is decoded into a string of its own.
func unquote(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	in := raw[1 : len(raw)-1]
	if bytes.IndexByte(in, '\\') < 0 {
		return providers.InPlace(in), true
	}
	out, ok := appendUnquoted(make([]byte, 0, len(in)), raw)
	if !ok {
		return "", false
	}
	return providers.InPlace(out), true // out is its own, and never written again
}

// appendUnquoted appends the text of the JSON string raw (quotes
// included) to dst, its escapes decoded. It reports false when raw is
// not a string; dst may then hold part of it.
func appendUnquoted(dst, raw []byte) ([]byte, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return dst, false
	}
	in, out := raw[1:len(raw)-1], dst
	for {
		j := bytes.IndexByte(in, '\\')
		if j < 0 {
			return append(out, in...), true
		}
		out = append(out, in[:j]...)
		if j+1 == len(in) {
			return out, false
		}
		c, n := in[j+1], 2
		switch c {
		case '"', '\\', '/':
			out = append(out, c)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := hex4(in, j+2)
			if !ok {
				return out, false
			}
			n = 6
			if utf16.IsSurrogate(r) {
				r2, ok := rune(0), false
				if j+7 < len(in) && in[j+6] == '\\' && in[j+7] == 'u' {
					r2, ok = hex4(in, j+8)
				}
				if d := utf16.DecodeRune(r, r2); ok && d != utf8.RuneError {
					r, n = d, 12
				} else {
					r = utf8.RuneError
				}
			}
			out = utf8.AppendRune(out, r)
		default:
			return out, false
		}
		in = in[j+n:]
	}
}

// hex4 reads the four hex digits at b[i:].
func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

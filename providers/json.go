package providers

import (
	"slices"
	"strconv"
	"unicode/utf8"
	"unsafe"

	"github.com/tidwall/gjson"
)

const hexDigits = "0123456789abcdef"

// AppendString appends s to dst as a JSON string. Invalid UTF-8 becomes
// U+FFFD, so the output is always valid JSON.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		// U+2028 and U+2029 are valid JSON but break JavaScript consumers.
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// AppendInt appends n as a JSON number.
func AppendInt(dst []byte, n int64) []byte { return strconv.AppendInt(dst, n, 10) }

// MaxDepth is how deeply arrays and objects may nest in JSON that ValidJSON
// accepts. Real requests and error bodies stay far below it.
const MaxDepth = 1000

// ValidJSON is gjson.ValidBytes for bodies from outside: it also refuses JSON
// nested more than MaxDepth levels deep. gjson's validator recurses once per
// level, so a 16 MB body of '[' overflows the goroutine stack, a fatal error
// that recover cannot catch and that ends the whole process.
func ValidJSON(b []byte) bool { return !tooDeep(b, MaxDepth) && gjson.ValidBytes(b) }

// tooDeep reports whether b nests arrays and objects more than limit levels
// deep. It does not validate b; up to the first byte that makes b invalid it
// counts the levels as a JSON parser would.
func tooDeep(b []byte, limit int) bool {
	if len(b) <= limit {
		// Each level takes at least a byte: most bodies, and nearly every
		// stream event, are too short to need the count.
		return false
	}
	depth := 0
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '"':
			end := SkipString(b, i)
			if end < 0 {
				return false // unterminated: not JSON anyway
			}
			i = end - 1
		case '[', '{':
			if depth++; depth > limit {
				return true
			}
		case ']', '}':
			depth--
		}
	}
	return false
}

// JSONScan follows JSON text byte by byte, as it may arrive in pieces,
// telling the bytes outside strings from those inside. Its zero value is
// at the start of the text.
type JSONScan struct {
	inString, escaped bool
}

// Outside reports whether c, the next byte of the text, stands outside
// every string; a string's quotes count as inside it.
func (s *JSONScan) Outside(c byte) bool {
	switch {
	case s.inString:
		switch {
		case s.escaped:
			s.escaped = false
		case c == '\\':
			s.escaped = true
		case c == '"':
			s.inString = false
		}
		return false
	case c == '"':
		s.inString = true
		return false
	}
	return true
}

// isSpace reports whether c is JSON's insignificant whitespace.
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// JSONCompactor removes insignificant whitespace from JSON text that may
// arrive in pieces (a streamed tool input): it carries whether the
// previous piece ended inside a string. Its zero value is at the start of
// the text.
type JSONCompactor struct {
	scan JSONScan
}

// Append appends piece to dst without the whitespace outside strings and
// reports whether it left any out.
func (c *JSONCompactor) Append(dst []byte, piece string) ([]byte, bool) {
	start := 0
	for i := 0; i < len(piece); i++ {
		if ch := piece[i]; c.scan.Outside(ch) && isSpace(ch) {
			dst = append(dst, piece[start:i]...)
			start = i + 1
		}
	}
	return append(dst, piece[start:]...), start > 0
}

// Compact is Append for a caller that can use piece itself when it holds
// no whitespace to leave out: only then, it reports false and appends
// nothing. Otherwise it appends piece without that whitespace to dst and
// reports true.
func (c *JSONCompactor) Compact(dst []byte, piece string) ([]byte, bool) {
	i := c.firstSpace(piece)
	if i < 0 {
		return dst, false
	}
	dst = slices.Grow(dst, len(piece)-1) // room for all of it at once
	dst, _ = c.Append(append(dst, piece[:i]...), piece[i+1:])
	return dst, true
}

// firstSpace follows s up to its first whitespace outside strings and
// returns its index, or follows all of s and returns -1.
func (c *JSONCompactor) firstSpace(s string) int {
	for i := 0; i < len(s); i++ {
		if ch := s[i]; c.scan.Outside(ch) && isSpace(ch) {
			return i
		}
	}
	return -1
}

// AppendCompactJSON appends raw, which must be valid JSON, to dst without
// insignificant whitespace.
func AppendCompactJSON(dst []byte, raw string) []byte {
	var c JSONCompactor
	dst, _ = c.Append(dst, raw)
	return dst
}

// CompactJSON returns raw, which must be valid JSON, without insignificant
// whitespace. It returns raw itself, without allocating, when there is
// none.
func CompactJSON(raw string) string {
	var c JSONCompactor
	out, changed := c.Compact(nil, raw)
	if !changed {
		return raw
	}
	return string(out)
}

// AppendRawString appends v when it is a JSON string (copying its raw,
// already escaped form) and "" otherwise.
func AppendRawString(dst []byte, v gjson.Result) []byte {
	if v.Type == gjson.String {
		return append(dst, v.Raw...)
	}
	return append(dst, `""`...)
}

// IsBool reports whether v is a JSON boolean.
func IsBool(v gjson.Result) bool { return v.Type == gjson.True || v.Type == gjson.False }

// IsInt reports whether v is a JSON number written as an integer: no
// fraction, no exponent.
func IsInt(v gjson.Result) bool {
	if v.Type != gjson.Number {
		return false
	}
	for _, c := range v.Raw {
		if c == '.' || c == 'e' || c == 'E' {
			return false
		}
	}
	return true
}

// InPlace reads b as a string without copying it, for gjson to parse in
// place: the caller keeps none of the strings gjson hands out beyond its
// use of b, and does not change b meanwhile.
func InPlace(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

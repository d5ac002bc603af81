package providers

import (
	"strconv"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers/jsonw"
)

// AppendString appends s to dst as a JSON string. Invalid UTF-8 becomes
// U+FFFD, so the output is always valid JSON.
func AppendString(dst []byte, s string) []byte { return jsonw.AppendString(dst, s) }

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
// telling the bytes outside strings from those inside (jsonw.Scan).
type JSONScan = jsonw.Scan

// JSONCompactor removes insignificant whitespace from JSON text that may
// arrive in pieces (jsonw.Compactor).
type JSONCompactor = jsonw.Compactor

// AppendCompactJSON appends raw, which must be valid JSON, to dst without
// insignificant whitespace.
func AppendCompactJSON(dst []byte, raw string) []byte { return jsonw.AppendCompact(dst, raw) }

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

const hexDigits = "0123456789abcdef"

// isSpace reports whether c is JSON's insignificant whitespace.
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

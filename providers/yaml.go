package providers

import (
	"strings"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

// AppendYAMLDocument appends an object document (a JSON object whose values
// are all strings) as a YAML mapping, one "key: value" line per field in the
// order the client sent them, which is how rerankers expect structured
// documents. A key or value is written plain when YAML reads it back as the
// same string, and double-quoted otherwise (colons, leading dashes or
// quotes, words YAML 1.1 reads as booleans or null, numbers, newlines,
// control characters), so the text always parses back to the same fields.
// obj must be a JSON object of strings; the caller checks that.
func AppendYAMLDocument(dst []byte, obj gjson.Result) []byte {
	first := true
	obj.ForEach(func(k, v gjson.Result) bool {
		if !first {
			dst = append(dst, '\n')
		}
		first = false
		start := len(dst)
		dst = appendYAMLScalar(dst, k.Str)
		if len(dst)-start > maxSimpleKey {
			// YAML allows implicit keys of up to 1024 characters; a longer
			// one needs the explicit form "? key" / ": value".
			dst = append(dst[:start], '?', ' ')
			dst = appendYAMLScalar(dst, k.Str)
			dst = append(dst, '\n')
		}
		dst = append(dst, ':', ' ')
		dst = appendYAMLScalar(dst, v.Str)
		return true
	})
	return dst
}

// maxSimpleKey is the longest key, in bytes, written as an implicit key; YAML
// allows 1024 characters, and bytes are never fewer than characters.
const maxSimpleKey = 1000

// yamlSpecialWords are plain scalars YAML 1.1 or 1.2 reads as something
// other than a string.
var yamlSpecialWords = map[string]bool{
	"y": true, "n": true, "yes": true, "no": true, "on": true, "off": true,
	"true": true, "false": true, "null": true, "~": true,
}

// yamlPlainSafe reports whether s, written plain, reads back as the string
// s. It is deliberately conservative: anything unusual is quoted.
func yamlPlainSafe(s string) bool {
	if s == "" || s[0] == ' ' || s[len(s)-1] == ' ' || yamlSpecialWords[strings.ToLower(s)] {
		return false
	}
	if c := s[0]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80) {
		return false // digits (numbers, dates), indicators such as - ? : , [ ] { } # & * ! | > ' " % @ `
	}
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			return false
		case r >= 0x80:
			if yamlEscaped(r) {
				return false
			}
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case strings.ContainsRune(" _-.,;()/'+=?!&$%", r):
		default:
			return false // ':' and '#' in context, quotes, brackets, controls, tabs, newlines, …
		}
		i += size
	}
	// A plain scalar like "Yes" is covered above; "1e3"-like strings start
	// with a digit; ".inf" and ".nan" start with '.'.
	return true
}

// yamlEscaped reports whether r, a rune of at least 0x80, must be escaped
// in YAML: C1 controls (0x85, a line break, among them), the BOM, the
// line and paragraph separators, and U+FFFE and U+FFFF, which are outside
// YAML's printable set.
func yamlEscaped(r rune) bool {
	return r < 0xA0 || r == 0xFEFF || r == '\u2028' || r == '\u2029' || r == 0xFFFE || r == 0xFFFF
}

// appendYAMLScalar appends s plain when that is safe, else double-quoted.
func appendYAMLScalar(dst []byte, s string) []byte {
	if yamlPlainSafe(s) {
		return append(dst, s...)
	}
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, `\uFFFD`...)
		case r == '"' || r == '\\':
			dst = append(dst, '\\', byte(r))
		case r == '\n':
			dst = append(dst, '\\', 'n')
		case r == '\t':
			dst = append(dst, '\\', 't')
		case r == '\r':
			dst = append(dst, '\\', 'r')
		case r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xA0:
			dst = append(dst, '\\', 'x', hexDigits[r>>4], hexDigits[r&0xf])
		case r >= 0xA0 && yamlEscaped(r):
			dst = append(dst, '\\', 'u', hexDigits[r>>12&0xf], hexDigits[r>>8&0xf], hexDigits[r>>4&0xf], hexDigits[r&0xf])
		default:
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return append(dst, '"')
}

package jsonw

import (
	"slices"
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

// AppendString appends s to dst as a JSON string. Invalid UTF-8 becomes
// U+FFFD, so the output is always valid JSON.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	dst = appendEscaped(dst, s)
	return append(dst, '"')
}

// appendConcat appends a+b to dst as one JSON string.
func appendConcat(dst []byte, a, b string) []byte {
	dst = append(dst, '"')
	dst = appendEscaped(dst, a)
	dst = appendEscaped(dst, b)
	return append(dst, '"')
}

// appendEscaped appends s as the inside of a JSON string: escaped, without
// the quotes. Invalid UTF-8 becomes U+FFFD.
func appendEscaped(dst []byte, s string) []byte {
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
	return append(dst, s[start:]...)
}

// Scan follows JSON text byte by byte, as it may arrive in pieces,
// telling the bytes outside strings from those inside. Its zero value is
// at the start of the text.
type Scan struct {
	inString, escaped bool
}

// Outside reports whether c, the next byte of the text, stands outside
// every string; a string's quotes count as inside it.
func (s *Scan) Outside(c byte) bool {
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

// Compactor removes insignificant whitespace from JSON text that may
// arrive in pieces (a streamed tool input): it carries whether the
// previous piece ended inside a string. Its zero value is at the start of
// the text.
type Compactor struct {
	scan Scan
}

// Append appends piece to dst without the whitespace outside strings and
// reports whether it left any out.
func (c *Compactor) Append(dst []byte, piece string) ([]byte, bool) {
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
func (c *Compactor) Compact(dst []byte, piece string) ([]byte, bool) {
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
func (c *Compactor) firstSpace(s string) int {
	for i := 0; i < len(s); i++ {
		if ch := s[i]; c.scan.Outside(ch) && isSpace(ch) {
			return i
		}
	}
	return -1
}

// AppendCompact appends raw, which must be valid JSON, to dst without
// insignificant whitespace.
func AppendCompact(dst []byte, raw string) []byte {
	var c Compactor
	dst, _ = c.Append(dst, raw)
	return dst
}

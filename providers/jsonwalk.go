package providers

import (
	"bytes"
	"encoding/binary"
	"iter"
	"math/bits"
	"strings"

	"github.com/tidwall/gjson"
)

// Members and Elements walk the top level of a large JSON object or
// array, such as an embeddings answer of 64 vectors of 1,536 values, in
// one pass: every string is skipped many bytes at a time (SkipString),
// where gjson's ValidBytes, Get and Array read strings byte by byte
// (several times over for nested paths). They check the structure they
// walk — the brackets, commas, colons and keys — and find where each
// value ends, but not what is inside a value: the caller checks the
// values it reads (ValidJSON on the small ones, its own strict parser on
// the large ones). They never panic, whatever the input.

// Members calls fn with each member of obj, exactly one JSON object
// (surrounding whitespace allowed): its key, unescaped, and its value's
// raw bytes, a slice of obj. fn returns false to stop. ok is false when
// obj is not an object.
func Members(obj []byte, fn func(key, value []byte) bool) (ok bool) {
	i, more, ok := open(obj, '{', '}')
	for more && i < len(obj) && obj[i] == '"' {
		key, colon := readKey(obj, i)
		if colon < 0 {
			return false
		}
		start := skipSpace(obj, colon+1)
		end := SkipValue(obj, start)
		if end < 0 {
			return false
		}
		if !fn(key, obj[start:end]) {
			return true
		}
		i, more, ok = next(obj, end, '}')
	}
	return ok && !more
}

// Elements calls fn with the raw bytes of each element of arr, exactly one
// JSON array (surrounding whitespace allowed), slices of arr. fn returns false
// to stop. ok is false when arr is not an array.
func Elements(arr []byte, fn func(value []byte) bool) (ok bool) {
	i, more, ok := open(arr, '[', ']')
	for more {
		end := SkipValue(arr, i)
		if end < 0 {
			return false
		}
		if !fn(arr[i:end]) {
			return true
		}
		i, more, ok = next(arr, end, ']')
	}
	return ok
}

// WalkMembers and WalkElements walk an object or array in one pass, where
// Members and Elements find where each value ends before fn reads it: fn
// reads a value it descends into itself and says how long it was, so
// that the bytes of nested values are passed over once, not once for
// each level above them.

// WalkMembers walks the object that starts at obj[0]. fn gets each
// member's key, unescaped, and the rest of obj from the member's value
// on; it returns the length of the value, which it read, or 0 to have it
// skipped, or -1 to stop the walk. WalkMembers returns the object's
// length, or -1 when obj does not start with a well-formed object (its
// structure, as Members checks it) or fn stopped.
func WalkMembers(obj []byte, fn func(key, rest []byte) int) int {
	i, end := walkOpen(obj, '{', '}')
	for end == 0 && i < len(obj) && obj[i] == '"' {
		key, colon := readKey(obj, i)
		if colon < 0 {
			return -1
		}
		if i = walkValue(obj, skipSpace(obj, colon+1), func(rest []byte) int { return fn(key, rest) }); i < 0 {
			return -1
		}
		i, end = walkNext(obj, i, '}')
	}
	return walked(end)
}

// WalkElements walks the array that starts at arr[0], as WalkMembers
// walks an object: fn gets the rest of arr from each element on.
func WalkElements(arr []byte, fn func(rest []byte) int) int {
	i, end := walkOpen(arr, '[', ']')
	for end == 0 && i < len(arr) {
		if i = walkValue(arr, i, fn); i < 0 {
			return -1
		}
		i, end = walkNext(arr, i, ']')
	}
	return walked(end)
}

// walkOpen reads the opening bracket that must start b: i is where the
// first member or element starts, or, of an empty object or array, end
// its length; end is -1 when b starts with no opening.
func walkOpen(b []byte, opening, closing byte) (i, end int) {
	if len(b) == 0 || b[0] != opening {
		return 0, -1
	}
	if i = skipSpace(b, 1); i < len(b) && b[i] == closing {
		return 0, i + 1
	}
	return i, 0
}

// walkNext reads what follows a member or element, at b[i]: a comma
// (next is where the next one starts) or the closing bracket (end is the
// length of the whole); end is -1 for anything else.
func walkNext(b []byte, i int, closing byte) (next, end int) {
	switch b[i] {
	case ',':
		return skipSpace(b, i+1), 0
	case closing:
		return 0, i + 1
	}
	return 0, -1
}

// walked is the length a walk returns: -1 when it did not reach its
// closing bracket (end 0).
func walked(end int) int {
	if end == 0 {
		return -1
	}
	return end
}

// walkValue has fn read the value at b[i], or skips it, and returns the
// index of the first byte after it and its spaces, or -1 when there is
// no value or nothing after it.
func walkValue(b []byte, i int, fn func(rest []byte) int) int {
	if i >= len(b) {
		return -1
	}
	n := fn(b[i:])
	switch {
	case n == 0:
		if n = SkipValue(b, i); n > 0 && !validScalar(b[i:n]) {
			return -1
		}
	case n > 0:
		n += i
	}
	if n < 0 || n > len(b) {
		return -1
	}
	if n = skipSpace(b, n); n == len(b) {
		return -1
	}
	return n
}

// readKey reads the member's key that starts at obj[i] (a '"'): its value,
// unescaped, and the index of the ':' after it; colon is -1 when there is
// no valid key and colon.
func readKey(obj []byte, i int) (key []byte, colon int) {
	end := keyEnd(obj, i)
	if end < 0 {
		return nil, -1
	}
	key = obj[i+1 : end-1]
	if bytes.IndexByte(key, '\\') >= 0 {
		key = []byte(gjson.ParseBytes(obj[i:end]).Str)
	}
	if colon = skipSpace(obj, end); colon == len(obj) || obj[colon] != ':' {
		return nil, -1
	}
	return key, colon
}

// keyEnd returns the index just past the key that starts at b[i] (a
// '"'), or -1 when it is not a valid JSON string. A key of printable
// ASCII without escapes, nearly every key, is read eight bytes at a time
// and needs no other check.
func keyEnd(b []byte, i int) int {
	for j := i + 1; j <= len(b)-8; {
		x := binary.LittleEndian.Uint64(b[j:])
		m := QuoteOrBackslash(x) | controlOrHigh(x)
		if m == 0 {
			j += 8
			continue
		}
		if j += bits.TrailingZeros64(m) >> 3; b[j] == '"' {
			return j + 1
		}
		break
	}
	end := SkipString(b, i)
	if end < 0 || !validString(b[i:end]) {
		return -1
	}
	return end
}

// controlOrHigh marks, in the high bit of each byte, the bytes of x that
// are below 0x20 (a control character) or from 0x80 on (UTF-8 past
// ASCII) — exactly for the lowest one marked, as QuoteOrBackslash, with
// which it is read.
func controlOrHigh(x uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	return ((x-ones*0x20)&^x | x) & highs
}

// validScalar reports whether v, a value SkipValue found, is well
// formed where a walk can tell at once: a number, true, false or null in
// JSON's grammar, a string, or an object or array (their insides are not
// read). A number glued to a quote ("0\"") is none: read as a literal, it
// would hide the strings after it from the walk, where a parser that
// sees the quote reads them.
func validScalar(v []byte) bool {
	switch v[0] {
	case '"', '{', '[':
		return true
	case 't':
		return string(v) == "true"
	case 'f':
		return string(v) == "false"
	case 'n':
		return string(v) == "null"
	}
	return validNumber(v)
}

// validNumber reports whether v is a JSON number.
func validNumber(v []byte) bool {
	i := 0
	if v[i] == '-' {
		i++
	}
	switch {
	case i == len(v):
		return false
	case v[i] == '0':
		i++
	case v[i] >= '1' && v[i] <= '9':
		i = digitsEnd(v, i)
	default:
		return false
	}
	if i < len(v) && v[i] == '.' {
		if j := digitsEnd(v, i+1); j > i+1 {
			i = j
		} else {
			return false
		}
	}
	if i < len(v) && (v[i] == 'e' || v[i] == 'E') {
		i++
		if i < len(v) && (v[i] == '+' || v[i] == '-') {
			i++
		}
		if j := digitsEnd(v, i); j > i {
			i = j
		} else {
			return false
		}
	}
	return i == len(v)
}

// digitsEnd returns the index past the digits that start at v[i].
func digitsEnd(v []byte, i int) int {
	for i < len(v) && v[i] >= '0' && v[i] <= '9' {
		i++
	}
	return i
}

// open reads the opening bracket of the object or array b must be: more
// says that a member or element starts at i; !more and ok, that b is the
// empty object or array.
func open(b []byte, opening, closing byte) (i int, more, ok bool) {
	i = skipSpace(b, 0)
	if i == len(b) || b[i] != opening {
		return 0, false, false
	}
	if i = skipSpace(b, i+1); i == len(b) {
		return 0, false, false
	}
	if b[i] == closing {
		return 0, false, skipSpace(b, i+1) == len(b)
	}
	return i, true, true
}

// next reads what follows the member or element that ends at end: a comma
// (more: the next one starts at i), or the closing bracket, which must end
// b (!more, ok).
func next(b []byte, end int, closing byte) (i int, more, ok bool) {
	if i = skipSpace(b, end); i == len(b) {
		return 0, false, false
	}
	switch b[i] {
	case ',':
		return skipSpace(b, i+1), true, true
	case closing:
		return 0, false, skipSpace(b, i+1) == len(b)
	}
	return 0, false, false
}

// SkipValue returns the index just past the JSON value that starts at
// b[i], or -1 when there is none: where Members and Elements find a
// value's end (a reader of one shape that must agree with them skips
// what it does not read with it).
func SkipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return SkipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			// Numbers, commas and spaces make up most of a long array
			// of numbers: passed over a table lookup at a time.
			for i < len(b) && !structural[b[i]] {
				i++
			}
			if i == len(b) {
				break
			}
			switch b[i] {
			case '"':
				if i = SkipString(b, i); i < 0 {
					return -1
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return -1
	}
	// A number, true, false or null: up to the next delimiter.
	start := i
	for i < len(b) && !endsLiteral[b[i]] {
		i++
	}
	if i == start {
		return -1
	}
	return i
}

// structural marks the bytes SkipValue stops at inside an array or object,
// and endsLiteral those that end a number, true, false or null.
var (
	structural  = [256]bool{'"': true, '{': true, '}': true, '[': true, ']': true}
	endsLiteral = [256]bool{',': true, '}': true, ']': true, ' ': true, '\t': true, '\n': true, '\r': true}
)

// SkipString returns the index just past the JSON string that starts at
// b[i] (a '"'), or -1 when it does not end.
//
// Its first 32 bytes are read eight at a time, escapes and all: keys, roles,
// types and ids end within them, and for those bytes.IndexByte's call
// costs more than the bytes. A longer string's rest is searched for its
// quotes with bytes.IndexByte, many bytes at a time.
func SkipString(b []byte, i int) int {
	j := i + 1
	for head := j + 32; j <= len(b)-8 && j < head; {
		m := QuoteOrBackslash(binary.LittleEndian.Uint64(b[j:]))
		if m == 0 {
			j += 8
			continue
		}
		j += bits.TrailingZeros64(m) >> 3
		if b[j] == '"' {
			return j + 1
		}
		j += 2 // the backslash and the byte it escapes
	}
	// Every escape before j was read: the search counts only the
	// backslashes from j on.
	start := j - 1
	for j < len(b) {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return -1
		}
		q := j + k
		// The quote ends the string unless an odd number of backslashes
		// escapes it.
		n := 0
		for p := q - 1; p > start && b[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return q + 1
		}
		j = q + 1
	}
	return -1
}

// QuoteOrBackslash marks, in the high bit of each byte, the bytes of x
// that are '"' or '\\' — exactly for the lowest one marked, which is all
// SkipString reads (the borrow of a marked byte may mark a byte above it).
func QuoteOrBackslash(x uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	q, s := x^(ones*'"'), x^(ones*'\\')
	return ((q-ones)&^q | (s-ones)&^s) & highs
}

// validString reports whether s, a short quoted string such as a key
// whose end SkipString found, is a valid JSON string. Printable ASCII
// without escapes, nearly every key, is; anything else is for gjson's
// validator to say.
func validString(s []byte) bool {
	for _, c := range s[1 : len(s)-1] {
		if c < 0x20 || c == '\\' || c >= 0x80 {
			return gjson.ValidBytes(s)
		}
	}
	return true
}

// Fields gives the members of a small JSON object from outside, such as
// an answer's usage: each member's key (unescaped) and raw value, in
// order, as gjson's ForEach does on a valid object, for a fraction of
// what ForEach costs (it parses every number into a float64). Unlike
// Members it checks nothing: of a broken object it gives some members and
// stops, never reading past the end; of a value that is not an object
// (its first byte other than a space is not '{') it gives none.
func Fields(obj string) iter.Seq2[string, string] {
	return func(yield func(key, value string) bool) {
		i := skipSpace(obj, 0)
		if i == len(obj) || obj[i] != '{' {
			return
		}
		for i++; ; {
			key, value, next := nextField(obj, i)
			if next < 0 || !yield(key, value) {
				return
			}
			i = next
		}
	}
}

// nextField reads the member of obj that follows index i (just past the
// '{', or past the member before it): its key, its raw value and where it
// ends; next is -1 when there is none.
func nextField(b string, i int) (key, value string, next int) {
	// To the key's quote: past the '{', or the ',', and spaces.
	for i < len(b) && b[i] != '"' {
		if b[i] == '}' {
			return "", "", -1
		}
		i++
	}
	in := bytesOf(b) // read only
	end := SkipString(in, i)
	if end < 0 {
		return "", "", -1
	}
	key = b[i+1 : end-1]
	if strings.IndexByte(key, '\\') >= 0 {
		key = gjson.Parse(b[i:end]).Str
	}
	i = end
	for i < len(b) && (b[i] == ':' || isSpace(b[i])) {
		i++
	}
	start := i
	if i = SkipValue(in, i); i < 0 {
		return "", "", -1
	}
	return key, b[start:i], i
}

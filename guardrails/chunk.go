package guardrails

import (
	"bytes"
	"encoding/binary"
	"math/bits"

	"github.com/modelgate/modelgate/providers"
)

// chunk is what a chat.completion.chunk of the common shape carries: one
// choice, its index, the content and refusal strings of its delta
// (data[start:end], quotes included) and whether it finished.
type chunk struct {
	choice int
	texts  [2]chunkText
	n      int
	ended  bool
	head   int // where the "choices" key starts: what comes before is plain
}

// chunkText is a string of a chunk's delta.
type chunkText struct {
	kind       textKind
	start, end int
}

// readChunk reads data in one pass when it is a chat chunk of the common
// shape, which every provider's stream sends for each delta: an object
// without spaces between its tokens, whose keys are plain (printable
// ASCII, no escape), each value a string, a literal, or an object or
// array skipped as the walk skips it (a usage), but "choices": an empty
// array (the chunk of the usage at a stream's end), or an array of one
// object whose "index" is a plain integer that comes before its "delta"
// and a string "finish_reason", and whose "delta" is an object of
// strings and literals, "content" and "refusal" at most once, no
// "tool_calls". It reports false for anything else, which the walk of
// every shape reads (chat); for what it reads, it finds what the walk
// finds. FuzzChunk holds the two to the same.
//
// known is the head of a chunk read before (data[:c.head]), or nil: the
// chunks of a stream most often begin alike (the same id, model and
// creation time), and a head already read is not read again.
func readChunk(data []byte, c *chunk, known []byte) bool {
	if len(data) < 2 || data[0] != '{' {
		return false
	}
	i := 1
	if len(known) > 0 && bytes.HasPrefix(data, known) {
		i = len(known)
	}
	choices := false
	for {
		key, j, ok := plainKey(data, i)
		if !ok {
			return false
		}
		if string(key) == "choices" {
			if choices {
				return false
			}
			choices, c.head = true, i
			j = readChoices(data, j, c)
		} else if j < len(data) && (data[j] == '{' || data[j] == '[') {
			j = providers.SkipValue(data, j)
		} else {
			j = skipPlain(data, j)
		}
		if j < 0 || j >= len(data) {
			return false
		}
		switch data[j] {
		case ',':
			i = j + 1
		case '}':
			return choices && j+1 == len(data)
		default:
			return false
		}
	}
}

// chunkShape is a chat chunk of one string read before, cut around that
// string: the bytes before it and after it. The chunks of a stream most
// often differ from the one before only in their text.
type chunkShape struct {
	c         chunk
	pre, post []byte
}

// read reads data as a chunk of the shape, when it is the bytes before
// the shape's string, one JSON string and the bytes after: readChunk
// would read it as it read the shape's chunk (it skips a string whole,
// whatever it holds), its one text at another place.
func (sh *chunkShape) read(data []byte, c *chunk) bool {
	n := len(sh.pre)
	if n == 0 || len(data) < n+2+len(sh.post) || data[n] != '"' ||
		!bytes.HasPrefix(data, sh.pre) || !bytes.HasSuffix(data, sh.post) ||
		providers.SkipString(data, n) != len(data)-len(sh.post) {
		return false
	}
	*c = sh.c
	c.texts[0].start, c.texts[0].end = n, len(data)-len(sh.post)
	return true
}

// learn makes the shape that of data, read by readChunk as c, when c
// has one text; none otherwise.
func (sh *chunkShape) learn(data []byte, c *chunk) {
	if c.n != 1 {
		sh.pre = sh.pre[:0]
		return
	}
	t := c.texts[0]
	if !bytes.Equal(sh.pre, data[:t.start]) {
		sh.pre = append(sh.pre[:0], data[:t.start]...)
	}
	if !bytes.Equal(sh.post, data[t.end:]) {
		sh.post = append(sh.post[:0], data[t.end:]...)
	}
	sh.c = *c
}

// readChoices reads an array of one choice, or none, at data[i] and
// returns where it ends, or -1.
func readChoices(data []byte, i int, c *chunk) int {
	if i+1 < len(data) && data[i] == '[' && data[i+1] == ']' {
		return i + 2
	}
	if i+1 >= len(data) || data[i] != '[' || data[i+1] != '{' {
		return -1
	}
	index, delta := false, false
	for i += 2; ; {
		key, j, ok := plainKey(data, i)
		if !ok {
			return -1
		}
		switch string(key) {
		case "index":
			if index {
				j = skipPlain(data, j)
				break
			}
			index = true
			if c.choice, j = plainInt(data, j); j < 0 {
				return -1
			}
		case "delta":
			if !index || delta {
				return -1
			}
			delta = true
			j = readDelta(data, j, c)
		case "finish_reason":
			if j < len(data) && data[j] == '"' {
				if !index {
					return -1
				}
				c.ended = true
			}
			j = skipPlain(data, j)
		default:
			j = skipPlain(data, j)
		}
		if j < 0 || j >= len(data) {
			return -1
		}
		switch data[j] {
		case ',':
			i = j + 1
		case '}':
			if j+1 < len(data) && data[j+1] == ']' {
				return j + 2
			}
			return -1
		default:
			return -1
		}
	}
}

// readDelta reads a choice's delta at data[i] and returns where it ends,
// or -1.
func readDelta(data []byte, i int, c *chunk) int {
	if i+1 >= len(data) || data[i] != '{' {
		return -1
	}
	if data[i+1] == '}' {
		return i + 2
	}
	for i++; ; {
		key, j, ok := plainKey(data, i)
		if !ok {
			return -1
		}
		var kind textKind
		switch string(key) {
		case "content":
			kind = kindContent
		case "refusal":
			kind = kindRefusal
		case "tool_calls":
			return -1
		default:
			kind = kindArguments // none: skipped
		}
		start := j
		if j = skipPlain(data, j); j < 0 {
			return -1
		}
		if kind != kindArguments && data[start] == '"' {
			for _, t := range c.texts[:c.n] {
				if t.kind == kind {
					return -1
				}
			}
			c.texts[c.n] = chunkText{kind: kind, start: start, end: j}
			c.n++
		}
		if j >= len(data) {
			return -1
		}
		switch data[j] {
		case ',':
			i = j + 1
		case '}':
			return j + 1
		default:
			return -1
		}
	}
}

// plainKey reads the plain key at data[i] and its colon: the key, and
// where its value starts.
func plainKey(data []byte, i int) ([]byte, int, bool) {
	if i >= len(data) || data[i] != '"' {
		return nil, 0, false
	}
	j := i + 1
	// Eight bytes at a time to the first that is not plain (the quote that
	// ends the key, when it is plain), then one at a time.
	for ; j <= len(data)-8; j += 8 {
		if m := notPlain(binary.LittleEndian.Uint64(data[j:])); m != 0 {
			j += bits.TrailingZeros64(m) >> 3
			break
		}
	}
	for ; j < len(data); j++ {
		switch c := data[j]; {
		case c == '"':
			if j+1 < len(data) && data[j+1] == ':' {
				return data[i+1 : j], j + 2, true
			}
			return nil, 0, false
		case c < 0x20 || c > 0x7e || c == '\\':
			return nil, 0, false
		}
	}
	return nil, 0, false
}

// notPlain marks, in the high bit of each byte, the bytes of x that a
// plain key has not: a quote or a backslash (providers.QuoteOrBackslash),
// a control byte, one above 0x7e — exactly for the lowest one marked (the
// borrow of a marked byte may mark a byte above it).
func notPlain(x uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	control := (x - ones*0x20) &^ x
	high := x | (x&^highs + ones) // 0x7f and above
	return providers.QuoteOrBackslash(x) | (control|high)&highs
}

// skipPlain returns the end of the string or literal (a number, true,
// false, null: up to the next delimiter, as the walk reads it, without a
// quote or an opening bracket) at data[i], or -1 for anything else.
func skipPlain(data []byte, i int) int {
	if i >= len(data) {
		return -1
	}
	switch data[i] {
	case '"':
		return providers.SkipString(data, i)
	case '{', '[':
		return -1
	}
	j := i
	for j < len(data) && !literalEnds[data[j]] {
		if data[j] == '"' || data[j] == '{' || data[j] == '[' {
			// What the walk, skipping the array or object around the
			// literal, reads as the start of a string, object or array.
			return -1
		}
		j++
	}
	if j == i {
		return -1
	}
	return j
}

// literalEnds are the bytes that end a literal.
var literalEnds = [256]bool{',': true, '}': true, ']': true, ' ': true, '\t': true, '\n': true, '\r': true}

// plainInt reads the plain integer (at most nine digits) at data[i]: its
// value and end, or -1.
func plainInt(data []byte, i int) (int, int) {
	n, j := 0, i
	for j < len(data) && j-i < 10 && isDigit(data[j]) {
		n = n*10 + int(data[j]-'0')
		j++
	}
	if j == i || j-i > 9 || j < len(data) && !literalEnds[data[j]] {
		return 0, -1
	}
	return n, j
}

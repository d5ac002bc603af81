package respcache

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
)

// A Key names one cached answer: the SHA-256 of everything that shapes
// it. Two requests have one key exactly when they are the same request of
// the same account to the same API and route, up to the layout of their
// JSON (key order, whitespace, string escapes) and the members that only
// shape the transport.
type Key [sha256.Size]byte

// String is the key in hex, as storage names it.
func (k Key) String() string { return hex.EncodeToString(k[:]) }

// Request is what a key is computed from.
type Request struct {
	// Account is who the answer belongs to: the owner of the calling key.
	// Answers are never shared across accounts.
	Account string

	// API is the API the request was made to.
	API API

	// Model is the route the request resolved to, as the host names it
	// (the "<provider>/<model>" of the first target it goes to): a config
	// change that routes the same model name elsewhere misses.
	Model string

	// Body is the client's request body, a JSON object.
	Body []byte

	// Header holds the client's headers. Only those the API passes to the
	// provider count: anthropic-version and anthropic-beta for Messages
	// (beta flags in any order, any number of headers).
	Header http.Header
}

// keyVersion starts every key's input: a change of what a key holds or
// of the canonical form changes it, so old entries miss instead of being
// read wrongly.
const keyVersion = "modelgate respcache key v1"

// ErrNotCacheable is returned by KeyOf for a request whose answer is not
// kept: a Responses request run in the background (its answer is a
// queued response, not the answer).
var ErrNotCacheable = errors.New("respcache: the request's answer is not cacheable")

// transportOnly lists, per API, the top-level members of a request body
// that do not shape the answer, and are left out of its key:
//
//   - stream and stream_options choose how the answer travels; a
//     streamed request and a plain one share their answer.
//   - chat: user, safety_identifier, metadata and store identify the end
//     user or ask the provider to keep the exchange; prompt_cache_key and
//     prompt_cache_retention steer the provider's prompt cache. None is
//     echoed in a chat completion.
//   - embeddings: user.
//   - messages: metadata (its user_id).
//
// A Response echoes every request member (user, metadata, store,
// prompt_cache_key, …), so Responses requests keep all but stream and
// stream_options. Everything else (the model, messages, tools, sampling
// parameters, n, service_tier, …) is in the key.
var transportOnly = map[API][]string{
	Chat: {"stream", "stream_options", "user", "safety_identifier", "metadata", "store",
		"prompt_cache_key", "prompt_cache_retention"},
	Embeddings: {"user"},
	Rerank:     nil,
	Responses:  {"stream", "stream_options"},
	Messages:   {"stream", "metadata"},
}

// keyHeaders are, per API, the client headers the gateway passes to the
// provider, which therefore shape the answer.
var keyHeaders = map[API][]string{
	Messages: {"Anthropic-Beta", "Anthropic-Version"},
}

// KeyOf computes the key of r. It fails on a body that is not a JSON
// object (the host has checked it before; a failure is then a bypass) and
// with ErrNotCacheable for a request whose answer is not kept.
func KeyOf(r Request) (Key, error) {
	if err := r.API.check(); err != nil {
		return Key{}, err
	}
	c := canonPool.Get().(*canon)
	defer canonPool.Put(c)
	c.reset()
	c.skip = transportOnly[r.API]
	if err := c.document(r.Body); err != nil {
		return Key{}, err
	}
	if r.API == Responses && c.background {
		return Key{}, ErrNotCacheable
	}

	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	field := func(s string) {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(s)))])
		h.Write([]byte(s))
	}
	field(keyVersion)
	field(r.Account)
	field(string(r.API))
	field(r.Model)
	for _, name := range keyHeaders[r.API] {
		field(name)
		field(headerValue(name, r.Header.Values(name)))
	}
	h.Write(c.out)
	var k Key
	h.Sum(k[:0])
	return k, nil
}

// headerValue is the canonical value of the header name given values:
// the comma-separated values of every line joined, trimmed, and for
// anthropic-beta (a set of flags) sorted and without repeats.
func headerValue(name string, values []string) string {
	var parts []string
	for _, v := range values {
		for p := range strings.SplitSeq(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				parts = append(parts, p)
			}
		}
	}
	if name == "Anthropic-Beta" {
		slices.Sort(parts)
		parts = slices.Compact(parts)
	}
	return strings.Join(parts, ",")
}

var canonPool = sync.Pool{New: func() any { return new(canon) }}

// errInvalid is the error of a body that is not valid JSON, or nests
// deeper than maxDepth.
var errInvalid = errors.New("respcache: the request body is not a valid JSON object")

// maxDepth bounds how deeply a body's arrays and objects nest (the host's
// validation allows as much).
const maxDepth = 1000

// canon writes the canonical form of a JSON document: no insignificant
// whitespace; every object's members sorted by key (bytewise on the
// canonical key; members of one key keep their order, so that duplicates
// in another order are another request); every string in one escaping;
// numbers and literals as written. The form is a function of the
// document's value and, for strings, injective: two documents that differ
// in meaning never share it.
type canon struct {
	out     []byte
	members []member // of the objects being written, innermost last
	scratch []byte   // for reordering an object's members

	skip       []string // top-level members left out
	background bool     // the top level has "background": true
}

// member is an object member written into out: its key (the canonical
// string, without quotes) at out[key:keyEnd] and the whole member,
// key, colon and value, at out[start:end].
type member struct {
	start, key, keyEnd, end int
}

func (c *canon) reset() {
	c.out = c.out[:0]
	c.members = c.members[:0]
	c.skip = nil
	c.background = false
}

// document writes the canonical form of b, which must be one JSON object.
func (c *canon) document(b []byte) error {
	i := skipSpace(b, 0)
	if i == len(b) || b[i] != '{' {
		return errInvalid
	}
	i, err := c.object(b, i, 1)
	if err != nil {
		return err
	}
	if skipSpace(b, i) != len(b) {
		return errInvalid
	}
	return nil
}

// value writes the value that starts at b[i] (no space before it) and
// returns the index past it.
func (c *canon) value(b []byte, i, depth int) (int, error) {
	if i >= len(b) {
		return 0, errInvalid
	}
	switch b[i] {
	case '{':
		return c.object(b, i, depth+1)
	case '[':
		return c.array(b, i, depth+1)
	case '"':
		return c.str(b, i)
	case 't':
		return c.literal(b, i, "true")
	case 'f':
		return c.literal(b, i, "false")
	case 'n':
		return c.literal(b, i, "null")
	}
	return c.number(b, i)
}

func (c *canon) literal(b []byte, i int, lit string) (int, error) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return 0, errInvalid
	}
	c.out = append(c.out, lit...)
	return i + len(lit), nil
}

// number copies a JSON number as written, after checking its grammar.
func (c *canon) number(b []byte, i int) (int, error) {
	start := i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digits(b, i)
	default:
		return 0, errInvalid
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			return 0, errInvalid
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return 0, errInvalid
		}
		i = j
	}
	c.out = append(c.out, b[start:i]...)
	return i, nil
}

func digits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

func (c *canon) array(b []byte, i, depth int) (int, error) {
	if depth > maxDepth {
		return 0, errInvalid
	}
	c.out = append(c.out, '[')
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		c.out = append(c.out, ']')
		return i + 1, nil
	}
	for {
		var err error
		if i, err = c.value(b, i, depth); err != nil {
			return 0, err
		}
		i = skipSpace(b, i)
		if i == len(b) {
			return 0, errInvalid
		}
		switch b[i] {
		case ',':
			c.out = append(c.out, ',')
			i = skipSpace(b, i+1)
		case ']':
			c.out = append(c.out, ']')
			return i + 1, nil
		default:
			return 0, errInvalid
		}
	}
}

func (c *canon) object(b []byte, i, depth int) (int, error) {
	if depth > maxDepth {
		return 0, errInvalid
	}
	top := depth == 1
	open := len(c.out)
	c.out = append(c.out, '{')
	base := len(c.members)
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		c.out = append(c.out, '}')
		return i + 1, nil
	}
	for {
		if i == len(b) || b[i] != '"' {
			return 0, errInvalid
		}
		before := len(c.out)
		if len(c.members) > base {
			c.out = append(c.out, ',')
		}
		m := member{start: len(c.out)}
		m.key = m.start + 1
		var err error
		if i, err = c.str(b, i); err != nil {
			return 0, err
		}
		m.keyEnd = len(c.out) - 1
		i = skipSpace(b, i)
		if i == len(b) || b[i] != ':' {
			return 0, errInvalid
		}
		c.out = append(c.out, ':')
		valueAt := len(c.out)
		if i, err = c.value(b, skipSpace(b, i+1), depth); err != nil {
			return 0, err
		}
		m.end = len(c.out)
		keep := true
		if top {
			key := string(c.out[m.key:m.keyEnd])
			keep = !slices.Contains(c.skip, key)
			if key == "background" && string(c.out[valueAt:m.end]) == "true" {
				c.background = true
			}
		}
		if keep {
			c.members = append(c.members, m)
		} else {
			c.out = c.out[:before]
		}
		i = skipSpace(b, i)
		if i == len(b) {
			return 0, errInvalid
		}
		if b[i] == '}' {
			i++
			break
		}
		if b[i] != ',' {
			return 0, errInvalid
		}
		i = skipSpace(b, i+1)
	}
	c.finishObject(open, base)
	return i, nil
}

// finishObject closes the object that starts at out[open], its members
// (c.members[base:]) written in the order they came, comma-separated:
// when they are not in order already, it writes them again in order.
func (c *canon) finishObject(open, base int) {
	ms := c.members[base:]
	c.members = c.members[:base]
	key := func(m member) []byte { return c.out[m.key:m.keyEnd] }
	cmp := func(a, b member) int { return compareBytes(key(a), key(b)) }
	if !slices.IsSortedFunc(ms, cmp) {
		slices.SortStableFunc(ms, cmp)
		from := open + 1
		c.scratch = append(c.scratch[:0], c.out[from:]...)
		c.out = c.out[:from]
		for j, m := range ms {
			if j > 0 {
				c.out = append(c.out, ',')
			}
			c.out = append(c.out, c.scratch[m.start-from:m.end-from]...)
		}
	}
	c.out = append(c.out, '}')
}

func compareBytes(a, b []byte) int { return bytes.Compare(a, b) }

// str writes the canonical form of the JSON string at b[i]: between
// quotes, every byte as it is but '"' and '\' (escaped so) and the
// control characters (\b \f \n \r \t, else \u00xx); escapes of the input
// are decoded first, \u escapes of surrogate pairs into UTF-8. A lone
// surrogate stays the escape \udxxx, which no decoded text writes (a
// backslash is written \\), so the form stays injective; invalid UTF-8 is
// kept as the bytes it is.
func (c *canon) str(b []byte, i int) (int, error) {
	c.out = append(c.out, '"')
	i++
	for {
		// Copy the run of bytes that need nothing.
		j := i
		for j+8 <= len(b) && !special(binary.LittleEndian.Uint64(b[j:])) {
			j += 8
		}
		for j < len(b) && b[j] != '"' && b[j] != '\\' && b[j] >= 0x20 {
			j++
		}
		c.out = append(c.out, b[i:j]...)
		if j == len(b) || b[j] < 0x20 {
			return 0, errInvalid
		}
		if b[j] == '"' {
			c.out = append(c.out, '"')
			return j + 1, nil
		}
		// An escape.
		if j+1 == len(b) {
			return 0, errInvalid
		}
		i = j + 2
		switch e := b[j+1]; e {
		case '"':
			c.out = append(c.out, '\\', '"')
		case '\\':
			c.out = append(c.out, '\\', '\\')
		case '/':
			c.out = append(c.out, '/')
		case 'b', 'f', 'n', 'r', 't':
			c.out = append(c.out, '\\', e)
		case 'u':
			r, ok := hex4(b, i)
			if !ok {
				return 0, errInvalid
			}
			i += 4
			if r >= 0xD800 && r < 0xDC00 && i+6 <= len(b) && b[i] == '\\' && b[i+1] == 'u' {
				if lo, ok := hex4(b, i+2); ok && lo >= 0xDC00 && lo < 0xE000 {
					i += 6
					c.out = appendRune(c.out, 0x10000+(r-0xD800)<<10+(lo-0xDC00))
					continue
				}
			}
			c.out = appendCodePoint(c.out, r)
		default:
			return 0, errInvalid
		}
	}
}

// special reports whether one of the eight bytes of x is a quote, a
// backslash or a control character: what ends a run of bytes a string
// copies as they are. (The classic test for a zero byte, applied to x
// xor each byte sought, and to x less 0x20 in each byte for the controls;
// a borrow can only mark a byte above one that is marked rightly.)
func special(x uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	zero := func(v uint64) uint64 { return (v - ones) & ^v & highs }
	return zero(x^(ones*'"'))|zero(x^(ones*'\\'))|((x-ones*0x20)&^x&highs) != 0
}

// appendCodePoint writes the code point of a \u escape: a control
// character as its escape, a lone surrogate as \udxxx, '"' and '\'
// escaped, anything else in UTF-8.
func appendCodePoint(dst []byte, r rune) []byte {
	switch {
	case r == '"':
		return append(dst, '\\', '"')
	case r == '\\':
		return append(dst, '\\', '\\')
	case r < 0x20:
		switch r {
		case '\b':
			return append(dst, '\\', 'b')
		case '\f':
			return append(dst, '\\', 'f')
		case '\n':
			return append(dst, '\\', 'n')
		case '\r':
			return append(dst, '\\', 'r')
		case '\t':
			return append(dst, '\\', 't')
		}
		return append(dst, '\\', 'u', '0', '0', hexDigit[r>>4], hexDigit[r&0xF])
	case r >= 0xD800 && r < 0xE000:
		return append(dst, '\\', 'u', hexDigit[r>>12], hexDigit[r>>8&0xF], hexDigit[r>>4&0xF], hexDigit[r&0xF])
	}
	return appendRune(dst, r)
}

func appendRune(dst []byte, r rune) []byte {
	switch {
	case r < 0x80:
		return append(dst, byte(r))
	case r < 0x800:
		return append(dst, 0xC0|byte(r>>6), 0x80|byte(r)&0x3F)
	case r < 0x10000:
		return append(dst, 0xE0|byte(r>>12), 0x80|byte(r>>6)&0x3F, 0x80|byte(r)&0x3F)
	}
	return append(dst, 0xF0|byte(r>>18), 0x80|byte(r>>12)&0x3F, 0x80|byte(r>>6)&0x3F, 0x80|byte(r)&0x3F)
}

const hexDigit = "0123456789abcdef"

// hex4 reads four hex digits at b[i].
func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, d := range b[i : i+4] {
		r <<= 4
		switch {
		case d >= '0' && d <= '9':
			r |= rune(d - '0')
		case d >= 'a' && d <= 'f':
			r |= rune(d-'a') + 10
		case d >= 'A' && d <= 'F':
			r |= rune(d-'A') + 10
		default:
			return 0, false
		}
	}
	return r, true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

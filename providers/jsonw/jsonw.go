// Package jsonw writes JSON into a caller's byte slice, keeping the
// grammar in the writer rather than in its caller: an object's members are
// written with their keys and an array's elements without, through
// distinct handle types, so a key in an array or a value without a key in
// an object does not compile; commas and colons are the writer's; and a
// container closed out of order, a handle used while a container inside it
// is still open, or a container left open at the end is caught by a cheap
// check (a depth and a bit per level) and reported by Finish.
//
// The writer appends to the slice it was given and allocates nothing of
// its own (but for containers nested more than 64 levels deep), so a
// caller that reuses its buffer writes without allocating. Strings are
// escaped as encoding/json escapes them, and invalid UTF-8 becomes U+FFFD.
//
// Beside the handles: Writer's streaming methods (OpenObject, Key, Str, …)
// serve a writer kept in a struct and written by several methods, with
// the same checks at run time; Mark and Rewind take back a member found
// empty after it was begun; Members and List keep runs of members and
// elements, written once by a Writer, to write again (the head of every
// chunk of a stream, the annotations of a message part); Text carries a
// string either as the JSON literal a body held or as text to escape.
//
// A misuse is a bug in the caller, not in its input: Finish reports the
// first one, and the bytes written are then not to be used.
package jsonw

import (
	"encoding/base64"
	"errors"
	"math"
	"strconv"

	"github.com/tidwall/gjson"
)

// The misuses Finish reports.
var (
	// ErrMisuse is what every misuse error wraps.
	ErrMisuse = errors.New("jsonw: misuse")

	errStale      = misuse("a container was written through while a container inside it was open, or after it was closed")
	errNoKey      = misuse("a value was written in an object without a key")
	errTwoKeys    = misuse("a key was written while another key waited for its value")
	errKeyNoValue = misuse("an object was closed while a key waited for its value")
	errTwoValues  = misuse("a second value was written at the top level")
	errUnclosed   = misuse("a container was left open")
	errNothing    = misuse("nothing was written")
	errNotFinite  = misuse("a number was NaN or infinite, which JSON cannot hold")
	errNotPlain   = misuse("a prefix that needs escaping was given as plain")
	errNotObject  = misuse("the members of a value that is not an object were asked for")
)

type misuseError struct{ msg string }

func misuse(msg string) error               { return &misuseError{msg} }
func (e *misuseError) Error() string        { return "jsonw: " + e.msg }
func (e *misuseError) Is(target error) bool { return target == ErrMisuse }

// Writer writes one JSON value (and what it contains) after the bytes its
// buffer already holds. Its zero value writes into a nil buffer; New
// writes after dst. A Writer is used through a pointer, and the Object and
// Array handles it returns point to it: it must not be copied once used.
type Writer struct {
	buf   []byte
	start int // len(buf) before the value

	// depth is the number of open containers. Bit i of arrays says whether
	// the container at depth i+1 is an array (for the first 64 levels);
	// deep holds the same for deeper levels.
	depth  int32
	arrays uint64
	deep   []bool

	first   bool // the innermost container has no member or element yet
	pending bool // a key was written; its value was not yet
	done    bool // the top-level value was written
	err     error
}

// New returns a Writer that appends to dst.
func New(dst []byte) Writer { return Writer{buf: dst, start: len(dst)} }

// Reset makes w write after dst, as New(dst) would, keeping the storage
// of its deep levels.
func (w *Writer) Reset(dst []byte) {
	deep := w.deep[:0]
	*w = Writer{buf: dst, start: len(dst), deep: deep}
}

// Finish returns the buffer with the value appended, and the first misuse,
// if any: a container left open, nothing written, or one reported while
// writing.
func (w *Writer) Finish() ([]byte, error) {
	switch {
	case w.err != nil:
	case w.depth != 0:
		w.err = errUnclosed
	case !w.done:
		w.err = errNothing
	}
	return w.buf, w.err
}

// Err returns the first misuse so far.
func (w *Writer) Err() error { return w.err }

// Len is the length of the buffer so far: what the caller gave and what w
// appended.
func (w *Writer) Len() int { return len(w.buf) }

// Object opens the top-level value as an object.
func (w *Writer) Object() Object { return w.Value().Object() }

// Array opens the top-level value as an array.
func (w *Writer) Array() Array { return w.Value().Array() }

// Value is the slot of the top-level value.
func (w *Writer) Value() Value { return Value{w: w, d: 0} }

func (w *Writer) fail(err error) {
	if w.err == nil {
		w.err = err
	}
}

// inArray reports whether the container at depth d (> 0) is an array.
func (w *Writer) inArray(d int32) bool {
	if d <= 64 {
		return w.arrays&(1<<(d-1)) != 0
	}
	return w.deep[d-65]
}

// value prepares for a value at depth d: the comma before an array's
// element, the check that an object's value follows its key. It reports
// false after a misuse.
func (w *Writer) value(d int32) bool {
	if d != w.depth {
		w.fail(errStale)
		return false
	}
	switch {
	case d == 0:
		if w.done {
			w.fail(errTwoValues)
			return false
		}
		w.done = true
	case w.inArray(d):
		if !w.first {
			w.buf = append(w.buf, ',')
		}
		w.first = false
	default:
		if !w.pending {
			w.fail(errNoKey)
			return false
		}
		w.pending = false
	}
	return true
}

// key writes k, the key of the next member of the object at depth d, and
// its colon. It reports false after a misuse.
func (w *Writer) key(d int32, k string) bool {
	if d != w.depth {
		w.fail(errStale)
		return false
	}
	if w.pending {
		w.fail(errTwoKeys)
		return false
	}
	w.writeKey(k)
	w.pending = true
	return true
}

// member writes k, the key of the next member of the object at depth d,
// for a value the caller writes at once. It reports false after a misuse.
func (w *Writer) member(d int32, k string) bool {
	if d != w.depth || w.pending {
		if d != w.depth {
			w.fail(errStale)
		} else {
			w.fail(errTwoKeys)
		}
		return false
	}
	w.writeKey(k)
	return true
}

// writeKey writes the comma before a member after the first, k and its
// colon.
func (w *Writer) writeKey(k string) {
	if w.first {
		w.buf = append(w.buf, '"')
	} else {
		w.buf = append(w.buf, ',', '"')
	}
	w.first = false
	if plain(k) {
		w.buf = append(w.buf, k...)
	} else {
		w.buf = appendEscaped(w.buf, k)
	}
	w.buf = append(w.buf, '"', ':')
}

// plain reports whether k needs no escaping as a JSON string: printable
// ASCII but for the quote and the backslash, as nearly every key is. It
// looks at eight bytes at a time.
func plain(k string) bool {
	const (
		ones = 0x0101010101010101
		high = 0x8080808080808080
	)
	i := 0
	for ; i+8 <= len(k); i += 8 {
		x := uint64(k[i]) | uint64(k[i+1])<<8 | uint64(k[i+2])<<16 | uint64(k[i+3])<<24 |
			uint64(k[i+4])<<32 | uint64(k[i+5])<<40 | uint64(k[i+6])<<48 | uint64(k[i+7])<<56
		// A byte below 0x20, equal to '"' or '\\', or from 0x7f up sets its
		// high bit in one of these; only such a byte does.
		bad := (x - 0x20*ones) | (x ^ 0x22*ones - ones) | (x ^ 0x5c*ones - ones) | (x + 0x01*ones) | x
		if bad&high != 0 {
			return plainBytes(k[i:])
		}
	}
	return plainBytes(k[i:])
}

// plainBytes is plain, a byte at a time.
func plainBytes(k string) bool {
	for i := 0; i < len(k); i++ {
		if c := k[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// open writes the opening bracket c of a container at depth d+1.
func (w *Writer) open(d int32, c byte, array bool) int32 {
	if !w.value(d) {
		return -1
	}
	w.buf = append(w.buf, c)
	w.depth++
	switch n := w.depth; {
	case n <= 64:
		if array {
			w.arrays |= 1 << (n - 1)
		} else {
			w.arrays &^= 1 << (n - 1)
		}
	default:
		w.deep = append(w.deep[:n-65], array)
	}
	w.first, w.pending = true, false
	return w.depth
}

// close writes the closing bracket c of the container at depth d.
func (w *Writer) close(d int32, c byte) {
	if d != w.depth || d <= 0 {
		w.fail(errStale)
		return
	}
	if w.pending {
		w.fail(errKeyNoValue)
		return
	}
	w.buf = append(w.buf, c)
	w.depth--
	w.first, w.pending = false, false
}

// Value is the slot of one value: the top-level value, an object's member
// after its key (Object.Key) or an array's next element (Array.Value).
// Exactly one of its methods is called.
type Value struct {
	w *Writer
	d int32
}

// Mark returns a mark of where the writer is, to rewind to.
func (v Value) Mark() Mark { return v.w.mark() }

// Object opens an object.
func (v Value) Object() Object { return Object{w: v.w, d: v.w.open(v.d, '{', false)} }

// Array opens an array.
func (v Value) Array() Array { return Array{w: v.w, d: v.w.open(v.d, '[', true)} }

// Str writes s as a JSON string.
func (v Value) Str(s string) {
	if v.w.value(v.d) {
		v.w.buf = AppendString(v.w.buf, s)
	}
}

// Concat writes a+b as one JSON string, without joining them first.
func (v Value) Concat(a, b string) {
	if v.w.value(v.d) {
		v.w.buf = appendConcat(v.w.buf, a, b)
	}
}

// Text writes t.
func (v Value) Text(t Text) {
	if v.w.value(v.d) {
		v.w.buf = t.append(v.w.buf)
	}
}

// Int writes n.
func (v Value) Int(n int64) {
	if v.w.value(v.d) {
		v.w.buf = strconv.AppendInt(v.w.buf, n, 10)
	}
}

// Float writes f in the shortest form that reads back as the same
// float64 (strconv's 'g' format). NaN and the infinities, which JSON
// cannot hold, are a misuse.
func (v Value) Float(f float64) { v.float(f, 64) }

// Float32 writes f in the shortest form that reads back as the same
// float32.
func (v Value) Float32(f float32) { v.float(float64(f), 32) }

func (v Value) float(f float64, bits int) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		v.w.fail(errNotFinite)
		return
	}
	if v.w.value(v.d) {
		v.w.buf = strconv.AppendFloat(v.w.buf, f, 'g', -1, bits)
	}
}

// Bool writes b.
func (v Value) Bool(b bool) {
	if v.w.value(v.d) {
		v.w.buf = strconv.AppendBool(v.w.buf, b)
	}
}

// Null writes null.
func (v Value) Null() {
	if v.w.value(v.d) {
		v.w.buf = append(v.w.buf, "null"...)
	}
}

// Base64 writes data in standard base64 as a JSON string.
func (v Value) Base64(data []byte) { v.Encoded("", base64.StdEncoding, data) }

// Encoded writes a JSON string of prefix, text that needs no escaping
// (letters, digits and punctuation but the quote and the backslash),
// followed by data in the encoding enc.
func (v Value) Encoded(prefix string, enc *base64.Encoding, data []byte) {
	if !plain(prefix) {
		v.w.fail(errNotPlain)
		return
	}
	if v.w.value(v.d) {
		v.w.buf = append(v.w.buf, '"')
		v.w.buf = append(v.w.buf, prefix...)
		v.w.buf = enc.AppendEncode(v.w.buf, data)
		v.w.buf = append(v.w.buf, '"')
	}
}

// Base64Text writes b64, text in base64 (standard or URL-safe) that the
// caller checked, as a JSON string: its characters need no escaping.
func (v Value) Base64Text(b64 []byte) {
	if v.w.value(v.d) {
		v.w.buf = append(v.w.buf, '"')
		v.w.buf = append(v.w.buf, b64...)
		v.w.buf = append(v.w.buf, '"')
	}
}

// Raw writes raw, a JSON value the caller holds (a gjson Result's Raw
// from a validated body, say), as it is.
func (v Value) Raw(raw string) {
	if v.w.value(v.d) {
		v.w.buf = append(v.w.buf, raw...)
	}
}

// Compact writes raw, a JSON value the caller holds, without its
// insignificant whitespace.
func (v Value) Compact(raw string) {
	if v.w.value(v.d) {
		v.w.buf = AppendCompact(v.w.buf, raw)
	}
}

// Object is an open object: its members are written with their keys, and
// End closes it. Its methods may be called only while no container opened
// inside it is open, and not after End.
type Object struct {
	w *Writer
	d int32
}

// Key writes the key of the next member, and returns the slot of its
// value.
func (o Object) Key(k string) Value {
	o.w.key(o.d, k)
	return Value(o)
}

// KeyText is Key for a key held as a Text: a key as a body wrote it,
// escapes and all.
func (o Object) KeyText(k Text) Value {
	w := o.w
	if o.d != w.depth {
		w.fail(errStale)
	} else if w.pending {
		w.fail(errTwoKeys)
	} else {
		if !w.first {
			w.buf = append(w.buf, ',')
		}
		w.first, w.pending = false, true
		w.buf = append(k.append(w.buf), ':')
	}
	return Value(o)
}

// End closes the object.
func (o Object) End() { o.w.close(o.d, '}') }

// Object opens an object as the member k.
func (o Object) Object(k string) Object { return o.Key(k).Object() }

// Array opens an array as the member k.
func (o Object) Array(k string) Array { return o.Key(k).Array() }

// Str writes the member k, a JSON string of s.
func (o Object) Str(k, s string) {
	if o.w.member(o.d, k) {
		o.w.buf = AppendString(o.w.buf, s)
	}
}

// StrOrNull writes the member k: a JSON string of s, or null when s is
// empty.
func (o Object) StrOrNull(k, s string) {
	if s == "" {
		o.Null(k)
	} else {
		o.Str(k, s)
	}
}

// Concat writes the member k, a JSON string of a+b.
func (o Object) Concat(k, a, b string) { o.Key(k).Concat(a, b) }

// Text writes the member k, the string t.
func (o Object) Text(k string, t Text) {
	if o.w.member(o.d, k) {
		o.w.buf = t.append(o.w.buf)
	}
}

// Int writes the member k, the number n.
func (o Object) Int(k string, n int64) {
	if o.w.member(o.d, k) {
		o.w.buf = strconv.AppendInt(o.w.buf, n, 10)
	}
}

// Float writes the member k, the number f (see Value.Float).
func (o Object) Float(k string, f float64) { o.Key(k).Float(f) }

// Bool writes the member k, b.
func (o Object) Bool(k string, b bool) { o.Key(k).Bool(b) }

// Null writes the member k, null.
func (o Object) Null(k string) {
	if o.w.member(o.d, k) {
		o.w.buf = append(o.w.buf, "null"...)
	}
}

// Raw writes the member k, raw (see Value.Raw).
func (o Object) Raw(k, raw string) {
	if o.w.member(o.d, k) {
		o.w.buf = append(o.w.buf, raw...)
	}
}

// Compact writes the member k, raw compacted (see Value.Compact).
func (o Object) Compact(k, raw string) { o.Key(k).Compact(raw) }

// Members writes the members m holds, as written by BuildMembers.
func (o Object) Members(m Members) {
	w := o.w
	if o.d != w.depth || w.pending {
		w.fail(errStale)
		return
	}
	if len(m.b) == 0 {
		return
	}
	if !w.first {
		w.buf = append(w.buf, ',')
	}
	w.first = false
	w.buf = append(w.buf, m.b...)
}

// RawMembers writes the members of a JSON object the caller holds: its
// text between the braces (gjson's Raw of the object without them),
// whitespace and all; blank text writes nothing.
func (o Object) RawMembers(inner string) { o.members(inner, false) }

// CompactMembers is RawMembers without the members' insignificant
// whitespace.
func (o Object) CompactMembers(inner string) { o.members(inner, true) }

func (o Object) members(inner string, compact bool) {
	w := o.w
	if o.d != w.depth || w.pending {
		w.fail(errStale)
		return
	}
	if blank(inner) {
		return
	}
	if !w.first {
		w.buf = append(w.buf, ',')
	}
	w.first = false
	if compact {
		w.buf = AppendCompact(w.buf, inner)
	} else {
		w.buf = append(w.buf, inner...)
	}
}

// blank reports whether s is only JSON whitespace.
func blank(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isSpace(s[i]) {
			return false
		}
	}
	return true
}

// Mark returns a mark of where the writer is, to rewind to.
func (o Object) Mark() Mark { return o.w.mark() }

// Array is an open array: its elements are written without keys, and End
// closes it. Its methods may be called only while no container opened
// inside it is open, and not after End.
type Array struct {
	w *Writer
	d int32
}

// Mark returns a mark of where the writer is, to rewind to.
func (a Array) Mark() Mark { return a.w.mark() }

// Value returns the slot of the next element.
func (a Array) Value() Value { return Value(a) }

// End closes the array.
func (a Array) End() { a.w.close(a.d, ']') }

// Object opens an object as the next element.
func (a Array) Object() Object { return a.Value().Object() }

// Array opens an array as the next element.
func (a Array) Array() Array { return a.Value().Array() }

// Str writes the next element, a JSON string of s.
func (a Array) Str(s string) { a.Value().Str(s) }

// Text writes the next element, the string t.
func (a Array) Text(t Text) { a.Value().Text(t) }

// Int writes the next element, the number n.
func (a Array) Int(n int64) {
	if a.w.value(a.d) {
		a.w.buf = strconv.AppendInt(a.w.buf, n, 10)
	}
}

// Float writes the next element, the number f (see Value.Float).
func (a Array) Float(f float64) { a.Value().Float(f) }

// Float32 writes the next element, the number f (see Value.Float32).
func (a Array) Float32(f float32) { a.Value().Float32(f) }

// Bool writes the next element, b.
func (a Array) Bool(b bool) { a.Value().Bool(b) }

// Null writes the next element, null.
func (a Array) Null() { a.Value().Null() }

// Raw writes the next element, raw (see Value.Raw).
func (a Array) Raw(raw string) { a.Value().Raw(raw) }

// Compact writes the next element, raw compacted (see Value.Compact).
func (a Array) Compact(raw string) { a.Value().Compact(raw) }

// Mark is a point in a writer's output to go back to, taking back what
// was written since: a member or an element found to be empty after it
// was begun, say.
type Mark struct {
	w                    *Writer
	len                  int
	depth                int32
	arrays               uint64
	first, pending, done bool
}

func (w *Writer) mark() Mark {
	return Mark{w: w, len: len(w.buf), depth: w.depth, arrays: w.arrays, first: w.first, pending: w.pending, done: w.done}
}

// Rewind takes back what was written since m. The containers open at m
// must still be open: the handles of containers opened since then are
// not to be used again.
func (m Mark) Rewind() {
	w := m.w
	if w.depth < m.depth || len(w.buf) < m.len {
		w.fail(errStale)
		return
	}
	w.buf = w.buf[:m.len]
	w.depth, w.arrays, w.first, w.pending, w.done = m.depth, m.arrays, m.first, m.pending, m.done
}

// Since is how many bytes were written since m.
func (m Mark) Since() int { return len(m.w.buf) - m.len }

// Members is a run of an object's members written once (Writer.Members)
// to be written again in many objects (the fields every chunk of a stream
// starts with) at the cost of a copy.
type Members struct{ b []byte }

// Members returns the members of the object w wrote, for Object.Members
// to write again, with the misuse Finish reports, if any. They are a
// slice of w's buffer.
func (w *Writer) Members() (Members, error) {
	b, err := w.Finish()
	if err != nil {
		return Members{}, err
	}
	if v := b[w.start:]; v[0] == '{' {
		return Members{b: v[1 : len(v)-1]}, nil
	}
	return Members{}, errNotObject
}

// Len is the length of the members' JSON text.
func (m Members) Len() int { return len(m.b) }

// Text is a JSON string for a writer, held either as a JSON string
// literal (quotes and escapes included, as gjson's Raw holds it), which is
// written as it is, or as text, which is escaped; either may follow a
// prefix of text. Writing the literal a request or an answer holds, rather
// than its text escaped again, is cheaper and keeps the escapes as they
// were.
type Text struct {
	prefix, s string
	lit       bool
}

// Lit is the string whose JSON literal is lit, which must be one.
func Lit(lit string) Text { return Text{s: lit, lit: true} }

// Plain is the string s.
func Plain(s string) Text { return Text{s: s} }

// StrOf is v's literal when v is a JSON string, and "" otherwise.
func StrOf(v gjson.Result) Text {
	if v.Type == gjson.String {
		return Text{s: v.Raw, lit: true}
	}
	return Text{s: `""`, lit: true}
}

// Prefixed is t after the text p ("chatcmpl-" before a provider's id),
// written as one string without joining them first. p ends at a
// character boundary.
func (t Text) Prefixed(p string) Text {
	t.prefix = p + t.prefix
	return t
}

// Len is the length of t's text as held: a hint of the room it takes.
func (t Text) Len() int { return len(t.prefix) + len(t.s) }

// Empty reports whether t is the empty string.
func (t Text) Empty() bool { return t.prefix == "" && (t.s == "" || t.lit && t.s == `""`) }

func (t Text) append(dst []byte) []byte {
	switch {
	case t.prefix == "" && t.lit:
		return append(dst, t.s...)
	case t.prefix == "":
		return AppendString(dst, t.s)
	case t.lit:
		dst = append(dst, '"')
		dst = appendEscaped(dst, t.prefix)
		return append(dst, t.s[1:]...)
	default:
		return appendConcat(dst, t.prefix, t.s)
	}
}

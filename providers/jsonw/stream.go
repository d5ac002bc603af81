package jsonw

import "strconv"

// The streaming API writes through the Writer itself rather than through
// handles, for a writer that lives in a struct and is written by several
// methods in turn (a list of contents whose current one stays open across
// calls): storing handles in such a struct would move the Writer to the
// heap. Its calls apply to the innermost open container; the checks the
// handle types make at compile time — a key only in an object, a value in
// an object only after its key, a container closed by its own kind — are
// made at run time instead and reported by Finish.

var (
	errKeyOutside = misuse("a key was written outside an object")
	errWrongClose = misuse("a container was closed as the other kind")
)

// OpenObject opens an object as the next value.
func (w *Writer) OpenObject() { w.open(w.depth, '{', false) }

// OpenArray opens an array as the next value.
func (w *Writer) OpenArray() { w.open(w.depth, '[', true) }

// CloseObject closes the innermost container, which must be an object.
func (w *Writer) CloseObject() {
	if w.depth > 0 && w.inArray(w.depth) {
		w.fail(errWrongClose)
		return
	}
	w.close(w.depth, '}')
}

// CloseArray closes the innermost container, which must be an array.
func (w *Writer) CloseArray() {
	if w.depth > 0 && !w.inArray(w.depth) {
		w.fail(errWrongClose)
		return
	}
	w.close(w.depth, ']')
}

// Key writes the key of the next member of the innermost container, which
// must be an object.
func (w *Writer) Key(k string) {
	if w.depth == 0 || w.inArray(w.depth) {
		w.fail(errKeyOutside)
		return
	}
	w.key(w.depth, k)
}

// Str writes s as the next value.
func (w *Writer) Str(s string) {
	if w.value(w.depth) {
		w.buf = AppendString(w.buf, s)
	}
}

// Text writes t as the next value.
func (w *Writer) Text(t Text) {
	if w.value(w.depth) {
		w.buf = t.append(w.buf)
	}
}

// Int writes n as the next value.
func (w *Writer) Int(n int64) {
	if w.value(w.depth) {
		w.buf = strconv.AppendInt(w.buf, n, 10)
	}
}

// Bool writes b as the next value.
func (w *Writer) Bool(b bool) { Value{w: w, d: w.depth}.Bool(b) }

// Null writes null as the next value.
func (w *Writer) Null() { Value{w: w, d: w.depth}.Null() }

// Raw writes raw, a JSON value the caller holds, as the next value.
func (w *Writer) Raw(raw string) {
	if w.value(w.depth) {
		w.buf = append(w.buf, raw...)
	}
}

// Next is the slot of the next value of the innermost container (after
// Key in an object), for code written against the handle API.
func (w *Writer) Next() Value { return Value{w: w, d: w.depth} }

package jsonw

// A Head and a Tail are runs of a Writer's output, written once and
// written again, whole, by other writers at the cost of a copy: the start
// of a value up to a point inside it (the head of every chunk of a stream,
// up to its delta) and the rest of a value from a point inside it to its
// end (what closes such a chunk). Each keeps the writer's state where it
// stops or starts, so the grammar stays the writer's: a Tail is written
// only where the writer is in the state it was recorded from.

var (
	errNoHead    = misuse("a head was asked for outside an object, or past 64 levels")
	errNoResume  = misuse("a head was resumed by a writer that had written something, or as the other kind")
	errNoTail    = misuse("a tail was asked for before the value was complete, or past 64 levels")
	errTailState = misuse("a tail was written where the writer was not in the state it was recorded from")
)

// state is where a Writer is inside its value.
type state struct {
	depth          int32
	arrays         uint64
	first, pending bool
}

// Head is the start of a value, up to a point inside an object.
type Head struct {
	b  []byte
	st state
}

// Tail is the end of a value, from a point inside it.
type Tail struct {
	b []byte

	from state
	// anyFirst: the tail starts by closing a container, which does not
	// depend on whether the container holds anything.
	anyFirst bool
}

// Head returns what w wrote of its value so far, which must stop inside
// an object, at most 64 levels deep: between its members, or after a key
// (then the head is resumed with ResumeValue). It is a slice of w's
// buffer.
func (w *Writer) Head() (Head, error) {
	switch {
	case w.err != nil:
		return Head{}, w.err
	case w.depth == 0 || w.depth > 64 || w.inArray(w.depth):
		return Head{}, errNoHead
	}
	return Head{b: w.buf[w.start:], st: state{depth: w.depth, arrays: w.arrays, first: w.first, pending: w.pending}}, nil
}

// Resume writes h, which stops between members, as the start of w's
// value, which w must not have begun, and returns the object h stops
// inside.
func (w *Writer) Resume(h Head) Object {
	if !w.resume(h, false) {
		return Object{w: w, d: -1}
	}
	return Object{w: w, d: h.st.depth}
}

// ResumeValue writes h, which stops after a key, as the start of w's
// value, which w must not have begun, and returns the slot of that key's
// value.
func (w *Writer) ResumeValue(h Head) Value {
	if !w.resume(h, true) {
		return Value{w: w, d: -1}
	}
	return Value{w: w, d: h.st.depth}
}

func (w *Writer) resume(h Head, pending bool) bool {
	if w.done || w.depth != 0 || len(h.b) == 0 || h.st.pending != pending {
		w.fail(errNoResume)
		return false
	}
	w.buf = append(w.buf, h.b...)
	w.depth, w.arrays, w.first, w.pending, w.done = h.st.depth, h.st.arrays, h.st.first, pending, true
	return true
}

// TailSince returns what w wrote since m, which must complete w's value,
// taken at most 64 levels deep. It is a slice of w's buffer.
func (w *Writer) TailSince(m Mark) (Tail, error) {
	switch {
	case w.err != nil:
		return Tail{}, w.err
	case m.w != w || w.depth != 0 || !w.done || m.depth == 0 || m.depth > 64 || m.pending || len(w.buf) <= m.len:
		return Tail{}, errNoTail
	}
	b := w.buf[m.len:]
	return Tail{
		b:        b,
		from:     state{depth: m.depth, arrays: m.arrays, first: m.first},
		anyFirst: b[0] == '}' || b[0] == ']',
	}, nil
}

// Close writes t, which completes w's value. w must be in the state t was
// recorded from.
func (w *Writer) Close(t Tail) {
	switch {
	case len(t.b) == 0 || w.depth != t.from.depth || w.pending || w.depth > 64 || w.arrays&depthMask(w.depth) != t.from.arrays&depthMask(w.depth):
		w.fail(errTailState)
		return
	case !t.anyFirst && w.first != t.from.first:
		w.fail(errTailState)
		return
	}
	w.buf = append(w.buf, t.b...)
	w.depth, w.first, w.pending = 0, false, false
}

// depthMask has the bits of the levels 1 to d.
func depthMask(d int32) uint64 {
	if d >= 64 {
		return ^uint64(0)
	}
	return 1<<d - 1
}

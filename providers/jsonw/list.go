package jsonw

import "slices"

// List is a run of array elements kept between calls: elements added one
// at a time as a stream brings them (a message part's annotations, its
// logprobs), each written by a Writer, then written into arrays with
// Array.List as often as needed. Its zero value is empty.
type List struct {
	b []byte
	n int
}

// Begin returns a Writer for the next element; End keeps what it wrote.
func (l *List) Begin() Writer {
	b := l.b
	if l.n > 0 {
		b = append(b, ',')
	}
	return New(b)
}

// End keeps the element w, which Begin returned, wrote, or reports the
// misuse that leaves it out.
func (l *List) End(w *Writer) error {
	b, err := w.Finish()
	if err != nil {
		return err
	}
	l.b = b
	l.n++
	return nil
}

// Grow makes room for n more bytes of elements, so that adding them
// takes at most one allocation.
func (l *List) Grow(n int) { l.b = slices.Grow(l.b, n+1) }

// Extend adds the elements of m.
func (l *List) Extend(m *List) {
	if m.n == 0 {
		return
	}
	if l.n > 0 {
		l.b = append(l.b, ',')
	}
	l.b = append(l.b, m.b...)
	l.n += m.n
}

// Size is the length of the elements' JSON text, commas included.
func (l *List) Size() int { return len(l.b) }

// Len is the number of elements.
func (l *List) Len() int { return l.n }

// Reset empties l, keeping its storage.
func (l *List) Reset() { l.b, l.n = l.b[:0], 0 }

// List writes the elements of l.
func (a Array) List(l *List) {
	w := a.w
	if a.d != w.depth {
		w.fail(errStale)
		return
	}
	if l.n == 0 {
		return
	}
	if !w.first {
		w.buf = append(w.buf, ',')
	}
	w.first = false
	w.buf = append(w.buf, l.b...)
}

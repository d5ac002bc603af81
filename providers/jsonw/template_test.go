package jsonw

import (
	"errors"
	"testing"
)

// chunkParts writes the head and the tail of a chunk-like object.
func chunkParts(t *testing.T) (Head, Tail) {
	t.Helper()
	w := New(make([]byte, 0, 256))
	o := w.Object()
	o.Str("id", "c")
	choices := o.Array("choices")
	choice := choices.Object()
	choice.Int("index", 0)
	d := choice.Object("delta")
	head, err := w.Head()
	if err != nil {
		t.Fatal(err)
	}
	m := d.Mark()
	d.End()
	choice.Null("finish_reason")
	choice.End()
	choices.End()
	o.End()
	tail, err := w.TailSince(m)
	if err != nil {
		t.Fatal(err)
	}
	return head, tail
}

func TestHeadTail(t *testing.T) {
	head, tail := chunkParts(t)
	for _, tc := range []struct {
		write func(d Object)
		want  string
	}{
		{func(d Object) { d.Str("content", "hi") }, `{"id":"c","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}`},
		{func(d Object) {}, `{"id":"c","choices":[{"index":0,"delta":{},"finish_reason":null}]}`},
		{func(d Object) {
			a := d.Array("tool_calls")
			a.Object().End()
			a.End()
		}, `{"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{}]},"finish_reason":null}]}`},
	} {
		w := New([]byte("data: "))
		d := w.Resume(head)
		tc.write(d)
		w.Close(tail)
		if got := finish(t, &w, len("data: ")); got != "data: "+tc.want {
			t.Errorf("got %s, want %s", got, tc.want)
		}
	}
}

func TestHeadTailMisuse(t *testing.T) {
	head, tail := chunkParts(t)
	for _, tc := range []struct {
		name  string
		write func(w *Writer)
		want  error
	}{
		{"resumed after a value began", func(w *Writer) {
			w.Object()
			w.Resume(head)
		}, errNoResume},
		{"closed with a container open inside", func(w *Writer) {
			d := w.Resume(head)
			d.Array("a")
			w.Close(tail)
		}, errTailState},
		{"closed with a key waiting", func(w *Writer) {
			d := w.Resume(head)
			d.Key("k")
			w.Close(tail)
		}, errTailState},
		{"closed at the wrong depth", func(w *Writer) {
			w.Object()
			w.Close(tail)
		}, errTailState},
		{"the head left open", func(w *Writer) { w.Resume(head) }, errUnclosed},
		{"a head between members resumed as a value", func(w *Writer) { w.ResumeValue(head) }, errNoResume},
	} {
		w := New(nil)
		tc.write(&w)
		if _, err := w.Finish(); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}

	// Heads and tails are taken where the grammar allows.
	w := New(nil)
	a := w.Array()
	if _, err := w.Head(); !errors.Is(err, ErrMisuse) {
		t.Errorf("a head inside an array: %v", err)
	}
	m := a.Mark()
	if _, err := w.TailSince(m); !errors.Is(err, ErrMisuse) {
		t.Errorf("a tail of an incomplete value: %v", err)
	}
	a.End()
	if _, err := w.TailSince(m); err != nil {
		t.Errorf("a tail of an array: %v", err)
	}
}

// TestHeadAtKey checks a head that stops after a key.
func TestHeadAtKey(t *testing.T) {
	w := New(nil)
	o := w.Object()
	d := o.Object("delta")
	v := d.Key("content")
	head, err := w.Head()
	if err != nil {
		t.Fatal(err)
	}
	v.Str("x")
	m := d.Mark()
	d.End()
	o.End()
	tail, err := w.TailSince(m)
	if err != nil {
		t.Fatal(err)
	}
	w = New(nil)
	w.ResumeValue(head).Text(Lit(`"hi"`))
	w.Close(tail)
	if got := finish(t, &w, 0); got != `{"delta":{"content":"hi"}}` {
		t.Errorf("got %s", got)
	}
	w = New(nil)
	w.ResumeValue(head) // no value: the key waits
	w.Close(tail)
	if _, err := w.Finish(); !errors.Is(err, errTailState) {
		t.Errorf("a tail after a key without its value: %v", err)
	}
	w = New(nil)
	w.Resume(head)
	if _, err := w.Finish(); !errors.Is(err, errNoResume) {
		t.Errorf("a head after a key resumed as an object: %v", err)
	}
}

// TestTailFirst checks that a tail that begins with a member is written
// only where the container is as full as where it was recorded.
func TestTailFirst(t *testing.T) {
	w := New(nil)
	o := w.Object()
	m := o.Mark()
	o.Int("n", 1)
	o.End()
	tail, err := w.TailSince(m)
	if err != nil {
		t.Fatal(err)
	}
	w = New(nil)
	o = w.Object()
	o.Int("a", 0)
	w.Close(tail) // recorded in an empty object: the comma would be missing
	if _, err := w.Finish(); !errors.Is(err, errTailState) {
		t.Errorf("got %v", err)
	}
}

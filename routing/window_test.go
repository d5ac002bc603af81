package routing

import (
	"testing"
	"time"
)

func TestWindow(t *testing.T) {
	w := newWindow(int64(10 * time.Second)) // ten buckets of a second
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).UnixNano()
	sec := int64(time.Second)
	w.add(t0, 1, 0)
	w.add(t0+sec/2, 1, 1)
	w.add(t0+3*sec, 2, 1)
	if a, b := w.sum(t0 + 3*sec); a != 4 || b != 2 {
		t.Fatalf("sum %d, %d; want 4, 2", a, b)
	}
	// The first bucket leaves the span after ten steps.
	if a, b := w.sum(t0 + 9*sec); a != 4 || b != 2 {
		t.Fatalf("at +9s: %d, %d; want 4, 2", a, b)
	}
	if a, b := w.sum(t0 + 10*sec); a != 2 || b != 1 {
		t.Fatalf("at +10s: %d, %d; want 2, 1", a, b)
	}
	// A bucket that comes round again starts from zero.
	w.add(t0+10*sec, 1, 0)
	if a, b := w.sum(t0 + 10*sec); a != 3 || b != 1 {
		t.Fatalf("after reuse: %d, %d; want 3, 1", a, b)
	}
	if a, b := w.sum(t0 + 100*sec); a != 0 || b != 0 {
		t.Fatalf("long after: %d, %d", a, b)
	}
	w.reset()
	if a, b := w.sum(t0 + 10*sec); a != 0 || b != 0 {
		t.Fatalf("after reset: %d, %d", a, b)
	}
}

func TestWindowSaturates(t *testing.T) {
	w := newWindow(int64(time.Second))
	w.add(0, countMax-1, 5)
	w.add(0, 10, countMax)
	if a, b := w.sum(0); a != countMax || b != countMax {
		t.Fatalf("sum %d, %d; want both at %d", a, b, countMax)
	}
}

package state

import (
	"testing"
	"time"
)

func TestRetryAfterNextWindow(t *testing.T) {
	w := Window{Size: time.Minute, Sliding: true}
	base := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	// Current window already holds 12 of a limit of 10 (corrections can
	// do that): nothing fits before the next window, where the 12 decay.
	// One more fits when floor(12*(60000-e)/60000) <= 9, i.e.
	// 12*(60000-e)/60000 < 10, from e = 10001.
	at := base.Add(30 * time.Second)
	tk := NewTaken(w, false, 12, 0, 1, 10, at)
	if want := 30*time.Second + 10001*time.Millisecond; tk.RetryAfter != want {
		t.Fatalf("RetryAfter = %v, want %v", tk.RetryAfter, want)
	}
	if tk.Remaining != 0 || tk.Count != 12 || tk.Reset != 90*time.Second {
		t.Fatalf("%+v", tk)
	}
	// A fixed window waits for its end.
	tk = NewTaken(Window{Size: time.Minute}, false, 10, 0, 1, 10, at)
	if tk.RetryAfter != 30*time.Second || tk.Reset != 30*time.Second {
		t.Fatalf("fixed: %+v", tk)
	}
	// Nothing counted: nothing to reset.
	if tk := NewTaken(w, true, 0, 0, 0, 10, at); tk.Reset != 0 || tk.Remaining != 10 {
		t.Fatalf("empty: %+v", tk)
	}
}

func TestWindowSpanBeforeEpoch(t *testing.T) {
	idx, size, el, err := WindowSpan(Window{Size: time.Second}, time.UnixMilli(-1500))
	if err != nil || idx != -2 || size != 1000 || el != 500 {
		t.Fatalf("%d %d %d %v", idx, size, el, err)
	}
}

// Fits and Weighted agree with what a sliding window should count at
// every millisecond of a small window, and firstFit finds the first fit.
func TestFirstFitExhaustive(t *testing.T) {
	const size = 1000
	for prev := int64(0); prev <= 40; prev += 7 {
		for room := int64(0); room <= prev; room += 3 {
			e, ok := firstFit(prev, size, 0, room)
			if !ok {
				t.Fatal("no fit")
			}
			for x := int64(0); x <= size; x++ {
				fits := Weighted(prev, size, x) <= room
				if fits != (x >= e) {
					t.Fatalf("prev %d room %d: at %d fits=%v, firstFit %d", prev, room, x, fits, e)
				}
			}
		}
	}
}

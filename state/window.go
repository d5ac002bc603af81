package state

import (
	"errors"
	"math"
	"time"
)

// The arithmetic of Take, shared by every implementation so that they
// agree to the unit: an implementation reads the current and previous
// window counts atomically, decides with Fits, adds n, and builds the
// answer with NewTaken.

// WindowSpan returns the fixed window of w holding now: its index (window
// i covers [i*size, (i+1)*size) milliseconds since the epoch), its size
// and how far into it now is, all in milliseconds.
func WindowSpan(w Window, now time.Time) (index, size, elapsed int64, err error) {
	size = w.Size.Milliseconds()
	if size < 1 {
		return 0, 0, 0, errors.New("state: window size under a millisecond")
	}
	ms := now.UnixMilli()
	index = floorDiv(ms, size)
	return index, size, ms - index*size, nil
}

// WindowTTL is how long, in milliseconds, the counter of the window
// holding now must be kept: to its end, and through the next window when
// sliding (it is then the previous window), plus a second for clocks of
// instances that differ a little.
func WindowTTL(w Window, size, elapsed int64) int64 {
	ttl := size - elapsed + 1000
	if w.Sliding {
		ttl += size
	}
	return ttl
}

// Weighted is what the previous window's count prev weighs elapsed
// milliseconds into the current window of size milliseconds:
// floor(prev * (size-elapsed) / size), in float64, as Redis's Lua
// computes it.
func Weighted(prev, size, elapsed int64) int64 {
	return int64(math.Floor(float64(prev) * float64(size-elapsed) / float64(size)))
}

// Fits reports whether n may be counted in a window whose current count
// is cur, previous count prev (0 for fixed windows), at elapsed ms.
func Fits(w Window, cur, prev, n, limit, size, elapsed int64) bool {
	if n <= 0 || limit < 0 {
		return true
	}
	count := cur
	if w.Sliding {
		count += Weighted(prev, size, elapsed)
	}
	return count+n <= limit
}

// Grant is what an UpTo take of up to n, at least least, counts in a window
// whose current count is cur and previous count prev (0 for fixed
// windows), at elapsed ms: as much of n as fits under limit (all of it
// when limit < 0), and whether that is at least least.
func Grant(w Window, cur, prev, n, least, limit, size, elapsed int64) (int64, bool) {
	if limit < 0 {
		return n, true
	}
	count := cur
	if w.Sliding {
		count += Weighted(prev, size, elapsed)
	}
	g := max(0, min(n, limit-count))
	return g, g >= least
}

// NewTaken builds Take's answer from the counts after the operation: cur
// includes n when ok.
func NewTaken(w Window, ok bool, cur, prev, n, limit int64, now time.Time) Taken {
	index, size, elapsed, _ := WindowSpan(w, now)
	return newTaken(w, ok, cur, prev, n, limit, index, size, elapsed)
}

// newTaken is NewTaken given the span of now, WindowSpan's answer.
func newTaken(w Window, ok bool, cur, prev, n, limit, index, size, elapsed int64) Taken {
	count := cur
	if w.Sliding {
		count += Weighted(prev, size, elapsed)
	}
	t := Taken{OK: ok, Count: count, Limit: limit, Start: time.UnixMilli(index * size)}
	if limit >= 0 {
		t.Remaining = max(0, limit-count)
	}
	toEnd := time.Duration(size-elapsed) * time.Millisecond
	switch {
	case count <= 0:
	case w.Sliding && cur > 0:
		t.Reset = toEnd + time.Duration(size)*time.Millisecond
	default:
		t.Reset = toEnd
	}
	if !ok {
		t.RetryAfter = retryAfter(w, cur, prev, n, limit, size, elapsed)
	}
	return t
}

// retryAfter finds how long until n fits, nothing else being counted.
func retryAfter(w Window, cur, prev, n, limit, size, elapsed int64) time.Duration {
	room := limit - n // the most the window may count besides n
	if room < 0 {
		return -1
	}
	toEnd := size - elapsed
	if !w.Sliding {
		return time.Duration(toEnd) * time.Millisecond
	}
	// Within the current window only the previous count decays.
	if cur <= room {
		if e, ok := firstFit(prev, size, elapsed, room-cur); ok {
			return time.Duration(e-elapsed) * time.Millisecond
		}
	}
	// In the next window the current count is the one decaying.
	e, _ := firstFit(cur, size, 0, room)
	return time.Duration(toEnd+e) * time.Millisecond
}

// firstFit returns the smallest e in [from, size] with Weighted(prev, size,
// e) <= room (Weighted only falls as e grows, reaching 0 at size).
func firstFit(prev, size, from, room int64) (int64, bool) {
	if room < 0 {
		return 0, false
	}
	if Weighted(prev, size, from) <= room {
		return from, true
	}
	lo, hi := from, size // Weighted(lo) > room, Weighted(hi) = 0 <= room
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if Weighted(prev, size, mid) <= room {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi, true
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

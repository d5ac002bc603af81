package routing

import "sync/atomic"

// window counts two quantities over a sliding span of time, in ten
// buckets: attempts and failures of a target, requests and retries of an
// alias. Each bucket is one atomic word — the bucket's step number and
// both counts — so counting is one compare-and-swap and a bucket that
// comes round again starts from zero in the same swap, without a lock.
// The span counted is the current bucket and the nine before it: between
// nine and ten tenths of the span.
type window struct {
	step    int64 // nanoseconds per bucket
	buckets [windowBuckets]atomic.Uint64
}

const (
	windowBuckets = 10
	countBits     = 20
	countMax      = 1<<countBits - 1 // a bucket's counts saturate there
	stepBits      = 64 - 2*countBits
	stepMask      = 1<<stepBits - 1
)

func newWindow(span int64) *window {
	return &window{step: max(span/windowBuckets, 1)}
}

func packBucket(step, a, b uint64) uint64 {
	return (step&stepMask)<<(2*countBits) | a<<countBits | b
}

// add counts da and db at now.
func (w *window) add(now int64, da, db uint64) {
	if now < 0 {
		return
	}
	step := uint64(now / w.step)
	slot := &w.buckets[step%windowBuckets]
	for {
		old := slot.Load()
		var a, b uint64
		if old>>(2*countBits) == step&stepMask {
			a, b = old>>countBits&countMax, old&countMax
		}
		a, b = min(a+da, countMax), min(b+db, countMax)
		if slot.CompareAndSwap(old, packBucket(step, a, b)) {
			return
		}
	}
}

// sum returns both counts over the span ending at now.
func (w *window) sum(now int64) (a, b uint64) {
	if now < 0 {
		return 0, 0
	}
	step := uint64(now / w.step)
	for i := range uint64(windowBuckets) {
		if i > step {
			break
		}
		s := step - i
		v := w.buckets[s%windowBuckets].Load()
		if v>>(2*countBits) == s&stepMask {
			a += v >> countBits & countMax
			b += v & countMax
		}
	}
	return a, b
}

// reset forgets every count.
func (w *window) reset() {
	for i := range w.buckets {
		w.buckets[i].Store(0)
	}
}

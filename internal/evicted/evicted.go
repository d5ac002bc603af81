// Package evicted measures an operation as a busy server runs it: with
// its code and data out of the core's caches. Between two calls of a
// request's or a stream's code, the kernel's network stack and the other
// requests' work move it out; a benchmark that repeats one call in a
// loop keeps it all in the caches and understates what the call costs
// there, the more so the more distinct code and memory it touches.
package evicted

import (
	"testing"
	"time"
)

// Size is how much Ops writes over before each op: more than the caches
// of one core hold here (a second-level cache of 2 MiB, and a share of
// the third).
const Size = 16 << 20

var buf = make([]byte, Size)

// Ops runs op b.N times, each after writing a byte of every cache line
// of Size bytes, and returns the mean time of op alone, in ns, for
// b.ReportMetric. The benchmark's own ns/op is mostly the writing over.
// An op that does nothing measures the clock's and the call's own code,
// cold: a floor under every result.
// (The timer is not stopped instead: starting it reads the runtime's
// memory statistics, which stops the world, at every op.)
func Ops(b *testing.B, op func()) float64 {
	var in time.Duration
	for b.Loop() {
		for i := 0; i < len(buf); i += 64 {
			buf[i]++
		}
		start := time.Now()
		op()
		in += time.Since(start)
	}
	return float64(in.Nanoseconds()) / float64(b.N)
}

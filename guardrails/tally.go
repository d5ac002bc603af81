package guardrails

import "sync/atomic"

// NumActions is the number of actions, Allow to Error: a Tally's size.
const NumActions = int(Error) + 1

// A Tally counts one guard's decisions by action: what a host's metrics
// read when they are scraped. Each decision points to its guard's tally,
// so counting one is an atomic addition with nothing looked up: in a busy
// server, a call's decisions come when the code and data of a lookup are
// out of the core's caches.
type Tally struct {
	n [NumActions]atomic.Uint64
}

// Count is the number of decisions of action a counted so far.
func (t *Tally) Count(a Action) uint64 {
	if int(a) >= NumActions {
		return 0
	}
	return t.n[a].Load()
}

// Count counts decisions ds, made by the engine's guards, each in its
// guard's tally. The host calls it once for each body's or stream's
// decisions, when it reports them. A decision the engine did not make
// (a literal Decision) is not counted.
func (e *Engine) Count(ds []Decision) {
	for i := range ds {
		if d := &ds[i]; d.tally != nil && int(d.Action) < NumActions {
			d.tally.n[d.Action].Add(1)
		}
	}
}

// Tally returns the tally of the engine's guard i (Engine.Guards).
func (e *Engine) Tally(i int) *Tally { return e.guards[i].tally }

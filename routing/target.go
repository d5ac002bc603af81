package routing

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// State is a circuit breaker's state.
type State uint8

// The states of a breaker, in the order of the breaker state gauge.
const (
	// Closed: the target is in rotation.
	Closed State = iota
	// HalfOpen: trial requests go to the target, a few at a time.
	HalfOpen
	// Open: the target is skipped without an attempt.
	Open
)

var stateNames = [...]string{Closed: "closed", HalfOpen: "half_open", Open: "open"}

// String names the state: closed, half_open or open.
func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "unknown"
}

// MarshalText implements encoding.TextMarshaler.
func (s State) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler, for the readers of
// a Health snapshot.
func (s *State) UnmarshalText(b []byte) error {
	for i, name := range stateNames {
		if string(b) == name {
			*s = State(i)
			return nil
		}
	}
	return fmt.Errorf("unknown breaker state %q", b)
}

// Target is one provider and model an alias routes to. Its health — the
// breaker, cool-down, latency averages — is kept per target, whichever
// aliases list it, and carries over to the Router of the next
// configuration.
type Target struct {
	key, provider, model string
	firstToken, idle     time.Duration
	cost                 float64
	priced               bool

	r    *Router
	h    *health
	solo *Alias // a plan of this target alone (Router.PlanTarget)
}

// Key is "<provider>/<model>".
func (t *Target) Key() string { return t.key }

// Provider is the target's provider name.
func (t *Target) Provider() string { return t.provider }

// Model is the provider's name of the model.
func (t *Target) Model() string { return t.model }

// FirstTokenTimeout is how long a stream to this target may take to send
// its first byte before the host gives up on it and tries the next target
// (reporting TimedOut); 0: no limit.
func (t *Target) FirstTokenTimeout() time.Duration { return t.firstToken }

// IdleTimeout is how long a stream from this target may go silent after
// its first byte before the host cuts it cleanly (and reports Stalled);
// 0: no limit.
func (t *Target) IdleTimeout() time.Duration { return t.idle }

// health is what is known of a target. The request path reads and counts
// with atomics; the breaker's transitions, which are rare, take mu.
type health struct {
	state     atomic.Uint32 // State
	openUntil atomic.Int64  // Unix ns: an open breaker lets trials through from then
	coolUntil atomic.Int64  // Unix ns: the target is out of rotation until then

	// trials is the breaker's generation (high 32 bits) and the trial
	// requests in flight in it (low 32 bits); trialOK the generation and
	// the trials of it that succeeded. Every transition starts a new
	// generation, so that a trial reported after one counts for nothing.
	trials  atomic.Uint64
	trialOK atomic.Uint64
	trialAt atomic.Int64 // Unix ns: the last trial handed out

	consecutive atomic.Int32 // failures in a row
	opens       atomic.Int32 // openings since the last close: doubles OpenFor
	inflight    atomic.Int32 // attempts handed out and not yet reported
	errs        *window      // attempts and failures
	latency     [2]atomic.Uint64

	// Totals since the target was first configured.
	requests, failures, opened, cooldowns atomic.Uint64

	sharedCool atomic.Int64 // the latest cool-down published or received

	mu sync.Mutex
}

// Indexes of health.latency.
const (
	latencyWhole = 0 // whole answers
	latencyFirst = 1 // first bytes of streams
)

func newHealth(window time.Duration) *health {
	return &health{errs: newWindow(int64(window))}
}

// inherit returns prev for the next configuration when its error window
// measures the same span; otherwise a new health with prev's state.
func inherit(prev *health, window time.Duration) *health {
	if prev.errs.step == newWindow(int64(window)).step {
		return prev
	}
	h := newHealth(window)
	prev.mu.Lock()
	defer prev.mu.Unlock()
	h.state.Store(prev.state.Load())
	h.openUntil.Store(prev.openUntil.Load())
	h.coolUntil.Store(prev.coolUntil.Load())
	h.trials.Store(prev.trials.Load() &^ math.MaxUint32)
	h.trialOK.Store(prev.trialOK.Load() &^ math.MaxUint32)
	h.opens.Store(prev.opens.Load())
	for i := range h.latency {
		h.latency[i].Store(prev.latency[i].Load())
	}
	h.requests.Store(prev.requests.Load())
	h.failures.Store(prev.failures.Load())
	h.opened.Store(prev.opened.Load())
	h.cooldowns.Store(prev.cooldowns.Load())
	h.sharedCool.Store(prev.sharedCool.Load())
	return h
}

func gen(word uint64) uint32   { return uint32(word >> 32) }
func count(word uint64) uint32 { return uint32(word) }

// availability is whether a plan may offer a target now.
type availability uint8

const (
	out   availability = iota // skipped: open, or cooling down, or its trials are all taken
	ready                     // in rotation
	trial                     // half-open with a trial free
)

// check says whether t may be offered at now and, when it may not, from
// when it may again (0: unknown). It moves an open breaker whose time has
// come to half-open.
func (t *Target) check(now int64) (availability, int64) {
	h := t.h
	if cu := h.coolUntil.Load(); now < cu {
		return out, cu
	}
	switch State(h.state.Load()) {
	case Closed:
		return ready, 0
	case Open:
		if ou := h.openUntil.Load(); now < ou {
			return out, ou
		}
		t.halfOpen(now)
	}
	w := h.trials.Load()
	if State(h.state.Load()) != HalfOpen {
		return t.check(now) // changed meanwhile
	}
	if int(count(w)) < t.r.cfg.Breaker.HalfOpenProbes {
		return trial, 0
	}
	// Trials handed out and never reported (a host that lost them) must
	// not keep the target out for good: after OpenFor they are written off.
	stale := h.trialAt.Load() + int64(t.r.cfg.Breaker.OpenFor)
	if now >= stale {
		t.writeOffTrials(now, gen(w))
		return trial, 0
	}
	return out, min(stale, now+int64(time.Second))
}

// takeTrial takes a trial slot of the half-open breaker and returns its
// generation.
func (t *Target) takeTrial(now int64) (uint32, bool) {
	h := t.h
	limit := uint32(t.r.cfg.Breaker.HalfOpenProbes)
	for {
		w := h.trials.Load()
		if State(h.state.Load()) != HalfOpen || count(w) >= limit {
			return 0, false
		}
		if h.trials.CompareAndSwap(w, w+1) {
			h.trialAt.Store(now)
			return gen(w), true
		}
	}
}

// releaseTrial gives back a trial slot of generation g.
func (t *Target) releaseTrial(g uint32) {
	h := t.h
	for {
		w := h.trials.Load()
		if gen(w) != g || count(w) == 0 {
			return
		}
		if h.trials.CompareAndSwap(w, w-1) {
			return
		}
	}
}

// writeOffTrials starts a new half-open generation with every trial slot
// free, if generation g is still the current one.
func (t *Target) writeOffTrials(now int64, g uint32) {
	h := t.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if State(h.state.Load()) == HalfOpen && gen(h.trials.Load()) == g {
		t.newGeneration()
		h.trialAt.Store(now)
	}
}

// newGeneration starts a new breaker generation with no trials; h.mu is
// held.
func (t *Target) newGeneration() {
	h := t.h
	next := uint64(gen(h.trials.Load())+1) << 32
	h.trials.Store(next)
	h.trialOK.Store(next)
}

// succeed counts a success; a trial's success may close the breaker.
func (t *Target) succeed(now int64, isTrial bool, g uint32, latency time.Duration, stream bool) {
	h := t.h
	h.requests.Add(1)
	h.errs.add(now, 1, 0)
	if h.consecutive.Load() != 0 {
		h.consecutive.Store(0)
	}
	if latency > 0 {
		t.average(latency, stream)
	}
	if !isTrial {
		return
	}
	t.releaseTrial(g)
	for {
		w := h.trialOK.Load()
		if gen(w) != g {
			return
		}
		if h.trialOK.CompareAndSwap(w, w+1) {
			if int(count(w))+1 >= t.r.cfg.Breaker.HalfOpenProbes {
				t.close(now, g)
			}
			return
		}
	}
}

// fail counts a failure; it may open the breaker.
func (t *Target) fail(now int64, isTrial bool, g uint32) {
	h := t.h
	h.requests.Add(1)
	h.failures.Add(1)
	h.errs.add(now, 1, 1)
	c := h.consecutive.Add(1)
	b := &t.r.cfg.Breaker
	if b.Off {
		return
	}
	if isTrial {
		t.releaseTrial(g)
		t.open(now, g, ReasonTrialFailed)
		return
	}
	if State(h.state.Load()) != Closed {
		return
	}
	switch {
	case int(c) >= b.ConsecutiveFailures:
		t.open(now, gen(h.trials.Load()), ReasonConsecutiveFailures)
	case t.errorRateExceeded(now):
		t.open(now, gen(h.trials.Load()), ReasonErrorRate)
	}
}

// errorRateExceeded reports whether the failures in the window reach the
// configured rate, over enough attempts.
func (t *Target) errorRateExceeded(now int64) bool {
	b := &t.r.cfg.Breaker
	n, failed := t.h.errs.sum(now)
	return n >= uint64(b.MinRequests) && float64(failed) >= b.ErrorRate*float64(n)
}

// openFor is how long the next opening lasts: OpenFor, doubled for each
// opening since the last close, up to MaxOpenFor.
func (t *Target) openFor(opens int32) time.Duration {
	b := &t.r.cfg.Breaker
	d := b.OpenFor
	for i := int32(1); i < opens && d < b.MaxOpenFor; i++ {
		d *= 2
	}
	return min(d, b.MaxOpenFor)
}

// open opens the breaker, if it is still in generation g and not open.
func (t *Target) open(now int64, g uint32, why Reason) {
	h := t.h
	h.mu.Lock()
	from := State(h.state.Load())
	if from == Open || gen(h.trials.Load()) != g {
		h.mu.Unlock()
		return
	}
	opens := h.opens.Add(1)
	until := now + int64(t.openFor(opens))
	h.openUntil.Store(until)
	t.newGeneration()
	h.state.Store(uint32(Open))
	h.opened.Add(1)
	h.mu.Unlock()
	t.r.changed(Change{Target: t, From: from, To: Open, Until: time.Unix(0, until), Reason: why})
}

// halfOpen moves an open breaker whose time has come to half-open.
func (t *Target) halfOpen(now int64) {
	h := t.h
	h.mu.Lock()
	if State(h.state.Load()) != Open || now < h.openUntil.Load() {
		h.mu.Unlock()
		return
	}
	t.newGeneration()
	h.trialAt.Store(now)
	h.state.Store(uint32(HalfOpen))
	h.mu.Unlock()
	t.r.changed(Change{Target: t, From: Open, To: HalfOpen, Reason: ReasonOpenForPassed})
}

// close closes a half-open breaker of generation g.
func (t *Target) close(now int64, g uint32) {
	h := t.h
	h.mu.Lock()
	if State(h.state.Load()) != HalfOpen || gen(h.trials.Load()) != g {
		h.mu.Unlock()
		return
	}
	t.closeLocked()
	h.mu.Unlock()
	t.r.changed(Change{Target: t, From: HalfOpen, To: Closed, Reason: ReasonTrialsSucceeded})
}

// closeLocked closes the breaker and forgets the failures; h.mu is held.
func (t *Target) closeLocked() {
	h := t.h
	t.newGeneration()
	h.state.Store(uint32(Closed))
	h.consecutive.Store(0)
	h.opens.Store(0)
	h.errs.reset()
}

// openRemote opens the breaker until until, as another instance did,
// unless it is open longer already. It reports whether it changed.
func (t *Target) openRemote(now, until int64) bool {
	h := t.h
	until = min(until, now+int64(t.r.cfg.Breaker.MaxOpenFor))
	if until <= now || t.r.cfg.Breaker.Off {
		return false
	}
	h.mu.Lock()
	from := State(h.state.Load())
	if from == Open && h.openUntil.Load() >= until {
		h.mu.Unlock()
		return false
	}
	if h.opens.Load() == 0 {
		h.opens.Store(1)
	}
	h.openUntil.Store(until)
	t.newGeneration()
	h.state.Store(uint32(Open))
	h.mu.Unlock()
	if from != Open {
		t.r.changed(Change{Target: t, From: from, To: Open, Until: time.Unix(0, until), Reason: ReasonRemote, Remote: true})
	}
	return true
}

// closeRemote closes the breaker, as another instance did.
func (t *Target) closeRemote() bool {
	h := t.h
	h.mu.Lock()
	from := State(h.state.Load())
	if from == Closed {
		h.mu.Unlock()
		return false
	}
	t.closeLocked()
	h.mu.Unlock()
	t.r.changed(Change{Target: t, From: from, To: Closed, Reason: ReasonRemote, Remote: true})
	return true
}

// cool keeps the target out of rotation for d from now (capped), unless
// it is out longer already. It returns the deadline it holds and whether
// a cool-down started (none was in force).
func (t *Target) cool(now int64, d time.Duration) (int64, bool) {
	h := t.h
	d = min(d, t.r.cfg.Cooldown.Max)
	if d <= 0 {
		return h.coolUntil.Load(), false
	}
	until := now + int64(d)
	for {
		old := h.coolUntil.Load()
		if old >= until {
			return old, false
		}
		if h.coolUntil.CompareAndSwap(old, until) {
			started := old <= now
			if started {
				h.cooldowns.Add(1)
			}
			return until, started
		}
	}
}

// average adds a latency sample to the target's average of its kind.
func (t *Target) average(d time.Duration, stream bool) {
	slot := &t.h.latency[latencyWhole]
	if stream {
		slot = &t.h.latency[latencyFirst]
	}
	x := float64(d)
	for {
		old := slot.Load()
		next := x
		if old != 0 {
			avg := math.Float64frombits(old)
			next = avg + t.r.alpha*(x-avg)
		}
		if slot.CompareAndSwap(old, math.Float64bits(next)) {
			return
		}
	}
}

// averageOf returns the latency average of a kind, 0 before any sample.
func (t *Target) averageOf(stream bool) float64 {
	i := latencyWhole
	if stream {
		i = latencyFirst
	}
	return math.Float64frombits(t.h.latency[i].Load())
}

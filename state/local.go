package state

import (
	"context"
	"math"
	"sync"
	"time"
)

// Local is the in-process State: one machine, no configuration. Its
// counters, leases and slots live in memory (a restart forgets them, as a
// restart of one machine forgets its rate windows) and its messages reach
// the subscribers of this process only.
type Local struct {
	now func() time.Time

	mu      sync.Mutex
	closed  bool
	entries map[scopedKey]*localEntry
	leases  map[string]*localLease
	fence   int64
	subs    map[string]map[*localSub]struct{}
	ops     int // operations since the last sweep of expired entries
	sweepAt int
	// undo is Apply's record of what it changed, kept for the next Apply
	// so that none pays for a new one. Between Applies it holds the last
	// one's records: a few entries kept from the collector until then.
	undo []localUndo
}

// scopedKey names a counter, the rate windows and a slot set: scope is ""
// for those of the methods of Counters and Slots, the scope of Apply for
// its own.
type scopedKey struct{ scope, key string }

// localEntry is everything under one scoped name, each part apart from
// the others: a counter, rate windows, a slot set. One entry per name
// makes one lookup per op (a map lookup is most of an op's cost), and a
// Ref can keep it for the next op on the name. An entry is dropped by the
// sweep once nothing in it is live; live says it is still the one in
// Local's map (a Ref holding a dropped entry looks the name up again).
type localEntry struct {
	scopedKey
	l    *Local // the owner, which a Ref is checked against
	live bool

	hasCounter bool
	counter    localCounter
	windows    []localWindow
	slots      slotSet

	// with are the entries OpReserve's and OpGet's With named last time
	// on this entry, which they most likely name again.
	with [2]*localEntry
}

type localCounter struct {
	value   int64
	expires instant // 0: never
}

// localWindow is the count of one rate window. It is unused once it
// expired; a window always has an expiry.
type localWindow struct {
	sliding     bool
	size, index int64
	localCounter
}

func (w *localWindow) live(now instant) bool { return w.expires > now }

// instant is a point in time in Unix nanoseconds: how Local keeps its
// expiries. Integers compare and add in an instruction each, where
// time.Time's After and Add take tens (every op of Apply reads or sets an
// expiry). Like Redis's, they follow the wall clock.
type instant int64

func instantOf(t time.Time) instant { return instant(t.UnixNano()) }

// after is the instant d after i, or the last one there is.
func (i instant) after(d time.Duration) instant {
	if s := i + instant(d); d <= 0 || s > i {
		return s
	}
	return math.MaxInt64
}

type localLease struct {
	Lease
	expires instant
}

// NewLocal returns an empty in-process State.
func NewLocal() *Local { return newLocal(time.Now) }

func newLocal(now func() time.Time) *Local {
	return &Local{
		now:     now,
		entries: make(map[scopedKey]*localEntry),
		leases:  make(map[string]*localLease),
		subs:    make(map[string]map[*localSub]struct{}),
		sweepAt: 1024,
	}
}

// lock takes the mutex for one operation and sweeps expired entries now
// and then, so memory stays bounded by what is live. It fails when closed.
func (l *Local) lock() (instant, error) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return 0, ErrClosed
	}
	now := instantOf(l.now())
	l.ops++
	if l.ops >= l.sweepAt {
		l.sweep(now)
	}
	return now, nil
}

func (l *Local) sweep(now instant) {
	for k, e := range l.entries {
		if !e.sweep(now) {
			e.live = false
			delete(l.entries, k)
		}
	}
	for k, ls := range l.leases {
		if ls.expires <= now {
			delete(l.leases, k)
		}
	}
	l.ops = 0
	l.sweepAt = max(1024, len(l.entries)+len(l.leases))
}

// sweep drops what expired in e and reports whether anything is left.
func (e *localEntry) sweep(now instant) bool {
	e.liveCounter(now)
	ws := e.windows[:0]
	for _, w := range e.windows {
		if w.live(now) {
			ws = append(ws, w)
		}
	}
	clear(e.windows[len(ws):])
	e.windows = ws
	e.slots.expire(now)
	e.with = [2]*localEntry{} // which this sweep may drop
	return e.hasCounter || len(ws) > 0 || len(e.slots.holders) > 0
}

func (c *localCounter) expired(now instant) bool {
	return c.expires != 0 && c.expires <= now
}

func (c *localCounter) ttl(now instant) time.Duration {
	if c == nil || c.expires == 0 {
		return 0
	}
	return time.Duration(c.expires - now)
}

// entry returns the entry of (scope, name), through ref when ref holds it
// (ref may be nil), or nil when there is none.
func (l *Local) entry(scope, name string, ref *Ref) *localEntry {
	if ref != nil {
		// The owner first: the other fields belong to its mutex.
		if e := ref.e.Load(); e != nil && e.l == l && e.live && e.key == name && e.scope == scope {
			return e
		}
	}
	e := l.entries[scopedKey{scope, name}]
	if e != nil && ref != nil {
		ref.e.Store(e)
	}
	return e
}

// newEntry makes the entry of (scope, name), which has none.
func (l *Local) newEntry(scope, name string, ref *Ref) *localEntry {
	e := &localEntry{scopedKey: scopedKey{scope, name}, l: l, live: true}
	l.entries[e.scopedKey] = e
	if ref != nil {
		ref.e.Store(e)
	}
	return e
}

// liveCounter returns e's counter, or nil when it has none (or it
// expired). A nil entry has none.
func (e *localEntry) liveCounter(now instant) *localCounter {
	if e == nil || !e.hasCounter {
		return nil
	}
	if e.counter.expired(now) {
		e.hasCounter = false
		return nil
	}
	return &e.counter
}

// value is the value of e's counter, 0 when it has none.
func (e *localEntry) value(now instant) int64 {
	if c := e.liveCounter(now); c != nil {
		return c.value
	}
	return 0
}

// add adds delta to e's counter, making it (expiring ttl from now, or
// never) when e has none.
func (e *localEntry) add(delta int64, ttl time.Duration, now instant) *localCounter {
	if e.liveCounter(now) == nil {
		e.hasCounter, e.counter = true, localCounter{}
		if ttl > 0 {
			e.counter.expires = now.after(ttl)
		}
	}
	e.counter.value += delta
	return &e.counter
}

// window returns the index in e.windows of the live window (sliding, size,
// index), or -1.
func (e *localEntry) window(sliding bool, size, index int64, now instant) int {
	if e == nil {
		return -1
	}
	for i := range e.windows {
		w := &e.windows[i]
		if w.index == index && w.size == size && w.sliding == sliding && w.live(now) {
			return i
		}
	}
	return -1
}

// newWindow makes the window (sliding, size, index), which e does not
// have live, in the place of an expired one if there is one.
func (e *localEntry) newWindow(sliding bool, size, index int64, now instant) int {
	w := localWindow{sliding: sliding, size: size, index: index}
	for i := range e.windows {
		if !e.windows[i].live(now) {
			e.windows[i] = w
			return i
		}
	}
	e.windows = append(e.windows, w)
	return len(e.windows) - 1
}

// windowValue is the count of the window (sliding, size, index) of e, 0
// when it has none.
func (e *localEntry) windowValue(sliding bool, size, index int64, now instant) int64 {
	if i := e.window(sliding, size, index, now); i >= 0 {
		return e.windows[i].value
	}
	return 0
}

// withEntry returns the entry of the j-th of the names op.With, remembered
// on e (the entry of op.Name, nil when it has none) for the next time.
// With e, a name without an entry gets an empty one, remembered too: a
// budget's previous reservation bucket is usually empty, and is read on
// every request. The sweep drops it if it stays empty.
func (l *Local) withEntry(e *localEntry, j int, scope, name string) *localEntry {
	if e == nil || j >= len(e.with) {
		return l.entries[scopedKey{scope, name}]
	}
	if w := e.with[j]; w != nil && w.live && w.key == name && w.scope == scope {
		return w
	}
	w := l.entries[scopedKey{scope, name}]
	if w == nil {
		w = l.newEntry(scope, name, nil)
	}
	e.with[j] = w
	return w
}

// Add implements Counters.
func (l *Local) Add(_ context.Context, key string, delta int64, ttl time.Duration) (int64, error) {
	now, err := l.lock()
	if err != nil {
		return 0, err
	}
	defer l.mu.Unlock()
	e := l.entry("", key, nil)
	if e == nil {
		e = l.newEntry("", key, nil)
	}
	return e.add(delta, ttl, now).value, nil
}

// Get implements Counters.
func (l *Local) Get(_ context.Context, key string) (Count, error) {
	now, err := l.lock()
	if err != nil {
		return Count{}, err
	}
	defer l.mu.Unlock()
	c := l.entry("", key, nil).liveCounter(now)
	if c == nil {
		return Count{}, nil
	}
	return Count{Value: c.value, TTL: c.ttl(now)}, nil
}

// Reserve implements Counters.
func (l *Local) Reserve(_ context.Context, key string, n, limit int64, ttl time.Duration) (Count, bool, error) {
	now, err := l.lock()
	if err != nil {
		return Count{}, false, err
	}
	defer l.mu.Unlock()
	e := l.entry("", key, nil)
	c := e.liveCounter(now)
	var v int64
	if c != nil {
		v = c.value
	}
	if v+n > limit {
		return Count{Value: v, TTL: c.ttl(now)}, false, nil
	}
	if e == nil {
		e = l.newEntry("", key, nil)
	}
	c = e.add(n, ttl, now)
	return Count{Value: c.value, TTL: c.ttl(now)}, true, nil
}

// Reset implements Counters.
func (l *Local) Reset(_ context.Context, key string) error {
	if _, err := l.lock(); err != nil {
		return err
	}
	defer l.mu.Unlock()
	if e := l.entry("", key, nil); e != nil {
		e.hasCounter = false
	}
	return nil
}

// Take implements Counters.
func (l *Local) Take(_ context.Context, key string, n, limit int64, w Window, at time.Time) (Taken, error) {
	index, size, elapsed, err := WindowSpan(w, at)
	if err != nil {
		return Taken{}, err
	}
	now, err := l.lock()
	if err != nil {
		return Taken{}, err
	}
	defer l.mu.Unlock()
	var buf [1]localUndo // nothing to undo: Take is one op
	t, _, _ := l.take(l.entry("", key, nil), "", key, nil, n, -1, limit, w, index, size, elapsed, now, buf[:0])
	return t, nil
}

// AcquireLease implements Leases.
func (l *Local) AcquireLease(_ context.Context, name, holder string, ttl time.Duration) (Lease, bool, error) {
	now, err := l.lock()
	if err != nil {
		return Lease{}, false, err
	}
	defer l.mu.Unlock()
	if cur := l.lease(name, now); cur != nil {
		ls := cur.Lease
		ls.TTL = time.Duration(cur.expires - now)
		return ls, false, nil
	}
	l.fence++
	ls := &localLease{Lease: Lease{Name: name, Holder: holder, Token: l.fence, TTL: ttl}, expires: now.after(ttl)}
	l.leases[name] = ls
	return ls.Lease, true, nil
}

func (l *Local) lease(name string, now instant) *localLease {
	ls := l.leases[name]
	if ls != nil && ls.expires <= now {
		delete(l.leases, name)
		return nil
	}
	return ls
}

// RenewLease implements Leases.
func (l *Local) RenewLease(_ context.Context, name string, token int64, ttl time.Duration) error {
	now, err := l.lock()
	if err != nil {
		return err
	}
	defer l.mu.Unlock()
	ls := l.lease(name, now)
	if ls == nil || ls.Token != token {
		return ErrLeaseLost
	}
	ls.expires = now.after(ttl)
	return nil
}

// ReleaseLease implements Leases.
func (l *Local) ReleaseLease(_ context.Context, name string, token int64) error {
	now, err := l.lock()
	if err != nil {
		return err
	}
	defer l.mu.Unlock()
	ls := l.lease(name, now)
	if ls == nil || ls.Token != token {
		return ErrLeaseLost
	}
	delete(l.leases, name)
	return nil
}

// GetLease implements Leases.
func (l *Local) GetLease(_ context.Context, name string) (Lease, bool, error) {
	now, err := l.lock()
	if err != nil {
		return Lease{}, false, err
	}
	defer l.mu.Unlock()
	ls := l.lease(name, now)
	if ls == nil {
		return Lease{}, false, nil
	}
	out := ls.Lease
	out.TTL = time.Duration(ls.expires - now)
	return out, true, nil
}

// AcquireSlot implements Slots.
func (l *Local) AcquireSlot(_ context.Context, name, holder string, limit int64, ttl time.Duration) (int64, bool, error) {
	now, err := l.lock()
	if err != nil {
		return 0, false, err
	}
	defer l.mu.Unlock()
	e := l.entry("", name, nil)
	var set *slotSet
	if e != nil {
		set = &e.slots
	}
	set.expire(now)
	_, has := set.get(holder)
	if !has && set.len() >= limit {
		return set.len(), false, nil
	}
	if e == nil {
		e = l.newEntry("", name, nil)
	}
	e.slots.put(holder, now.after(ttl))
	return e.slots.len(), true, nil
}

// ReleaseSlot implements Slots.
func (l *Local) ReleaseSlot(_ context.Context, name, holder string) error {
	if _, err := l.lock(); err != nil {
		return err
	}
	defer l.mu.Unlock()
	if e := l.entry("", name, nil); e != nil {
		delete(e.slots.holders, holder)
	}
	return nil
}

// slotSet is the holders of the slots of one name, with their expiries.
// soonest is no later than the earliest of them: until then none has
// expired, and counting the live holders needs no scan of them all (with
// many requests in flight, every acquire and release would otherwise pay
// one).
type slotSet struct {
	holders map[string]instant
	soonest instant // 0: none
}

// expire drops the holders expired at now. A nil set has none.
func (s *slotSet) expire(now instant) {
	if s == nil || now < s.soonest {
		return
	}
	s.soonest = 0
	for h, exp := range s.holders {
		switch {
		case exp <= now:
			delete(s.holders, h)
		case s.soonest == 0 || exp < s.soonest:
			s.soonest = exp
		}
	}
}

// put sets the expiry of holder.
func (s *slotSet) put(holder string, exp instant) {
	if len(s.holders) == 0 || exp < s.soonest {
		s.soonest = exp
	}
	if s.holders == nil {
		s.holders = make(map[string]instant)
	}
	s.holders[holder] = exp
}

// get returns holder's expiry. A nil set has no holders.
func (s *slotSet) get(holder string) (instant, bool) {
	if s == nil {
		return 0, false
	}
	exp, ok := s.holders[holder]
	return exp, ok
}

// len is how many holders s has (expire first to count the live ones).
func (s *slotSet) len() int64 {
	if s == nil {
		return 0
	}
	return int64(len(s.holders))
}

// Publish implements PubSub.
func (l *Local) Publish(_ context.Context, channel string, payload []byte) error {
	if _, err := l.lock(); err != nil {
		return err
	}
	defer l.mu.Unlock()
	if len(l.subs[channel]) == 0 {
		return nil
	}
	m := Message{Channel: channel, Payload: append([]byte(nil), payload...)}
	for s := range l.subs[channel] {
		s.push(m)
	}
	return nil
}

// Subscribe implements PubSub. A local subscription is always live.
func (l *Local) Subscribe(_ context.Context, channels ...string) (Subscription, error) {
	if _, err := l.lock(); err != nil {
		return nil, err
	}
	defer l.mu.Unlock()
	s := &localSub{l: l, channels: channels, wake: make(chan struct{}, 1),
		out: make(chan Message, 64), done: make(chan struct{})}
	for _, ch := range channels {
		if l.subs[ch] == nil {
			l.subs[ch] = make(map[*localSub]struct{})
		}
		l.subs[ch][s] = struct{}{}
	}
	go s.run()
	return s, nil
}

// Ping implements State.
func (l *Local) Ping(context.Context) error {
	if _, err := l.lock(); err != nil {
		return err
	}
	l.mu.Unlock()
	return nil
}

// Close implements State: operations fail from now on and every
// subscription ends.
func (l *Local) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	var subs []*localSub
	for _, set := range l.subs {
		for s := range set {
			subs = append(subs, s)
		}
	}
	l.mu.Unlock()
	for _, s := range subs {
		_ = s.Close()
	}
	return nil
}

// maxQueued is how many messages a local subscription holds for a
// receiver that does not keep up; beyond, messages are dropped and the
// receiver gets a Resync.
const maxQueued = 4096

type localSub struct {
	l        *Local
	channels []string

	mu     sync.Mutex
	queue  []Message
	wake   chan struct{}
	out    chan Message
	done   chan struct{}
	closed bool
}

func (s *localSub) push(m Message) {
	s.mu.Lock()
	switch {
	case len(s.queue) < maxQueued:
		s.queue = append(s.queue, m)
	case !s.queue[len(s.queue)-1].Resync:
		s.queue = append(s.queue, Message{Resync: true})
	}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *localSub) run() {
	defer close(s.out)
	for {
		s.mu.Lock()
		if len(s.queue) == 0 {
			s.mu.Unlock()
			select {
			case <-s.wake:
				continue
			case <-s.done:
				return
			}
		}
		m := s.queue[0]
		s.queue[0] = Message{}
		s.queue = s.queue[1:]
		s.mu.Unlock()
		select {
		case s.out <- m:
		case <-s.done:
			return
		}
	}
}

func (s *localSub) Messages() <-chan Message { return s.out }

func (s *localSub) Live() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.closed
}

func (s *localSub) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.l.mu.Lock()
	for _, ch := range s.channels {
		delete(s.l.subs[ch], s)
		if len(s.l.subs[ch]) == 0 {
			delete(s.l.subs, ch)
		}
	}
	s.l.mu.Unlock()
	close(s.done)
	return nil
}

var _ State = (*Local)(nil)

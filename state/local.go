package state

import (
	"context"
	"sync"
	"time"
)

// Local is the in-process State: one machine, no configuration. Its
// counters, leases and slots live in memory (a restart forgets them, as a
// restart of one machine forgets its rate windows) and its messages reach
// the subscribers of this process only.
type Local struct {
	now func() time.Time

	mu       sync.Mutex
	closed   bool
	counters map[scopedKey]*localCounter
	windows  map[windowID]*localCounter
	leases   map[string]*localLease
	fence    int64
	slots    map[scopedKey]*slotSet
	subs     map[string]map[*localSub]struct{}
	ops      int // operations since the last sweep of expired entries
	sweepAt  int
}

type localCounter struct {
	value   int64
	expires time.Time // zero: never
}

// scopedKey names a counter or a slot set: scope is "" for those of the
// methods of Counters and Slots, the scope of Apply for its own.
type scopedKey struct{ scope, key string }

type windowID struct {
	scope, key  string
	sliding     bool
	size, index int64
}

type localLease struct {
	Lease
	expires time.Time
}

// NewLocal returns an empty in-process State.
func NewLocal() *Local { return newLocal(time.Now) }

func newLocal(now func() time.Time) *Local {
	return &Local{
		now:      now,
		counters: make(map[scopedKey]*localCounter),
		windows:  make(map[windowID]*localCounter),
		leases:   make(map[string]*localLease),
		slots:    make(map[scopedKey]*slotSet),
		subs:     make(map[string]map[*localSub]struct{}),
		sweepAt:  1024,
	}
}

// lock takes the mutex for one operation and sweeps expired entries now
// and then, so memory stays bounded by what is live. It fails when closed.
func (l *Local) lock() (time.Time, error) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return time.Time{}, ErrClosed
	}
	now := l.now()
	l.ops++
	if l.ops >= l.sweepAt {
		l.sweep(now)
	}
	return now, nil
}

func (l *Local) sweep(now time.Time) {
	for k, c := range l.counters {
		if c.expired(now) {
			delete(l.counters, k)
		}
	}
	for k, c := range l.windows {
		if c.expired(now) {
			delete(l.windows, k)
		}
	}
	for k, ls := range l.leases {
		if !ls.expires.After(now) {
			delete(l.leases, k)
		}
	}
	for name, set := range l.slots {
		set.expire(now)
		if len(set.holders) == 0 {
			delete(l.slots, name)
		}
	}
	l.ops = 0
	l.sweepAt = max(1024, len(l.counters)+len(l.windows)+len(l.leases)+len(l.slots))
}

func (c *localCounter) expired(now time.Time) bool {
	return !c.expires.IsZero() && !c.expires.After(now)
}

func (c *localCounter) ttl(now time.Time) time.Duration {
	if c == nil || c.expires.IsZero() {
		return 0
	}
	return c.expires.Sub(now)
}

// counter returns the live counter key, or nil.
func (l *Local) counter(key scopedKey, now time.Time) *localCounter {
	c := l.counters[key]
	if c != nil && c.expired(now) {
		delete(l.counters, key)
		return nil
	}
	return c
}

func (l *Local) add(key scopedKey, delta int64, ttl time.Duration, now time.Time) *localCounter {
	return l.addTo(l.counter(key, now), key, delta, ttl, now)
}

// addTo is add, given c = l.counter(key, now) (the caller has looked it
// up already; a map lookup is most of an op's cost).
func (l *Local) addTo(c *localCounter, key scopedKey, delta int64, ttl time.Duration, now time.Time) *localCounter {
	if c == nil {
		c = &localCounter{}
		if ttl > 0 {
			c.expires = now.Add(ttl)
		}
		l.counters[key] = c
	}
	c.value += delta
	return c
}

// Add implements Counters.
func (l *Local) Add(_ context.Context, key string, delta int64, ttl time.Duration) (int64, error) {
	now, err := l.lock()
	if err != nil {
		return 0, err
	}
	defer l.mu.Unlock()
	return l.add(scopedKey{"", key}, delta, ttl, now).value, nil
}

// Get implements Counters.
func (l *Local) Get(_ context.Context, key string) (Count, error) {
	now, err := l.lock()
	if err != nil {
		return Count{}, err
	}
	defer l.mu.Unlock()
	c := l.counter(scopedKey{"", key}, now)
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
	k := scopedKey{"", key}
	c := l.counter(k, now)
	var v int64
	if c != nil {
		v = c.value
	}
	if v+n > limit {
		return Count{Value: v, TTL: c.ttl(now)}, false, nil
	}
	c = l.addTo(c, k, n, ttl, now)
	return Count{Value: c.value, TTL: c.ttl(now)}, true, nil
}

// Reset implements Counters.
func (l *Local) Reset(_ context.Context, key string) error {
	if _, err := l.lock(); err != nil {
		return err
	}
	defer l.mu.Unlock()
	delete(l.counters, scopedKey{"", key})
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
	get := func(id windowID) int64 {
		c := l.windows[id]
		if c == nil || c.expired(now) {
			return 0
		}
		return c.value
	}
	curID := windowID{"", key, w.Sliding, size, index}
	cur, prev := get(curID), int64(0)
	if w.Sliding {
		prev = get(windowID{"", key, true, size, index - 1})
	}
	ok := Fits(w, cur, prev, n, limit, size, elapsed)
	if ok && n != 0 {
		cur += n
		// As Redis does: the expiry counts from the real now, the
		// window from the time given.
		l.windows[curID] = &localCounter{value: cur,
			expires: now.Add(time.Duration(WindowTTL(w, size, elapsed)) * time.Millisecond)}
	}
	return NewTaken(w, ok, cur, prev, n, limit, at), nil
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
		ls.TTL = cur.expires.Sub(now)
		return ls, false, nil
	}
	l.fence++
	ls := &localLease{Lease: Lease{Name: name, Holder: holder, Token: l.fence, TTL: ttl}, expires: now.Add(ttl)}
	l.leases[name] = ls
	return ls.Lease, true, nil
}

func (l *Local) lease(name string, now time.Time) *localLease {
	ls := l.leases[name]
	if ls != nil && !ls.expires.After(now) {
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
	ls.expires = now.Add(ttl)
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
	out.TTL = ls.expires.Sub(now)
	return out, true, nil
}

// AcquireSlot implements Slots.
func (l *Local) AcquireSlot(_ context.Context, name, holder string, limit int64, ttl time.Duration) (int64, bool, error) {
	now, err := l.lock()
	if err != nil {
		return 0, false, err
	}
	defer l.mu.Unlock()
	k := scopedKey{"", name}
	set := l.slots[k]
	set.expire(now)
	_, has := set.get(holder)
	if !has && set.len() >= limit {
		return set.len(), false, nil
	}
	if set == nil {
		set = newSlotSet()
		l.slots[k] = set
	}
	set.put(holder, now.Add(ttl))
	return set.len(), true, nil
}

// ReleaseSlot implements Slots.
func (l *Local) ReleaseSlot(_ context.Context, name, holder string) error {
	if _, err := l.lock(); err != nil {
		return err
	}
	defer l.mu.Unlock()
	k := scopedKey{"", name}
	if set := l.slots[k]; set != nil {
		delete(set.holders, holder)
		if len(set.holders) == 0 {
			delete(l.slots, k)
		}
	}
	return nil
}

// slotSet is the holders of the slots of one name, with their expiries.
// soonest is no later than the earliest of them: until then none has
// expired, and counting the live holders needs no scan of them all (with
// many requests in flight, every acquire and release would otherwise pay
// one).
type slotSet struct {
	holders map[string]time.Time
	soonest time.Time
}

func newSlotSet() *slotSet { return &slotSet{holders: make(map[string]time.Time)} }

// expire drops the holders expired at now. A nil set has none.
func (s *slotSet) expire(now time.Time) {
	if s == nil || now.Before(s.soonest) {
		return
	}
	s.soonest = time.Time{}
	for h, exp := range s.holders {
		switch {
		case !exp.After(now):
			delete(s.holders, h)
		case s.soonest.IsZero() || exp.Before(s.soonest):
			s.soonest = exp
		}
	}
}

// put sets the expiry of holder.
func (s *slotSet) put(holder string, exp time.Time) {
	if len(s.holders) == 0 || exp.Before(s.soonest) {
		s.soonest = exp
	}
	s.holders[holder] = exp
}

// get returns holder's expiry. A nil set has no holders.
func (s *slotSet) get(holder string) (time.Time, bool) {
	if s == nil {
		return time.Time{}, false
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

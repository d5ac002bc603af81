// Package state is what modelgate instances share beyond Caddy's storage:
// atomic counters with expiry (rate limits, budgets), leases with fencing
// tokens and counted slots (who works on what, how many at once), and
// publish/subscribe (a deleted key or a cancelled batch reaches every
// instance at once). Atomic applies several counter, window and slot
// operations at once, all or none (the limits and budgets of a key and of
// its owner, in one round trip).
//
// Two implementations pass one conformance suite (state/statetest): Local,
// in this package, for one machine and the zero-configuration default, and
// state/redisstate, on Redis (or a Redis-protocol server such as Valkey),
// for a cluster. This package imports nothing of Caddy.
//
// Keys, lease names and channels are opaque strings chosen by the caller;
// implementations namespace them (a Redis key prefix), so several gateways
// can share one server.
package state

import (
	"context"
	"errors"
	"time"
)

// State is the shared state of the instances of one gateway.
type State interface {
	Counters
	Atomic
	Leases
	Slots
	PubSub

	// Ping reports whether the state can be reached now. It is cheap
	// enough for a readiness endpoint.
	Ping(ctx context.Context) error

	// Close releases the state's resources; its subscriptions end.
	Close() error
}

// Counters are integers that expire, changed atomically across instances.
type Counters interface {
	// Add adds delta (which may be negative) to the counter key and
	// returns its new value. A counter that does not exist starts at 0,
	// and then expires ttl later (ttl <= 0: never); an existing counter
	// keeps the expiry it has.
	Add(ctx context.Context, key string, delta int64, ttl time.Duration) (int64, error)

	// Get returns the counter's value and the time until it expires (0
	// when it never does). A counter that does not exist, or expired, is 0.
	Get(ctx context.Context, key string) (Count, error)

	// Reserve adds n to the counter only if the result stays within limit
	// (value+n <= limit), atomically: concurrent reservations never take
	// the counter past limit together. It reports whether it added; the
	// Count is the value after a reservation, or the unchanged value of a
	// refused one. A new counter expires ttl later, as with Add. A budget
	// reserves its estimate before the work and settles with Add(actual -
	// estimate) after it.
	Reserve(ctx context.Context, key string, n, limit int64, ttl time.Duration) (Count, bool, error)

	// Take counts n against limit in the rate window w of key at the time
	// now, atomically, and reports whether it fit. A positive n with limit
	// >= 0 is refused when the window's count plus n would exceed limit;
	// n <= 0 (a correction) or limit < 0 always applies. The window a
	// count lands in follows from now, so a later correction of an
	// estimate passes the time of the original Take to reach the same
	// window. Windows of different sizes, or fixed and sliding ones, under
	// one key are independent counts.
	Take(ctx context.Context, key string, n, limit int64, w Window, now time.Time) (Taken, error)

	// Reset deletes the counter key. It does not touch Take's windows.
	Reset(ctx context.Context, key string) error
}

// Count is a counter's value and the time until it expires (0: never).
type Count struct {
	Value int64
	TTL   time.Duration
}

// Window is a rate window. Fixed windows are aligned to the Unix epoch:
// the count restarts at every multiple of Size. A sliding window counts
// the current fixed window plus the previous one's count weighted by the
// share of the previous window that still lies within Size of now (the
// sliding-window-counter approximation Cloudflare and Envoy describe):
// smooth at window edges, with one counter per window.
type Window struct {
	Size    time.Duration // at least a millisecond; counted in whole milliseconds
	Sliding bool
}

// Taken is the outcome of Take.
type Taken struct {
	// OK reports whether n was counted.
	OK bool
	// Count is what counts against the limit now: after n when OK,
	// without it when refused.
	Count int64
	// Limit is the limit Take was given.
	Limit int64
	// Remaining is Limit - Count, at least 0 (0 without a limit).
	Remaining int64
	// Reset is how long until the whole count has drained: the end of
	// the current fixed window, and for a sliding window with a count in
	// the current fixed window the end of the next one.
	Reset time.Duration
	// RetryAfter, when refused, is how long until n would fit if nothing
	// else were counted meanwhile; negative when n can never fit (n >
	// Limit).
	RetryAfter time.Duration
	// Start is the start of the fixed window n was counted in.
	Start time.Time
}

// Leases give one holder at a time a named piece of work, for a time it
// renews while it works. Every acquisition gets a fencing token, greater
// than every token given for that name before, so a holder that stalled
// past its lease is told (ErrLeaseLost) and a store that records the
// token with its writes can refuse a stale one.
type Leases interface {
	// AcquireLease takes the lease name for holder for ttl if no one holds
	// it. When someone does, it reports false and the current Lease.
	AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (Lease, bool, error)

	// RenewLease extends the lease held with token to ttl from now. It
	// returns ErrLeaseLost when token does not hold it any more (it
	// expired, or someone else holds it now).
	RenewLease(ctx context.Context, name string, token int64, ttl time.Duration) error

	// ReleaseLease frees the lease held with token. It returns
	// ErrLeaseLost, and frees nothing, when token does not hold it.
	ReleaseLease(ctx context.Context, name string, token int64) error

	// GetLease returns the current lease of name, if anyone holds it.
	GetLease(ctx context.Context, name string) (Lease, bool, error)
}

// Lease is a held lease: who holds it, with which fencing token, and for
// how much longer unless renewed.
type Lease struct {
	Name   string
	Holder string
	Token  int64
	TTL    time.Duration
}

// Slots limit how many holders work at once under one name (concurrent
// requests of a key): a counting semaphore whose holders expire, so a
// crashed instance's slots come back by themselves.
type Slots interface {
	// AcquireSlot takes one of limit slots of name for holder until ttl
	// from now, or extends holder's slot when it has one already. It
	// reports whether holder has a slot now and how many are taken.
	AcquireSlot(ctx context.Context, name, holder string, limit int64, ttl time.Duration) (taken int64, ok bool, err error)

	// ReleaseSlot frees holder's slot of name; freeing none is no error.
	ReleaseSlot(ctx context.Context, name, holder string) error
}

// PubSub delivers messages to the subscribers of every instance that are
// live when a message is published: at most once, nothing kept for later.
// A subscriber that may have missed messages is told (Message.Resync) and
// reloads what it caches from where the truth is kept.
type PubSub interface {
	// Publish sends payload to the current subscribers of channel.
	Publish(ctx context.Context, channel string, payload []byte) error

	// Subscribe subscribes to channels. It returns once the subscription
	// is live, or when ctx ends first: then the subscription is returned
	// all the same, not live yet, and keeps trying in the background (and
	// sends Resync when it becomes live). A subscription whose connection
	// breaks reconnects by itself until it is closed.
	Subscribe(ctx context.Context, channels ...string) (Subscription, error)
}

// Subscription receives the messages of its channels.
type Subscription interface {
	// Messages delivers messages in the order they were published on each
	// channel. It is closed after Close.
	Messages() <-chan Message
	// Live reports whether messages published now will be received: the
	// subscription is connected and subscribed.
	Live() bool
	// Close ends the subscription.
	Close() error
}

// Message is a published message, or a Resync notice.
type Message struct {
	Channel string
	Payload []byte
	// Resync reports that messages may have been lost before this point
	// (the subscription was down, or its receiver fell too far behind):
	// the receiver reloads what it caches. A Resync message has no
	// Channel or Payload.
	Resync bool
}

var (
	// ErrLeaseLost is returned when a lease token no longer holds the
	// lease.
	ErrLeaseLost = errors.New("lease lost: the token no longer holds it")

	// ErrUnavailable wraps the errors of a state that cannot be reached
	// (Redis down, unreachable or still loading). Requests that can do
	// without shared state go on; readiness reports it.
	ErrUnavailable = errors.New("shared state unavailable")

	// ErrClosed is returned by a closed State.
	ErrClosed = errors.New("state closed")
)

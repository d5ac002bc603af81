// Package redisstate is state.State on Redis (or a Redis-protocol server
// such as Valkey), through go-redis's UniversalClient: standalone,
// Sentinel or Cluster alike. Every operation that reads and then writes is
// one Lua script, so it is atomic across instances.
//
// Keys, all under Options.KeyPrefix (default "modelgate:"):
//
//	<prefix>c:{<key>}                        a counter (Add, Get, Reserve, Reset)
//	<prefix>w:{<key>}:<f|s><size ms>:<index> a rate window's count (Take)
//	<prefix>{leases}:<name>                  a lease: hash of holder, token
//	<prefix>{leases}:fence                   the fencing token counter, never expires
//	<prefix>s:{<name>}                       slots: sorted set of holder → expiry (ms)
//	<prefix>a:{<scope>}:<c|w|s>:<name>…      counters, windows and slots of Apply (apply.go)
//	channel <prefix>{pubsub}:<channel>       publish/subscribe
//
// The braces are Redis Cluster hash tags: what one script touches lives in
// one slot (for Apply, everything of one scope). Every lease shares one slot, so that the fencing counter is
// one key and tokens grow across all names; leases are few.
//
// Time: leases and counters expire by Redis's clock (PEXPIRE); slots
// compare expiries with Redis's TIME; rate windows are chosen by the time
// the caller gives (instances' clocks, as Envoy's rate limit service uses
// its own), with one extra second of life for counters so that clocks a
// little apart still meet.
//
// Publish/subscribe channels are global to a Redis server (not per
// database), so they carry the prefix too. On a Cluster, messages go
// through sharded publish/subscribe (SPUBLISH, SSUBSCRIBE; Redis 7 and
// Valkey): every channel is in the slot of "pubsub", so one shard orders
// all of them, as a standalone server does. (Classic PUBLISH on a Cluster
// may enter at any node and reach a subscriber out of order.)
package redisstate

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/modelgate/modelgate/state"
	"github.com/modelgate/modelgate/state/redisclient"
)

// Options tune a State.
type Options struct {
	// KeyPrefix starts every key and channel. Default: "modelgate:". It
	// must not contain '{' or '}'.
	KeyPrefix string

	// Timeout bounds every operation, whatever the caller's context
	// allows: when Redis does not answer, the caller gets an error
	// wrapping state.ErrUnavailable within about this long. Default: 2s.
	Timeout time.Duration

	// PingInterval is how often an idle subscription checks its
	// connection; a subscription is reported not live when a check goes
	// unanswered for as long. Default: 1s.
	PingInterval time.Duration

	// Logger receives subscription outages and recoveries. Default: none.
	Logger *zap.Logger
}

// State is state.State on a go-redis client.
type State struct {
	rdb     redis.UniversalClient
	sharded bool // a Cluster: sharded publish/subscribe
	prefix  string
	timeout time.Duration
	ping    time.Duration
	log     *zap.Logger
	applier applier // Applies queued behind a round trip in flight (batch.go)

	ctx    context.Context // ends at Close: stops subscriptions
	cancel context.CancelFunc
}

// New returns a State on rdb. Closing the State does not close rdb: the
// client may be shared (with the Redis storage, for one).
func New(rdb redis.UniversalClient, opt Options) (*State, error) {
	if opt.KeyPrefix == "" {
		opt.KeyPrefix = "modelgate:"
	}
	if strings.ContainsAny(opt.KeyPrefix, "{}") {
		return nil, fmt.Errorf("redis state key prefix %q contains a brace", opt.KeyPrefix)
	}
	if opt.Timeout <= 0 {
		opt.Timeout = 2 * time.Second
	}
	if opt.PingInterval <= 0 {
		opt.PingInterval = time.Second
	}
	if opt.Logger == nil {
		opt.Logger = zap.NewNop()
	}
	ctx, cancel := context.WithCancel(context.Background())
	_, sharded := rdb.(*redis.ClusterClient)
	return &State{rdb: rdb, sharded: sharded, prefix: opt.KeyPrefix, timeout: opt.Timeout, ping: opt.PingInterval,
		log: opt.Logger, ctx: ctx, cancel: cancel}, nil
}

// Client returns the go-redis client the State uses.
func (s *State) Client() redis.UniversalClient { return s.rdb }

// op bounds ctx by the operation timeout.
func (s *State) op(ctx context.Context) (context.Context, context.CancelFunc) {
	if s.ctx.Err() != nil {
		c, cancel := context.WithCancel(ctx)
		cancel()
		return c, cancel
	}
	return context.WithTimeout(ctx, s.timeout)
}

// wrap marks errors of an unreachable or not yet serving Redis as
// state.ErrUnavailable.
func (s *State) wrap(err error) error {
	if err == nil {
		return nil
	}
	if s.ctx.Err() != nil {
		return state.ErrClosed
	}
	if unavailable(err) {
		return fmt.Errorf("%w: %w", state.ErrUnavailable, err)
	}
	return fmt.Errorf("redis state: %w", err)
}

// unavailable reports whether err says Redis could not serve: no answer
// at all (network errors, timeouts, a closed connection), or an answer
// that says it cannot serve now (loading, failing over). Other replies
// from the server are errors of the operation itself.
func unavailable(err error) bool {
	if errors.Is(err, context.Canceled) {
		return false // the caller gave up
	}
	var re redis.Error
	if errors.As(err, &re) && !errors.Is(err, redis.ErrClosed) && !errors.Is(err, redis.ErrPoolTimeout) {
		msg := re.Error()
		for _, p := range []string{"LOADING", "READONLY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN", "BUSY"} {
			if strings.HasPrefix(msg, p) {
				return true
			}
		}
		return false
	}
	return true
}

func ms(d time.Duration) int64 { return d.Milliseconds() }

func (s *State) counterKey(key string) string { return s.prefix + "c:{" + key + "}" }

func (s *State) windowKey(key string, sliding bool, size, index int64) string {
	kind := "f"
	if sliding {
		kind = "s"
	}
	return s.prefix + "w:{" + key + "}:" + kind + strconv.FormatInt(size, 10) + ":" + strconv.FormatInt(index, 10)
}

func (s *State) leaseKey(name string) string { return s.prefix + "{leases}:n:" + name }
func (s *State) fenceKey() string            { return s.prefix + "{leases}:fence" }
func (s *State) slotsKey(name string) string { return s.prefix + "s:{" + name + "}" }
func (s *State) channel(ch string) string    { return s.prefix + "{pubsub}:" + ch }

// ttlOf converts a PTTL answer (ms; -1 no expiry, -2 missing) to a TTL.
func ttlOf(pttl int64) time.Duration {
	if pttl < 0 {
		return 0
	}
	return time.Duration(pttl) * time.Millisecond
}

// addScript: KEYS[1] counter; ARGV delta, ttl ms. Returns the new value.
var addScript = redisclient.NewScript(`
local existed = redis.call('EXISTS', KEYS[1])
local v = redis.call('INCRBY', KEYS[1], ARGV[1])
if existed == 0 and tonumber(ARGV[2]) > 0 then
	redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return v
`)

// Add implements state.Counters.
func (s *State) Add(ctx context.Context, key string, delta int64, ttl time.Duration) (int64, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	v, err := addScript.Run(ctx, s.rdb, []string{s.counterKey(key)}, delta, ms(ttl)).Int64()
	return v, s.wrap(err)
}

// Get implements state.Counters.
func (s *State) Get(ctx context.Context, key string) (state.Count, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	k := s.counterKey(key)
	var get *redis.StringCmd
	var pttl *redis.DurationCmd
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		get = p.Get(ctx, k)
		pttl = p.PTTL(ctx, k)
		return nil
	})
	if errors.Is(err, redis.Nil) {
		return state.Count{}, nil
	}
	if err != nil {
		return state.Count{}, s.wrap(err)
	}
	v, err := get.Int64()
	if err != nil {
		return state.Count{}, s.wrap(err)
	}
	return state.Count{Value: v, TTL: max(0, pttl.Val())}, nil
}

// reserveScript: KEYS[1] counter; ARGV n, limit, ttl ms. Returns {ok,
// value, pttl}.
var reserveScript = redisclient.NewScript(`
local v = tonumber(redis.call('GET', KEYS[1]) or '0')
local n = tonumber(ARGV[1])
if v + n > tonumber(ARGV[2]) then
	return {0, v, redis.call('PTTL', KEYS[1])}
end
local existed = redis.call('EXISTS', KEYS[1])
v = redis.call('INCRBY', KEYS[1], n)
if existed == 0 and tonumber(ARGV[3]) > 0 then
	redis.call('PEXPIRE', KEYS[1], ARGV[3])
end
return {1, v, redis.call('PTTL', KEYS[1])}
`)

// Reserve implements state.Counters.
func (s *State) Reserve(ctx context.Context, key string, n, limit int64, ttl time.Duration) (state.Count, bool, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	r, err := reserveScript.Run(ctx, s.rdb, []string{s.counterKey(key)}, n, limit, ms(ttl)).Int64Slice()
	if err != nil {
		return state.Count{}, false, s.wrap(err)
	}
	return state.Count{Value: r[1], TTL: ttlOf(r[2])}, r[0] == 1, nil
}

// Reset implements state.Counters.
func (s *State) Reset(ctx context.Context, key string) error {
	ctx, cancel := s.op(ctx)
	defer cancel()
	return s.wrap(s.rdb.Del(ctx, s.counterKey(key)).Err())
}

// takeScript: KEYS[1] current window, KEYS[2] previous window (sliding
// only); ARGV n, limit, size ms, elapsed ms, ttl ms. The arithmetic is
// state.Fits'. Returns {ok, cur, prev}.
var takeScript = redisclient.NewScript(`
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
local prev = 0
if KEYS[2] then prev = tonumber(redis.call('GET', KEYS[2]) or '0') end
local n, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
local size, elapsed = tonumber(ARGV[3]), tonumber(ARGV[4])
if n > 0 and limit >= 0 then
	local count = cur
	if KEYS[2] then count = count + math.floor(prev * (size - elapsed) / size) end
	if count + n > limit then return {0, cur, prev} end
end
if n ~= 0 then
	cur = redis.call('INCRBY', KEYS[1], n)
	redis.call('PEXPIRE', KEYS[1], ARGV[5])
end
return {1, cur, prev}
`)

// Take implements state.Counters.
func (s *State) Take(ctx context.Context, key string, n, limit int64, w state.Window, now time.Time) (state.Taken, error) {
	index, size, elapsed, err := state.WindowSpan(w, now)
	if err != nil {
		return state.Taken{}, err
	}
	keys := []string{s.windowKey(key, w.Sliding, size, index)}
	if w.Sliding {
		keys = append(keys, s.windowKey(key, true, size, index-1))
	}
	ctx, cancel := s.op(ctx)
	defer cancel()
	r, err := takeScript.Run(ctx, s.rdb, keys, n, limit, size, elapsed, state.WindowTTL(w, size, elapsed)).Int64Slice()
	if err != nil {
		return state.Taken{}, s.wrap(err)
	}
	return state.NewTaken(w, r[0] == 1, r[1], r[2], n, limit, now), nil
}

// acquireScript: KEYS[1] lease, KEYS[2] fence; ARGV holder, ttl ms.
// Returns {ok, token, holder, pttl}.
var acquireScript = redisclient.NewScript(`
local cur = redis.call('HMGET', KEYS[1], 'holder', 'token')
if cur[1] then
	return {0, tonumber(cur[2]), cur[1], redis.call('PTTL', KEYS[1])}
end
local token = redis.call('INCR', KEYS[2])
redis.call('HSET', KEYS[1], 'holder', ARGV[1], 'token', token)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {1, token, ARGV[1], tonumber(ARGV[2])}
`)

// AcquireLease implements state.Leases.
func (s *State) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (state.Lease, bool, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	r, err := acquireScript.Run(ctx, s.rdb, []string{s.leaseKey(name), s.fenceKey()}, holder, max(1, ms(ttl))).Slice()
	if err != nil {
		return state.Lease{}, false, s.wrap(err)
	}
	if len(r) != 4 {
		return state.Lease{}, false, fmt.Errorf("redis state: unexpected lease reply %v", r)
	}
	ok, _ := r[0].(int64)
	token, _ := r[1].(int64)
	h, _ := r[2].(string)
	pttl, _ := r[3].(int64)
	return state.Lease{Name: name, Holder: h, Token: token, TTL: ttlOf(pttl)}, ok == 1, nil
}

// renewScript: KEYS[1] lease; ARGV token, ttl ms. 1 when renewed.
var renewScript = redisclient.NewScript(`
if redis.call('HGET', KEYS[1], 'token') == ARGV[1] then
	return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
`)

// RenewLease implements state.Leases.
func (s *State) RenewLease(ctx context.Context, name string, token int64, ttl time.Duration) error {
	ctx, cancel := s.op(ctx)
	defer cancel()
	n, err := renewScript.Run(ctx, s.rdb, []string{s.leaseKey(name)}, token, max(1, ms(ttl))).Int64()
	if err != nil {
		return s.wrap(err)
	}
	if n != 1 {
		return state.ErrLeaseLost
	}
	return nil
}

// releaseScript: KEYS[1] lease; ARGV token. 1 when released.
var releaseScript = redisclient.NewScript(`
if redis.call('HGET', KEYS[1], 'token') == ARGV[1] then
	return redis.call('DEL', KEYS[1])
end
return 0
`)

// ReleaseLease implements state.Leases.
func (s *State) ReleaseLease(ctx context.Context, name string, token int64) error {
	ctx, cancel := s.op(ctx)
	defer cancel()
	n, err := releaseScript.Run(ctx, s.rdb, []string{s.leaseKey(name)}, token).Int64()
	if err != nil {
		return s.wrap(err)
	}
	if n != 1 {
		return state.ErrLeaseLost
	}
	return nil
}

// getLeaseScript: KEYS[1] lease. Returns {holder, token, pttl} or nil.
var getLeaseScript = redisclient.NewScript(`
local cur = redis.call('HMGET', KEYS[1], 'holder', 'token')
if not cur[1] then return false end
return {cur[1], tonumber(cur[2]), redis.call('PTTL', KEYS[1])}
`)

// GetLease implements state.Leases.
func (s *State) GetLease(ctx context.Context, name string) (state.Lease, bool, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	r, err := getLeaseScript.Run(ctx, s.rdb, []string{s.leaseKey(name)}).Slice()
	if errors.Is(err, redis.Nil) {
		return state.Lease{}, false, nil
	}
	if err != nil {
		return state.Lease{}, false, s.wrap(err)
	}
	h, _ := r[0].(string)
	token, _ := r[1].(int64)
	pttl, _ := r[2].(int64)
	return state.Lease{Name: name, Holder: h, Token: token, TTL: ttlOf(pttl)}, true, nil
}

// slotScript: KEYS[1] slots; ARGV holder, limit, ttl ms. Expiries are
// Redis's TIME in ms. Returns {ok, taken}.
var slotScript = redisclient.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local ok = 0
if redis.call('ZSCORE', KEYS[1], ARGV[1]) or redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[2]) then
	redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
	ok = 1
end
local n = redis.call('ZCARD', KEYS[1])
if n > 0 then
	local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
	redis.call('PEXPIREAT', KEYS[1], last[2])
end
return {ok, n}
`)

// AcquireSlot implements state.Slots.
func (s *State) AcquireSlot(ctx context.Context, name, holder string, limit int64, ttl time.Duration) (int64, bool, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	r, err := slotScript.Run(ctx, s.rdb, []string{s.slotsKey(name)}, holder, limit, max(1, ms(ttl))).Int64Slice()
	if err != nil {
		return 0, false, s.wrap(err)
	}
	return r[1], r[0] == 1, nil
}

// ReleaseSlot implements state.Slots.
func (s *State) ReleaseSlot(ctx context.Context, name, holder string) error {
	ctx, cancel := s.op(ctx)
	defer cancel()
	return s.wrap(s.rdb.ZRem(ctx, s.slotsKey(name), holder).Err())
}

// Publish implements state.PubSub.
func (s *State) Publish(ctx context.Context, channel string, payload []byte) error {
	ctx, cancel := s.op(ctx)
	defer cancel()
	if s.sharded {
		return s.wrap(s.rdb.SPublish(ctx, s.channel(channel), payload).Err())
	}
	return s.wrap(s.rdb.Publish(ctx, s.channel(channel), payload).Err())
}

// Ping implements state.State.
func (s *State) Ping(ctx context.Context) error {
	ctx, cancel := s.op(ctx)
	defer cancel()
	return s.wrap(s.rdb.Ping(ctx).Err())
}

// Close ends the State's subscriptions. It does not close the client.
func (s *State) Close() error {
	s.cancel()
	return nil
}

var _ state.State = (*State)(nil)

package redisstate

import (
	"context"
	"strconv"
	"time"

	"github.com/modelgate/modelgate/state"
	"github.com/modelgate/modelgate/state/redisclient"
)

// Deadlines (state.Deadlines) live under one hash tag, so that reading
// several is one MGET on a Redis Cluster too (they are few: two per
// routed target):
//
//	<prefix>{deadlines}:<key>   a deadline, Unix ms, expiring at it (PEXPIREAT)

func (s *State) deadlineKey(key string) string { return s.prefix + "{deadlines}:" + key }

// extendScript: KEYS[1] deadline; ARGV until (Unix ms). Keeps the later
// of the stored and the given deadline and returns it.
var extendScript = redisclient.NewScript(`
local cur = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
local u = tonumber(ARGV[1])
if u > cur then
	redis.call('SET', KEYS[1], ARGV[1])
	redis.call('PEXPIREAT', KEYS[1], ARGV[1])
	return u
end
return cur
`)

// ExtendDeadline implements state.Deadlines.
func (s *State) ExtendDeadline(ctx context.Context, key string, until time.Time) (time.Time, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	v, err := extendScript.Run(ctx, s.rdb, []string{s.deadlineKey(key)}, until.UnixMilli()).Int64()
	if err != nil {
		return time.Time{}, s.wrap(err)
	}
	if v <= time.Now().UnixMilli() {
		return time.Time{}, nil // already past: Redis dropped it
	}
	return time.UnixMilli(v), nil
}

// GetDeadlines implements state.Deadlines.
func (s *State) GetDeadlines(ctx context.Context, keys ...string) ([]time.Time, error) {
	out := make([]time.Time, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	ctx, cancel := s.op(ctx)
	defer cancel()
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = s.deadlineKey(k)
	}
	vals, err := s.rdb.MGet(ctx, names...).Result()
	if err != nil {
		return nil, s.wrap(err)
	}
	now := time.Now().UnixMilli()
	for i, v := range vals {
		str, ok := v.(string)
		if !ok {
			continue // no such key
		}
		if ms, err := strconv.ParseInt(str, 10, 64); err == nil && ms > now {
			out[i] = time.UnixMilli(ms)
		}
	}
	return out, nil
}

// ClearDeadline implements state.Deadlines.
func (s *State) ClearDeadline(ctx context.Context, key string) error {
	ctx, cancel := s.op(ctx)
	defer cancel()
	return s.wrap(s.rdb.Del(ctx, s.deadlineKey(key)).Err())
}

var _ state.Deadlines = (*State)(nil)

package redisstate

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/modelgate/modelgate/state"
)

// Values (state.Values) live under
//
//	<prefix>v:{<key>}   a value: a Redis string, PEXPIRE'd by its ttl
//
// each key in a hash slot of its own on a Cluster. A value is one GET or
// one SET: nothing needs a script.

var _ state.Values = (*State)(nil)

func (s *State) valueKey(key string) string { return s.prefix + "v:{" + key + "}" }

// GetValue implements state.Values.
func (s *State) GetValue(ctx context.Context, key string) ([]byte, bool, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	b, err := s.rdb.Get(ctx, s.valueKey(key)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, s.wrap(err)
	}
	return b, true, nil
}

// SetValue implements state.Values. A ttl below a millisecond, Redis's
// finest expiry, is a millisecond.
func (s *State) SetValue(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	ctx, cancel := s.op(ctx)
	defer cancel()
	var exp time.Duration // 0: go-redis sets no expiry
	if ttl > 0 {
		exp = max(ttl, time.Millisecond)
	}
	return s.wrap(s.rdb.Set(ctx, s.valueKey(key), value, exp).Err())
}

// DeleteValue implements state.Values.
func (s *State) DeleteValue(ctx context.Context, key string) error {
	ctx, cancel := s.op(ctx)
	defer cancel()
	return s.wrap(s.rdb.Del(ctx, s.valueKey(key)).Err())
}

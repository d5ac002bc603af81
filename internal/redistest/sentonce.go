package redistest

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
)

// SentOnce is a go-redis hook that fails t when a script (EVAL, EVALSHA)
// goes to Redis as a command that go-redis would send again after a
// timeout: one Redis may already have run (redisclient.Once).
func SentOnce(t testing.TB) redis.Hook { return sentOnce{t} }

type sentOnce struct{ t testing.TB }

func (h sentOnce) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h sentOnce) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.check(cmd)
		return next(ctx, cmd)
	}
}

func (h sentOnce) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			h.check(cmd)
		}
		return next(ctx, cmds)
	}
}

func (h sentOnce) check(cmd redis.Cmder) {
	if n := cmd.Name(); (n == "evalsha" || n == "eval") && !cmd.NoRetry() {
		h.t.Errorf("a script sent as a command go-redis sends again: %v", cmd.Args()[:3])
	}
}

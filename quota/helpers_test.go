package quota_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/modelgate/modelgate/internal/redistest"
	"github.com/modelgate/modelgate/pricing"
	"github.com/modelgate/modelgate/quota"
	"github.com/modelgate/modelgate/state"
	"github.com/modelgate/modelgate/state/redisclient"
	"github.com/modelgate/modelgate/state/redisstate"
	"github.com/modelgate/modelgate/usage"
)

// opener returns n handles on one fresh state, as n instances hold them.
type opener func(t testing.TB, n int) []state.State

var prefixes atomic.Int64

// local is the in-process state: every instance is this process.
func local(t testing.TB, n int) []state.State {
	l := state.NewLocal()
	t.Cleanup(func() { _ = l.Close() })
	out := make([]state.State, n)
	for i := range out {
		out[i] = l
	}
	return out
}

// onRedis returns an opener on srv: n clients (n instances) under a
// prefix of their own. hook, when set, is added to every client.
func onRedis(srv *redistest.Server, hook redis.Hook) opener {
	return func(t testing.TB, n int) []state.State {
		prefix := fmt.Sprintf("q%d:", prefixes.Add(1))
		out := make([]state.State, n)
		for i := range out {
			rdb, err := redisclient.New(redisclient.Options{Addresses: []string{srv.Addr}})
			if err != nil {
				t.Fatal(err)
			}
			if hook != nil {
				rdb.AddHook(hook)
			}
			st, err := redisstate.New(rdb, redisstate.Options{KeyPrefix: prefix})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close(); _ = rdb.Close() })
			out[i] = st
		}
		return out
	}
}

// bothStates runs f against the in-process state and against a real
// redis-server.
func bothStates(t *testing.T, f func(t *testing.T, open opener)) {
	t.Run("local", func(t *testing.T) { f(t, local) })
	t.Run("redis", func(t *testing.T) {
		srv := redistest.Start(t)
		f(t, onRedis(srv, nil))
	})
}

// clock is a settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock(t time.Time) *clock { return &clock{t: t} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// spender is a Spender with fixed answers, counting its calls.
type spender struct {
	mu    sync.Mutex
	spent map[string]pricing.Money // "key:<id>" or "owner:<id>"
	calls atomic.Int64
	delay time.Duration
	asked []string
}

func (s *spender) Spent(_ context.Context, by usage.Dimension, id string, from, to time.Time) (pricing.Money, error) {
	s.calls.Add(1)
	time.Sleep(s.delay)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asked = append(s.asked, fmt.Sprintf("%s:%s %s..%s", by, id, from.Format(time.DateOnly), to.Format(time.DateOnly)))
	return s.spent[string(by)+":"+id], nil
}

func newQuota(t testing.TB, st state.State, sp quota.Spender, c *clock, hold time.Duration) *quota.Quota {
	t.Helper()
	cfg := quota.Config{State: st, Spender: sp, Hold: hold}
	if c != nil {
		cfg.Now = c.Now
	}
	q, err := quota.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

var bg = context.Background()

// admit admits, failing the test on an error.
func admit(t testing.TB, q *quota.Quota, s quota.Subjects, a quota.Ask) (*quota.Admission, *quota.Refusal) {
	t.Helper()
	adm, ref, err := q.Admit(bg, s, a)
	if err != nil {
		t.Fatal(err)
	}
	if (adm == nil) == (ref == nil) {
		t.Fatalf("Admit returned admission %v and refusal %v", adm, ref)
	}
	return adm, ref
}

// admitted admits a request that must be admitted, failing the test on a
// refusal.
func admitted(t testing.TB, q *quota.Quota, s quota.Subjects, a quota.Ask) *quota.Admission {
	t.Helper()
	adm, ref := admit(t, q, s, a)
	if ref != nil {
		t.Fatalf("refused: %s", ref.Message())
	}
	return adm
}

func done(t testing.TB, adm *quota.Admission, a quota.Actual) {
	t.Helper()
	if err := adm.Done(bg, a); err != nil {
		t.Fatal(err)
	}
}

func status(t testing.TB, q *quota.Quota, s quota.Subjects) quota.Status {
	t.Helper()
	st, err := q.Status(bg, s)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

const dollar = pricing.Dollar

package redisstate_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/modelgate/modelgate/internal/redistest"
	"github.com/modelgate/modelgate/state"
	"github.com/modelgate/modelgate/state/redisclient"
	"github.com/modelgate/modelgate/state/redisstate"
	"github.com/modelgate/modelgate/state/statetest"
)

var prefixes atomic.Int64

func init() {
	// go-redis logs every failed dial; the outage tests make many.
	redis.SetLogger(redisclient.Logger(func(string, ...any) {}))
}

// open returns n States, each on its own client as n instances would
// have, under a prefix of their own.
func open(t *testing.T, srv *redistest.Server, n int, opt redisstate.Options) []*redisstate.State {
	t.Helper()
	if opt.KeyPrefix == "" {
		opt.KeyPrefix = fmt.Sprintf("t%d:", prefixes.Add(1))
	}
	out := make([]*redisstate.State, n)
	for i := range out {
		rdb, err := redisclient.New(redisclient.Options{Addresses: []string{srv.Addr}, Timeout: redisclient.Duration(time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		rdb.AddHook(redistest.SentOnce(t))
		st, err := redisstate.New(rdb, opt)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close(); _ = rdb.Close() })
		out[i] = st
	}
	return out
}

func TestConformance(t *testing.T) {
	srv := redistest.Start(t)
	statetest.Run(t, func(t *testing.T, n int) []state.State {
		var out []state.State
		for _, s := range open(t, srv, n, redisstate.Options{}) {
			out = append(out, s)
		}
		return out
	})
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

func recv(t *testing.T, sub state.Subscription, within time.Duration) state.Message {
	t.Helper()
	select {
	case m, ok := <-sub.Messages():
		if !ok {
			t.Fatal("subscription ended")
		}
		return m
	case <-time.After(within):
		t.Fatalf("no message within %v", within)
	}
	return state.Message{}
}

func waitFor(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A subscription survives redis-server being killed and restarted: it is
// reported not live while Redis is down, comes back by itself, tells the
// receiver to resync, and receives what is published afterwards.
func TestSubscriptionSurvivesRedisRestart(t *testing.T) {
	srv := redistest.Start(t)
	ss := open(t, srv, 2, redisstate.Options{PingInterval: 200 * time.Millisecond})
	sub, err := ss[0].Subscribe(ctx(t), "keys")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if err := ss[1].Publish(ctx(t), "keys", []byte("before")); err != nil {
		t.Fatal(err)
	}
	if m := recv(t, sub, 5*time.Second); string(m.Payload) != "before" {
		t.Fatalf("got %+v", m)
	}

	srv.Kill()
	waitFor(t, "subscription reported down", 3*time.Second, func() bool { return !sub.Live() })
	err = ss[1].Publish(ctx(t), "keys", []byte("lost"))
	if !errors.Is(err, state.ErrUnavailable) {
		t.Fatalf("publishing while Redis is down: %v, want ErrUnavailable", err)
	}
	srv.Restart()
	waitFor(t, "subscription live again", 10*time.Second, sub.Live)
	if m := recv(t, sub, 5*time.Second); !m.Resync {
		t.Fatalf("first message after the outage = %+v, want Resync", m)
	}
	if err := ss[1].Publish(ctx(t), "keys", []byte("after")); err != nil {
		t.Fatal(err)
	}
	if m := recv(t, sub, 5*time.Second); string(m.Payload) != "after" || m.Channel != "keys" {
		t.Fatalf("after the restart got %+v", m)
	}
}

// Subscribing while Redis is down returns when ctx ends with a
// subscription that is not live, which goes live (with a Resync) once
// Redis is back.
func TestSubscribeWhileDown(t *testing.T) {
	srv := redistest.Start(t)
	ss := open(t, srv, 2, redisstate.Options{})
	srv.Stop()
	c, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	sub, err := ss[0].Subscribe(c, "batches")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if sub.Live() {
		t.Fatal("live while Redis is stopped")
	}
	srv.Restart()
	waitFor(t, "live after Redis started", 15*time.Second, sub.Live)
	if m := recv(t, sub, 5*time.Second); !m.Resync {
		t.Fatalf("got %+v, want Resync", m)
	}
	if err := ss[1].Publish(ctx(t), "batches", []byte("cancel")); err != nil {
		t.Fatal(err)
	}
	if m := recv(t, sub, 5*time.Second); string(m.Payload) != "cancel" {
		t.Fatalf("got %+v", m)
	}
}

// With Redis unreachable every operation fails promptly with
// ErrUnavailable, never hanging the request that needs it.
func TestUnreachableFailsPromptly(t *testing.T) {
	srv := redistest.Start(t)
	s := open(t, srv, 1, redisstate.Options{Timeout: 500 * time.Millisecond})[0]
	srv.Stop()
	ops := map[string]func(context.Context) error{
		"Add":     func(c context.Context) error { _, err := s.Add(c, "k", 1, 0); return err },
		"Get":     func(c context.Context) error { _, err := s.Get(c, "k"); return err },
		"Reserve": func(c context.Context) error { _, _, err := s.Reserve(c, "k", 1, 5, 0); return err },
		"Take": func(c context.Context) error {
			_, err := s.Take(c, "k", 1, 5, state.Window{Size: time.Minute}, time.Now())
			return err
		},
		"AcquireLease": func(c context.Context) error { _, _, err := s.AcquireLease(c, "l", "h", time.Second); return err },
		"RenewLease":   func(c context.Context) error { return s.RenewLease(c, "l", 1, time.Second) },
		"AcquireSlot":  func(c context.Context) error { _, _, err := s.AcquireSlot(c, "s", "h", 1, time.Second); return err },
		"Publish":      func(c context.Context) error { return s.Publish(c, "c", nil) },
		"Ping":         s.Ping,
		"Apply": func(c context.Context) error {
			_, err := s.Apply(c, "scope", []state.Op{{Kind: state.OpAdd, Name: "k", N: 1}}, make([]state.Result, 1))
			return err
		},
	}
	for name, op := range ops {
		start := time.Now()
		err := op(context.Background()) // no deadline of the caller's own
		if !errors.Is(err, state.ErrUnavailable) {
			t.Errorf("%s: %v, want ErrUnavailable", name, err)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("%s took %v with Redis down", name, d)
		}
	}
	srv.Restart()
	waitFor(t, "Ping after restart", 10*time.Second, func() bool { return s.Ping(ctx(t)) == nil })
}

// Counters, leases and fencing tokens survive redis-server being killed
// (append-only file, fsync always) and restarted.
func TestStateSurvivesKill(t *testing.T) {
	srv := redistest.Start(t)
	s := open(t, srv, 1, redisstate.Options{})[0]
	c := ctx(t)
	if _, ok, err := s.Reserve(c, "budget", 70, 100, time.Hour); !ok || err != nil {
		t.Fatal(ok, err)
	}
	l, ok, err := s.AcquireLease(c, "part-3", "a", time.Hour)
	if !ok || err != nil {
		t.Fatal(ok, err)
	}
	srv.Kill()
	srv.Restart()
	waitFor(t, "Ping after restart", 10*time.Second, func() bool { return s.Ping(c) == nil })
	if got, err := s.Get(c, "budget"); err != nil || got.Value != 70 {
		t.Fatalf("budget after restart = %+v, %v", got, err)
	}
	if _, ok, _ := s.Reserve(c, "budget", 31, 100, time.Hour); ok {
		t.Fatal("the budget forgot its spend in the restart")
	}
	if err := s.RenewLease(c, "part-3", l.Token, time.Hour); err != nil {
		t.Fatalf("lease after restart: %v", err)
	}
	if err := s.ReleaseLease(c, "part-3", l.Token); err != nil {
		t.Fatal(err)
	}
	l2, ok, _ := s.AcquireLease(c, "part-3", "b", time.Hour)
	if !ok || l2.Token <= l.Token {
		t.Fatalf("token after restart %d, before %d: fencing went backwards", l2.Token, l.Token)
	}
}

// Two gateways with different prefixes on one Redis share nothing:
// counters, leases or messages.
func TestPrefixesSeparate(t *testing.T) {
	srv := redistest.Start(t)
	a := open(t, srv, 1, redisstate.Options{KeyPrefix: "gw-a:"})[0]
	b := open(t, srv, 1, redisstate.Options{KeyPrefix: "gw-b:"})[0]
	c := ctx(t)
	if _, err := a.Add(c, "k", 5, 0); err != nil {
		t.Fatal(err)
	}
	if got, _ := b.Get(c, "k"); got.Value != 0 {
		t.Fatalf("b sees a's counter: %+v", got)
	}
	if _, ok, _ := a.AcquireLease(c, "l", "a", time.Minute); !ok {
		t.Fatal("a's lease")
	}
	if _, ok, _ := b.AcquireLease(c, "l", "b", time.Minute); !ok {
		t.Fatal("b could not take its own lease of the same name")
	}
	sub, err := b.Subscribe(c, "keys")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if err := a.Publish(c, "keys", []byte("for a")); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-sub.Messages():
		t.Fatalf("b received a's message %+v", m)
	case <-time.After(200 * time.Millisecond):
	}
	// Every key a wrote carries its prefix.
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	keys, _ := rdb.Keys(c, "*").Result()
	for _, k := range keys {
		if !strings.HasPrefix(k, "gw-a:") && !strings.HasPrefix(k, "gw-b:") {
			t.Errorf("key %q outside both prefixes", k)
		}
	}
	if _, err := redisstate.New(rdb, redisstate.Options{KeyPrefix: "bad{"}); err == nil {
		t.Error("a prefix with a brace was accepted")
	}
}

// A receiver that stops reading does not stall publishers; when Redis
// drops the subscriber for its full output buffer, the subscription comes
// back with a Resync.
func TestSlowReceiverGetsResync(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{Config: []string{"client-output-buffer-limit pubsub 64kb 32kb 1"}})
	ss := open(t, srv, 2, redisstate.Options{PingInterval: 200 * time.Millisecond})
	sub, err := ss[0].Subscribe(ctx(t), "flood")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	// More than the kernel's socket buffers hold, so Redis's own output
	// buffer fills.
	payload := make([]byte, 64<<10)
	for i := range 400 {
		if err := ss[1].Publish(ctx(t), "flood", payload); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	deadline := time.After(20 * time.Second)
	for {
		select {
		case m := <-sub.Messages():
			if m.Resync {
				return
			}
		case <-deadline:
			t.Fatal("no Resync after Redis dropped the slow subscriber")
		}
	}
}

// applyAdd is an Apply of one OpAdd of 1 to name.
func applyAdd(c context.Context, s state.Atomic, name string) (state.Result, error) {
	return applyAddIn(c, s, "scope", name)
}

func applyAddIn(c context.Context, s state.Atomic, scope, name string) (state.Result, error) {
	res := make([]state.Result, 1)
	_, err := s.Apply(c, scope, []state.Op{{Kind: state.OpAdd, Name: name, N: 1, TTL: time.Hour}}, res)
	return res[0], err
}

// pipelineSizes counts, through a go-redis hook, the scripts of each
// pipeline of scripts a client sends.
type pipelineSizes struct{ most, pipelines atomic.Int64 }

func (h *pipelineSizes) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *pipelineSizes) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *pipelineSizes) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) == 0 || cmds[0].Name() != "evalsha" {
			return next(ctx, cmds) // not Apply's
		}
		h.pipelines.Add(1)
		for {
			most := h.most.Load()
			if int64(len(cmds)) <= most || h.most.CompareAndSwap(most, int64(len(cmds))) {
				break
			}
		}
		return next(ctx, cmds)
	}
}

// Applies of many requests at once are atomic each, and those that
// arrive while a round trip is in flight go together in the next one (a
// pipeline): a gateway under load pays one round trip for many requests'
// admissions instead of one each. On a Cluster, one pipeline holds scopes
// of several nodes.
func TestApplyConcurrent(t *testing.T) {
	for _, cluster := range []bool{false, true} {
		t.Run(map[bool]string{false: "standalone", true: "cluster"}[cluster], func(t *testing.T) {
			var addrs []string
			if cluster {
				for _, n := range redistest.StartCluster(t, 3) {
					addrs = append(addrs, n.Addr)
				}
			} else {
				addrs = []string{redistest.Start(t).Addr}
			}
			rdb, err := redisclient.New(redisclient.Options{Addresses: addrs})
			if err != nil {
				t.Fatal(err)
			}
			sizes := new(pipelineSizes)
			rdb.AddHook(sizes)
			s, err := redisstate.New(rdb, redisstate.Options{KeyPrefix: fmt.Sprintf("t%d:", prefixes.Add(1))})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close(); _ = rdb.Close() })
			const scopes, goroutines, each = 4, 64, 50
			const perScope = goroutines / scopes * each
			var seen [scopes][perScope + 1]atomic.Bool
			errs := make(chan error, goroutines)
			for g := range goroutines {
				go func() {
					scope := g % scopes
					for range each {
						r, err := applyAddIn(ctx(t), s, fmt.Sprint("owner-", scope), "hits")
						if err != nil {
							errs <- fmt.Errorf("apply: %w", err)
							return
						}
						if !r.OK || r.Value < 1 || r.Value > perScope || seen[scope][r.Value].Swap(true) {
							errs <- fmt.Errorf("apply: %+v (or the value seen twice)", r)
							return
						}
					}
					errs <- nil
				}()
			}
			for range goroutines {
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
			}
			for scope := range scopes {
				r, err := applyAddIn(ctx(t), s, fmt.Sprint("owner-", scope), "hits")
				if err != nil || r.Value != perScope+1 {
					t.Fatalf("scope %d after %d applies: %+v, %v", scope, perScope, r, err)
				}
			}
			if most := sizes.most.Load(); most < 2 {
				t.Fatalf("%d pipelines, the largest of %d scripts: the applies were not batched", sizes.pipelines.Load(), most)
			}
			t.Logf("%d applies in %d pipelines, the largest of %d", goroutines*each, sizes.pipelines.Load(), sizes.most.Load())
		})
	}
}

// With redis-server hung (SIGSTOP: it holds its connections but answers
// nothing), each of many Applies in flight fails within about the timeout,
// the ones queued behind the hung round trip too, and Apply works again
// once the server does.
func TestApplyHungRedis(t *testing.T) {
	srv := redistest.Start(t)
	s := open(t, srv, 1, redisstate.Options{Timeout: 500 * time.Millisecond})[0]
	if _, err := applyAdd(ctx(t), s, "k"); err != nil {
		t.Fatal(err)
	}
	if err := srv.Pause(); err != nil {
		t.Skip(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			if err := srv.Resume(); err != nil {
				t.Error(err)
			}
		}
	}
	defer resume()
	const n = 50
	type outcome struct {
		err  error
		took time.Duration
	}
	out := make(chan outcome, n)
	for range n {
		go func() {
			start := time.Now()
			_, err := applyAdd(context.Background(), s, "k") // no deadline of the caller's own
			out <- outcome{err, time.Since(start)}
		}()
	}
	for range n {
		o := <-out
		if !errors.Is(o.err, state.ErrUnavailable) {
			t.Errorf("apply with Redis hung: %v, want ErrUnavailable", o.err)
		}
		if o.took > 3*time.Second {
			t.Errorf("apply with Redis hung took %v (timeout 500ms)", o.took)
		}
	}
	resume()
	waitFor(t, "Apply after the server resumed", 10*time.Second, func() bool {
		_, err := applyAdd(ctx(t), s, "k")
		return err == nil
	})
}

// An Apply whose answer does not come within the client's timeout is not
// sent again: Redis, hung for longer than that, runs the first script when
// it goes on, and a second would count twice. Apply reports the answer
// lost, and the count is one. (open's hook checks that every script, the
// pipelined ones too, goes so.)
func TestApplySentOnce(t *testing.T) {
	srv := redistest.Start(t)
	s := open(t, srv, 1, redisstate.Options{})[0] // the client's timeout 1 s, the State's 2 s
	if _, err := applyAdd(ctx(t), s, "k"); err != nil {
		t.Fatal(err)
	}
	// Redis goes on after the script's timeout, and before that of a
	// second sending.
	resumed := srv.Hang(t, 1500*time.Millisecond)
	if _, err := applyAdd(context.Background(), s, "k"); err == nil {
		t.Error("an Apply answered after the client's timeout reported no error: it was sent again")
	}
	<-resumed
	var got state.Result
	waitFor(t, "Apply after the server resumed", 10*time.Second, func() bool {
		var err error
		got, err = applyAdd(ctx(t), s, "k")
		return err == nil
	})
	if got.Value != 3 {
		t.Fatalf("the count is %d, want 3: one before, one whose answer was lost, one after", got.Value)
	}
}

// The script takes each op's key count as one byte: an op may count up
// to 254 counters With its own, and one that counts more is refused
// before anything is sent rather than read wrong.
func TestApplyKeyCountLimit(t *testing.T) {
	srv := redistest.Start(t)
	s := open(t, srv, 1, redisstate.Options{})[0]
	c := ctx(t)
	with := make([]string, 255)
	res := make([]state.Result, 1)
	for i := range with {
		with[i] = fmt.Sprintf("c%d", i)
		if ok, err := s.Apply(c, "scope", []state.Op{{Kind: state.OpAdd, Name: with[i], N: int64(i)}}, res); !ok || err != nil {
			t.Fatal(ok, err)
		}
	}
	get := func(with []string) (state.Result, error) {
		_, err := s.Apply(c, "scope", []state.Op{{Kind: state.OpGet, Name: "c0", With: with}}, res)
		return res[0], err
	}
	r, err := get(with[1:]) // 255 keys: c0 and 254 others
	if err != nil || r.Total != 254*255/2 {
		t.Fatalf("254 counters with its own: total %d, %v; want %d", r.Total, err, 254*255/2)
	}
	if _, err := get(append(with[1:], "c255")); !errors.Is(err, state.ErrBadOp) {
		t.Fatalf("255 counters with its own: %v; want ErrBadOp", err)
	}
}

package redisstate

import (
	"context"
	"testing"
	"time"

	"github.com/modelgate/modelgate/internal/redistest"
	"github.com/modelgate/modelgate/state"
	"github.com/modelgate/modelgate/state/redisclient"
)

// A batch of Applies sent after Redis lost its script cache (a restart,
// a failover, SCRIPT FLUSH) is sent again with the script itself, and
// each call gets its own reply; a call whose caller has given up is not
// sent.
func TestPipelineAppliesAfterScriptFlush(t *testing.T) {
	srv := redistest.Start(t)
	rdb, err := redisclient.New(redisclient.Options{Addresses: []string{srv.Addr}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(rdb, Options{KeyPrefix: "flush:"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(); _ = rdb.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	gone, giveUp := context.WithCancel(ctx)
	giveUp()
	call := func(c context.Context, name string) *applyCall {
		// One key; ARGV: one op (its code and key count), an add of 1
		// without expiry.
		args := []any{nil, nil, 1, "flush:a:{s}:c:" + name, []byte{codeAdd, 1}, int64(1), int64(0), 0}
		return &applyCall{ctx: c, args: args, done: make(chan struct{})}
	}
	batch := []*applyCall{call(ctx, "x"), call(gone, "y"), call(ctx, "x"), call(ctx, "z")}
	calls := append([]*applyCall(nil), batch...)
	s.pipelineApplies(batch)
	for i, want := range []int64{1, -1, 2, 1} {
		c := calls[i]
		<-c.done
		if want < 0 {
			if c.err == nil {
				t.Errorf("call %d: the caller gave up, yet it was sent: %v", i, c.reply)
			}
			continue
		}
		// The reply: applied, then per op flags, value, total.
		if c.err != nil || len(c.reply) != 4 || c.reply[2] != want {
			t.Errorf("call %d: %v, %v; want value %d", i, c.reply, c.err, want)
		}
	}
	if n, err := rdb.Exists(ctx, "flush:a:{s}:c:y").Result(); err != nil || n != 0 {
		t.Errorf("the given-up call's counter exists (%d, %v)", n, err)
	}
	// And through Apply, with the cache flushed again.
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	res := make([]state.Result, 1)
	if ok, err := s.Apply(ctx, "s", []state.Op{{Kind: state.OpAdd, Name: "x", N: 1}}, res); !ok || err != nil || res[0].Value != 3 {
		t.Fatalf("Apply after a flush: %v %v %+v", ok, err, res[0])
	}
}

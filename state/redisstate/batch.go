package redisstate

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/modelgate/modelgate/state/redisclient"
)

// Applies under load go to Redis together.
//
// An Apply is one script call, one round trip. A gateway with limits or
// budgets makes two a request (admitting it and settling it), from as many
// goroutines as it has requests in flight, and each round trip costs a
// write and a read system call and a wake-up on both sides: on a busy
// instance that cost more than the scripts themselves. So an Apply that
// finds no round trip of Applies in flight sends its own at once, as it
// always did (nothing waits when the gateway is idle); those that arrive
// while one is in flight queue, and go together as one pipeline as soon as
// it ends: one batch in flight at a time, of what came meanwhile. Under
// load an Apply may so wait for the round trip in flight before its own:
// one round trip more at most, against one round trip, one write and one
// read per Apply saved; a batch grows with the load, so the rate Redis
// can be asked for is not bounded by round trips.
//
// go-redis's AutoPipeline does this too, but a caller waiting there does
// not give up at its deadline: with Redis hung, TestApplyHungRedis's
// Applies waited far past their timeout, where a gateway must turn to its
// standby state in about the timeout.

// applyCall is one Apply's script call.
type applyCall struct {
	// ctx is the caller's, bounded by the timeout: a call still queued when
	// it ends is not sent (its caller has been told it failed).
	ctx   context.Context
	args  []any // the command's: see applyCmd
	reply []int64
	err   error
	done  chan struct{} // closed once reply and err are set
}

// applier queues the Applies that arrive while a round trip is in flight.
type applier struct {
	mu      sync.Mutex
	queue   []*applyCall
	sending bool // a round trip of Applies is in flight, or about to be
}

// maxBatch bounds one pipeline; a longer queue goes in several.
const maxBatch = 256

// applyCmd is the command that runs the apply script: EVALSHA, or with
// eval EVAL and the script itself, which Redis caches again. args are
// Apply's: their first two are the command's name and the script (or its
// SHA1), filled in here, then the key count, the keys and ARGV. Its reply, an
// array of integers, is read into an []int64 as it comes (a *redis.Cmd
// would box each integer first).
func applyCmd(ctx context.Context, args []any, eval bool) *redis.IntSliceCmd {
	if eval {
		args[0], args[1] = "eval", applySource
	} else {
		args[0], args[1] = "evalsha", applyScript.Hash()
	}
	return redis.NewIntSliceCmd(ctx, args...)
}

// runApply runs the apply script with args (see applyCmd) and returns
// its reply.
func (s *State) runApply(ctx context.Context, args []any) ([]int64, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	a := &s.applier
	a.mu.Lock()
	if !a.sending {
		a.sending = true
		a.mu.Unlock()
		cmd := applyCmd(ctx, args, false)
		_ = s.rdb.Process(ctx, redisclient.OnceInts{IntSliceCmd: cmd})
		if redisclient.NoScript(cmd.Err()) {
			cmd = applyCmd(ctx, args, true)
			_ = s.rdb.Process(ctx, redisclient.OnceInts{IntSliceCmd: cmd})
		}
		s.sendQueued()
		return cmd.Result()
	}
	c := &applyCall{ctx: ctx, args: args, done: make(chan struct{})}
	a.queue = append(a.queue, c)
	a.mu.Unlock()
	select {
	case <-c.done:
		return c.reply, c.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// sendQueued ends a round trip: what queued meanwhile goes next, sent by a
// goroutine of its own (the caller whose call just returned must not wait
// for other requests' round trips), which goes on until the queue is
// empty.
func (s *State) sendQueued() {
	a := &s.applier
	a.mu.Lock()
	if len(a.queue) == 0 {
		a.sending = false
		a.mu.Unlock()
		return
	}
	a.mu.Unlock()
	go func() {
		var batch []*applyCall
		for {
			a.mu.Lock()
			if len(a.queue) == 0 {
				a.sending = false
				a.mu.Unlock()
				return
			}
			n := min(len(a.queue), maxBatch)
			batch = append(batch[:0], a.queue[:n]...)
			rest := copy(a.queue, a.queue[n:])
			clear(a.queue[rest:])
			a.queue = a.queue[:rest]
			a.mu.Unlock()
			s.pipelineApplies(batch)
			clear(batch)
		}
	}()
}

// pipelineApplies sends the calls still wanted in one pipeline and hands
// each its reply.
func (s *State) pipelineApplies(batch []*applyCall) {
	calls := batch[:0]
	for _, c := range batch {
		if err := c.ctx.Err(); err != nil {
			c.err = err
			close(c.done)
			continue
		}
		calls = append(calls, c)
	}
	if len(calls) == 0 {
		return
	}
	// The State's context: Close ends a round trip in flight.
	ctx, cancel := context.WithTimeout(s.ctx, s.timeout)
	defer cancel()
	cmds := make([]*redis.IntSliceCmd, len(calls))
	err := s.pipeline(ctx, calls, cmds, false)
	// Calls that found no script go again, with it; the rest have their
	// replies.
	var again []*applyCall
	for i, c := range calls {
		if redisclient.NoScript(cmds[i].Err()) {
			again = append(again, c)
			continue
		}
		c.reply, c.err = reply(cmds[i], err)
		close(c.done)
	}
	if len(again) > 0 {
		cmds = cmds[:len(again)]
		err = s.pipeline(ctx, again, cmds, true)
		for i, c := range again {
			c.reply, c.err = reply(cmds[i], err)
			close(c.done)
		}
	}
}

// pipeline sends the calls' commands (applyCmd) in one pipeline and puts
// each one's into cmds.
func (s *State) pipeline(ctx context.Context, calls []*applyCall, cmds []*redis.IntSliceCmd, eval bool) error {
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, c := range calls {
			cmds[i] = applyCmd(ctx, c.args, eval)
			_ = p.Process(ctx, redisclient.OnceInts{IntSliceCmd: cmds[i]})
		}
		return nil
	})
	return err
}

// reply is a pipelined command's reply; err is the pipeline's, for a
// command that has neither a reply nor an error of its own.
func reply(cmd *redis.IntSliceCmd, err error) ([]int64, error) {
	r, cerr := cmd.Result()
	if cerr == nil && r == nil && err != nil {
		cerr = err
	}
	return r, cerr
}

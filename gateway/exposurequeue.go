package gateway

import (
	"fmt"
	"sync"

	"go.uber.org/zap"

	"github.com/modelgate/modelgate/keys"
)

// exposureCheck is a key found in a request: its digest, where it was
// seen, and whether the in-memory index knew it (a managed key, then) or it
// must be looked up in storage.
type exposureCheck struct {
	digest [32]byte
	known  bool
	e      keys.Exposure
}

// maxQueuedLookups bounds the storage lookups waiting in an exposure
// queue: a flood of requests full of fake keys makes it drop lookups
// (counted in exposure_checks_skipped_total), never grow.
const maxQueuedLookups = 1024

// exposureQueue runs the checks of keys found in requests in the
// background, one at a time, on a goroutine that runs while there is work.
// Checks of keys the in-memory index knows are never dropped: they are
// real keys, each queued once however many requests carry it, so their
// number is bounded by the keys in storage. Storage lookups of keys it
// does not know wait in a bounded queue. A digest already waiting is not
// queued again.
type exposureQueue struct {
	run     func(exposureCheck)
	logger  *zap.Logger
	skipped func(reason string, n int) // told of the lookups dropped

	mu      sync.Mutex
	idle    sync.Cond // signalled when the goroutine stops
	known   []exposureCheck
	lookups []exposureCheck
	queued  map[[32]byte]struct{} // the digests of known and lookups
	running bool
}

// newExposureQueue returns a queue whose checks run runs, and which tells
// skipped of the lookups it drops.
func newExposureQueue(run func(exposureCheck), logger *zap.Logger, skipped func(reason string, n int)) *exposureQueue {
	q := &exposureQueue{run: run, logger: logger, skipped: skipped, queued: make(map[[32]byte]struct{})}
	q.idle.L = &q.mu
	return q
}

// add queues the checks and starts the goroutine if it is not running.
func (q *exposureQueue) add(checks []exposureCheck) {
	dropped := 0
	q.mu.Lock()
	for _, c := range checks {
		if _, ok := q.queued[c.digest]; ok {
			continue
		}
		switch {
		case c.known:
			q.known = append(q.known, c)
		case len(q.lookups) < maxQueuedLookups:
			q.lookups = append(q.lookups, c)
		default:
			dropped++
			continue
		}
		q.queued[c.digest] = struct{}{}
	}
	start := !q.running && len(q.known)+len(q.lookups) > 0
	if start {
		q.running = true
	}
	q.mu.Unlock()
	if dropped > 0 {
		q.skipped("queue_full", dropped)
	}
	if start {
		go q.drain()
	}
}

// drain runs the queued checks, known keys first, until none is left.
func (q *exposureQueue) drain() {
	for {
		q.mu.Lock()
		var c exposureCheck
		switch {
		case len(q.known) > 0:
			c, q.known = q.known[0], q.known[1:]
		case len(q.lookups) > 0:
			c, q.lookups = q.lookups[0], q.lookups[1:]
		default:
			q.known, q.lookups, q.running = nil, nil, false
			q.idle.Broadcast()
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
		q.runOne(c)
		q.mu.Lock()
		delete(q.queued, c.digest)
		q.mu.Unlock()
	}
}

// runOne runs one check; a panic is logged, and the queue goes on.
func (q *exposureQueue) runOne(c exposureCheck) {
	defer recoverLog(q.logger, "checking a key found in a request")
	q.run(c)
}

// wait returns once the queue is empty and its goroutine stopped.
func (q *exposureQueue) wait() {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.running {
		q.idle.Wait()
	}
}

// recoverLog logs a panic of a background goroutine instead of ending the
// process.
func recoverLog(log *zap.Logger, doing string) {
	if v := recover(); v != nil {
		log.Error("panic while "+doing, zap.String("panic", fmt.Sprint(v)))
	}
}

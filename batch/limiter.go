package batch

import (
	"context"
	"sync"
)

// limiter is a counting semaphore whose size can change while it is in
// use (a reload may change workers). Waiters are served in order.
type limiter struct {
	mu      sync.Mutex
	limit   int
	used    int
	waiters []chan struct{}
}

func newLimiter(n int) *limiter { return &limiter{limit: n} }

func (l *limiter) acquire(ctx context.Context) error {
	l.mu.Lock()
	if l.used < l.limit && len(l.waiters) == 0 {
		l.used++
		l.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	l.waiters = append(l.waiters, ch)
	l.mu.Unlock()

	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		l.mu.Lock()
		for i, w := range l.waiters {
			if w == ch {
				l.waiters = append(l.waiters[:i], l.waiters[i+1:]...)
				l.mu.Unlock()
				return ctx.Err()
			}
		}
		l.mu.Unlock()
		l.release() // the slot was handed over as ctx ended: give it back
		return ctx.Err()
	}
}

func (l *limiter) release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.used <= l.limit && len(l.waiters) > 0 {
		ch := l.waiters[0]
		l.waiters = l.waiters[1:]
		close(ch) // the slot passes to the waiter: used stays
		return
	}
	l.used--
}

func (l *limiter) setLimit(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.limit = n
	for l.used < l.limit && len(l.waiters) > 0 {
		l.used++
		close(l.waiters[0])
		l.waiters = l.waiters[1:]
	}
}

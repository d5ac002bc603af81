package batch

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func (l *limiter) state() (used, waiting int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.used, len(l.waiters)
}

// waitQueued waits until n acquires wait on l.
func waitQueued(t *testing.T, l *limiter, n int) {
	t.Helper()
	waitUntil(t, "waiters to queue", func() bool { _, w := l.state(); return w == n })
}

// acquireAsync acquires in a goroutine; the channel gets its result.
func acquireAsync(ctx context.Context, l *limiter) chan error {
	ch := make(chan error, 1)
	go func() { ch <- l.acquire(ctx) }()
	return ch
}

func acquired(ch chan error) bool {
	select {
	case err := <-ch:
		if err != nil {
			panic(err)
		}
		return true
	default:
		return false
	}
}

func mustGet(t *testing.T, ch chan error) {
	t.Helper()
	select {
	case err := <-ch:
		if err != nil {
			t.Fatalf("acquire: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("acquire still waits")
	}
}

func TestLimiterAcquireRelease(t *testing.T) {
	ctx := context.Background()
	l := newLimiter(2)
	for range 2 {
		if err := l.acquire(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Waiters queue, and are served in order.
	w1 := acquireAsync(ctx, l)
	waitQueued(t, l, 1)
	w2 := acquireAsync(ctx, l)
	waitQueued(t, l, 2)
	if acquired(w1) || acquired(w2) {
		t.Fatal("an acquire beyond the limit went through")
	}
	l.release()
	mustGet(t, w1)
	if used, waiting := l.state(); used != 2 || waiting != 1 || acquired(w2) {
		t.Fatalf("after one release: used %d, waiting %d", used, waiting)
	}
	l.release()
	mustGet(t, w2)
	l.release()
	l.release()
	if used, waiting := l.state(); used != 0 || waiting != 0 {
		t.Fatalf("all released: used %d, waiting %d", used, waiting)
	}
}

func TestLimiterSetLimit(t *testing.T) {
	ctx := context.Background()
	l := newLimiter(1)
	if err := l.acquire(ctx); err != nil {
		t.Fatal(err)
	}
	var ws []chan error
	for i := range 4 {
		ws = append(ws, acquireAsync(ctx, l))
		waitQueued(t, l, i+1)
	}
	// Up: two more slots go to the first two waiters.
	l.setLimit(3)
	mustGet(t, ws[0])
	mustGet(t, ws[1])
	if used, waiting := l.state(); used != 3 || waiting != 2 {
		t.Fatalf("after raising the limit to 3: used %d, waiting %d", used, waiting)
	}
	// Down to 1 with 3 in use: a waiter gets a slot only when one is free
	// under the new limit, after three releases.
	l.setLimit(1)
	l.release()
	l.release()
	if used, waiting := l.state(); used != 1 || waiting != 2 || acquired(ws[2]) {
		t.Fatalf("after two releases under limit 1: used %d, waiting %d", used, waiting)
	}
	l.release()
	mustGet(t, ws[2])
	if used, waiting := l.state(); used != 1 || waiting != 1 {
		t.Fatalf("after the third release: used %d, waiting %d", used, waiting)
	}
	l.release()
	mustGet(t, ws[3])
	l.release()
	if used, waiting := l.state(); used != 0 || waiting != 0 {
		t.Fatalf("all released: used %d, waiting %d", used, waiting)
	}
}

func TestLimiterCancelledWaiter(t *testing.T) {
	l := newLimiter(1)
	if err := l.acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := acquireAsync(ctx, l)
	waitQueued(t, l, 1)
	w2 := acquireAsync(context.Background(), l)
	waitQueued(t, l, 2)
	cancel()
	if err := <-w; !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled acquire returned %v", err)
	}
	if used, waiting := l.state(); used != 1 || waiting != 1 {
		t.Fatalf("after the cancel: used %d, waiting %d", used, waiting)
	}
	l.release() // goes to w2, not to the cancelled waiter
	mustGet(t, w2)
	l.release()
	if used, waiting := l.state(); used != 0 || waiting != 0 {
		t.Fatalf("a slot leaked: used %d, waiting %d", used, waiting)
	}
}

// TestLimiterCancelAsHandedOver: a waiter whose ctx ends as the slot is
// handed to it either keeps the slot or gives it back; none leaks.
func TestLimiterCancelAsHandedOver(t *testing.T) {
	kept, returned := 0, 0
	for range 200 {
		l := newLimiter(1)
		_ = l.acquire(context.Background())
		ctx, cancel := context.WithCancel(context.Background())
		w := acquireAsync(ctx, l)
		waitQueued(t, l, 1)
		// Both at once: the slot is handed over while ctx ends.
		l.mu.Lock()
		cancel()
		ch := l.waiters[0]
		l.waiters = l.waiters[1:]
		close(ch)
		l.mu.Unlock()
		if err := <-w; err == nil {
			kept++
			l.release()
		} else {
			returned++
		}
		if used, waiting := l.state(); used != 0 || waiting != 0 {
			t.Fatalf("used %d, waiting %d after the handover", used, waiting)
		}
	}
	t.Logf("kept %d, gave back %d", kept, returned)
}

// TestLimiterStress: under acquires that time out and a changing limit,
// no more run at once than the limit allows, and nothing leaks.
func TestLimiterStress(t *testing.T) {
	l := newLimiter(3)
	var (
		mu      sync.Mutex
		running int
		limit   = 3
		wg      sync.WaitGroup
		bad     atomic.Int64
	)
	setLimit := func(n int) {
		mu.Lock()
		limit = max(limit, n) // a lower limit binds only once the excess is released
		mu.Unlock()
		l.setLimit(n)
	}
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 9))
			for range 200 {
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(r.IntN(200))*time.Microsecond)
				if l.acquire(ctx) == nil {
					mu.Lock()
					running++
					if running > limit {
						bad.Add(1)
					}
					mu.Unlock()
					time.Sleep(time.Duration(r.IntN(50)) * time.Microsecond)
					mu.Lock()
					running--
					mu.Unlock()
					l.release()
				}
				cancel()
			}
		}()
	}
	for i := range 50 {
		setLimit(1 + i%5)
		time.Sleep(100 * time.Microsecond)
	}
	wg.Wait()
	if bad.Load() > 0 {
		t.Errorf("%d times more ran than the limit", bad.Load())
	}
	if used, waiting := l.state(); used != 0 || waiting != 0 {
		t.Errorf("at the end: used %d, waiting %d", used, waiting)
	}
}

package statetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/modelgate/modelgate/state"
)

// OpenDeadlines opens fresh deadlines for one test, empty and apart from
// every other test's, as n instances would hold them, and closes them
// when t ends.
type OpenDeadlines func(t *testing.T, n int) []state.Deadlines

// RunDeadlines runs the conformance suite of state.Deadlines.
func RunDeadlines(t *testing.T, open OpenDeadlines) {
	tests := []struct {
		name string
		f    func(t *testing.T, open OpenDeadlines)
	}{
		{"OnlyLater", testDeadlineOnlyLater},
		{"GetInOrder", testDeadlineGet},
		{"Passes", testDeadlinePasses},
		{"PastIsNothing", testDeadlinePast},
		{"Clear", testDeadlineClear},
		{"SharedByInstances", testDeadlineShared},
		{"Concurrent", testDeadlineConcurrent},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.f(t, open) })
	}
}

// ms is t at the deadlines' precision.
func msOf(t time.Time) time.Time { return time.UnixMilli(t.UnixMilli()) }

func testDeadlineOnlyLater(t *testing.T, open OpenDeadlines) {
	d := open(t, 1)[0]
	ctx := ctxT(t)
	now := time.Now()
	later, earlier, latest := msOf(now.Add(time.Minute)), msOf(now.Add(30*time.Second)), msOf(now.Add(2*time.Minute))
	if got := must(d.ExtendDeadline(ctx, "a", later))(t); !got.Equal(later) {
		t.Fatalf("first extend holds %v, want %v", got, later)
	}
	if got := must(d.ExtendDeadline(ctx, "a", earlier))(t); !got.Equal(later) {
		t.Fatalf("an earlier deadline replaced the later one: holds %v, want %v", got, later)
	}
	if got := must(d.ExtendDeadline(ctx, "a", latest))(t); !got.Equal(latest) {
		t.Fatalf("a later deadline was not taken: holds %v, want %v", got, latest)
	}
	if got := must(d.GetDeadlines(ctx, "a"))(t); !got[0].Equal(latest) {
		t.Fatalf("GetDeadlines = %v, want %v", got[0], latest)
	}
}

func testDeadlineGet(t *testing.T, open OpenDeadlines) {
	d := open(t, 1)[0]
	ctx := ctxT(t)
	now := time.Now()
	a, c := msOf(now.Add(time.Minute)), msOf(now.Add(3*time.Minute))
	must(d.ExtendDeadline(ctx, "a", a))(t)
	must(d.ExtendDeadline(ctx, "c", c))(t)
	got := must(d.GetDeadlines(ctx, "c", "b", "a"))(t)
	if len(got) != 3 || !got[0].Equal(c) || !got[1].IsZero() || !got[2].Equal(a) {
		t.Fatalf("GetDeadlines(c, b, a) = %v, want [%v 0 %v]", got, c, a)
	}
	if got := must(d.GetDeadlines(ctx))(t); len(got) != 0 {
		t.Fatalf("GetDeadlines() = %v, want nothing", got)
	}
}

func testDeadlinePasses(t *testing.T, open OpenDeadlines) {
	d := open(t, 1)[0]
	ctx := ctxT(t)
	must(d.ExtendDeadline(ctx, "a", time.Now().Add(150*time.Millisecond)))(t)
	if got := must(d.GetDeadlines(ctx, "a"))(t); got[0].IsZero() {
		t.Fatal("the deadline is gone before its time")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if got := must(d.GetDeadlines(ctx, "a"))(t); got[0].IsZero() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a deadline still holds seconds after its time")
		}
		time.Sleep(25 * time.Millisecond)
	}
	// Once passed, an earlier time than the passed one is taken again.
	next := msOf(time.Now().Add(time.Minute))
	if got := must(d.ExtendDeadline(ctx, "a", next))(t); !got.Equal(next) {
		t.Fatalf("after it passed, extend holds %v, want %v", got, next)
	}
}

func testDeadlinePast(t *testing.T, open OpenDeadlines) {
	d := open(t, 1)[0]
	ctx := ctxT(t)
	if got := must(d.ExtendDeadline(ctx, "a", time.Now().Add(-time.Second)))(t); !got.IsZero() {
		t.Fatalf("a deadline in the past holds %v, want none", got)
	}
	if got := must(d.GetDeadlines(ctx, "a"))(t); !got[0].IsZero() {
		t.Fatalf("a deadline in the past is kept: %v", got[0])
	}
}

func testDeadlineClear(t *testing.T, open OpenDeadlines) {
	d := open(t, 1)[0]
	ctx := ctxT(t)
	must(d.ExtendDeadline(ctx, "a", time.Now().Add(time.Hour)))(t)
	if err := d.ClearDeadline(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if got := must(d.GetDeadlines(ctx, "a"))(t); !got[0].IsZero() {
		t.Fatalf("cleared deadline still holds %v", got[0])
	}
	if err := d.ClearDeadline(ctx, "never-set"); err != nil {
		t.Fatalf("clearing a missing deadline: %v", err)
	}
	// A cleared deadline may be set earlier than it was.
	soon := msOf(time.Now().Add(time.Minute))
	if got := must(d.ExtendDeadline(ctx, "a", soon))(t); !got.Equal(soon) {
		t.Fatalf("after clear, extend holds %v, want %v", got, soon)
	}
}

func testDeadlineShared(t *testing.T, open OpenDeadlines) {
	ds := open(t, 2)
	ctx := ctxT(t)
	until := msOf(time.Now().Add(time.Minute))
	must(ds[0].ExtendDeadline(ctx, "a", until))(t)
	if got := must(ds[1].GetDeadlines(ctx, "a"))(t); !got[0].Equal(until) {
		t.Fatalf("the other instance reads %v, want %v", got[0], until)
	}
	if err := ds[1].ClearDeadline(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if got := must(ds[0].GetDeadlines(ctx, "a"))(t); !got[0].IsZero() {
		t.Fatalf("cleared on one instance, the other still reads %v", got[0])
	}
}

func testDeadlineConcurrent(t *testing.T, open OpenDeadlines) {
	ds := open(t, 2)
	ctx := ctxT(t)
	base := time.Now().Add(time.Minute)
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 40 {
		wg.Go(func() {
			// Interleaved: the latest is set by neither the first nor the
			// last goroutine.
			until := base.Add(time.Duration((i*17)%40) * time.Second)
			if _, err := ds[i%2].ExtendDeadline(ctx, "a", until); err != nil {
				errs <- fmt.Errorf("extend %d: %w", i, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	want := msOf(base.Add(39 * time.Second))
	if got := must(ds[0].GetDeadlines(ctx, "a"))(t); !got[0].Equal(want) {
		t.Fatalf("after concurrent extends the deadline is %v, want the latest %v", got[0], want)
	}
}

package batch

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/modelgate/modelgate/internal/storagetest"
	"go.uber.org/zap"
)

// finishedCalls records the calls of Live.Finished.
type finishedCalls struct {
	mu    sync.Mutex
	calls []Batch
}

func (f *finishedCalls) add(owner string, b Batch) {
	if owner != testOwner {
		panic("Finished told of owner " + owner)
	}
	f.mu.Lock()
	f.calls = append(f.calls, b)
	f.mu.Unlock()
}

func (f *finishedCalls) of(id string) []Batch {
	f.mu.Lock()
	defer f.mu.Unlock()
	var bs []Batch
	for _, b := range f.calls {
		if b.ID == id {
			bs = append(bs, b)
		}
	}
	return bs
}

// TestFinishedToldOnce: Live.Finished hears of every final status once,
// with the batch as stored, also when two runners share the batch.
func TestFinishedToldOnce(t *testing.T) {
	t.Parallel()
	lines := func(n int, model string) []string {
		ls, _ := chatLines(model, model, n)
		return ls
	}
	for _, tc := range []struct {
		name    string
		lines   []string
		window  time.Duration
		cancel  bool
		runners int
		status  string
	}{
		{"completed by two runners", lines(40, "ok"), time.Hour, false, 2, StatusCompleted},
		{"failed validation", append(lines(3, "ok"), `{"custom_id":`), time.Hour, false, 1, StatusFailed},
		{"cancelled", lines(5, "ok"), time.Hour, true, 2, StatusCancelled},
		{"expired", lines(5, "ok"), time.Millisecond, false, 1, StatusExpired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := NewStore(storagetest.NewMemory(), "mg")
			b := createBatch(t, st, putInput(t, st, tc.lines...), tc.window)
			if tc.cancel {
				if _, err := st.CancelBatch(context.Background(), testOwner, b.ID); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(5 * time.Millisecond) // past the expiring window
			var calls finishedCalls
			ex := newFakeExecutor()
			for i := range tc.runners {
				startRunner(t, st, fmt.Sprintf("inst-%d", i), func() (Live, bool) {
					return Live{Settings: testSettings(), Executor: ex, Logger: zap.NewNop(), Finished: calls.add}, true
				})
			}
			b = waitStatus(t, st, b.ID, tc.status)
			// The call follows the stored record; give it a moment, and
			// the other runner its chance to call twice.
			time.Sleep(20 * testPoll)
			got := calls.of(b.ID)
			if len(got) != 1 {
				t.Fatalf("Finished called %d times", len(got))
			}
			if got[0].Status != tc.status || got[0].RequestCounts != b.RequestCounts ||
				(b.OutputFileID == nil) != (got[0].OutputFileID == nil) {
				t.Errorf("told %+v, stored %+v", got[0], b)
			}
		})
	}
}

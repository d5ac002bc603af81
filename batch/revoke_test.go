package batch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelgate/modelgate/internal/storagetest"
	"go.uber.org/zap"
)

// keyedBatch creates a chat batch of testOwner over lines, created by the
// key key_test (name "ci").
func keyedBatch(t *testing.T, st *Store, lines []string) Batch {
	t.Helper()
	b, err := st.CreateBatch(context.Background(), testOwner, CreateParams{
		InputFileID: putInput(t, st, lines...).ID, Endpoint: EndpointChat, CompletionWindow: "24h",
		Window: time.Hour, KeyID: "key_test", KeyName: "ci",
	})
	if err != nil {
		t.Fatalf("CreateBatch: %v", err)
	}
	return b
}

// keyCheck is a Live.KeyGone that says what gone says, and records what
// it was asked and which batches the runner cancelled.
type keyCheck struct {
	gone      atomic.Bool
	err       error
	mu        sync.Mutex
	asked     []string // "owner/keyID/keyName"
	cancelled []string
}

func (k *keyCheck) live(set Settings, ex Executor) func() (Live, bool) {
	return func() (Live, bool) {
		return Live{Settings: set, Executor: ex, Logger: zap.NewNop(),
			KeyGone: func(_ context.Context, owner, keyID, keyName string) (bool, error) {
				k.mu.Lock()
				k.asked = append(k.asked, owner+"/"+keyID+"/"+keyName)
				k.mu.Unlock()
				return k.gone.Load(), k.err
			},
			Cancelled: func(id string) {
				k.mu.Lock()
				k.cancelled = append(k.cancelled, id)
				k.mu.Unlock()
			},
		}, true
	}
}

// checkRevoked checks that b ended cancelled for its revoked key: its
// errors say so, every line has one result, and every line that never ran
// is in the error file as key_revoked, naming the key, with its custom_id.
func checkRevoked(t *testing.T, st *Store, b Batch, want []string, answered map[string]int) {
	t.Helper()
	if b.Status != StatusCancelled || b.CancellingAt == nil || b.CancelledAt == nil {
		t.Errorf("status %s, cancelling_at %v, cancelled_at %v", b.Status, b.CancellingAt, b.CancelledAt)
	}
	if b.Errors == nil || len(b.Errors.Data) != 1 || b.Errors.Data[0].Code != CancelKeyRevoked ||
		!strings.Contains(b.Errors.Data[0].Message, `"ci" (key_test)`) {
		t.Errorf("errors %+v, want one key_revoked naming the key", b.Errors)
	}
	out, errs := readResultFile(t, st, b.OutputFileID), readResultFile(t, st, b.ErrorFileID)
	checkExactlyOnce(t, want, out, errs)
	for _, l := range out {
		if answered[l.CustomID] != 1 {
			t.Errorf("%s is in the output file, answered %d times", l.CustomID, answered[l.CustomID])
		}
	}
	for _, l := range errs {
		if answered[l.CustomID] != 0 {
			t.Errorf("%s was answered, yet is in the error file", l.CustomID)
		}
		if l.Response != nil || l.Error == nil || l.Error.Code != CancelKeyRevoked ||
			!strings.Contains(l.Error.Message, `"ci" (key_test)`) || !strings.Contains(l.Error.Message, "revoked") {
			t.Errorf("error line %s", l.raw)
		}
	}
	if b.RequestCounts != (RequestCounts{Total: len(want), Completed: len(out), Failed: len(errs)}) {
		t.Errorf("request_counts %+v for %d output and %d error lines", b.RequestCounts, len(out), len(errs))
	}
}

// TestKeyRevokedCancels: once Live.KeyGone says the key that created a
// running batch is gone, the batch is cancelled for it: no line is sent
// after, the lines answered before keep their results, every other line
// ends as key_revoked naming the key, and Cancelled is told once.
func TestKeyRevokedCancels(t *testing.T) {
	t.Parallel()
	mem := storagetest.NewMemory()
	statuses := watchStatuses(mem)
	st := NewStore(mem, "mg")
	ex := newFakeExecutor()
	ex.delay = 20 * time.Millisecond
	lines, want := chatLines("r", "slow", 60)
	b := keyedBatch(t, st, lines)
	set := testSettings()
	set.Workers, set.PerProvider = 2, 2
	var k keyCheck
	startRunner(t, st, "inst-a", k.live(set, ex))
	waitUntil(t, "some lines to be answered", func() bool { return len(ex.answeredIDs()) >= 4 })

	k.gone.Store(true)
	b = waitStatus(t, st, b.ID, StatusCancelled)
	sent := ex.totalCalls()
	time.Sleep(20 * testPoll)
	if n := ex.totalCalls(); n != sent {
		t.Errorf("%d lines sent after the batch was cancelled for its revoked key", n-sent)
	}
	if got := statuses.of(b.ID); !slices.Equal(got, []string{StatusValidating, StatusInProgress, StatusCancelling, StatusCancelled}) {
		t.Errorf("statuses %v", got)
	}
	answered := ex.answeredIDs()
	if len(answered) == 0 || len(answered) == len(want) {
		t.Fatalf("%d of %d lines answered: the key was not revoked mid-batch", len(answered), len(want))
	}
	checkRevoked(t, st, b, want, answered)
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.asked) == 0 || k.asked[0] != testOwner+"/key_test/ci" {
		t.Errorf("KeyGone was asked %v", k.asked)
	}
	if !slices.Equal(k.cancelled, []string{b.ID}) {
		t.Errorf("Cancelled was told %v, want the batch once", k.cancelled)
	}
	checkCleanedUp(t, mem, st, b.ID)
}

// goneExecutor answers every request KeyGone once gone is set, without
// running it, as modelgate's executor does for a line whose key it cannot
// find; before, it is the fake.
type goneExecutor struct {
	*fakeExecutor
	gone    atomic.Bool
	refused atomic.Int64
}

func (g *goneExecutor) Do(ctx context.Context, req Request) Response {
	if g.gone.Load() {
		g.refused.Add(1)
		return Response{KeyGone: true}
	}
	return g.fakeExecutor.Do(ctx, req)
}

// TestKeyGoneLine: a line the executor refuses because its key is gone is
// not run, and it cancels the batch as a revoked key's, even when the
// runner's own check (Live.KeyGone, unset here) never said so: the
// executor is the last guard, and a line never runs without its key.
func TestKeyGoneLine(t *testing.T) {
	t.Parallel()
	st := NewStore(storagetest.NewMemory(), "mg")
	ex := &goneExecutor{fakeExecutor: newFakeExecutor()}
	ex.delay = 20 * time.Millisecond
	lines, want := chatLines("g", "slow", 60)
	b := keyedBatch(t, st, lines)
	set := testSettings()
	set.Workers, set.PerProvider = 2, 2
	var cancelled atomic.Int64
	startRunner(t, st, "inst-a", func() (Live, bool) {
		return Live{Settings: set, Executor: ex, Logger: zap.NewNop(), Cancelled: func(string) { cancelled.Add(1) }}, true
	})
	waitUntil(t, "some lines to be answered", func() bool { return len(ex.answeredIDs()) >= 4 })
	ex.gone.Store(true)
	b = waitStatus(t, st, b.ID, StatusCancelled)
	answered := ex.answeredIDs()
	if len(answered) == len(want) {
		t.Fatal("every line was answered")
	}
	checkRevoked(t, st, b, want, answered)
	if ex.refused.Load() == 0 || cancelled.Load() != 1 {
		t.Errorf("%d lines refused, Cancelled told %d times; want some, and once", ex.refused.Load(), cancelled.Load())
	}
}

// TestKeyRevokedBeforeValidation: a batch whose key is gone before a
// runner validated it is cancelled without a look at its input.
func TestKeyRevokedBeforeValidation(t *testing.T) {
	t.Parallel()
	st := NewStore(storagetest.NewMemory(), "mg")
	ex := newFakeExecutor()
	b := keyedBatch(t, st, []string{chatLine("a", "ok"), chatLine("b", "ok")})
	var k keyCheck
	k.gone.Store(true)
	startRunner(t, st, "inst-a", k.live(testSettings(), ex))
	b = waitStatus(t, st, b.ID, StatusCancelled)
	if ex.totalCalls() != 0 || ex.checks.Load() != 0 {
		t.Errorf("%d requests sent, %d lines checked; want none", ex.totalCalls(), ex.checks.Load())
	}
	if b.Errors == nil || len(b.Errors.Data) != 1 || b.Errors.Data[0].Code != CancelKeyRevoked {
		t.Errorf("errors %+v", b.Errors)
	}
}

// TestKeyGoneUndecided: while KeyGone cannot tell (an error: the keys
// cannot be read just now), the batch runs on; and a batch's own cancel
// still ends its lines as batch_cancelled.
func TestKeyGoneUndecided(t *testing.T) {
	t.Parallel()
	st := NewStore(storagetest.NewMemory(), "mg")
	ex := newFakeExecutor()
	lines, want := chatLines("u", "ok", 20)
	b := keyedBatch(t, st, lines)
	k := keyCheck{err: errors.New("storage unreachable")}
	k.gone.Store(true)
	startRunner(t, st, "inst-a", k.live(testSettings(), ex))
	b = waitStatus(t, st, b.ID, StatusCompleted)
	if b.RequestCounts.Completed != len(want) || b.Errors != nil {
		t.Errorf("%+v, errors %+v", b.RequestCounts, b.Errors)
	}
}

func TestUnfinishedError(t *testing.T) {
	revoked := &Errors{Object: "list", Data: []ErrorEntry{{Code: CancelKeyRevoked}}}
	for _, tc := range []struct {
		rec    batchRecord
		status string
		code   string
		names  string
	}{
		{batchRecord{}, StatusCancelled, "batch_cancelled", ""},
		{batchRecord{}, StatusExpired, "batch_expired", ""},
		{batchRecord{Batch: Batch{Errors: revoked}, KeyID: "key_1", KeyName: "ci"}, StatusCancelled, CancelKeyRevoked, `the API key "ci" (key_1)`},
		{batchRecord{Batch: Batch{Errors: revoked}, KeyName: "alice"}, StatusCancelled, CancelKeyRevoked, `the API key "alice" that`},
		{batchRecord{Batch: Batch{Errors: revoked}}, StatusCancelled, CancelKeyRevoked, "the API key that created the batch was revoked"},
		// Expiry wins: the window ended first.
		{batchRecord{Batch: Batch{Errors: revoked}, KeyName: "ci"}, StatusExpired, "batch_expired", ""},
	} {
		t.Run(fmt.Sprintf("%s/%s/%s", tc.status, tc.rec.KeyName, tc.code), func(t *testing.T) {
			code, msg := unfinishedError(&tc.rec, tc.status)
			if code != tc.code || !strings.Contains(msg, tc.names) {
				t.Errorf("unfinishedError = %q, %q; want %q naming %q", code, msg, tc.code, tc.names)
			}
		})
	}
}

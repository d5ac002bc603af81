package batch

import (
	"context"
	"errors"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/modelgate/modelgate/internal/storagetest"
)

// checkpointed returns the custom_ids whose results are in b's
// checkpoints now.
func checkpointed(t *testing.T, st *Store, b Batch, want []string) map[string]bool {
	t.Helper()
	ctx := context.Background()
	rec, err := st.batchRecord(ctx, testOwner, b.ID)
	if err != nil {
		t.Fatal(err)
	}
	c, err := st.loadClaims(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]bool)
	for i := range c.Parts {
		err := st.readCheckpoints(ctx, st.batchDir(testOwner, b.ID), i, func(idx int, _ bool, _ []byte) {
			out[want[idx]] = true
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestGracefulStop: a runner stopped with Destruct writes what it finished
// and gives up its claims; the next runner does only the rest.
func TestGracefulStop(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem := storagetest.NewMemory()
	st := NewStore(mem, "mg")
	exA := newFakeExecutor()
	exA.delay = 15 * time.Millisecond
	setA := testSettings()
	setA.Workers = 2 // so the batch takes a while
	b, want := chatBatch(t, st, "s", "slow", 35)
	a := startRunner(t, st, "inst-a", staticLive(setA, exA))
	waitUntil(t, "a few answers", func() bool { return len(exA.answeredIDs()) >= 6 })
	if err := a.Destruct(); err != nil {
		t.Fatal(err)
	}
	answeredA := exA.answeredIDs()
	if len(answeredA) == len(want) {
		t.Fatal("the batch finished before the runner was stopped")
	}
	rec, _ := st.batchRecord(ctx, testOwner, b.ID)
	c, err := st.loadClaims(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range c.Parts {
		if p.Holder != "" {
			t.Errorf("part %d is still held by %s after a graceful stop", i, p.Holder)
		}
	}
	if got := checkpointed(t, st, b, want); len(got) != len(answeredA) {
		t.Errorf("%d results checkpointed, %d answered", len(got), len(answeredA))
	}

	exB := newFakeExecutor()
	exB.delay = time.Millisecond
	startRunner(t, st, "inst-b", staticLive(testSettings(), exB))
	b = waitStatus(t, st, b.ID, StatusCompleted)
	checkExactlyOnce(t, want, readResultFile(t, st, b.OutputFileID), readResultFile(t, st, b.ErrorFileID))
	callsB := exB.callCounts()
	for id := range answeredA {
		if callsB[id] > 0 {
			t.Errorf("%s was answered before the stop, and sent again after", id)
		}
	}
	for _, id := range want {
		if answeredA[id] == 0 && callsB[id] != 1 {
			t.Errorf("%s was sent %d times after the stop, want 1", id, callsB[id])
		}
	}
	if b.RequestCounts != (RequestCounts{Total: 35, Completed: 35}) {
		t.Errorf("request_counts %+v", b.RequestCounts)
	}
}

// TestCrashTakeover: a process killed mid-run leaves its claims; the next
// process of the same instance takes them over at once (the lease is a
// minute: waiting for it would time out), re-sends only work finished
// after the last checkpoint, and every line ends with one result.
func TestCrashTakeover(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem := storagetest.NewMemory()
	view := &crashView{Memory: mem}
	stA, stB := NewStore(view, "mg"), NewStore(mem, "mg")
	exA := newFakeExecutor()
	exA.delay = 15 * time.Millisecond
	set := testSettings()
	set.Lease = time.Minute
	setA := set
	setA.Workers = 2
	b, want := chatBatch(t, stB, "s", "slow", 35)
	startRunner(t, stA, "inst-a", staticLive(setA, exA))
	waitUntil(t, "a few answers", func() bool { return len(exA.answeredIDs()) >= 6 })

	// kill -9: nothing more reaches the storage or the upstream.
	exA.dead.Store(true)
	view.crash()
	saved := checkpointed(t, stB, b, want)
	rec, _ := stB.batchRecord(ctx, testOwner, b.ID)
	c, _ := stB.loadClaims(ctx, rec)
	held := 0
	for _, p := range c.Parts {
		if strings.HasPrefix(p.Holder, "inst-a/") && p.Until > time.Now().Add(30*time.Second).UnixMilli() {
			held++
		}
	}
	if held == 0 {
		t.Fatalf("the dead process holds no part: %+v", c.Parts)
	}

	exB := newFakeExecutor()
	exB.delay = time.Millisecond
	startRunner(t, stB, "inst-a", staticLive(set, exB))
	b = waitStatus(t, stB, b.ID, StatusCompleted)
	checkExactlyOnce(t, want, readResultFile(t, stB, b.OutputFileID), readResultFile(t, stB, b.ErrorFileID))

	callsA, callsB := exA.callCounts(), exB.callCounts()
	dups := 0
	for _, id := range want {
		if saved[id] && callsB[id] > 0 {
			t.Errorf("%s was checkpointed before the crash, yet sent again", id)
		}
		if !saved[id] && callsB[id] != 1 {
			t.Errorf("%s had no saved result; it was sent %d times after the crash, want 1", id, callsB[id])
		}
		if callsA[id] > 0 && callsB[id] > 0 {
			dups++
		}
	}
	t.Logf("%d lines checkpointed before the crash, %d sent before it, %d sent again", len(saved), len(callsA), dups)
	checkCleanedUp(t, mem, stB, b.ID)
}

// TestCrashWhileFinalizing: a process killed while it writes the result
// files leaves the batch finalizing; the next one writes them again, to
// the same file IDs, without sending anything again.
func TestCrashWhileFinalizing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem := storagetest.NewMemory()
	view := &crashView{Memory: mem}
	stA, stB := NewStore(view, "mg"), NewStore(mem, "mg")
	ls, want := chatLines("f", "ok", 17)
	in := putInput(t, stB, ls...)
	view.crashOn = func(key string) bool {
		return strings.Contains(key, "/files/") && !strings.Contains(key, in.ID)
	}
	b := createBatch(t, stB, in, time.Hour)
	ex := newFakeExecutor()
	startRunner(t, stA, "inst-a", staticLive(testSettings(), ex))
	waitUntil(t, "the crash", view.crashed.Load)

	rec, err := stB.batchRecord(ctx, testOwner, b.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != StatusFinalizing || rec.OutputFileID == nil {
		t.Fatalf("after the crash the batch is %s with output %v", rec.Status, rec.OutputFileID)
	}
	outID := *rec.OutputFileID

	startRunner(t, stB, "inst-a", staticLive(testSettings(), ex))
	b = waitStatus(t, stB, b.ID, StatusCompleted)
	if b.OutputFileID == nil || *b.OutputFileID != outID || b.ErrorFileID != nil {
		t.Errorf("output %v (chosen before the crash: %s), error %v", b.OutputFileID, outID, b.ErrorFileID)
	}
	checkExactlyOnce(t, want, readResultFile(t, stB, b.OutputFileID))
	checkSentOnce(t, want, ex)
	checkCleanedUp(t, mem, stB, b.ID)
}

// TestTwoRunnersShare: two instances on one storage both work on a batch,
// and each line is sent once and has one result.
func TestTwoRunnersShare(t *testing.T) {
	t.Parallel()
	mem := storagetest.NewMemory()
	st := NewStore(mem, "mg")
	set := testSettings()
	set.Lease = 2 * time.Second
	exA, exB := newFakeExecutor(), newFakeExecutor()
	// Each runner's requests wait until the other has sent one: neither
	// can finish its parts, so each must leave parts to the other (a
	// runner works on at most maxParts at once).
	gateA, gateB := make(chan struct{}), make(chan struct{})
	var onceA, onceB sync.Once
	exA.gate, exB.gate = gateA, gateB
	exA.onCall = func(Request) { onceB.Do(func() { close(gateB) }) }
	exB.onCall = func(Request) { onceA.Do(func() { close(gateA) }) }

	b, want := chatBatch(t, st, "t", "ok", 70) // 10 parts
	startRunner(t, st, "inst-a", staticLive(set, exA))
	startRunner(t, st, "inst-b", staticLive(set, exB))
	b = waitStatus(t, st, b.ID, StatusCompleted)
	checkExactlyOnce(t, want, readResultFile(t, st, b.OutputFileID))
	checkSentOnce(t, want, exA, exB)
	callsA, callsB := exA.callCounts(), exB.callCounts()
	if len(callsA) == 0 || len(callsB) == 0 {
		t.Errorf("A sent %d lines, B %d: both should have had parts", len(callsA), len(callsB))
	}
	t.Logf("A sent %d lines, B %d", len(callsA), len(callsB))
	if b.RequestCounts != (RequestCounts{Total: 70, Completed: 70}) {
		t.Errorf("request_counts %+v", b.RequestCounts)
	}
	checkCleanedUp(t, mem, st, b.ID)
}

// TestDeadInstance: an instance dies holding parts; the other takes them
// over once their lease runs out, and finishes the batch.
func TestDeadInstance(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem := storagetest.NewMemory()
	view := &crashView{Memory: mem}
	stA, stB := NewStore(mem, "mg"), NewStore(view, "mg")
	set := testSettings()
	set.Lease = 300 * time.Millisecond
	exA, exB := newFakeExecutor(), newFakeExecutor()
	gate := make(chan struct{})
	exA.gate = gate
	var (
		mu    sync.Mutex
		calls int
	)
	exB.onCall = func(Request) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls == 1 {
			close(gate)
		}
		if calls == 3 { // B dies as it sends its third request
			exB.dead.Store(true)
			view.crash()
		}
	}
	b, want := chatBatch(t, stA, "d", "ok", 70)
	startRunner(t, stA, "inst-a", staticLive(set, exA))
	startRunner(t, stB, "inst-b", staticLive(set, exB))
	waitUntil(t, "B's death", view.crashed.Load)

	rec, _ := stA.batchRecord(ctx, testOwner, b.ID)
	c, _ := stA.loadClaims(ctx, rec)
	heldByB := 0
	for _, p := range c.Parts {
		if strings.HasPrefix(p.Holder, "inst-b/") {
			heldByB++
		}
	}
	if heldByB == 0 {
		t.Fatalf("the dead instance holds no part: %+v", c.Parts)
	}

	b = waitStatus(t, stA, b.ID, StatusCompleted)
	checkExactlyOnce(t, want, readResultFile(t, stA, b.OutputFileID))
	callsA := exA.callCounts()
	if len(callsA) < len(want)-3 {
		t.Errorf("A sent %d lines; it should have taken over all but B's", len(callsA))
	}
	checkCleanedUp(t, mem, stA, b.ID)
	if n := len(mem.Keys(path.Join(stA.prefix, "active"))); n != 0 {
		t.Errorf("%d active batches left", n)
	}
}

// TestLeaseRenewed: lines slower than the lease keep their parts: the
// holder renews its claims, so the other instance takes nothing over and
// sends nothing twice, also when the store's clock is not the runner's.
func TestLeaseRenewed(t *testing.T) {
	t.Parallel()
	for _, skew := range []time.Duration{0, time.Second} {
		t.Run(skew.String(), func(t *testing.T) {
			t.Parallel()
			st := NewStore(storagetest.NewMemory(), "mg")
			st.now = func() time.Time { return time.Now().Add(skew) }
			set := testSettings()
			exA, exB := newFakeExecutor(), newFakeExecutor()
			exA.delay, exB.delay = 3*set.Lease, 3*set.Lease
			b, want := chatBatch(t, st, "s", "slow", 14)
			startRunner(t, st, "inst-a", staticLive(set, exA))
			startRunner(t, st, "inst-b", staticLive(set, exB))
			b = waitStatus(t, st, b.ID, StatusCompleted)
			checkExactlyOnce(t, want, readResultFile(t, st, b.OutputFileID))
			checkSentOnce(t, want, exA, exB)
		})
	}
}

// outageView is a storage that cannot be reached while down is set: every
// read, write and lock fails, as with Redis stopped.
type outageView struct {
	*storagetest.Memory
	down atomic.Bool
}

var errUnreachable = errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")

func (o *outageView) Store(ctx context.Context, key string, value []byte) error {
	if o.down.Load() {
		return errUnreachable
	}
	return o.Memory.Store(ctx, key, value)
}

func (o *outageView) Load(ctx context.Context, key string) ([]byte, error) {
	if o.down.Load() {
		return nil, errUnreachable
	}
	return o.Memory.Load(ctx, key)
}

func (o *outageView) Delete(ctx context.Context, key string) error {
	if o.down.Load() {
		return errUnreachable
	}
	return o.Memory.Delete(ctx, key)
}

func (o *outageView) List(ctx context.Context, prefix string, recursive bool) ([]string, error) {
	if o.down.Load() {
		return nil, errUnreachable
	}
	return o.Memory.List(ctx, prefix, recursive)
}

func (o *outageView) Lock(ctx context.Context, name string) error {
	if o.down.Load() {
		return errUnreachable
	}
	return o.Memory.Lock(ctx, name)
}

// TestStorageOutage: the storage cannot be reached for a while mid-batch.
// The parts under way go on answering their lines; those that finish meanwhile
// keep their results until the storage is back, rather than dropping them
// to have them sent upstream again. Every line goes upstream once.
func TestStorageOutage(t *testing.T) {
	t.Parallel()
	view := &outageView{Memory: storagetest.NewMemory()}
	st := NewStore(view, "mg")
	ex := newFakeExecutor()
	ex.delay = 5 * time.Millisecond
	set := testSettings()
	set.Workers = 4
	set.Lease = time.Minute // no takeover: this is about one runner
	b, want := chatBatch(t, st, "o", "slow", 70)
	startRunner(t, st, "inst-a", staticLive(set, ex))
	waitUntil(t, "a few answers", func() bool { return len(ex.answeredIDs()) >= 10 })

	view.down.Store(true)
	atDown := len(ex.answeredIDs())
	// The parts under way finish while the storage is down.
	time.Sleep(300 * time.Millisecond)
	duringDown := len(ex.answeredIDs()) - atDown
	view.down.Store(false)

	b = waitStatus(t, st, b.ID, StatusCompleted)
	checkExactlyOnce(t, want, readResultFile(t, st, b.OutputFileID), readResultFile(t, st, b.ErrorFileID))
	if duringDown == 0 {
		t.Fatal("no line was answered while the storage was down")
	}
	for id, n := range ex.callCounts() {
		if n != 1 {
			t.Errorf("%s went upstream %d times", id, n)
		}
	}
	t.Logf("%d lines answered before the outage, %d during it", atDown, duringDown)
}

// TestStorageOutageLogged: a runner that cannot list the batches says so
// once, not at every poll, and says when it can again.
func TestStorageOutageLogged(t *testing.T) {
	t.Parallel()
	view := &outageView{Memory: storagetest.NewMemory()}
	view.down.Store(true)
	core, logs := observer.New(zap.InfoLevel)
	live := func() (Live, bool) {
		return Live{Settings: testSettings(), Executor: newFakeExecutor(), Logger: zap.New(core)}, true
	}
	startRunner(t, NewStore(view, "mg"), "inst-a", live)
	time.Sleep(20 * testPoll)
	view.down.Store(false)
	waitUntil(t, "the runner to say it lists again", func() bool {
		return logs.FilterMessage("listing active batches works again").Len() == 1
	})
	if n := logs.FilterMessageSnippet("listing active batches failed").Len(); n != 1 {
		t.Errorf("the outage was logged %d times over 20 polls, want once", n)
	}
}

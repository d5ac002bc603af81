package batch

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelgate/modelgate/internal/ids"
	"github.com/modelgate/modelgate/internal/storagetest"
	"github.com/tidwall/gjson"
	"go.uber.org/zap"
)

// statusLog records the statuses batch.json is stored with, in order,
// each change once.
type statusLog struct {
	mu       sync.Mutex
	statuses map[string][]string
}

func watchStatuses(mem *storagetest.Memory) *statusLog {
	l := &statusLog{statuses: make(map[string][]string)}
	mem.OnStore(func(key string, value []byte) error {
		if !strings.HasSuffix(key, "/batch.json") {
			return nil
		}
		id := gjson.GetBytes(value, "id").Str
		s := gjson.GetBytes(value, "status").Str
		l.mu.Lock()
		defer l.mu.Unlock()
		if ss := l.statuses[id]; len(ss) == 0 || ss[len(ss)-1] != s {
			l.statuses[id] = append(ss, s)
		}
		return nil
	})
	return l
}

func (l *statusLog) of(id string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.statuses[id])
}

func TestBatchLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem := storagetest.NewMemory()
	statuses := watchStatuses(mem)
	st := NewStore(mem, "mg")
	ex := newFakeExecutor()
	set := testSettings()

	// 24 lines: 4 parts of 7, 7, 7 and 3, the models shuffled.
	models := map[string]string{}
	var want, ls []string
	add := func(model string, n int) {
		for i := range n {
			id := fmt.Sprintf("%s-%d", model, i)
			models[id] = model
			want = append(want, id)
		}
	}
	add("ok", 12)
	add("fail-400", 4)
	add("flaky", 5)
	add("always-500", 3)
	rand.New(rand.NewPCG(5, 6)).Shuffle(len(want), func(i, j int) { want[i], want[j] = want[j], want[i] })
	for _, id := range want {
		ls = append(ls, chatLine(id, models[id]))
	}
	b := createBatch(t, st, putInput(t, st, ls...), time.Hour)
	b.Metadata = nil
	if b.Status != StatusValidating || b.ExpiresAt == nil || *b.ExpiresAt != b.CreatedAt+3600 {
		t.Errorf("created batch %+v", b)
	}
	startRunner(t, st, "inst-a", staticLive(set, ex))
	b = waitFor(t, st, b.ID, "the batch to end", func(b Batch) bool {
		return b.Status == StatusCompleted || b.Status == StatusFailed
	})
	if b.Status != StatusCompleted {
		t.Fatalf("status %s, errors %+v", b.Status, b.Errors)
	}
	if got, want := statuses.of(b.ID), []string{StatusValidating, StatusInProgress, StatusFinalizing, StatusCompleted}; !slices.Equal(got, want) {
		t.Errorf("statuses %v, want %v", got, want)
	}
	if b.InProgressAt == nil || b.FinalizingAt == nil || b.CompletedAt == nil || b.FailedAt != nil ||
		b.CancelledAt != nil || b.ExpiredAt != nil || b.Errors != nil {
		t.Errorf("times and errors of a completed batch: %+v", b)
	}
	if b.Model != "" {
		t.Errorf("model %q of a batch of several models", b.Model)
	}
	if b.RequestCounts != (RequestCounts{Total: 24, Completed: 17, Failed: 7}) {
		t.Errorf("request_counts %+v", b.RequestCounts)
	}
	wantUsage := Usage{InputTokens: 3 * 17, InputTokensDetails: CachedTokens{17}, OutputTokens: 5 * 17,
		OutputTokensDetails: ReasonTokens{2 * 17}, TotalTokens: 8 * 17}
	if b.Usage == nil || *b.Usage != wantUsage {
		t.Errorf("usage %+v, want %+v", b.Usage, wantUsage)
	}
	if b.OutputFileID == nil || b.ErrorFileID == nil {
		t.Fatalf("output_file_id %v, error_file_id %v", b.OutputFileID, b.ErrorFileID)
	}
	out, errs := readResultFile(t, st, b.OutputFileID), readResultFile(t, st, b.ErrorFileID)
	checkExactlyOnce(t, want, out, errs)
	index := make(map[string]int)
	for i, id := range want {
		index[id] = i
	}
	for _, l := range out {
		m := models[l.CustomID]
		if m != "ok" && m != "flaky" {
			t.Errorf("%s (%s) is in the output file", l.CustomID, m)
		}
		if l.ID != requestID(b.ID, index[l.CustomID]) || !strings.HasPrefix(l.ID, "batch_req_") {
			t.Errorf("%s: id %q", l.CustomID, l.ID)
		}
		if l.Response == nil || l.Response.StatusCode != 200 || l.Response.RequestID != "req_"+l.CustomID || l.Error != nil {
			t.Errorf("output line %s", l.raw)
			continue
		}
		if !strings.Contains(l.raw, `,"error":null}`) {
			t.Errorf("output line without error null: %s", l.raw)
		}
		body := gjson.Parse(string(l.Response.Body))
		if body.Get("object").Str != "chat.completion" || body.Get("choices.0.message.content").Str != "hi "+l.CustomID {
			t.Errorf("output line's body: %s", l.Response.Body)
		}
	}
	for _, l := range errs {
		m := models[l.CustomID]
		want := map[string]int{"fail-400": 400, "always-500": 500}[m]
		if want == 0 || l.Response == nil || l.Response.StatusCode != want || l.Error != nil {
			t.Errorf("error line of %s (%s): %s", l.CustomID, m, l.raw)
			continue
		}
		if gjson.GetBytes(l.Response.Body, "error.message").Str == "" {
			t.Errorf("error line without the error body: %s", l.raw)
		}
	}
	calls := ex.callCounts()
	for _, id := range want {
		want := map[string]int{"ok": 1, "fail-400": 1, "flaky": 2, "always-500": set.MaxRetries + 1}[models[id]]
		if calls[id] != want {
			t.Errorf("%s (%s) was sent %d times, want %d", id, models[id], calls[id], want)
		}
	}
	for _, f := range []struct {
		id, name string
		n        int
	}{{*b.OutputFileID, "_output.jsonl", len(out)}, {*b.ErrorFileID, "_error.jsonl", len(errs)}} {
		file, err := st.GetFile(ctx, testOwner, f.id)
		if err != nil || file.Purpose != PurposeBatchOutput || file.Filename != "batch_"+b.ID+f.name {
			t.Errorf("result file %+v, %v", file, err)
		}
	}
	checkCleanedUp(t, mem, st, b.ID)

	// What GetBatch said at the end is what the store holds.
	again, err := st.GetBatch(ctx, testOwner, b.ID)
	if err != nil || again.Status != StatusCompleted || again.RequestCounts != b.RequestCounts {
		t.Errorf("GetBatch again: %+v, %v", again, err)
	}
	if _, err := st.GetBatch(ctx, "bob", b.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("another owner's GetBatch: %v, want ErrNotFound", err)
	}
}

// TestBatchEmptyResultFiles: a result file that would be empty is not made.
func TestBatchEmptyResultFiles(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		model          string
		output, errors bool
	}{
		{"ok", true, false},
		{"fail-400", false, true},
	} {
		t.Run(tc.model, func(t *testing.T) {
			t.Parallel()
			mem := storagetest.NewMemory()
			st := NewStore(mem, "mg")
			b, _ := chatBatch(t, st, "l", tc.model, 9)
			startRunner(t, st, "inst-a", staticLive(testSettings(), newFakeExecutor()))
			b = waitStatus(t, st, b.ID, StatusCompleted)
			if (b.OutputFileID != nil) != tc.output || (b.ErrorFileID != nil) != tc.errors {
				t.Errorf("output_file_id %v, error_file_id %v", b.OutputFileID, b.ErrorFileID)
			}
			if b.Model != tc.model {
				t.Errorf("model %q, want %q", b.Model, tc.model)
			}
			// Only the input and the one result file are left.
			files := mem.Keys(st.ownerDir(testOwner) + "/files/")
			dirs := map[string]bool{}
			for _, k := range files {
				dirs[strings.Split(strings.TrimPrefix(k, st.ownerDir(testOwner)+"/files/"), "/")[0]] = true
			}
			if len(dirs) != 2 {
				t.Errorf("files left: %v", files)
			}
			checkCleanedUp(t, mem, st, b.ID)
		})
	}
}

// TestCreateBatchRefuses: CreateBatch checks its parameters.
func TestCreateBatchRefuses(t *testing.T) {
	ctx := context.Background()
	st := NewStore(storagetest.NewMemory(), "mg")
	in := putInput(t, st, chatLine("a", "ok"))
	other, err := st.PutFile(ctx, testOwner, "x", "user_data", strings.NewReader("{}"), 10)
	if err != nil {
		t.Fatal(err)
	}
	bigMeta := map[string]string{}
	for i := range 17 {
		bigMeta[fmt.Sprint(i)] = "v"
	}
	for _, tc := range []struct {
		name  string
		owner string
		p     CreateParams
		param string
	}{
		{"endpoint", testOwner, CreateParams{InputFileID: in.ID, Endpoint: "/v1/completions", Window: time.Hour}, "endpoint"},
		{"window", testOwner, CreateParams{InputFileID: in.ID, Endpoint: EndpointChat}, "completion_window"},
		{"no such file", testOwner, CreateParams{InputFileID: "file-000000000000000000000000", Endpoint: EndpointChat, Window: time.Hour}, "input_file_id"},
		{"another owner's file", "bob", CreateParams{InputFileID: in.ID, Endpoint: EndpointChat, Window: time.Hour}, "input_file_id"},
		{"purpose", testOwner, CreateParams{InputFileID: other.ID, Endpoint: EndpointChat, Window: time.Hour}, "input_file_id"},
		{"metadata pairs", testOwner, CreateParams{InputFileID: in.ID, Endpoint: EndpointChat, Window: time.Hour, Metadata: bigMeta}, "metadata"},
		{"metadata key", testOwner, CreateParams{InputFileID: in.ID, Endpoint: EndpointChat, Window: time.Hour, Metadata: map[string]string{strings.Repeat("k", 65): "v"}}, "metadata"},
		{"metadata value", testOwner, CreateParams{InputFileID: in.ID, Endpoint: EndpointChat, Window: time.Hour, Metadata: map[string]string{"k": strings.Repeat("v", 513)}}, "metadata"},
	} {
		_, err := st.CreateBatch(ctx, tc.owner, tc.p)
		var inv *InvalidError
		if !errors.As(err, &inv) || inv.Param != tc.param || inv.Message == "" {
			t.Errorf("%s: %v, want an InvalidError of %s", tc.name, err, tc.param)
		}
	}
	if page, _ := st.ListBatches(ctx, testOwner, ListOptions{Limit: 10}); len(page.Data) != 0 {
		t.Errorf("refused batches are listed: %+v", page.Data)
	}
}

func TestListBatches(t *testing.T) {
	ctx := context.Background()
	mem := storagetest.NewMemory()
	st := NewStore(mem, "mg")
	fakeClock(st)
	in := putInput(t, st, chatLine("a", "ok"))
	var all []Batch
	for i := range 5 {
		b, err := st.CreateBatch(ctx, testOwner, CreateParams{InputFileID: in.ID, Endpoint: EndpointChat,
			CompletionWindow: "24h", Window: time.Hour, Metadata: map[string]string{"n": fmt.Sprint(i)}})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b)
	}
	// Bob's batch is his only.
	bobIn, _ := st.PutFile(ctx, "bob", "in", PurposeBatch, strings.NewReader(chatLine("a", "ok")), 1000)
	if _, err := st.CreateBatch(ctx, "bob", CreateParams{InputFileID: bobIn.ID, Endpoint: EndpointChat, Window: time.Hour}); err != nil {
		t.Fatal(err)
	}
	rev := slices.Clone(all)
	slices.Reverse(rev)
	for _, tc := range []struct {
		opt     ListOptions
		want    []Batch
		hasMore bool
	}{
		{ListOptions{Limit: 20}, rev, false},
		{ListOptions{Limit: 2}, rev[:2], true},
		{ListOptions{Limit: 2, After: rev[1].ID}, rev[2:4], true},
		{ListOptions{Limit: 2, After: rev[3].ID}, rev[4:], false},
	} {
		page, err := st.ListBatches(ctx, testOwner, tc.opt)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(idsOf(page.Data), idsOf(tc.want)) || page.HasMore != tc.hasMore {
			t.Errorf("%+v: %v has_more=%v, want %v has_more=%v", tc.opt, idsOf(page.Data), page.HasMore, idsOf(tc.want), tc.hasMore)
		}
	}
	page, _ := st.ListBatches(ctx, "bob", ListOptions{Limit: 20})
	if len(page.Data) != 1 {
		t.Errorf("bob lists %d batches, want 1", len(page.Data))
	}

	// A batch asked to cancel before it was validated lists as cancelling.
	c, err := st.CancelBatch(ctx, testOwner, all[2].ID)
	if err != nil {
		t.Fatalf("CancelBatch of a validating batch: %v", err)
	}
	if c.Status != StatusCancelling || c.CancellingAt == nil {
		t.Errorf("cancelled batch: %s, cancelling_at %v", c.Status, c.CancellingAt)
	}
	page, err = st.ListBatches(ctx, testOwner, ListOptions{Limit: 20})
	if err != nil || len(page.Data) != 5 || page.Data[2].Status != StatusCancelling || page.Data[0].Status != StatusValidating {
		t.Errorf("ListBatches after a cancel: %+v, %v", page.Data, err)
	}
	if page.Data[1].Metadata["n"] != "3" {
		t.Errorf("metadata %v", page.Data[1].Metadata)
	}
}

func TestCancel(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem := storagetest.NewMemory()
	statuses := watchStatuses(mem)
	st := NewStore(mem, "mg")
	ex := newFakeExecutor() // "slow" waits until it is stopped
	// 35 lines, 5 parts; every fifth line is slow, so no part ends and
	// the runner, working on at most maxParts parts, never starts part 4.
	var want, ls []string
	okStarted := 0
	for i := range 35 {
		id := fmt.Sprintf("c-%d", i)
		want = append(want, id)
		model := "ok"
		if i%5 == 0 {
			model = "slow"
		} else if i < maxParts*7 {
			okStarted++
		}
		ls = append(ls, chatLine(id, model))
	}
	b := createBatch(t, st, putInput(t, st, ls...), time.Hour)
	startRunner(t, st, "inst-a", staticLive(testSettings(), ex))
	waitUntil(t, "the ok lines of the running parts to be answered", func() bool { return len(ex.answeredIDs()) == okStarted })
	// The runner reports the progress of its parts as it renews them.
	waitFor(t, st, b.ID, "the progress to show", func(b Batch) bool {
		return b.Status == StatusInProgress && b.RequestCounts == RequestCounts{Total: 35, Completed: okStarted}
	})

	c, err := st.CancelBatch(ctx, testOwner, b.ID)
	if err != nil {
		t.Fatalf("CancelBatch: %v", err)
	}
	if c.Status != StatusCancelling || c.CancellingAt == nil {
		t.Errorf("CancelBatch returned %s, cancelling_at %v", c.Status, c.CancellingAt)
	}
	b = waitStatus(t, st, b.ID, StatusCancelled)
	if got := statuses.of(b.ID); !slices.Equal(got, []string{StatusValidating, StatusInProgress, StatusCancelling, StatusCancelled}) {
		t.Errorf("statuses %v", got)
	}
	if b.CancelledAt == nil || b.CancellingAt == nil || b.CompletedAt != nil {
		t.Errorf("cancelled_at %v, cancelling_at %v, completed_at %v", b.CancelledAt, b.CancellingAt, b.CompletedAt)
	}
	answered := ex.answeredIDs()
	if len(answered) != okStarted {
		t.Errorf("%d lines answered after the cancel, want %d", len(answered), okStarted)
	}
	if b.RequestCounts != (RequestCounts{Total: 35, Completed: okStarted, Failed: 35 - okStarted}) {
		t.Errorf("request_counts %+v", b.RequestCounts)
	}
	out, errs := readResultFile(t, st, b.OutputFileID), readResultFile(t, st, b.ErrorFileID)
	checkExactlyOnce(t, want, out, errs)
	for _, l := range out {
		if answered[l.CustomID] != 1 || l.Response == nil || l.Response.StatusCode != 200 {
			t.Errorf("output line %s", l.raw)
		}
	}
	for _, l := range errs {
		if answered[l.CustomID] != 0 {
			t.Errorf("%s was answered, yet is in the error file", l.CustomID)
		}
		if l.Response != nil || l.Error == nil || l.Error.Code != "batch_cancelled" || l.Error.Message == "" ||
			!strings.Contains(l.raw, `"response":null`) {
			t.Errorf("error line %s", l.raw)
		}
	}
	checkCleanedUp(t, mem, st, b.ID)

	// Cancelling again returns the cancelled batch.
	again, err := st.CancelBatch(ctx, testOwner, b.ID)
	if err != nil || again.Status != StatusCancelled || again.CancelledAt == nil {
		t.Errorf("CancelBatch of a cancelled batch: %+v, %v", again, err)
	}
	if _, err := st.CancelBatch(ctx, "bob", b.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("bob's CancelBatch: %v, want ErrNotFound", err)
	}
	if _, err := st.CancelBatch(ctx, testOwner, "batch_nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("CancelBatch of no batch: %v, want ErrNotFound", err)
	}
}

func TestCancelEnded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := NewStore(storagetest.NewMemory(), "mg")
	done := createBatch(t, st, putInput(t, st, chatLine("a", "ok")), time.Hour)
	failed := createBatch(t, st, putInput(t, st, "nope"), time.Hour)
	startRunner(t, st, "inst-a", staticLive(testSettings(), newFakeExecutor()))
	waitStatus(t, st, done.ID, StatusCompleted)
	waitStatus(t, st, failed.ID, StatusFailed)
	for _, id := range []string{done.ID, failed.ID} {
		if _, err := st.CancelBatch(ctx, testOwner, id); !errors.Is(err, ErrNotCancellable) {
			t.Errorf("CancelBatch of an ended batch: %v, want ErrNotCancellable", err)
		}
		if b, _ := st.GetBatch(ctx, testOwner, id); b.Status == StatusCancelling || b.Status == StatusCancelled {
			t.Errorf("an ended batch became %s", b.Status)
		}
	}
}

// TestCancelBeforeValidation: a batch cancelled before a runner saw it
// ends cancelled, with no requests sent.
func TestCancelBeforeValidation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem := storagetest.NewMemory()
	st := NewStore(mem, "mg")
	b := createBatch(t, st, putInput(t, st, chatLine("a", "ok"), chatLine("b", "ok")), time.Hour)
	c, err := st.CancelBatch(ctx, testOwner, b.ID)
	if err != nil || c.Status != StatusCancelling {
		t.Fatalf("CancelBatch: %+v, %v", c, err)
	}
	if g, err := st.GetBatch(ctx, testOwner, b.ID); err != nil || g.Status != StatusCancelling {
		t.Fatalf("GetBatch: %+v, %v", g, err)
	}
	ex := newFakeExecutor()
	startRunner(t, st, "inst-a", staticLive(testSettings(), ex))
	b = waitStatus(t, st, b.ID, StatusCancelled)
	if ex.totalCalls() != 0 {
		t.Errorf("%d requests sent", ex.totalCalls())
	}
	checkCleanedUp(t, mem, st, b.ID)
}

func TestExpiry(t *testing.T) {
	t.Parallel()
	mem := storagetest.NewMemory()
	st := NewStore(mem, "mg")
	// The store's clock reads half past a second when the batch is
	// created, so a window that does not end on a whole second shows.
	off := time.Duration(1500e6 - time.Now().UnixNano()%1e9)
	st.now = func() time.Time { return time.Now().Add(off) }
	ex := newFakeExecutor()
	var want, ls []string
	for i := range 14 {
		id := fmt.Sprintf("e-%d", i)
		want = append(want, id)
		model := "ok"
		if i%2 == 1 {
			model = "slow"
		}
		ls = append(ls, chatLine(id, model))
	}
	b := createBatch(t, st, putInput(t, st, ls...), 300*time.Millisecond)
	startRunner(t, st, "inst-a", staticLive(testSettings(), ex))
	b = waitFor(t, st, b.ID, "the batch to end", func(b Batch) bool {
		return b.Status == StatusExpired || b.Status == StatusCompleted || b.Status == StatusFailed
	})
	if b.Status != StatusExpired || b.ExpiredAt == nil || b.CompletedAt != nil {
		t.Fatalf("status %s, expired_at %v", b.Status, b.ExpiredAt)
	}
	// The ok lines were answered within the window (in practice all
	// seven); what was answered is in the output file, the rest expired.
	answered := ex.answeredIDs()
	if len(answered) == 0 {
		t.Error("no line was answered before the window ended")
	}
	if b.RequestCounts != (RequestCounts{Total: 14, Completed: len(answered), Failed: 14 - len(answered)}) {
		t.Errorf("request_counts %+v with %d answered", b.RequestCounts, len(answered))
	}
	out, errs := readResultFile(t, st, b.OutputFileID), readResultFile(t, st, b.ErrorFileID)
	checkExactlyOnce(t, want, out, errs)
	for _, l := range out {
		if answered[l.CustomID] != 1 || !strings.HasSuffix(gjson.Get(l.raw, "response.body.choices.0.message.content").Str, l.CustomID) {
			t.Errorf("output line %s", l.raw)
		}
	}
	for _, l := range errs {
		if answered[l.CustomID] != 0 || l.Response != nil || l.Error == nil || l.Error.Code != "batch_expired" {
			t.Errorf("error line %s", l.raw)
		}
	}
	checkCleanedUp(t, mem, st, b.ID)
}

// TestCancelFinishInterrupted: a finish of a batch cancelled before its
// validation that stopped after it stored the batch as cancelling (and so
// the batch has no claims) is finished by the next runner.
func TestCancelFinishInterrupted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem := storagetest.NewMemory()
	st := NewStore(mem, "mg")
	b := createBatch(t, st, putInput(t, st, chatLine("a", "ok")), time.Hour)
	if _, err := st.CancelBatch(ctx, testOwner, b.ID); err != nil {
		t.Fatal(err)
	}
	rec, err := st.batchRecord(ctx, testOwner, b.ID)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now().Unix()
	rec.Status, rec.CancellingAt = StatusCancelling, &at
	rec.OutputFileID, rec.ErrorFileID = ptr(ids.New("file-", time.Now())), ptr(ids.New("file-", time.Now()))
	if err := st.storeJSON(ctx, path.Join(st.batchDir(testOwner, b.ID), "batch.json"), rec); err != nil {
		t.Fatal(err)
	}
	if g, err := st.GetBatch(ctx, testOwner, b.ID); err != nil || g.Status != StatusCancelling {
		t.Fatalf("GetBatch: %+v, %v", g, err)
	}
	ex := newFakeExecutor()
	startRunner(t, st, "inst-a", staticLive(testSettings(), ex))
	b = waitStatus(t, st, b.ID, StatusCancelled)
	if ex.totalCalls() != 0 || b.OutputFileID != nil || b.ErrorFileID != nil || b.CancelledAt == nil {
		t.Errorf("%d calls, batch %+v", ex.totalCalls(), b)
	}
	checkCleanedUp(t, mem, st, b.ID)
}

// TestReload: the runner reads its config on every poll: with none it
// waits, and a new executor takes the requests sent after the reload, with
// nothing stopped or sent twice.
func TestReload(t *testing.T) {
	t.Parallel()
	st := NewStore(storagetest.NewMemory(), "mg")
	exA, exB := newFakeExecutor(), newFakeExecutor()
	exA.delay, exB.delay = 10*time.Millisecond, 10*time.Millisecond
	set := testSettings()
	set.Workers = 1 // one line at a time
	var (
		mu   sync.Mutex
		live *Live
	)
	lv := func() (Live, bool) {
		mu.Lock()
		defer mu.Unlock()
		if live == nil {
			return Live{}, false
		}
		return *live, true
	}
	reload := func(ex Executor) {
		mu.Lock()
		defer mu.Unlock()
		live = &Live{Settings: set, Executor: ex, Logger: zap.NewNop()}
	}
	exA.onCall = func(Request) {
		if exA.totalCalls() == 3 {
			reload(exB)
		}
	}
	b, want := chatBatch(t, st, "s", "slow", 20)
	startRunner(t, st, "inst-a", lv)
	time.Sleep(5 * testPoll)
	if g, _ := st.GetBatch(context.Background(), testOwner, b.ID); g.Status != StatusValidating {
		t.Fatalf("without a config the batch went on to %s", g.Status)
	}
	reload(exA)
	b = waitStatus(t, st, b.ID, StatusCompleted)
	checkExactlyOnce(t, want, readResultFile(t, st, b.OutputFileID))
	checkSentOnce(t, want, exA, exB) // before the reload, after it
	callsA, callsB := exA.callCounts(), exB.callCounts()
	if len(callsB) == 0 {
		t.Error("no request went through the new config")
	}
	t.Logf("%d lines before the reload, %d after", len(callsA), len(callsB))
}

// TestRerankBatch: a rerank batch runs the same way, without chat usage.
func TestRerankBatch(t *testing.T) {
	t.Parallel()
	st := NewStore(storagetest.NewMemory(), "mg")
	var ls []string
	for i := range 3 {
		ls = append(ls, fmt.Sprintf(`{"custom_id":"r%d","method":"POST","url":"/v1/rerank","body":{"model":"ok","query":"q","documents":["a","b"]}}`, i))
	}
	b, err := st.CreateBatch(context.Background(), testOwner, CreateParams{
		InputFileID: putInput(t, st, ls...).ID, Endpoint: EndpointRerank, CompletionWindow: "24h", Window: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	startRunner(t, st, "inst-a", staticLive(testSettings(), newFakeExecutor()))
	b = waitStatus(t, st, b.ID, StatusCompleted)
	if b.Usage != nil || b.RequestCounts != (RequestCounts{Total: 3, Completed: 3}) {
		t.Errorf("usage %+v, request_counts %+v", b.Usage, b.RequestCounts)
	}
	checkExactlyOnce(t, []string{"r0", "r1", "r2"}, readResultFile(t, st, b.OutputFileID))
}

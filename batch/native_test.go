package batch

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelgate/modelgate/internal/storagetest"
	"github.com/tidwall/gjson"
	"go.uber.org/zap"
)

// fakeNative is a provider's batch API in memory. A record is
// {"key","model","body"}; a request whose first message says "fail" gets
// a 400, one that says "unencodable" cannot be encoded. Results come in
// reverse order. A cancelled or expired batch has answered the first half
// of its requests.
type fakeNative struct {
	lim NativeLimits

	mu       sync.Mutex
	batches  map[string]*fakeNativeBatch
	order    []string // ids in creation order
	hold     bool     // batches run until released
	refuse   bool     // Submit refuses
	failAll  bool     // batches fail as a whole
	failNext int      // Submit calls that fail (passing) before one succeeds
	pollAt   map[string][]time.Time
	inPoll   map[string]int
	overlap  atomic.Int64 // polls of one batch that overlapped
	cancels  atomic.Int64
	submits  atomic.Int64 // Submit calls
	finds    atomic.Int64
	progress int // Completed reported while running
}

type fakeNativeBatch struct {
	id, marker, model string
	keys              []string
	bodies            []string
	state             string
}

func newFakeNative() *fakeNative {
	return &fakeNative{lim: NativeLimits{MaxRequests: 1000, MaxBytes: 1 << 20},
		batches: make(map[string]*fakeNativeBatch), pollAt: make(map[string][]time.Time), inPoll: make(map[string]int)}
}

func (f *fakeNative) Limits(endpoint string) NativeLimits {
	if endpoint != EndpointChat {
		return NativeLimits{}
	}
	return f.lim
}

func (f *fakeNative) Encode(_, key string, body []byte, model string) ([]byte, error) {
	if strings.Contains(string(body), "unencodable") {
		return nil, errors.New("the provider cannot express this request")
	}
	return fmt.Appendf(nil, `{"key":%q,"model":%q,"body":%s}`, key, model, body), nil
}

func (f *fakeNative) Submit(ctx context.Context, s *NativeSubmission) (NativeRef, error) {
	f.submits.Add(1)
	f.mu.Lock()
	if f.failNext > 0 {
		f.failNext--
		f.mu.Unlock()
		return NativeRef{}, errors.New("connection reset")
	}
	refuse := f.refuse
	f.mu.Unlock()
	if refuse {
		return NativeRef{}, &NativeRefusal{Status: 400, Message: "batches are not enabled for this deployment"}
	}
	rc := s.Records()
	defer rc.Close()
	b := &fakeNativeBatch{marker: s.Marker, model: s.Model, state: NativeRunning}
	sc := bufio.NewScanner(rc)
	sc.Buffer(nil, 1<<20)
	var size int64
	for sc.Scan() {
		size += int64(len(sc.Bytes()) + 1)
		f := gjson.GetManyBytes(sc.Bytes(), "key", "model", "body")
		if f[1].Str != s.Model {
			return NativeRef{}, &NativeRefusal{Status: 400, Message: "one model per batch"}
		}
		b.keys = append(b.keys, f[0].Str)
		b.bodies = append(b.bodies, f[2].Raw)
	}
	if err := sc.Err(); err != nil {
		return NativeRef{}, err
	}
	if len(b.keys) != s.Count || size != s.Bytes {
		return NativeRef{}, fmt.Errorf("submission says %d records of %d bytes, has %d of %d", s.Count, s.Bytes, len(b.keys), size)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	b.id = "nb_" + strconv.Itoa(len(f.order)+1)
	f.batches[b.id] = b
	f.order = append(f.order, b.id)
	return NativeRef{ID: b.id, Data: map[string]string{"input": "file_" + b.id}}, nil
}

func (f *fakeNative) Find(_ context.Context, s *NativeSubmission) (NativeRef, bool, error) {
	f.finds.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, id := range f.order {
		if f.batches[id].marker == s.Marker {
			return NativeRef{ID: id, Data: map[string]string{"input": "file_" + id}}, true, nil
		}
	}
	return NativeRef{}, false, nil
}

func (f *fakeNative) Poll(_ context.Context, ref NativeRef) (NativeStatus, error) {
	f.mu.Lock()
	b := f.batches[ref.ID]
	if f.inPoll[ref.ID] > 0 {
		f.overlap.Add(1)
	}
	f.inPoll[ref.ID]++
	f.pollAt[ref.ID] = append(f.pollAt[ref.ID], time.Now())
	f.mu.Unlock()
	time.Sleep(time.Millisecond) // long enough for two pollers to meet
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inPoll[ref.ID]--
	if b == nil {
		return NativeStatus{}, errors.New("no such batch")
	}
	if b.state == NativeRunning && !f.hold {
		b.state = NativeCompleted
		if f.failAll {
			b.state = NativeFailed
		}
	}
	st := NativeStatus{State: b.state, Message: "the input file is invalid"}
	if b.state == NativeRunning {
		st.Completed = f.progress
	}
	if ref.Data["input"] != "file_"+ref.ID {
		return NativeStatus{}, errors.New("the reference lost its data")
	}
	return st, nil
}

func (f *fakeNative) Results(_ context.Context, ref NativeRef, st NativeStatus, each func(NativeResult) error) error {
	f.mu.Lock()
	b := f.batches[ref.ID]
	f.mu.Unlock()
	answered := len(b.keys)
	if b.state == NativeCancelled || b.state == NativeExpired {
		answered = len(b.keys) / 2
	}
	for k := len(b.keys) - 1; k >= 0; k-- { // out of order
		res := NativeResult{Key: b.keys[k]}
		switch {
		case k >= answered && b.state == NativeExpired:
			res.Code, res.Message = "batch_expired", "expired at the provider"
		case k >= answered:
			continue // a cancelled request without a result line
		case gjson.Get(b.bodies[k], "messages.0.content").Str == "fail":
			res.Status, res.Body = 400, []byte(`{"error":{"message":"bad","type":"invalid_request_error","param":null,"code":null}}`)
		default:
			res.Status, res.RequestID = 200, "preq_"+b.keys[k]
			res.Body = fmt.Appendf(nil, `{"id":"x","object":"chat.completion","model":%q,"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":20,"total_tokens":30}}`, b.model)
		}
		if err := each(res); err != nil {
			return err
		}
	}
	return nil
}

func (f *fakeNative) Cancel(_ context.Context, ref NativeRef) error {
	f.cancels.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	if b := f.batches[ref.ID]; b != nil && b.state == NativeRunning {
		b.state = NativeCancelled
	}
	return nil
}

// expireAll ends every running batch as expired at the provider.
func (f *fakeNative) expireAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, b := range f.batches {
		if b.state == NativeRunning {
			b.state = NativeExpired
		}
	}
}

func (f *fakeNative) set(fn func(f *fakeNative)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *fakeNative) created() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.order)
}

// fakeAccounting records what the engine tells it.
type fakeAccounting struct {
	mu       sync.Mutex
	reserved map[string]int64
	settled  map[string]int
	released map[string]int
	refuse   *Response
}

func newFakeAccounting() *fakeAccounting {
	return &fakeAccounting{reserved: map[string]int64{}, settled: map[string]int{}, released: map[string]int{}}
}

func (a *fakeAccounting) Estimate(_, provider, _ string, body []byte) int64 {
	if provider == "" {
		panic("no provider")
	}
	return int64(len(body))
}

func (a *fakeAccounting) Reserve(_ context.Context, r Reservation) (*Response, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.reserved[r.ID] = r.Amount
	return a.refuse, nil
}

func (a *fakeAccounting) Settle(_ context.Context, s Settlement) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.settled[s.LineID]++
}

func (a *fakeAccounting) Release(_ context.Context, r Reservation) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.released[r.ID]++
}

// nativeSettings are testSettings with quick polls.
func nativeSettings() Settings {
	s := testSettings()
	s.NativePoll = 5 * time.Millisecond
	s.NativePollMax = 20 * time.Millisecond
	s.NativeSubmitTimeout = 300 * time.Millisecond
	s.NativeCancelWait = 5 * time.Second
	return s
}

// nativeLive is a live config whose providers nat… have batch APIs.
func nativeLive(set Settings, ex Executor, apis map[string]*fakeNative, acc NativeAccounting) func() (Live, bool) {
	return func() (Live, bool) {
		return Live{Settings: set, Executor: ex, Logger: zap.NewNop(), Accounting: acc,
			Native: func(p string) NativeAPI {
				if a, ok := apis[p]; ok {
					return a
				}
				return nil
			}}, true
	}
}

// contentLine is a chat line of model whose message says content.
func contentLine(customID, model, content string) string {
	return fmt.Sprintf(`{"custom_id":%q,"method":"POST","url":"/v1/chat/completions","body":{"model":%q,"messages":[{"role":"user","content":%q}]}}`,
		customID, model, content)
}

// mixedInput is n lines for each of nat/ok and nat2/ok, gw lines for
// the gateway, interleaved; line 3 of nat fails at the provider, line 5
// of nat cannot be encoded (it runs in the gateway).
func mixedInput(n, gw int) (lines, ids []string) {
	for i := range max(n, gw) {
		if i < n {
			content := "hello"
			switch i {
			case 3:
				content = "fail"
			case 5:
				content = "unencodable"
			}
			lines = append(lines, contentLine(fmt.Sprintf("a-%d", i), "nat/ok", content), contentLine(fmt.Sprintf("b-%d", i), "nat2/ok", "hello"))
			ids = append(ids, fmt.Sprintf("a-%d", i), fmt.Sprintf("b-%d", i))
		}
		if i < gw {
			lines = append(lines, chatLine(fmt.Sprintf("g-%d", i), "ok"))
			ids = append(ids, fmt.Sprintf("g-%d", i))
		}
	}
	return lines, ids
}

func TestNativeBatchSplitsByProviderAndMerges(t *testing.T) {
	mem := storagetest.NewMemory()
	st := NewStore(mem, "mg")
	ex := newFakeExecutor()
	nat, nat2 := newFakeNative(), newFakeNative()
	acc := newFakeAccounting()
	startRunner(t, st, "inst", nativeLive(nativeSettings(), ex, map[string]*fakeNative{"nat": nat, "nat2": nat2}, acc))
	lines, ids := mixedInput(8, 5)
	b := createBatch(t, st, putInput(t, st, lines...), time.Hour)
	done := waitStatus(t, st, b.ID, StatusCompleted)

	out, errs := readResultFile(t, st, done.OutputFileID), readResultFile(t, st, done.ErrorFileID)
	checkExactlyOnce(t, ids, out, errs)
	if nat.created() != 1 || nat2.created() != 1 {
		t.Errorf("provider batches: nat %d, nat2 %d; want one each", nat.created(), nat2.created())
	}
	// The gateway ran its own lines and the one the provider cannot take.
	calls := ex.callCounts()
	want := []string{"a-5", "g-0", "g-1", "g-2", "g-3", "g-4"}
	var got []string
	for id := range calls {
		got = append(got, id)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("the gateway ran %v, want %v", got, want)
	}
	if done.RequestCounts != (RequestCounts{Total: len(ids), Completed: len(ids) - 1, Failed: 1}) {
		t.Errorf("request_counts = %+v", done.RequestCounts)
	}
	if len(errs) != 1 || errs[0].CustomID != "a-3" || errs[0].Response.StatusCode != 400 {
		t.Errorf("error file = %+v, want a-3's 400", errs)
	}
	for _, l := range out {
		native := strings.HasPrefix(l.CustomID, "a-") || strings.HasPrefix(l.CustomID, "b-")
		if native && l.CustomID != "a-5" && !strings.HasPrefix(l.Response.RequestID, "preq_") {
			t.Errorf("%s: request_id %q is not the provider's", l.CustomID, l.Response.RequestID)
		}
	}
	// Every native line was settled once; both parts reserved and released.
	acc.mu.Lock()
	if len(acc.settled) != 2*8-1 || len(acc.reserved) != 2 || len(acc.released) != 2 {
		t.Errorf("accounting: %d settled, %d reserved, %d released", len(acc.settled), len(acc.reserved), len(acc.released))
	}
	for id, n := range acc.settled {
		if n != 1 {
			t.Errorf("line %s settled %d times", id, n)
		}
	}
	acc.mu.Unlock()
	if done.Usage == nil || done.Usage.TotalTokens < 30*14 {
		t.Errorf("usage = %+v, want the native lines' counted", done.Usage)
	}
	checkCleanedUp(t, mem, st, b.ID)
}

func TestNativeBatchPartsFollowProviderLimits(t *testing.T) {
	for _, tc := range []struct {
		name      string
		lim       NativeLimits
		batches   int
		gatewayed int
	}{
		{"requests", NativeLimits{MaxRequests: 4, MaxBytes: 1 << 20}, 3, 0},
		{"bytes", NativeLimits{MaxRequests: 100, MaxBytes: 300}, 4, 0},
		{"fewer than the minimum", NativeLimits{MinRequests: 11, MaxRequests: 100, MaxBytes: 1 << 20}, 0, 10},
		{"no batches for the endpoint", NativeLimits{}, 0, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := NewStore(storagetest.NewMemory(), "mg")
			ex := newFakeExecutor()
			nat := newFakeNative()
			nat.lim = tc.lim
			startRunner(t, st, "inst", nativeLive(nativeSettings(), ex, map[string]*fakeNative{"nat": nat}, nil))
			var lines, ids []string
			for i := range 10 {
				lines = append(lines, contentLine(fmt.Sprintf("r-%d", i), "nat/ok", "hello"))
				ids = append(ids, fmt.Sprintf("r-%d", i))
			}
			b := createBatch(t, st, putInput(t, st, lines...), time.Hour)
			done := waitStatus(t, st, b.ID, StatusCompleted)
			checkExactlyOnce(t, ids, readResultFile(t, st, done.OutputFileID), readResultFile(t, st, done.ErrorFileID))
			if got := nat.created(); got != tc.batches {
				t.Errorf("%d provider batches, want %d", got, tc.batches)
			}
			if got := ex.totalCalls(); got != tc.gatewayed {
				t.Errorf("the gateway ran %d lines, want %d", got, tc.gatewayed)
			}
			nat.mu.Lock()
			for _, b := range nat.batches {
				if len(b.keys) > tc.lim.MaxRequests {
					t.Errorf("a provider batch of %d requests, above %d", len(b.keys), tc.lim.MaxRequests)
				}
			}
			nat.mu.Unlock()
		})
	}
}

// TestNativeCrashAtEachStep stops the part at each step of its life as a
// crash would (nothing more stored, the claim kept) and restarts the
// runner: the part is submitted to the provider exactly once, and every
// line has exactly one result.
func TestNativeCrashAtEachStep(t *testing.T) {
	for _, step := range []string{"reserved", "ahead", "sent", "stored", "ended", "flushing", "collected"} {
		t.Run(step, func(t *testing.T) {
			mem := storagetest.NewMemory()
			st := NewStore(mem, "mg")
			ex := newFakeExecutor()
			nat := newFakeNative()
			acc := newFakeAccounting()
			var crashed atomic.Bool
			nativeHook = func(s string) error {
				if s == step && crashed.CompareAndSwap(false, true) {
					return errNativeCrash
				}
				return nil
			}
			t.Cleanup(func() { nativeHook = func(string) error { return nil } })
			live := nativeLive(nativeSettings(), ex, map[string]*fakeNative{"nat": nat}, acc)
			var lines, ids []string
			for i := range 12 {
				lines = append(lines, contentLine(fmt.Sprintf("r-%d", i), "nat/ok", "hello"))
				ids = append(ids, fmt.Sprintf("r-%d", i))
			}
			b := createBatch(t, st, putInput(t, st, lines...), time.Hour)
			first := NewRunner(st, "inst", testPoll, live)
			waitUntil(t, "the crash at "+step, crashed.Load)
			_ = first.Destruct()

			startRunner(t, st, "inst", live) // the restarted process
			done := waitStatus(t, st, b.ID, StatusCompleted)
			checkExactlyOnce(t, ids, readResultFile(t, st, done.OutputFileID), readResultFile(t, st, done.ErrorFileID))
			if got := nat.created(); got != 1 {
				t.Errorf("the provider has %d batches of the part, want 1", got)
			}
			if ex.totalCalls() != 0 {
				t.Errorf("the gateway ran %d lines", ex.totalCalls())
			}
			if done.RequestCounts.Completed != 12 {
				t.Errorf("request_counts = %+v", done.RequestCounts)
			}
			acc.mu.Lock()
			for id, n := range acc.settled {
				if n > 2 {
					t.Errorf("line %s settled %d times", id, n)
				}
			}
			if len(acc.settled) != 12 {
				t.Errorf("%d lines settled, want 12", len(acc.settled))
			}
			acc.mu.Unlock()
		})
	}
}

// TestNativeTakeOverWaitsForSubmission: another instance takes over a
// part whose submission was begun but not recorded only after the
// submission's deadline, then finds it rather than submitting again.
func TestNativeTakeOverWaitsForSubmission(t *testing.T) {
	mem := storagetest.NewMemory()
	st := NewStore(mem, "mg")
	nat := newFakeNative()
	var crashed atomic.Bool
	nativeHook = func(s string) error {
		if s == "sent" && crashed.CompareAndSwap(false, true) {
			return errNativeCrash
		}
		return nil
	}
	t.Cleanup(func() { nativeHook = func(string) error { return nil } })
	set := nativeSettings()
	live := nativeLive(set, newFakeExecutor(), map[string]*fakeNative{"nat": nat}, nil)
	var lines []string
	for i := range 5 {
		lines = append(lines, contentLine(fmt.Sprintf("r-%d", i), "nat/ok", "hello"))
	}
	b := createBatch(t, st, putInput(t, st, lines...), time.Hour)
	first := NewRunner(st, "inst-a", testPoll, live)
	waitUntil(t, "the crash", crashed.Load)
	_ = first.Destruct()
	startRunner(t, st, "inst-b", live)
	waitStatus(t, st, b.ID, StatusCompleted)
	if nat.created() != 1 || nat.submits.Load() != 1 || nat.finds.Load() == 0 {
		t.Errorf("%d batches, %d submits, %d finds; want 1, 1 and some", nat.created(), nat.submits.Load(), nat.finds.Load())
	}
}

func TestNativeSubmitRetriedAfterPassingFailure(t *testing.T) {
	st := NewStore(storagetest.NewMemory(), "mg")
	nat := newFakeNative()
	nat.failNext = 2
	startRunner(t, st, "inst", nativeLive(nativeSettings(), newFakeExecutor(), map[string]*fakeNative{"nat": nat}, nil))
	b := createBatch(t, st, putInput(t, st, contentLine("r", "nat/ok", "hello")), time.Hour)
	waitStatus(t, st, b.ID, StatusCompleted)
	if nat.created() != 1 || nat.submits.Load() != 3 || nat.finds.Load() != 2 {
		t.Errorf("%d batches, %d submits, %d finds; want 1, 3 and 2 (Find before each retry)", nat.created(), nat.submits.Load(), nat.finds.Load())
	}
}

func TestNativeRefusedOrFailedRunsInGateway(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(f *fakeNative)
	}{
		{"refused", func(f *fakeNative) { f.refuse = true }},
		{"failed", func(f *fakeNative) { f.failAll = true }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := NewStore(storagetest.NewMemory(), "mg")
			ex := newFakeExecutor()
			nat := newFakeNative()
			nat.set(tc.set)
			acc := newFakeAccounting()
			startRunner(t, st, "inst", nativeLive(nativeSettings(), ex, map[string]*fakeNative{"nat": nat}, acc))
			lines, ids := chatLines("r", "nat/ok", 6)
			b := createBatch(t, st, putInput(t, st, lines...), time.Hour)
			done := waitStatus(t, st, b.ID, StatusCompleted)
			checkExactlyOnce(t, ids, readResultFile(t, st, done.OutputFileID), readResultFile(t, st, done.ErrorFileID))
			checkSentOnce(t, ids, ex)
			acc.mu.Lock()
			if len(acc.released) != 1 || len(acc.settled) != 0 {
				t.Errorf("accounting: released %v, settled %d", acc.released, len(acc.settled))
			}
			acc.mu.Unlock()
		})
	}
}

func TestNativeReservationRefused(t *testing.T) {
	st := NewStore(storagetest.NewMemory(), "mg")
	nat := newFakeNative()
	acc := newFakeAccounting()
	acc.refuse = &Response{Status: 429, Body: []byte(`{"error":{"message":"budget spent","type":"insufficient_quota","param":null,"code":"budget_exceeded"}}`)}
	startRunner(t, st, "inst", nativeLive(nativeSettings(), newFakeExecutor(), map[string]*fakeNative{"nat": nat}, acc))
	lines, ids := chatLines("r", "nat/ok", 4)
	b := createBatch(t, st, putInput(t, st, lines...), time.Hour)
	done := waitStatus(t, st, b.ID, StatusCompleted)
	errs := readResultFile(t, st, done.ErrorFileID)
	checkExactlyOnce(t, ids, errs)
	for _, l := range errs {
		if l.Response == nil || l.Response.StatusCode != 429 {
			t.Errorf("%s: %s, want the refusal", l.CustomID, l.raw)
		}
	}
	if nat.submits.Load() != 0 {
		t.Errorf("a refused part was submitted")
	}
	acc.mu.Lock()
	if acc.reserved[nativeMarker(b.ID, 0)] != int64(4*len(`{"model":"nat/ok","messages":[{"role":"user","content":"Hi"}]}`)) {
		t.Errorf("reserved %v", acc.reserved)
	}
	acc.mu.Unlock()
}

func TestNativeCancelReachesProvider(t *testing.T) {
	mem := storagetest.NewMemory()
	st := NewStore(mem, "mg")
	ex := newFakeExecutor()
	ex.gate = make(chan struct{}) // the gateway's lines never answer
	nat, nat2 := newFakeNative(), newFakeNative()
	nat.hold, nat2.hold = true, true
	nat.progress = 3
	startRunner(t, st, "inst", nativeLive(nativeSettings(), ex, map[string]*fakeNative{"nat": nat, "nat2": nat2}, nil))
	lines, ids := mixedInput(8, 3)
	b := createBatch(t, st, putInput(t, st, lines...), time.Hour)
	waitUntil(t, "both provider batches", func() bool { return nat.created() == 1 && nat2.created() == 1 })
	waitFor(t, st, b.ID, "the provider's progress", func(b Batch) bool { return b.RequestCounts.Completed >= 3 })
	if _, err := st.CancelBatch(context.Background(), testOwner, b.ID); err != nil {
		t.Fatal(err)
	}
	done := waitStatus(t, st, b.ID, StatusCancelled)
	if nat.cancels.Load() != 1 || nat2.cancels.Load() != 1 {
		t.Errorf("cancels sent: %d and %d, want one each", nat.cancels.Load(), nat2.cancels.Load())
	}
	out, errs := readResultFile(t, st, done.OutputFileID), readResultFile(t, st, done.ErrorFileID)
	checkExactlyOnce(t, ids, out, errs)
	// Each provider batch answered its first half before the cancel.
	answered := 0
	for _, l := range out {
		if strings.HasPrefix(l.CustomID, "b-") {
			answered++
		}
	}
	if answered != 4 {
		t.Errorf("%d of nat2's lines answered, want 4 (kept from the cancelled provider batch)", answered)
	}
	for _, l := range errs {
		if l.Response == nil && l.Error.Code != "batch_cancelled" {
			t.Errorf("%s: %s", l.CustomID, l.raw)
		}
	}
	checkCleanedUp(t, mem, st, b.ID)
}

func TestNativeExpiry(t *testing.T) {
	st := NewStore(storagetest.NewMemory(), "mg")
	nat := newFakeNative()
	nat.hold = true
	startRunner(t, st, "inst", nativeLive(nativeSettings(), newFakeExecutor(), map[string]*fakeNative{"nat": nat}, nil))
	lines, ids := chatLines("r", "nat/ok", 6)
	b := createBatch(t, st, putInput(t, st, lines...), 500*time.Millisecond)
	done := waitStatus(t, st, b.ID, StatusExpired)
	if nat.cancels.Load() != 1 {
		t.Errorf("%d cancels sent at expiry, want 1", nat.cancels.Load())
	}
	out, errs := readResultFile(t, st, done.OutputFileID), readResultFile(t, st, done.ErrorFileID)
	checkExactlyOnce(t, ids, out, errs)
	if len(out) != 3 {
		t.Errorf("%d answered lines kept, want 3", len(out))
	}
	// The provider batch ended cancelled; its unfinished lines end as the
	// batch did.
	for _, l := range errs {
		if l.Error == nil || l.Error.Code != "batch_expired" {
			t.Errorf("%s: %s", l.CustomID, l.raw)
		}
	}
}

func TestNativeProviderExpiry(t *testing.T) {
	st := NewStore(storagetest.NewMemory(), "mg")
	nat := newFakeNative()
	nat.hold = true
	startRunner(t, st, "inst", nativeLive(nativeSettings(), newFakeExecutor(), map[string]*fakeNative{"nat": nat}, nil))
	lines, ids := chatLines("r", "nat/ok", 6)
	b := createBatch(t, st, putInput(t, st, lines...), time.Hour)
	waitUntil(t, "the provider batch", func() bool { return nat.created() == 1 })
	nat.expireAll()
	done := waitStatus(t, st, b.ID, StatusCompleted)
	out, errs := readResultFile(t, st, done.OutputFileID), readResultFile(t, st, done.ErrorFileID)
	checkExactlyOnce(t, ids, out, errs)
	if len(errs) != 3 {
		t.Fatalf("%d error lines, want 3", len(errs))
	}
	for _, l := range errs {
		if l.Error == nil || l.Error.Code != "batch_expired" {
			t.Errorf("%s: %s", l.CustomID, l.raw)
		}
	}
}

func TestNativePollBacksOff(t *testing.T) {
	st := NewStore(storagetest.NewMemory(), "mg")
	nat := newFakeNative()
	nat.hold = true
	set := nativeSettings()
	set.NativePoll, set.NativePollMax = 10*time.Millisecond, 40*time.Millisecond
	startRunner(t, st, "inst", nativeLive(set, newFakeExecutor(), map[string]*fakeNative{"nat": nat}, nil))
	b := createBatch(t, st, putInput(t, st, contentLine("r", "nat/ok", "hello")), time.Hour)
	waitUntil(t, "six polls", func() bool {
		nat.mu.Lock()
		defer nat.mu.Unlock()
		return len(nat.pollAt["nb_1"]) >= 6
	})
	nat.set(func(f *fakeNative) { f.hold = false })
	waitStatus(t, st, b.ID, StatusCompleted)
	nat.mu.Lock()
	at := nat.pollAt["nb_1"]
	nat.mu.Unlock()
	// Each wait is at least the one planned: 10, 20, 40, 40 ms.
	for k := 1; k < len(at); k++ {
		planned := min(set.NativePoll<<(k-1), set.NativePollMax)
		if gap := at[k].Sub(at[k-1]); gap < planned {
			t.Errorf("poll %d came %v after the one before, before the %v planned", k, gap, planned)
		}
	}
}

// TestNativeOnePollerInCluster: two instances share the storage; one
// polls a provider batch at a time, and the part is submitted once.
func TestNativeOnePollerInCluster(t *testing.T) {
	st := NewStore(storagetest.NewMemory(), "mg")
	nat := newFakeNative()
	nat.hold = true
	live := nativeLive(nativeSettings(), newFakeExecutor(), map[string]*fakeNative{"nat": nat}, nil)
	startRunner(t, st, "inst-a", live)
	startRunner(t, st, "inst-b", live)
	var lines []string
	for i := range 30 {
		lines = append(lines, contentLine(fmt.Sprintf("r-%d", i), "nat/ok", "hello"))
	}
	b := createBatch(t, st, putInput(t, st, lines...), time.Hour)
	waitUntil(t, "ten polls", func() bool {
		nat.mu.Lock()
		defer nat.mu.Unlock()
		return len(nat.pollAt["nb_1"]) >= 10
	})
	nat.set(func(f *fakeNative) { f.hold = false })
	waitStatus(t, st, b.ID, StatusCompleted)
	if nat.created() != 1 || nat.overlap.Load() != 0 {
		t.Errorf("%d provider batches, %d overlapping polls; want 1 and 0", nat.created(), nat.overlap.Load())
	}
}

func TestNativeModeTurnedOffBeforeSubmit(t *testing.T) {
	st := NewStore(storagetest.NewMemory(), "mg")
	ex := newFakeExecutor()
	nat := newFakeNative()
	var polls atomic.Int64
	// The first poll (which validates the batch) has the provider native;
	// every later one, gateway.
	live := func() (Live, bool) {
		native := polls.Add(1) == 1
		return Live{Settings: nativeSettings(), Executor: ex, Logger: zap.NewNop(), Native: func(p string) NativeAPI {
			if p == "nat" && native {
				return nat
			}
			return nil
		}}, true
	}
	lines, ids := chatLines("r", "nat/ok", 3)
	b := createBatch(t, st, putInput(t, st, lines...), time.Hour)
	startRunner(t, st, "inst", live)
	done := waitStatus(t, st, b.ID, StatusCompleted)
	checkExactlyOnce(t, ids, readResultFile(t, st, done.OutputFileID))
	checkSentOnce(t, ids, ex)
	if nat.submits.Load() != 0 {
		t.Error("submitted to a provider whose mode is gateway")
	}
}

func TestModes(t *testing.T) {
	for typ, want := range map[string]string{"openai": ModeNative, "azure_openai": ModeNative, "anthropic": ModeNative,
		"gemini": ModeNative, "vertex": ModeNative, "bedrock": ModeNative, "groq": ModeGateway, "cohere": ModeGateway, "acme": ModeGateway} {
		if got := DefaultMode(typ); got != want {
			t.Errorf("DefaultMode(%s) = %s, want %s", typ, got, want)
		}
	}
	for in, ok := range map[string]bool{"": true, "native": true, "gateway": true, "Native": false, "both": false} {
		if _, err := ParseMode(in); (err == nil) != ok {
			t.Errorf("ParseMode(%q): %v", in, err)
		}
	}
}

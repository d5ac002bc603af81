package batch

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelgate/modelgate/internal/storagetest"
	"go.uber.org/zap"
)

const testOwner = "alice"

// testSettings are short, so batches run in milliseconds and have several
// parts.
func testSettings() Settings {
	return Settings{
		Workers:            32,
		PerProvider:        16,
		MaxRequests:        1000,
		MaxLineBytes:       4096,
		MaxRetries:         2,
		RetryBackoff:       5 * time.Millisecond,
		CheckpointInterval: 20 * time.Millisecond,
		PartLines:          7,
		Lease:              200 * time.Millisecond,
	}
}

const testPoll = 10 * time.Millisecond

// staticLive returns a live func answering with set and ex.
func staticLive(set Settings, ex Executor) func() (Live, bool) {
	return func() (Live, bool) {
		return Live{Settings: set, Executor: ex, Logger: zap.NewNop()}, true
	}
}

// startRunner starts a runner and stops it when the test ends.
func startRunner(t *testing.T, st *Store, instance string, live func() (Live, bool)) *Runner {
	t.Helper()
	r := NewRunner(st, instance, testPoll, live)
	var stopped atomic.Bool
	t.Cleanup(func() {
		if stopped.CompareAndSwap(false, true) {
			_ = r.Destruct()
		}
	})
	return r
}

// chatLine is one request line of the chat endpoint.
func chatLine(customID, model string) string {
	return fmt.Sprintf(`{"custom_id":%q,"method":"POST","url":"/v1/chat/completions","body":{"model":%q,"messages":[{"role":"user","content":"Hi"}]}}`,
		customID, model)
}

// putInput uploads lines (joined by newlines, with a final one) as a batch
// input file of testOwner.
func putInput(t *testing.T, st *Store, lines ...string) File {
	t.Helper()
	content := strings.Join(lines, "\n") + "\n"
	f, err := st.PutFile(context.Background(), testOwner, "input.jsonl", PurposeBatch, strings.NewReader(content), 1<<30)
	if err != nil {
		t.Fatalf("PutFile: %v", err)
	}
	return f
}

// createBatch creates a chat batch of testOwner over f with window w.
func createBatch(t *testing.T, st *Store, f File, w time.Duration) Batch {
	t.Helper()
	b, err := st.CreateBatch(context.Background(), testOwner, CreateParams{
		InputFileID: f.ID, Endpoint: EndpointChat, CompletionWindow: "24h", Window: w,
	})
	if err != nil {
		t.Fatalf("CreateBatch: %v", err)
	}
	return b
}

// waitFor polls the batch until cond holds, failing after 10 s.
func waitFor(t *testing.T, st *Store, id string, what string, cond func(Batch) bool) Batch {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := st.GetBatch(context.Background(), testOwner, id)
		if err != nil {
			t.Fatalf("GetBatch: %v", err)
		}
		if cond(b) {
			return b
		}
		if time.Now().After(deadline) {
			t.Fatalf("batch %s: waited 10s for %s; it is %s with counts %+v", id, what, b.Status, b.RequestCounts)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func waitStatus(t *testing.T, st *Store, id, status string) Batch {
	t.Helper()
	return waitFor(t, st, id, "status "+status, func(b Batch) bool { return b.Status == status })
}

// waitUntil polls cond, failing after 10 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10s for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// outLine is a line of an output or error file.
type outLine struct {
	ID       string `json:"id"`
	CustomID string `json:"custom_id"`
	Response *struct {
		StatusCode int             `json:"status_code"`
		RequestID  string          `json:"request_id"`
		Body       json.RawMessage `json:"body"`
	} `json:"response"`
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	raw string
}

// readResultFile returns the lines of owner's file id; a nil id is no lines.
func readResultFile(t *testing.T, st *Store, id *string) []outLine {
	t.Helper()
	if id == nil {
		return nil
	}
	f, rc, err := st.OpenFile(context.Background(), testOwner, *id)
	if err != nil {
		t.Fatalf("OpenFile(%s): %v", *id, err)
	}
	defer rc.Close()
	if f.Purpose != PurposeBatchOutput {
		t.Errorf("file %s has purpose %q, want %q", *id, f.Purpose, PurposeBatchOutput)
	}
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("reading %s: %v", *id, err)
	}
	if int64(len(b)) != f.Bytes {
		t.Errorf("file %s: read %d bytes, its object says %d", *id, len(b), f.Bytes)
	}
	if len(b) == 0 {
		t.Errorf("file %s is empty; an empty result file should have no id", *id)
	}
	var out []outLine
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l outLine
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&l); err != nil {
			t.Fatalf("file %s: line %q is not a result line: %v", *id, sc.Text(), err)
		}
		l.raw = sc.Text()
		out = append(out, l)
	}
	return out
}

// checkExactlyOnce checks every id of want appears exactly once across
// the lines, and no other.
func checkExactlyOnce(t *testing.T, want []string, files ...[]outLine) {
	t.Helper()
	seen := make(map[string]int)
	for _, lines := range files {
		for _, l := range lines {
			seen[l.CustomID]++
		}
	}
	for _, id := range want {
		if seen[id] != 1 {
			t.Errorf("custom_id %s has %d result lines, want 1", id, seen[id])
		}
		delete(seen, id)
	}
	for id, n := range seen {
		t.Errorf("custom_id %s is no input's, yet has %d result lines", id, n)
	}
}

// checkSentOnce checks every custom_id of want was sent exactly once by the
// executors together (the instances, or the configs, that shared a batch),
// and no other was sent.
func checkSentOnce(t *testing.T, want []string, exs ...*fakeExecutor) {
	t.Helper()
	counts := make([]map[string]int, len(exs))
	total := make(map[string]int)
	for i, ex := range exs {
		counts[i] = ex.callCounts()
		for id, n := range counts[i] {
			total[id] += n
		}
	}
	for _, id := range want {
		if total[id] != 1 {
			each := make([]int, len(exs))
			for i := range exs {
				each[i] = counts[i][id]
			}
			t.Errorf("%s was sent %d times (by each executor: %v), want once", id, total[id], each)
		}
		delete(total, id)
	}
	for id, n := range total {
		t.Errorf("%s is no input's, yet was sent %d times", id, n)
	}
}

// checkNothingLeft checks the storage is empty after what.
func checkNothingLeft(t *testing.T, mem *storagetest.Memory, what string) {
	t.Helper()
	if left := mem.Keys(""); len(left) > 0 {
		t.Errorf("%s left %v in storage", what, left)
	}
}

// idsOf returns the IDs of files or batches, in order.
func idsOf[T File | Batch](xs []T) []string {
	out := make([]string, 0, len(xs))
	for _, x := range xs {
		switch x := any(x).(type) {
		case File:
			out = append(out, x.ID)
		case Batch:
			out = append(out, x.ID)
		}
	}
	return out
}

// checkCleanedUp checks nothing of a finished batch's work remains.
//
// The runner stores the terminal status before it cleans up, so a test that
// saw the status gives the cleanup a moment.
func checkCleanedUp(t *testing.T, mem *storagetest.Memory, st *Store, id string) {
	t.Helper()
	dir := st.batchDir(testOwner, id)
	var left []string
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		left = left[:0]
		for _, k := range mem.Keys(dir + "/") {
			if k != dir+"/batch.json" {
				left = append(left, k)
			}
		}
		if mem.Exists(context.Background(), st.activeKey(id)) {
			left = append(left, st.activeKey(id))
		}
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
	}
	for _, k := range left {
		t.Errorf("after the batch ended, storage still holds %s", k)
	}
}

// chatLines returns n request lines of the chat endpoint for model, with
// the custom_ids "<prefix>-<i>", and those custom_ids in input order.
func chatLines(prefix, model string, n int) (lines, customIDs []string) {
	for i := range n {
		id := fmt.Sprintf("%s-%d", prefix, i)
		lines = append(lines, chatLine(id, model))
		customIDs = append(customIDs, id)
	}
	return lines, customIDs
}

// chatBatch creates a batch of testOwner over n chat lines of model (see
// chatLines), with a window of an hour; it returns the custom_ids in input
// order.
func chatBatch(t *testing.T, st *Store, prefix, model string, n int) (Batch, []string) {
	t.Helper()
	lines, want := chatLines(prefix, model, n)
	return createBatch(t, st, putInput(t, st, lines...), time.Hour), want
}

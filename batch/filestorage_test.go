package batch

import (
	"context"
	"fmt"
	"path"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/redis/go-redis/v9"

	"github.com/modelgate/modelgate/internal/redistest"
	"github.com/modelgate/modelgate/state/redisclient"
	"github.com/modelgate/modelgate/state/redisstore"
)

func init() {
	// go-redis logs connection events to standard error.
	redis.SetLogger(redisclient.Logger(func(string, ...any) {}))
}

// recording wraps a Storage and remembers every key stored in it.
type recording struct {
	Storage
	mu     sync.Mutex
	stored map[string]int // key → largest value stored
}

func record(s Storage) *recording { return &recording{Storage: s, stored: make(map[string]int)} }

func (r *recording) Store(ctx context.Context, key string, value []byte) error {
	r.mu.Lock()
	r.stored[key] = max(r.stored[key], len(value))
	r.mu.Unlock()
	return r.Storage.Store(ctx, key, value)
}

func (r *recording) keys() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int, len(r.stored))
	for k, v := range r.stored {
		out[k] = v
	}
	return out
}

var (
	// What the coordinating storage may hold: small records and markers.
	recordKey = regexp.MustCompile(`^mg/(active/[^/]+|o/[0-9a-f]+/(files/file-[0-9a-v]+/meta\.json|batches/batch_[0-9a-v]+/(batch\.json|claims\.json|cancel)))$`)
	// What the file storage may hold: file parts, work parts, checkpoints.
	bulkKey = regexp.MustCompile(`^mg/o/[0-9a-f]+/(files/file-[0-9a-v]+/\d{6}|batches/batch_[0-9a-v]+/(input/\d{6}|results/\d{6}/[^/]+))$`)
)

// runSplit runs a completed batch and a cancelled one on st, whose
// records go to main and whose bulk bytes go to files, and checks each
// storage holds only its own kind of key.
func runSplit(t *testing.T, main, files *recording, st *Store) {
	t.Helper()
	ctx := context.Background()
	ex := newFakeExecutor()
	startRunner(t, st, "inst-a", staticLive(testSettings(), ex))

	// Completed: 20 lines in 3 parts, some failing.
	var want, lines []string
	for i := range 20 {
		id := fmt.Sprintf("s-%d", i)
		model := "ok"
		if i%4 == 0 {
			model = "fail-400"
		}
		want, lines = append(want, id), append(lines, chatLine(id, model))
	}
	in := putInput(t, st, lines...)
	b := createBatch(t, st, in, time.Hour)
	b = waitStatus(t, st, b.ID, StatusCompleted)
	out, errs := readResultFile(t, st, b.OutputFileID), readResultFile(t, st, b.ErrorFileID)
	checkExactlyOnce(t, want, out, errs)
	if len(out) != 15 || len(errs) != 5 {
		t.Fatalf("%d output and %d error lines", len(out), len(errs))
	}

	// Cancelled: the error file's lines for requests never run are read
	// back from the work parts in the file storage.
	want, lines = nil, nil
	for i := range 14 {
		id := fmt.Sprintf("c-%d", i)
		model := "ok"
		if i%7 == 0 {
			model = "slow"
		}
		want, lines = append(want, id), append(lines, chatLine(id, model))
	}
	c := createBatch(t, st, putInput(t, st, lines...), time.Hour)
	waitUntil(t, "the ok lines to be answered", func() bool { return len(ex.answeredIDs()) >= 12+15 })
	if _, err := st.CancelBatch(ctx, testOwner, c.ID); err != nil {
		t.Fatal(err)
	}
	c = waitStatus(t, st, c.ID, StatusCancelled)
	cout, cerrs := readResultFile(t, st, c.OutputFileID), readResultFile(t, st, c.ErrorFileID)
	checkExactlyOnce(t, want, cout, cerrs)
	cancelled := 0
	for _, l := range cerrs {
		if l.Error != nil && l.Error.Code == "batch_cancelled" {
			cancelled++
		}
	}
	if cancelled != 2 {
		t.Fatalf("%d batch_cancelled lines, want 2", cancelled)
	}

	for k, size := range main.keys() {
		if !recordKey.MatchString(k) {
			t.Errorf("the coordinating storage got %s (%d bytes)", k, size)
		}
	}
	sawChunk, sawInput, sawResults := false, false, false
	for k := range files.keys() {
		if !bulkKey.MatchString(k) {
			t.Errorf("the file storage got %s", k)
		}
		sawChunk = sawChunk || strings.Contains(k, "/files/")
		sawInput = sawInput || strings.Contains(k, "/input/")
		sawResults = sawResults || strings.Contains(k, "/results/")
	}
	if !sawChunk || !sawInput || !sawResults {
		t.Errorf("file storage saw file parts %v, work parts %v, checkpoints %v", sawChunk, sawInput, sawResults)
	}

	// Deleting a file deletes it from both storages.
	if _, err := st.DeleteFile(ctx, testOwner, in.ID); err != nil {
		t.Fatal(err)
	}
	dir := st.fileDir(testOwner, in.ID)
	if main.Exists(ctx, path.Join(dir, "meta.json")) || files.Exists(ctx, path.Join(dir, "000000")) {
		t.Error("a deleted file's record or content remains")
	}
	// The batch's work parts and checkpoints leave the file storage once
	// it ended (the cleanup follows the final status).
	for _, id := range []string{b.ID, c.ID} {
		bd := st.batchDir(testOwner, id)
		waitUntil(t, "batch "+id+"'s work parts to leave the file storage", func() bool {
			return !files.Exists(ctx, path.Join(bd, "input")) && !files.Exists(ctx, path.Join(bd, "results"))
		})
	}
}

// Records and locks on one file system storage, bulk bytes on another.
func TestFileStorageApart(t *testing.T) {
	t.Parallel()
	main := record(&certmagic.FileStorage{Path: t.TempDir()})
	files := record(&certmagic.FileStorage{Path: t.TempDir()})
	runSplit(t, main, files, NewStore(main, "mg", WithFileStorage(files)))
}

// The cluster setup: coordination on Redis, a 4 MiB part never in it.
func TestFileStorageApartFromRedis(t *testing.T) {
	srv := redistest.Start(t)
	rdb, err := redisclient.New(redisclient.Options{Addresses: []string{srv.Addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	rs, err := redisstore.New(rdb, redisstore.Options{KeyPrefix: "gw"})
	if err != nil {
		t.Fatal(err)
	}
	main := record(rs)
	files := record(&certmagic.FileStorage{Path: t.TempDir()})
	runSplit(t, main, files, NewStore(main, "mg", WithFileStorage(files)))
	for k, size := range main.keys() {
		if size > 8<<10 {
			t.Errorf("Redis got %d bytes at %s", size, k)
		}
	}
}

// Without the option everything stays in the one storage, as before.
func TestFileStorageDefault(t *testing.T) {
	t.Parallel()
	one := record(&certmagic.FileStorage{Path: t.TempDir()})
	st := NewStore(one, "mg")
	if st.separateFiles || st.files != FileStorage(one) {
		t.Fatal("bulk bytes do not default to the storage")
	}
	f := putInput(t, st, chatLine("a", "ok"))
	if _, ok := one.keys()[path.Join(st.fileDir(testOwner, f.ID), "000000")]; !ok {
		t.Fatal("the file's content is not in the storage")
	}
}

// A file system storage writes through a temporary file beside the key:
// the runner, listing active batches, must leave such a name alone, or the
// Store that made it fails (CreateBatch did, now and then, on Caddy's
// file_system storage).
func TestRunnerLeavesForeignActiveNames(t *testing.T) {
	t.Parallel()
	fsys := &certmagic.FileStorage{Path: t.TempDir()}
	st := NewStore(fsys, "mg")
	tmp := path.Join("mg", "active", "2725130610")
	if err := fsys.Store(context.Background(), tmp, []byte(testOwner)); err != nil {
		t.Fatal(err)
	}
	r := startRunner(t, st, "inst-a", staticLive(testSettings(), newFakeExecutor()))
	for range 5 {
		r.Wake()
		time.Sleep(3 * testPoll)
	}
	if !fsys.Exists(context.Background(), tmp) {
		t.Fatal("the runner deleted a name in active/ that is no batch")
	}
}

package batch

import (
	"context"
	"errors"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelgate/modelgate/internal/storagetest"
	"github.com/modelgate/modelgate/retention"
	"go.uber.org/zap"
)

// stepClock is a clock a test moves.
type stepClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *stepClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *stepClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// upload uploads content for testOwner, asking it to expire after ttl
// (0: not asking).
func upload(t *testing.T, st *Store, content string, ttl time.Duration) File {
	t.Helper()
	p, err := st.UploadFile(context.Background(), testOwner, "f.jsonl", strings.NewReader(content), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if ttl > 0 {
		p.ExpireAfter(ttl)
	}
	f, err := p.Commit(context.Background(), PurposeBatch)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

const day = 24 * time.Hour

// Files expire as their expires_at says: their Retention after their
// creation, or sooner when the upload asked; a file from before expiry
// was recorded by its purpose's Retention. An expired file is gone for
// every reader at once, and the retention sweep, by the same clock,
// deletes it from the storage together with uploads a stopped instance
// left behind.
func TestFileExpiry(t *testing.T) {
	ctx := context.Background()
	mem := storagetest.NewMemory()
	clk := &stepClock{t: time.Unix(1_800_000_000, 0)}
	st := NewStore(mem, "mg", WithRetention(Retention{Files: 30 * day, Output: 7 * day}))
	st.now = clk.now

	kept := upload(t, st, "thirty days\n", 0)
	hour := upload(t, st, "an hour\n", time.Hour)
	capped := upload(t, st, "asks for sixty days\n", 60*day)
	for _, tc := range []struct {
		f    File
		want time.Duration
	}{{kept, 30 * day}, {hour, time.Hour}, {capped, 30 * day}} {
		if tc.f.ExpiresAt == nil || *tc.f.ExpiresAt != tc.f.CreatedAt+int64(tc.want/time.Second) {
			t.Errorf("%q expires at %v, want created_at %d + %v", tc.f.Filename, tc.f.ExpiresAt, tc.f.CreatedAt, tc.want)
		}
	}
	// A result file stored before expiry was recorded.
	old := fileRecord{File: File{ID: "file-" + strings.Repeat("0", 23) + "1", Object: "file", Bytes: 3, CreatedAt: clk.now().Unix(),
		Filename: "old.jsonl", Purpose: PurposeBatchOutput, Status: "processed"}, Owner: testOwner}
	if err := st.storeJSON(ctx, path.Join(st.fileDir(testOwner, old.ID), "meta.json"), old); err != nil {
		t.Fatal(err)
	}
	if f, err := st.GetFile(ctx, testOwner, old.ID); err != nil || f.ExpiresAt == nil || *f.ExpiresAt != old.CreatedAt+int64(7*day/time.Second) {
		t.Errorf("an old result file: %+v %v, want it to expire 7 days after its creation", f, err)
	}
	// An upload that never became a file: its instance stopped.
	if _, err := st.UploadFile(ctx, testOwner, "left.jsonl", strings.NewReader("left behind\n"), 1<<20); err != nil {
		t.Fatal(err)
	}

	sweeper := &retention.Sweeper{Storage: mem, Prefix: "mg", Kinds: []retention.Kind{st.FileKind()}, Interval: time.Minute,
		Now: clk.now, Logger: zap.NewNop()}
	sweep := func(want int) {
		t.Helper()
		res, err := sweeper.Sweep(ctx)
		if err != nil || !res.Swept || res.Deleted["files"] != want {
			t.Fatalf("sweep at +%v: %+v %v, want %d files deleted", clk.now().Sub(time.Unix(1_800_000_000, 0)), res, err, want)
		}
	}
	fileKeys := func(id string) []string { return mem.Keys(st.fileDir(testOwner, id) + "/") }

	sweep(0)
	clk.advance(time.Hour)
	if _, err := st.GetFile(ctx, testOwner, hour.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetFile of an expired file: %v", err)
	}
	if _, _, err := st.OpenFile(ctx, testOwner, hour.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("OpenFile of an expired file: %v", err)
	}
	if _, err := st.DeleteFile(ctx, testOwner, hour.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("DeleteFile of an expired file: %v", err)
	}
	if page, err := st.ListFiles(ctx, testOwner, ListOptions{Limit: 10}); err != nil || len(page.Data) != 3 {
		t.Errorf("ListFiles after an hour: %v %v, want the three that have not expired", idsOf(page.Data), err)
	}
	_, err := st.CreateBatch(ctx, testOwner, CreateParams{InputFileID: hour.ID, Endpoint: EndpointChat, CompletionWindow: "24h", Window: time.Hour})
	var inv *InvalidError
	if !errors.As(err, &inv) || inv.Param != "input_file_id" {
		t.Errorf("a batch on an expired file: %v", err)
	}
	if len(fileKeys(hour.ID)) == 0 {
		t.Fatal("the expired file was deleted before the sweep")
	}
	sweep(1)
	if keys := fileKeys(hour.ID); len(keys) != 0 {
		t.Errorf("the sweep left %v of the expired file", keys)
	}

	clk.advance(day)
	sweep(1) // what the stopped upload left
	clk.advance(6 * day)
	sweep(1) // the old result file
	clk.advance(23 * day)
	sweep(2) // the two of thirty days
	if left := mem.Keys("mg/o/"); len(left) != 0 {
		t.Errorf("after every file expired, the storage holds %v", left)
	}
}

// The scan the storage quota is counted from sees every file's content
// bytes, and uploads in progress as nothing.
func TestFileKindScan(t *testing.T) {
	ctx := context.Background()
	mem := storagetest.NewMemory()
	files := storagetest.NewMemory()
	st := NewStore(mem, "mg", WithFileStorage(files), WithRetention(Retention{Files: day}))
	a := upload(t, st, "12345", 0)
	b := upload(t, st, "1234567890", time.Hour)
	p, err := st.UploadFile(ctx, testOwner, "x", strings.NewReader("pending"), 100)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]retention.Object{}
	dir := st.ownerDir(testOwner)
	if err := st.FileKind().Scan(ctx, dir, func(o retention.Object) { got[o.Name] = o }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[a.ID].Bytes != 5 || got[b.ID].Bytes != 10 || got[p.rec.ID].Bytes != 0 ||
		!got[b.ID].Expires.Equal(time.Unix(*b.ExpiresAt, 0)) || !got[a.ID].Expires.Equal(time.Unix(*a.ExpiresAt, 0)) {
		t.Errorf("scan: %+v", got)
	}
	if err := st.FileKind().Delete(ctx, dir, got[p.rec.ID]); err != nil {
		t.Fatal(err)
	}
	if left := files.Keys(st.fileDir(testOwner, p.rec.ID) + "/"); len(left) != 0 {
		t.Errorf("deleting a pending upload left %v in the file storage", left)
	}
	if err := st.FileKind().Scan(ctx, st.ownerDir("nobody"), func(o retention.Object) { t.Errorf("nobody has %+v", o) }); err != nil {
		t.Errorf("scanning an owner without files: %v", err)
	}
}

// A batch's output and error files expire as the batch asked
// (output_expires_after) or the runner's OutputRetention says, whichever
// is sooner, after they were written; the runner reports their bytes.
func TestBatchOutputExpiry(t *testing.T) {
	for _, tc := range []struct {
		name      string
		asked     time.Duration
		retention time.Duration
		want      time.Duration
	}{
		{"the retention", 0, 48 * time.Hour, 48 * time.Hour},
		{"asked for less", time.Hour, 48 * time.Hour, time.Hour},
		{"asked for more", 72 * time.Hour, 48 * time.Hour, 48 * time.Hour},
		{"no retention", time.Hour, 0, time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := NewStore(storagetest.NewMemory(), "mg")
			set := testSettings()
			set.OutputRetention = tc.retention
			var mu sync.Mutex
			var stored int64
			startRunner(t, st, "a", func() (Live, bool) {
				return Live{Settings: set, Executor: newFakeExecutor(), Logger: zap.NewNop(),
					Stored: func(_ context.Context, owner string, n int64) {
						mu.Lock()
						defer mu.Unlock()
						if owner == testOwner {
							stored += n
						}
					}}, true
			})
			lines, _ := chatLines("q", "ok", 3)
			lines = append(lines, chatLine("bad", "fail-400"))
			b, err := st.CreateBatch(context.Background(), testOwner, CreateParams{InputFileID: putInput(t, st, lines...).ID,
				Endpoint: EndpointChat, CompletionWindow: "24h", Window: time.Hour, OutputExpiresAfter: tc.asked})
			if err != nil {
				t.Fatal(err)
			}
			b = waitStatus(t, st, b.ID, StatusCompleted)
			if b.OutputFileID == nil || b.ErrorFileID == nil {
				t.Fatalf("the batch has no output or no error file: %+v", b)
			}
			var total int64
			for _, id := range []string{*b.OutputFileID, *b.ErrorFileID} {
				f, err := st.GetFile(context.Background(), testOwner, id)
				if err != nil {
					t.Fatal(err)
				}
				if f.ExpiresAt == nil || *f.ExpiresAt != f.CreatedAt+int64(tc.want/time.Second) {
					t.Errorf("%s expires at %v, want created_at %d + %v", f.Filename, f.ExpiresAt, f.CreatedAt, tc.want)
				}
				total += f.Bytes
			}
			mu.Lock()
			defer mu.Unlock()
			if stored != total {
				t.Errorf("the runner reported %d bytes stored, the files hold %d", stored, total)
			}
		})
	}
}

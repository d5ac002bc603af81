package batch

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"path"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/modelgate/modelgate/internal/ids"
	"github.com/modelgate/modelgate/internal/storagetest"
)

// fakeClock makes st's clock step by 1 ms on each reading, so IDs made one
// after another have distinct times.
func fakeClock(st *Store) {
	t0 := time.UnixMilli(1_700_000_000_000)
	n := 0
	st.now = func() time.Time {
		n++
		return t0.Add(time.Duration(n) * time.Millisecond)
	}
}

func randomBytes(n int) []byte {
	r := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// onlyReader hides everything of a reader but Read.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

func TestPutFileStreamsInParts(t *testing.T) {
	ctx := context.Background()
	mem := storagetest.NewMemory()
	st := NewStore(mem, "mg")
	content := randomBytes(9 << 20) // three parts: 4 + 4 + 1 MiB

	f, err := st.PutFile(ctx, testOwner, "big.jsonl", PurposeBatch, onlyReader{bytes.NewReader(content)}, 10<<20)
	if err != nil {
		t.Fatalf("PutFile: %v", err)
	}
	if f.Bytes != int64(len(content)) || f.Object != "file" || f.Purpose != PurposeBatch ||
		f.Filename != "big.jsonl" || f.Status != "processed" || !ids.Valid(f.ID, "file-") {
		t.Errorf("PutFile returned %+v", f)
	}
	rec, err := st.fileRecord(ctx, testOwner, f.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Chunks != 3 {
		t.Errorf("Chunks = %d, want 3", rec.Chunks)
	}
	parts := mem.Keys(st.fileDir(testOwner, f.ID) + "/")
	if want := []string{"000000", "000001", "000002", "meta.json"}; len(parts) != len(want) {
		t.Errorf("stored keys %v, want %v", parts, want)
	}
	for _, k := range parts {
		if b, _ := mem.Load(ctx, k); path.Base(k) != "meta.json" && len(b) > ChunkSize {
			t.Errorf("part %s holds %d bytes, more than ChunkSize", k, len(b))
		}
	}

	got, rc, err := st.OpenFile(ctx, testOwner, f.ID)
	if err != nil {
		t.Fatalf("OpenFile: %v", err)
	}
	if got != f {
		t.Errorf("OpenFile's file %+v, PutFile's %+v", got, f)
	}
	// Read in odd-sized pieces, so reads straddle the parts.
	var back bytes.Buffer
	buf := make([]byte, 1000003)
	for {
		n, err := rc.Read(buf)
		back.Write(buf[:n])
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("Read: %v", err)
		}
	}
	_ = rc.Close()
	if !bytes.Equal(back.Bytes(), content) {
		t.Fatalf("read back %d bytes that differ from the %d written", back.Len(), len(content))
	}
}

func TestPutFileSizes(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		size   int
		limit  int64
		err    error
		chunks int
	}{
		{"empty", 0, 10, nil, 0},
		{"at the limit", 100, 100, nil, 1},
		{"one over the limit", 101, 100, ErrTooLarge, 0},
		{"exactly one part", ChunkSize, ChunkSize, nil, 1},
		{"one byte over a part", ChunkSize + 1, ChunkSize + 1, nil, 2},
		{"parts stored before the limit hit", 2*ChunkSize + 10, 2 * ChunkSize, ErrTooLarge, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := storagetest.NewMemory()
			st := NewStore(mem, "mg")
			content := randomBytes(tc.size)
			f, err := st.PutFile(ctx, testOwner, "x", PurposeBatch, bytes.NewReader(content), tc.limit)
			if !errors.Is(err, tc.err) {
				t.Fatalf("PutFile error %v, want %v", err, tc.err)
			}
			if err != nil {
				checkNothingLeft(t, mem, "a refused upload")
				page, _ := st.ListFiles(ctx, testOwner, ListOptions{Limit: 10})
				if len(page.Data) > 0 {
					t.Errorf("a refused upload is listed: %+v", page.Data)
				}
				return
			}
			rec, err := st.fileRecord(ctx, testOwner, f.ID)
			if err != nil {
				t.Fatal(err)
			}
			if rec.Chunks != tc.chunks || rec.Bytes != int64(tc.size) {
				t.Errorf("Chunks %d, Bytes %d; want %d, %d", rec.Chunks, rec.Bytes, tc.chunks, tc.size)
			}
			_, rc, err := st.OpenFile(ctx, testOwner, f.ID)
			if err != nil {
				t.Fatal(err)
			}
			back, err := io.ReadAll(rc)
			if err != nil || !bytes.Equal(back, content) {
				t.Errorf("read back %d bytes (err %v), want the %d written", len(back), err, len(content))
			}
		})
	}
}

// failingReader yields n bytes, then fails.
type failingReader struct{ n int }

var errReader = errors.New("the client went away")

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, errReader
	}
	k := min(len(p), r.n)
	clear(p[:k])
	r.n -= k
	return k, nil
}

// An upload that fails after its first part, on the client's side or on
// the storage's, leaves nothing; the client's failure is ErrUnreadable
// (an upload cut short, which the Files API answers with 400), the
// storage's is not.
func TestPutFileFails(t *testing.T) {
	boom := errors.New("disk full")
	for _, tc := range []struct {
		name       string
		content    io.Reader
		onStore    func(key string, _ []byte) error
		err        error
		unreadable bool
	}{
		{"reader", &failingReader{n: ChunkSize + 5}, nil, errReader, true},
		{"cut short", io.MultiReader(bytes.NewReader(randomBytes(10)), iotest.ErrReader(io.ErrUnexpectedEOF)), nil, io.ErrUnexpectedEOF, true},
		{"storage", bytes.NewReader(randomBytes(ChunkSize + 5)), func(key string, _ []byte) error {
			if path.Base(key) == "000001" {
				return boom
			}
			return nil
		}, boom, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := storagetest.NewMemory()
			mem.OnStore(tc.onStore)
			st := NewStore(mem, "mg")
			_, err := st.PutFile(context.Background(), testOwner, "x", PurposeBatch, tc.content, 1<<30)
			if !errors.Is(err, tc.err) {
				t.Fatalf("PutFile error %v, want %v", err, tc.err)
			}
			if errors.Is(err, ErrUnreadable) != tc.unreadable {
				t.Errorf("PutFile error %v: ErrUnreadable is %v, want %v", err, !tc.unreadable, tc.unreadable)
			}
			checkNothingLeft(t, mem, "a failed upload")
		})
	}
}

func TestPendingFile(t *testing.T) {
	ctx := context.Background()
	mem := storagetest.NewMemory()
	st := NewStore(mem, "mg")
	p, err := st.UploadFile(ctx, testOwner, "x", strings.NewReader("hello\n"), 100)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetFile(ctx, testOwner, p.rec.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetFile of an uncommitted file: %v, want ErrNotFound", err)
	}
	if page, _ := st.ListFiles(ctx, testOwner, ListOptions{Limit: 10}); len(page.Data) != 0 {
		t.Errorf("an uncommitted file is listed: %+v", page.Data)
	}
	p.Discard(ctx)
	checkNothingLeft(t, mem, "Discard")

	p, err = st.UploadFile(ctx, testOwner, "y", strings.NewReader("hello\n"), 100)
	if err != nil {
		t.Fatal(err)
	}
	f, err := p.Commit(ctx, "user_data")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := st.GetFile(ctx, testOwner, f.ID); err != nil || got != f || got.Purpose != "user_data" {
		t.Errorf("GetFile after Commit: %+v, %v", got, err)
	}
}

func TestGetAndDeleteFile(t *testing.T) {
	ctx := context.Background()
	mem := storagetest.NewMemory()
	st := NewStore(mem, "mg")
	f, err := st.PutFile(ctx, testOwner, "a.jsonl", PurposeBatch, strings.NewReader("abc"), 100)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := st.GetFile(ctx, testOwner, f.ID); err != nil || got != f {
		t.Fatalf("GetFile: %+v, %v; want %+v", got, err, f)
	}
	if _, err := st.DeleteFile(ctx, testOwner, f.ID); err != nil {
		t.Fatalf("DeleteFile: %v", err)
	}
	if _, err := st.GetFile(ctx, testOwner, f.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetFile after delete: %v, want ErrNotFound", err)
	}
	if _, _, err := st.OpenFile(ctx, testOwner, f.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("OpenFile after delete: %v, want ErrNotFound", err)
	}
	if _, err := st.DeleteFile(ctx, testOwner, f.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("DeleteFile twice: %v, want ErrNotFound", err)
	}
	checkNothingLeft(t, mem, "DeleteFile")
	for _, id := range []string{"", "file-", "../x", "file-../../../../etc/passwd", f.ID + "/meta.json"} {
		if _, err := st.GetFile(ctx, testOwner, id); !errors.Is(err, ErrNotFound) {
			t.Errorf("GetFile(%q): %v, want ErrNotFound", id, err)
		}
	}
}

func TestFilesBelongToTheirOwner(t *testing.T) {
	ctx := context.Background()
	st := NewStore(storagetest.NewMemory(), "mg")
	fakeClock(st)
	put := func(owner, name string) File {
		f, err := st.PutFile(ctx, owner, name, PurposeBatch, strings.NewReader(name), 100)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	a1, b1, a2 := put("alice", "a1"), put("bob", "b1"), put("alice", "a2")

	if _, err := st.GetFile(ctx, "bob", a1.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("bob's GetFile of alice's file: %v, want ErrNotFound", err)
	}
	if _, _, err := st.OpenFile(ctx, "bob", a1.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("bob's OpenFile of alice's file: %v, want ErrNotFound", err)
	}
	if _, err := st.DeleteFile(ctx, "bob", a1.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("bob's DeleteFile of alice's file: %v, want ErrNotFound", err)
	}
	if _, err := st.GetFile(ctx, "alice", a1.ID); err != nil {
		t.Errorf("alice's file is gone after bob tried to delete it: %v", err)
	}
	for owner, want := range map[string][]File{"alice": {a2, a1}, "bob": {b1}, "carol": nil} {
		page, err := st.ListFiles(ctx, owner, ListOptions{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(page.Data, want) || page.HasMore {
			t.Errorf("ListFiles(%s) = %+v, want %+v", owner, page, want)
		}
	}
	// An owner's name is hashed: a name that looks like a path stays one key.
	if _, err := st.GetFile(ctx, "../alice", a1.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetFile by ../alice: %v, want ErrNotFound", err)
	}
}

func TestListFiles(t *testing.T) {
	ctx := context.Background()
	st := NewStore(storagetest.NewMemory(), "mg")
	fakeClock(st)
	var all []File // in creation order
	for i := range 6 {
		purpose := PurposeBatch
		if i%3 == 2 {
			purpose = "user_data"
		}
		f, err := st.PutFile(ctx, testOwner, "f", purpose, strings.NewReader("x"), 10)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, f)
	}
	rev := slices.Clone(all)
	slices.Reverse(rev)
	for _, tc := range []struct {
		name    string
		opt     ListOptions
		want    []File
		hasMore bool
	}{
		{"default is desc", ListOptions{Limit: 100}, rev, false},
		{"desc", ListOptions{Limit: 100, Order: "desc"}, rev, false},
		{"asc", ListOptions{Limit: 100, Order: "asc"}, all, false},
		{"limit", ListOptions{Limit: 2}, rev[:2], true},
		{"limit exactly all", ListOptions{Limit: 6}, rev, false},
		{"limit asc", ListOptions{Limit: 4, Order: "asc"}, all[:4], true},
		{"after desc", ListOptions{Limit: 100, After: all[3].ID}, []File{all[2], all[1], all[0]}, false},
		{"after asc", ListOptions{Limit: 100, Order: "asc", After: all[3].ID}, all[4:], false},
		{"after and limit", ListOptions{Limit: 2, After: all[4].ID}, []File{all[3], all[2]}, true},
		{"after the last", ListOptions{Limit: 100, After: all[0].ID}, nil, false},
		{"purpose", ListOptions{Limit: 100, Purpose: "user_data"}, []File{all[5], all[2]}, false},
		{"purpose asc with limit", ListOptions{Limit: 3, Order: "asc", Purpose: PurposeBatch}, []File{all[0], all[1], all[3]}, true},
		// HasMore counts only files of the purpose asked for.
		{"purpose, no more of it", ListOptions{Limit: 2, Purpose: "user_data"}, []File{all[5], all[2]}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			page, err := st.ListFiles(ctx, testOwner, tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(idsOf(page.Data), idsOf(tc.want)) || page.HasMore != tc.hasMore {
				t.Errorf("got %v has_more=%v, want %v has_more=%v", idsOf(page.Data), page.HasMore, idsOf(tc.want), tc.hasMore)
			}
		})
	}
}

func TestChunkWriterWrite(t *testing.T) {
	ctx := context.Background()
	mem := storagetest.NewMemory()
	st := NewStore(mem, "mg")
	content := randomBytes(2*ChunkSize + 17)
	w := st.newChunkWriter(ctx, "mg/w")
	r := rand.New(rand.NewPCG(3, 4))
	for rest := content; len(rest) > 0; {
		n := min(len(rest), 1+r.IntN(ChunkSize/3))
		if k, err := w.Write(rest[:n]); k != n || err != nil {
			t.Fatalf("Write: %d, %v", k, err)
		}
		rest = rest[n:]
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if w.chunks != 3 || w.n != int64(len(content)) {
		t.Errorf("chunks %d, n %d; want 3, %d", w.chunks, w.n, len(content))
	}
	back, err := io.ReadAll(&chunkReader{ctx: ctx, s: st, dir: "mg/w", chunks: w.chunks})
	if err != nil || !bytes.Equal(back, content) {
		t.Errorf("read back %d bytes (err %v), want the %d written", len(back), err, len(content))
	}
}

// TestChunkSizeFitsRedis: on Redis (storage modelgate_redis) a part is a string
// with a header of up to 9 bytes and a terminator in a hash, allocated by
// jemalloc in size classes four apart above 4 MiB (4, 5, 6, 7 MiB…), so a
// part of 4 MiB exactly, with its header, would take the 5 MiB class there.
// Parts stay below the 4 MiB class with room.
func TestChunkSizeFitsRedis(t *testing.T) {
	if ChunkSize > 4<<20-64 || ChunkSize < 4<<20-64<<10 {
		t.Errorf("ChunkSize %d: a part would not fill jemalloc's 4 MiB size class in Redis (keep it within 64 KiB below 4 MiB, and 64 bytes under)", ChunkSize)
	}
}

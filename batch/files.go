package batch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"time"

	"github.com/modelgate/modelgate/internal/ids"
	"github.com/modelgate/modelgate/internal/storage"
)

// ChunkSize is the size of the parts a file is stored in. An upload or a
// download holds one part in memory at a time. It is 4 KiB short of 4 MiB
// so that a part with Redis's string and hash overhead fits jemalloc's
// 4 MiB size class: a part of 4 MiB exactly takes 5 MiB of Redis memory.
const ChunkSize = 4<<20 - 4<<10

// Purposes of files.
const (
	PurposeBatch       = "batch"
	PurposeBatchOutput = "batch_output"
)

// File is OpenAI's File object.
type File struct {
	ID        string `json:"id"`
	Object    string `json:"object"`
	Bytes     int64  `json:"bytes"`
	CreatedAt int64  `json:"created_at"`
	ExpiresAt *int64 `json:"expires_at"`
	Filename  string `json:"filename"`
	Purpose   string `json:"purpose"`
	// Status is deprecated by OpenAI but still required by its schema;
	// stored files are always "processed".
	Status string `json:"status"`
}

// fileRecord is what meta.json holds.
type fileRecord struct {
	File
	Owner  string `json:"owner"`
	Chunks int    `json:"chunks"`
}

// ErrTooLarge is returned by PutFile when the content exceeds the limit.
var ErrTooLarge = errors.New("file too large")

// ErrUnreadable wraps the error of reading a file's content from its
// source (an upload cut short, a broken request body): the sender's
// failure, where any other error of PutFile or UploadFile is the
// storage's.
var ErrUnreadable = errors.New("the file's content could not be read")

// sourceReader reads a file's content and keeps the error its source
// failed with, so that a failed upload can tell the sender's failure from
// the storage's.
type sourceReader struct {
	r   io.Reader
	err error
}

func (s *sourceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && err != io.EOF {
		s.err = err
	}
	return n, err
}

// PutFile stores the content of r as a new file of owner, reading at most
// limit bytes (ErrTooLarge beyond, and nothing is kept). It is streamed: one
// ChunkSize part is in memory at a time.
func (s *Store) PutFile(ctx context.Context, owner, filename, purpose string, r io.Reader, limit int64) (File, error) {
	p, err := s.UploadFile(ctx, owner, filename, r, limit)
	if err != nil {
		return File{}, err
	}
	return p.Commit(ctx, purpose)
}

// PendingFile is uploaded content that is not a file yet: Commit makes it
// one, Discard deletes it. (A multipart upload may name the purpose after
// the content.)
type PendingFile struct {
	s   *Store
	rec fileRecord
	ttl time.Duration // ExpireAfter's
}

// Bytes is the size of the uploaded content.
func (p *PendingFile) Bytes() int64 { return p.rec.Bytes }

// ExpireAfter asks for the file to expire ttl after its creation (OpenAI's
// expires_after, anchored at created_at), or sooner if the Store's
// Retention keeps files less long. Without it the file expires as the
// Retention says.
func (p *PendingFile) ExpireAfter(ttl time.Duration) { p.ttl = ttl }

// UploadFile stores the content of r for a new file of owner, streamed,
// reading at most limit bytes (ErrTooLarge beyond, and nothing is kept).
// An error reading r is returned wrapped in ErrUnreadable, and nothing is
// kept either. The file exists for Get and List only once it is
// committed.
func (s *Store) UploadFile(ctx context.Context, owner, filename string, r io.Reader, limit int64) (*PendingFile, error) {
	now := s.now()
	rec := fileRecord{
		File: File{ID: ids.New("file-", now), Object: "file", CreatedAt: now.Unix(),
			Filename: filename, Status: "processed"},
		Owner: owner,
	}
	w := s.newChunkWriter(ctx, s.fileDir(owner, rec.ID))
	src := &sourceReader{r: r}
	n, err := io.Copy(w, io.LimitReader(src, limit+1))
	switch {
	case src.err != nil:
		err = fmt.Errorf("%w: %w", ErrUnreadable, src.err)
	case err == nil && n > limit:
		err = ErrTooLarge
	case err == nil:
		err = w.Close()
	}
	if err != nil {
		_ = s.files.Delete(context.WithoutCancel(ctx), s.fileDir(owner, rec.ID))
		return nil, err
	}
	rec.Bytes, rec.Chunks = n, w.chunks
	return &PendingFile{s: s, rec: rec}, nil
}

// Commit records the file with its purpose and when it expires; from now
// on it can be listed, read and used, until it expires.
func (p *PendingFile) Commit(ctx context.Context, purpose string) (File, error) {
	p.rec.Purpose = purpose
	if ttl := shortest(p.ttl, p.s.retention.Files); ttl > 0 {
		p.rec.ExpiresAt = ptr(p.rec.CreatedAt + seconds(ttl))
	}
	if err := p.s.storeJSON(ctx, path.Join(p.s.fileDir(p.rec.Owner, p.rec.ID), "meta.json"), p.rec); err != nil {
		p.Discard(ctx)
		return File{}, err
	}
	return p.rec.File, nil
}

// Discard deletes the uploaded content.
func (p *PendingFile) Discard(ctx context.Context) {
	_ = p.s.deleteDir(context.WithoutCancel(ctx), p.s.fileDir(p.rec.Owner, p.rec.ID))
}

// GetFile returns owner's file id.
func (s *Store) GetFile(ctx context.Context, owner, id string) (File, error) {
	rec, err := s.fileRecord(ctx, owner, id)
	return rec.File, err
}

// fileRecord loads owner's file id. A file that has expired is not found,
// whether or not the retention sweep has deleted it yet.
func (s *Store) fileRecord(ctx context.Context, owner, id string) (fileRecord, error) {
	var rec fileRecord
	if !ids.Valid(id, "file-") {
		return rec, ErrNotFound
	}
	err := s.loadJSON(ctx, path.Join(s.fileDir(owner, id), "meta.json"), &rec)
	if storage.IsNotExist(err) || err == nil && rec.Owner != owner {
		return fileRecord{}, ErrNotFound
	}
	if err != nil {
		return rec, err
	}
	if exp := s.expires(&rec); !exp.IsZero() && !s.now().Before(exp) {
		return fileRecord{}, ErrNotFound
	}
	return rec, nil
}

// expires returns when rec expires (zero for never). A file that does not
// say, stored before expiry was recorded, expires its Retention after its
// creation; expires fills that in as its expires_at.
func (s *Store) expires(rec *fileRecord) time.Time {
	if rec.ExpiresAt == nil {
		ttl := s.retention.Files
		if rec.Purpose == PurposeBatchOutput {
			ttl = s.retention.Output
		}
		if ttl <= 0 {
			return time.Time{}
		}
		rec.ExpiresAt = ptr(rec.CreatedAt + seconds(ttl))
	}
	return time.Unix(*rec.ExpiresAt, 0)
}

// shortest is the shorter of two retentions, zero standing for none.
func shortest(a, b time.Duration) time.Duration {
	switch {
	case a <= 0:
		return b
	case b <= 0:
		return a
	}
	return min(a, b)
}

// seconds is d in whole seconds, rounded up: an expires_at never comes
// before the time asked for.
func seconds(d time.Duration) int64 { return int64((d + time.Second - 1) / time.Second) }

// OpenFile returns the content of owner's file id, read part by part.
func (s *Store) OpenFile(ctx context.Context, owner, id string) (File, io.ReadCloser, error) {
	rec, err := s.fileRecord(ctx, owner, id)
	if err != nil {
		return File{}, nil, err
	}
	return rec.File, &chunkReader{ctx: ctx, s: s, dir: s.fileDir(owner, id), chunks: rec.Chunks}, nil
}

// DeleteFile deletes owner's file id, and returns what it was.
func (s *Store) DeleteFile(ctx context.Context, owner, id string) (File, error) {
	rec, err := s.fileRecord(ctx, owner, id)
	if err != nil {
		return File{}, err
	}
	return rec.File, s.removeFile(ctx, s.fileDir(owner, id))
}

// removeFile deletes the file in dir: its record first, so that it is gone
// for readers before its content is.
func (s *Store) removeFile(ctx context.Context, dir string) error {
	if err := s.storage.Delete(ctx, path.Join(dir, "meta.json")); err != nil && !storage.IsNotExist(err) {
		return err
	}
	return s.deleteDir(ctx, dir)
}

// ListOptions select a page of a list. Order is "desc" (newest first, the
// default) or "asc"; After is the ID the page starts after.
type ListOptions struct {
	Limit   int
	Order   string
	After   string
	Purpose string
}

// Page is one page of a list.
type Page[T any] struct {
	Data    []T
	HasMore bool
}

// ListFiles returns a page of owner's files.
func (s *Store) ListFiles(ctx context.Context, owner string, opt ListOptions) (Page[File], error) {
	ids, err := s.list(ctx, path.Join(s.ownerDir(owner), "files"))
	if err != nil {
		return Page[File]{}, err
	}
	var page Page[File]
	err = walkIDs(ids, opt, func(id string) (bool, error) {
		rec, err := s.fileRecord(ctx, owner, id)
		if errors.Is(err, ErrNotFound) || err == nil && opt.Purpose != "" && rec.Purpose != opt.Purpose {
			return false, nil // being uploaded or deleted, or not asked for
		}
		if err != nil {
			return false, err
		}
		if len(page.Data) == opt.Limit {
			page.HasMore = true
			return true, nil
		}
		page.Data = append(page.Data, rec.File)
		return false, nil
	})
	return page, err
}

// walkIDs calls visit for the sorted ids in opt's order, starting after
// opt.After, until visit says stop.
func walkIDs(ids []string, opt ListOptions, visit func(id string) (stop bool, err error)) error {
	asc := opt.Order == "asc"
	for i := range ids {
		id := ids[i]
		if !asc {
			id = ids[len(ids)-1-i]
		}
		if opt.After != "" && (asc && id <= opt.After || !asc && id >= opt.After) {
			continue
		}
		stop, err := visit(id)
		if stop || err != nil {
			return err
		}
	}
	return nil
}

// chunkWriter stores what is written to it as numbered parts of ChunkSize.
type chunkWriter struct {
	ctx    context.Context
	s      *Store
	dir    string
	buf    []byte
	chunks int
	n      int64
}

func (s *Store) newChunkWriter(ctx context.Context, dir string) *chunkWriter {
	return &chunkWriter{ctx: ctx, s: s, dir: dir}
}

func chunkKey(dir string, i int) string { return path.Join(dir, fmt.Sprintf("%06d", i)) }

func (w *chunkWriter) Write(p []byte) (int, error) {
	if w.buf == nil {
		w.buf = make([]byte, 0, ChunkSize)
	}
	written := 0
	for len(p) > 0 {
		n := min(len(p), ChunkSize-len(w.buf))
		w.buf = append(w.buf, p[:n]...)
		p, written = p[n:], written+n
		if len(w.buf) == ChunkSize {
			if err := w.flush(); err != nil {
				return written, err
			}
		}
	}
	w.n += int64(written)
	return written, nil
}

// ReadFrom reads straight into the part buffer (io.Copy uses it), saving a
// copy per byte.
func (w *chunkWriter) ReadFrom(r io.Reader) (int64, error) {
	if w.buf == nil {
		w.buf = make([]byte, 0, ChunkSize)
	}
	var total int64
	for {
		n, err := r.Read(w.buf[len(w.buf):cap(w.buf)])
		w.buf = w.buf[:len(w.buf)+n]
		total += int64(n)
		w.n += int64(n)
		if len(w.buf) == cap(w.buf) {
			if ferr := w.flush(); ferr != nil {
				return total, ferr
			}
		}
		if err == io.EOF {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

func (w *chunkWriter) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	if err := w.s.files.Store(w.ctx, chunkKey(w.dir, w.chunks), w.buf); err != nil {
		return err
	}
	w.chunks++
	w.buf = w.buf[:0]
	return nil
}

// Close stores the last part.
func (w *chunkWriter) Close() error { return w.flush() }

// chunkReader reads the numbered parts of a file in order.
type chunkReader struct {
	ctx    context.Context
	s      *Store
	dir    string
	chunks int
	next   int
	buf    []byte
}

func (r *chunkReader) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		if r.next == r.chunks {
			return 0, io.EOF
		}
		b, err := r.s.files.Load(r.ctx, chunkKey(r.dir, r.next))
		if err != nil {
			return 0, fmt.Errorf("reading part %d of the file: %w", r.next, err)
		}
		r.buf, r.next = b, r.next+1
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

func (r *chunkReader) Close() error { r.buf = nil; return nil }

func (s *Store) storeJSON(ctx context.Context, key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return s.storage.Store(ctx, key, b)
}

func (s *Store) loadJSON(ctx context.Context, key string, v any) error {
	b, err := s.storage.Load(ctx, key)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	return nil
}

// itoa is strconv.Itoa, short.
func itoa(i int) string { return strconv.Itoa(i) }

// inputKey is the storage key of part n's input, written whole.
func inputKey(dir string, n int) string { return path.Join(dir, "input", fmt.Sprintf("%06d", n)) }

// inputChunkKey is the storage key of chunk k of part n's input, written
// in chunks (partState.Chunks).
func inputChunkKey(dir string, n, k int) string {
	return path.Join(dir, "input", fmt.Sprintf("%06d-%06d", n, k))
}

// eachInputLine calls f with each request line of part n (described by
// ps) in order, with its position in the part, reading one chunk at a
// time. It stops at f's first error and returns it.
func (s *Store) eachInputLine(ctx context.Context, dir string, n int, ps partState, f func(j int, line []byte) error) error {
	keys := []string{inputKey(dir, n)}
	if ps.Chunks > 0 {
		keys = keys[:0]
		for k := range ps.Chunks {
			keys = append(keys, inputChunkKey(dir, n, k))
		}
	}
	j := 0
	for _, key := range keys {
		b, err := s.files.Load(ctx, key)
		if err != nil {
			return err
		}
		for len(b) > 0 && j < ps.N {
			line, rest, _ := bytes.Cut(b, []byte{'\n'})
			b = rest
			if err := f(j, line); err != nil {
				return err
			}
			j++
		}
	}
	return nil
}

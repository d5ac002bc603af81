package batch

import (
	"context"
	"encoding/json"
	"path"
	"slices"
	"time"

	"github.com/modelgate/modelgate/internal/ids"
	"github.com/modelgate/modelgate/internal/storage"
	"github.com/modelgate/modelgate/retention"
)

// pendingLife is how long an upload may take to become a file: content
// under a file ID without a record older than that was left by an
// instance that stopped during an upload, or during the writing of a
// batch's results (which writes them again, whole, when it resumes).
const pendingLife = 24 * time.Hour

// FileKind is the Store's files as the retention engine sees them: each
// file with its size and when it expires, and each upload that never
// became a file, with no size, expiring pendingLife after it began.
func (s *Store) FileKind() retention.Kind { return fileKind{s} }

type fileKind struct{ s *Store }

func (fileKind) Name() string { return "files" }

// Scan reports the files in the owner folder dir. A record that cannot be
// read as one is left alone: nothing can tell when it expires.
func (k fileKind) Scan(ctx context.Context, dir string, f func(retention.Object)) error {
	names, err := k.fileIDs(ctx, dir)
	if err != nil {
		return err
	}
	for _, id := range names {
		if !ids.Valid(id, "file-") {
			continue // a file system storage's temporary file
		}
		b, err := k.s.storage.Load(ctx, path.Join(dir, "files", id, "meta.json"))
		if storage.IsNotExist(err) {
			if at, ok := ids.Time(id, "file-"); ok {
				f(retention.Object{Name: id, Expires: at.Add(pendingLife)})
			}
			continue
		}
		if err != nil {
			return err
		}
		var rec fileRecord
		if json.Unmarshal(b, &rec) != nil {
			continue
		}
		f(retention.Object{Name: id, Bytes: rec.Bytes, Expires: k.s.expires(&rec)})
	}
	return nil
}

// fileIDs lists the file IDs in dir: those with a record, and those whose
// content is all there is (in the file storage, when it is apart).
func (k fileKind) fileIDs(ctx context.Context, dir string) ([]string, error) {
	names, err := listIn(ctx, k.s.storage, path.Join(dir, "files"))
	if err != nil || !k.s.separateFiles {
		return names, err
	}
	more, err := listIn(ctx, k.s.files, path.Join(dir, "files"))
	if err != nil {
		return nil, err
	}
	names = append(names, more...)
	slices.Sort(names)
	return slices.Compact(names), nil
}

func (k fileKind) Delete(ctx context.Context, dir string, o retention.Object) error {
	if !ids.Valid(o.Name, "file-") {
		return nil
	}
	return k.s.removeFile(ctx, path.Join(dir, "files", o.Name))
}

// Package retention deletes what owners store once it has expired, and
// counts what each owner stores, for a storage quota: files, batch
// results and stored responses, in a storage that several instances may
// share.
//
// A Kind is one kind of stored object (the batch engine's files, the
// gateway's stored responses): it lists an owner's objects with their
// size and expiry, and deletes one. A Sweeper deletes the expired objects
// of every owner, at most once per interval across all the instances that
// share the storage: it holds the storage's lock while it sweeps and
// records in the storage when it swept, which the others read before they
// start. A Ledger counts each owner's stored bytes on the shared state, so
// that a quota holds across instances; a count missing there is seeded
// from the storage (every Kind's objects of the owner), and lives for a
// while before it is counted from the storage again, which repairs what
// a crash between a write and its count left wrong.
//
// Owners are the folders under <prefix>/o/ of the storage, as
// storage.OwnerDir names them; this package never needs their names.
//
// It imports nothing of Caddy.
package retention

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/modelgate/modelgate/internal/storage"
)

// Object is one stored object of an owner.
type Object struct {
	// Name identifies the object to its Kind (a file id, a response id).
	Name string
	// Bytes is what the object counts against its owner's quota.
	Bytes int64
	// Expires is when the object expires; zero for never.
	Expires time.Time
}

// Expired reports whether o has expired at now.
func (o Object) Expired(now time.Time) bool { return !o.Expires.IsZero() && !now.Before(o.Expires) }

// Kind is one kind of object that owners store.
type Kind interface {
	// Name names the kind in logs and results ("files", "responses").
	Name() string
	// Scan calls f with each object of the owner whose folder is dir. An
	// owner without any has none: that is no error.
	Scan(ctx context.Context, dir string, f func(Object)) error
	// Delete deletes o, which Scan found in dir. An object that is gone
	// already is no error.
	Delete(ctx context.Context, dir string, o Object) error
}

// LockName is the storage lock a Sweeper holds while it sweeps.
const LockName = "modelgate_retention"

// lockWait is how long a sweep waits for the lock: another instance that
// holds it is sweeping, and this one has nothing to do.
const lockWait = 5 * time.Second

// Sweeper deletes expired objects from a storage.
type Sweeper struct {
	// Storage holds the owners' folders (under Prefix/o/), the lock the
	// sweeps take and the time the last sweep ended.
	Storage storage.Storage
	// Prefix is the folder the owners' folders are in, under o/.
	Prefix string
	// Kinds are the kinds of objects swept.
	Kinds []Kind
	// Ledger, when not nil, is told of the bytes each deletion frees.
	Ledger *Ledger
	// Interval is the least time from the end of a sweep of the storage
	// to the start of the next, on any instance.
	Interval time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger receives what a sweep did; nil means none.
	Logger *zap.Logger
}

// Result is what a sweep did.
type Result struct {
	// Swept is false when another sweep was recent or running, and this
	// one did nothing.
	Swept bool
	// Owners is how many owners' folders were looked at.
	Owners int
	// Deleted counts the objects deleted, by kind.
	Deleted map[string]int
	// Bytes is what the deleted objects counted against their owners.
	Bytes int64
	// Failed counts the objects that could not be deleted; the next
	// sweep tries again.
	Failed int
}

func (s *Sweeper) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Sweeper) logger() *zap.Logger {
	if s.Logger != nil {
		return s.Logger
	}
	return zap.NewNop()
}

// markKey is where the time the last sweep ended is kept, in Unix
// milliseconds.
func (s *Sweeper) markKey() string { return path.Join(s.Prefix, "retention", "swept") }

// Sweep deletes every expired object of every owner, unless a sweep of
// the storage ended less than Interval ago, here or on another instance
// sharing the storage, or one is running there now: then it does nothing
// (Result.Swept is false). A sweep holds the storage's lock, so that
// instances sweep one at a time and each object is deleted (and its bytes
// given back to the Ledger) once. An object that cannot be deleted is
// counted in Result.Failed and left for the next sweep.
func (s *Sweeper) Sweep(ctx context.Context) (Result, error) {
	if recent, err := s.recent(ctx); err != nil || recent {
		return Result{}, err
	}
	lockCtx, cancel := context.WithTimeout(ctx, lockWait)
	defer cancel()
	unlock, err := storage.Lock(lockCtx, s.Storage, LockName)
	if err != nil {
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			return Result{}, nil // another instance is sweeping
		}
		return Result{}, fmt.Errorf("taking the retention lock: %w", err)
	}
	defer unlock()
	// Another instance may have swept while this one waited for the lock.
	if recent, err := s.recent(ctx); err != nil || recent {
		return Result{}, err
	}
	start := s.now()
	res, err := s.sweep(ctx)
	if err != nil {
		return res, err
	}
	end := s.now()
	if err := s.Storage.Store(ctx, s.markKey(), []byte(strconv.FormatInt(end.UnixMilli(), 10))); err != nil {
		return res, fmt.Errorf("recording the sweep: %w", err)
	}
	log := s.logger().Debug
	if len(res.Deleted) > 0 || res.Failed > 0 {
		log = s.logger().Info
	}
	log("expired objects deleted", zap.Int("owners", res.Owners), zap.Any("deleted", res.Deleted),
		zap.Int64("bytes", res.Bytes), zap.Int("failed", res.Failed), zap.Duration("took", end.Sub(start)))
	return res, nil
}

// recent reports whether a sweep ended less than Interval ago.
func (s *Sweeper) recent(ctx context.Context) (bool, error) {
	b, err := s.Storage.Load(ctx, s.markKey())
	if storage.IsNotExist(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading when the last sweep ended: %w", err)
	}
	ms, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return false, nil //nolint:nilerr // unreadable: sweep, and write it anew
	}
	return s.now().Sub(time.UnixMilli(ms)) < s.Interval, nil
}

// sweep deletes the expired objects of each owner in turn.
func (s *Sweeper) sweep(ctx context.Context) (Result, error) {
	res := Result{Swept: true}
	owners, err := s.Storage.List(ctx, path.Join(s.Prefix, "o"), false)
	if err != nil && !storage.IsNotExist(err) {
		return res, fmt.Errorf("listing owners: %w", err)
	}
	now := s.now()
	for _, key := range owners {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		dir := path.Join(s.Prefix, "o", path.Base(key))
		res.Owners++
		for _, k := range s.Kinds {
			var expired []Object
			err := k.Scan(ctx, dir, func(o Object) {
				if o.Expired(now) {
					expired = append(expired, o)
				}
			})
			if err != nil {
				s.logger().Warn("listing an owner's objects failed; the next sweep tries again",
					zap.String("kind", k.Name()), zap.String("owner_dir", dir), zap.Error(err))
				res.Failed++
				continue
			}
			s.delete(ctx, k, dir, expired, &res)
		}
	}
	return res, nil
}

// delete deletes expired objects of kind k in dir, and gives their bytes
// back to the ledger.
func (s *Sweeper) delete(ctx context.Context, k Kind, dir string, expired []Object, res *Result) {
	var freed int64
	for _, o := range expired {
		if err := k.Delete(ctx, dir, o); err != nil {
			s.logger().Warn("deleting an expired object failed; the next sweep tries again",
				zap.String("kind", k.Name()), zap.String("name", o.Name), zap.Error(err))
			res.Failed++
			continue
		}
		if res.Deleted == nil {
			res.Deleted = make(map[string]int)
		}
		res.Deleted[k.Name()]++
		freed += o.Bytes
	}
	res.Bytes += freed
	if freed != 0 && s.Ledger != nil {
		if err := s.Ledger.Add(ctx, dir, -freed); err != nil {
			s.logger().Warn("counting the bytes an owner freed failed; the count is repaired when next counted from the storage",
				zap.String("owner_dir", dir), zap.Error(err))
		}
	}
}

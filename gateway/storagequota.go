package gateway

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dustin/go-humanize"
	"go.uber.org/zap"

	"github.com/modelgate/modelgate/internal/storage"
	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/retention"
)

// StorageQuota bounds the bytes each owner keeps in the storage: its
// files, its batches' output and error files and its stored responses,
// together, counted on the shared state by the retention engine's Ledger.
// Anything that would pass it is refused before it is stored
// (docs/retention.md). The zero StorageQuota limits nothing.
type StorageQuota struct {
	Ledger *retention.Ledger        // nil: nothing is counted
	Limit  func(owner string) int64 // owner's quota in bytes; 0 is none
	Log    *zap.Logger              // nil: nothing is logged
}

// ownerDir is owner's folder in the storage, by which its stored bytes
// are counted. It is worked out once per owner (a hash, and a path): the
// owners are those of the keys, a set the clients cannot grow.
func ownerDir(owner string) string {
	if d, ok := ownerDirs.Load(owner); ok {
		return d.(string)
	}
	d := storage.OwnerDir("modelgate", owner)
	ownerDirs.Store(owner, d)
	return d
}

var ownerDirs sync.Map // owner → ownerDir(owner)

// limit is owner's quota; 0 is none.
func (q *StorageQuota) limit(owner string) int64 {
	if q == nil || q.Limit == nil || q.Ledger == nil {
		return 0
	}
	return q.Limit(owner)
}

// Room returns how many more bytes owner may store (-1: no limit), or the
// refusal of an owner at its quota already. When the count cannot be had
// (the state or the storage cannot be reached), the owner is not held
// back, and the log says so.
func (q *StorageQuota) Room(ctx context.Context, owner, param string) (int64, *providers.Error) {
	limit := q.limit(owner)
	if limit <= 0 {
		return -1, nil
	}
	used, err := q.Ledger.Used(ctx, ownerDir(owner))
	if err != nil {
		q.warn(err)
		return -1, nil
	}
	if used >= limit {
		return 0, QuotaExceeded(param, used, limit)
	}
	return limit - used, nil
}

// Reserve counts n bytes that are about to be stored for owner, if they
// fit its quota, or returns the refusal. release gives them back (the
// write failed).
func (q *StorageQuota) Reserve(ctx context.Context, owner, param string, n int64) (release func(), perr *providers.Error) {
	release = func() { q.Count(context.WithoutCancel(ctx), owner, -n) }
	limit := q.limit(owner)
	if limit <= 0 {
		q.Count(ctx, owner, n)
		return release, nil
	}
	used, ok, err := q.Ledger.Reserve(ctx, ownerDir(owner), n, limit)
	if err != nil {
		q.warn(err)
		return func() {}, nil
	}
	if !ok {
		return nil, QuotaExceeded(param, used, limit)
	}
	return release, nil
}

// Count counts delta more bytes stored for owner (fewer, when negative):
// a write or a deletion. An owner without a quota is counted too, when a
// count of it is kept (it had a quota before a reload): a count that
// missed writes would be wrong once it has one again.
func (q *StorageQuota) Count(ctx context.Context, owner string, delta int64) {
	if q == nil || delta == 0 || q.Ledger == nil {
		return
	}
	if err := q.Ledger.Add(ctx, ownerDir(owner), delta); err != nil {
		q.warn(err)
	}
}

var lastStorageQuotaWarning atomic.Int64

// warn logs, at most every 10 seconds, that the storage quota could not
// be checked.
func (q *StorageQuota) warn(err error) {
	now := time.Now().UnixMilli()
	if last := lastStorageQuotaWarning.Load(); now-last < 10_000 || !lastStorageQuotaWarning.CompareAndSwap(last, now) {
		return
	}
	if q.Log != nil {
		q.Log.Warn("owners' stored bytes cannot be counted; uploads and stored responses are let through without the storage quota", zap.Error(err))
	}
}

// QuotaExceeded is the refusal of what would take an owner past its
// storage quota: 400 invalid_request_error, as OpenAI answers an upload
// past an organization's file storage limit — a request the client must
// change (delete files, or wait for them to expire), not repeat, so
// neither 429, which the SDKs retry, nor 507, a 5xx they retry too. The
// code, which OpenAI leaves null, lets a client tell it apart.
func QuotaExceeded(param string, used, limit int64) *providers.Error {
	return &providers.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "storage_quota_exceeded", Param: param,
		Message: fmt.Sprintf("You have exceeded your storage quota: your files, batch results and stored responses take %s of the %s you may keep, and this does not fit. Delete files or stored responses, or let them expire, and try again.",
			humanize.IBytes(uint64(max(used, 0))), humanize.IBytes(uint64(limit)))}
}

package caddygateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/certmagic"
	"github.com/dustin/go-humanize"
	"go.uber.org/zap"

	"github.com/modelgate/modelgate/batch"
	"github.com/modelgate/modelgate/internal/storage"
	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/retention"
)

// This file keeps what owners store from growing without end: files,
// batch results and stored responses expire (RetentionConfig), a sweep
// deletes them once they have (the retention engine, run by one worker
// per storage that outlives config reloads, as the batch runner does),
// and each owner's stored bytes count against a quota
// (StorageQuotaConfig), checked before anything is stored for it.

// RetentionConfig is how long what owners store is kept. Each duration
// counts from the object's creation. An expired object is gone for its
// owner at once (404) and deleted from the storage by the next sweep.
type RetentionConfig struct {
	// Files is how long an uploaded file is kept. An upload that asks
	// for less with expires_after gets that; none gets more. Default:
	// 720h (30 days), as OpenAI keeps batch input files.
	Files caddy.Duration `json:"files,omitempty"`

	// BatchOutput is how long a batch's output and error files are kept
	// after they are written. A batch that asks for less with
	// output_expires_after gets that. Default: 720h (30 days), as
	// OpenAI keeps them.
	BatchOutput caddy.Duration `json:"batch_output,omitempty"`

	// Responses is how long a stored response (store: true) is kept: the
	// gateway's record of a translated one, or its pointer to a
	// provider that stores one itself. Default: 720h (30 days), as
	// OpenAI keeps stored responses.
	Responses caddy.Duration `json:"responses,omitempty"`

	// SweepInterval is how often expired objects are deleted from the
	// storage, by one of the instances that share it. Default: 1h.
	SweepInterval caddy.Duration `json:"sweep_interval,omitempty"`
}

// StorageQuotaConfig bounds the bytes each owner keeps in the storage:
// its files, its batches' output and error files and its stored
// responses, together. An upload, a batch or a stored response that
// would pass it is refused with 400 (storageQuotaExceeded).
type StorageQuotaConfig struct {
	// Owner is the quota of every owner not in Owners, in bytes; 0 is
	// none. Default: 10 GiB.
	Owner *int64 `json:"owner,omitempty"`

	// Owners are the quotas of named owners, in bytes; 0 is none.
	Owners map[string]int64 `json:"owners,omitempty"`
}

const (
	defaultRetention     = 30 * 24 * time.Hour
	defaultSweepInterval = time.Hour
	defaultStorageQuota  = 10 << 30

	// ledgerTTL is how long an owner's count of stored bytes lives on
	// the state before it is counted from the storage again: what a crash
	// between a write and its count left wrong lasts that long. The
	// count is taken on the request that finds it missing, a listing of
	// the owner's files and responses, so not often.
	ledgerTTL = 24 * time.Hour
)

// withDefaults is c with every unset duration at its default.
func (c *RetentionConfig) withDefaults() RetentionConfig {
	var r RetentionConfig
	if c != nil {
		r = *c
	}
	for _, d := range []*caddy.Duration{&r.Files, &r.BatchOutput, &r.Responses} {
		if *d == 0 {
			*d = caddy.Duration(defaultRetention)
		}
	}
	if r.SweepInterval == 0 {
		r.SweepInterval = caddy.Duration(defaultSweepInterval)
	}
	return r
}

// validate refuses what cannot be meant.
func (c *RetentionConfig) validate() error {
	if c == nil {
		return nil
	}
	if c.Files < 0 || c.BatchOutput < 0 || c.Responses < 0 || c.SweepInterval < 0 {
		return errors.New("retention: durations must not be negative")
	}
	return nil
}

func (c *StorageQuotaConfig) validate() error {
	if c == nil {
		return nil
	}
	if c.Owner != nil && *c.Owner < 0 {
		return errors.New("storage_quota owner: the quota must not be negative")
	}
	for name, q := range c.Owners {
		if q < 0 {
			return fmt.Errorf("storage_quota owner %s: the quota must not be negative", name)
		}
	}
	return nil
}

// limit is owner's quota in bytes; 0 is none. owner is the owner as
// things are stored under it: a static key's (staticOwnerPrefix and its
// name) takes the quota the configuration gives its name, counted apart
// from a managed owner of the same name.
func (c *StorageQuotaConfig) limit(owner string) int64 {
	if c == nil {
		return defaultStorageQuota
	}
	if q, ok := c.Owners[strings.TrimPrefix(owner, staticOwnerPrefix)]; ok {
		return q
	}
	if c.Owner != nil {
		return *c.Owner
	}
	return defaultStorageQuota
}

// retention is the app's retention, defaults filled in.
func (a *App) retention() RetentionConfig { return a.Retention.withDefaults() }

// provisionRetention counts the owners' stored bytes on the app's state,
// from its files and stored responses.
func (a *App) provisionRetention() error {
	if err := a.Retention.validate(); err != nil {
		return err
	}
	if err := a.StorageQuota.validate(); err != nil {
		return err
	}
	a.ledger = retention.NewLedger(a.state, ledgerTTL, a.retentionKinds()...)
	return nil
}

// retentionKinds are what owners store: files, and stored responses.
func (a *App) retentionKinds() []retention.Kind {
	return []retention.Kind{a.store.FileKind(), responseKind{s: a.storage, ttl: time.Duration(a.retention().Responses)}}
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

// storageRoom returns how many more bytes owner may store (-1: no limit),
// or the refusal of an owner at its quota already. When the count cannot
// be had (the state or the storage cannot be reached), the owner is not
// held back, and the log says so.
func (a *App) storageRoom(ctx context.Context, owner, param string) (int64, *providers.Error) {
	limit := a.StorageQuota.limit(owner)
	if limit <= 0 || a.ledger == nil {
		return -1, nil
	}
	used, err := a.ledger.Used(ctx, ownerDir(owner))
	if err != nil {
		a.warnStorageQuota(err)
		return -1, nil
	}
	if used >= limit {
		return 0, storageQuotaExceeded(param, used, limit)
	}
	return limit - used, nil
}

// reserveStorage counts n bytes that are about to be stored for owner,
// if they fit its quota, or returns the refusal. release gives them back
// (the write failed).
func (a *App) reserveStorage(ctx context.Context, owner, param string, n int64) (release func(), perr *providers.Error) {
	release = func() { a.countStored(context.WithoutCancel(ctx), owner, -n) }
	limit := a.StorageQuota.limit(owner)
	if limit <= 0 || a.ledger == nil {
		a.countStored(ctx, owner, n)
		return release, nil
	}
	dir := ownerDir(owner)
	used, ok, err := a.ledger.Reserve(ctx, dir, n, limit)
	if err != nil {
		a.warnStorageQuota(err)
		return func() {}, nil
	}
	if !ok {
		return nil, storageQuotaExceeded(param, used, limit)
	}
	return release, nil
}

// countStored counts delta more bytes stored for owner (fewer, when
// negative): a write or a deletion. An owner without a quota is counted
// too, when a count of it is kept (it had a quota before a reload): a
// count that missed writes would be wrong once it has one again.
func (a *App) countStored(ctx context.Context, owner string, delta int64) {
	if delta == 0 || a.ledger == nil {
		return
	}
	if err := a.ledger.Add(ctx, ownerDir(owner), delta); err != nil {
		a.warnStorageQuota(err)
	}
}

var lastStorageQuotaWarning atomic.Int64

// warnStorageQuota logs, at most every 10 seconds, that the storage quota
// could not be checked.
func (a *App) warnStorageQuota(err error) {
	now := time.Now().UnixMilli()
	if last := lastStorageQuotaWarning.Load(); now-last < 10_000 || !lastStorageQuotaWarning.CompareAndSwap(last, now) {
		return
	}
	a.logger.Warn("owners' stored bytes cannot be counted; uploads and stored responses are let through without the storage quota", zap.Error(err))
}

// storageQuotaExceeded is the refusal of what would take an owner past
// its storage quota: 400 invalid_request_error, as OpenAI answers an
// upload past an organization's file storage limit — a request the
// client must change (delete files, or wait for them to expire), not
// repeat, so neither 429, which the SDKs retry, nor 507, a 5xx they retry
// too. The code, which OpenAI leaves null, lets a client tell it apart.
func storageQuotaExceeded(param string, used, limit int64) *providers.Error {
	return &providers.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "storage_quota_exceeded", Param: param,
		Message: fmt.Sprintf("You have exceeded your storage quota: your files, batch results and stored responses take %s of the %s you may keep, and this does not fit. Delete files or stored responses, or let them expire, and try again.",
			humanize.IBytes(uint64(max(used, 0))), humanize.IBytes(uint64(limit)))}
}

// responseKind is the stored responses of the app's storage, as the
// retention engine sees them: each record or pointer with its size, and
// expiring ttl after it was written.
type responseKind struct {
	s   certmagic.Storage
	ttl time.Duration
}

func (responseKind) Name() string { return "responses" }

func (k responseKind) Scan(ctx context.Context, dir string, f func(retention.Object)) error {
	keys, err := k.s.List(ctx, path.Join(dir, "responses"), false)
	if storage.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, key := range keys {
		id, ok := strings.CutSuffix(path.Base(key), ".json")
		if !ok || !validResponseID(id) {
			continue // a file system storage's temporary file
		}
		info, err := k.s.Stat(ctx, key)
		if storage.IsNotExist(err) {
			continue
		}
		if err != nil {
			return err
		}
		o := retention.Object{Name: id, Bytes: info.Size}
		if k.ttl > 0 {
			o.Expires = info.Modified.Add(k.ttl)
		}
		f(o)
	}
	return nil
}

func (k responseKind) Delete(ctx context.Context, dir string, o retention.Object) error {
	if !validResponseID(o.Name) {
		return nil
	}
	return k.s.Delete(ctx, path.Join(dir, "responses", o.Name+".json"))
}

// sweepers keeps one retention worker per storage alive across config
// reloads, as runners does the batch runner.
var sweepers = caddy.NewUsagePool()

// sweepWorker sweeps its storage on every tick, with the live config's
// retention; the sweep itself (retention.Sweeper) makes sure that the
// instances sharing the storage sweep it once per interval between them.
type sweepWorker struct {
	storageID string
	cancel    context.CancelFunc
	done      chan struct{}
}

// startSweeper acquires the retention worker of this config's storage.
func (a *App) startSweeper() error {
	v, _, err := sweepers.LoadOrNew(a.storageID, func() (caddy.Destructor, error) {
		return newSweepWorker(a.storageID), nil
	})
	if err == nil {
		a.sweeper = v.(*sweepWorker)
	}
	return err
}

// stopSweeper releases this config's reference to the worker; the last
// one stops it.
func (a *App) stopSweeper() error {
	if a.sweeper == nil {
		return nil
	}
	a.sweeper = nil
	_, err := sweepers.Delete(a.storageID)
	return err
}

func newSweepWorker(storageID string) *sweepWorker {
	ctx, cancel := context.WithCancel(context.Background())
	w := &sweepWorker{storageID: storageID, cancel: cancel, done: make(chan struct{})}
	go w.loop(ctx)
	return w
}

// Destruct stops the worker, waiting for a sweep under way to stop.
func (w *sweepWorker) Destruct() error {
	w.cancel()
	<-w.done
	return nil
}

// maxSweepTick is the longest a worker waits between two looks at
// whether its storage is due a sweep; noConfigTick is how long it waits
// for a config of its storage to be running (a worker starts while its
// config starts, before that config is the running one).
const (
	maxSweepTick = time.Minute
	noConfigTick = time.Second
)

func (w *sweepWorker) loop(ctx context.Context) {
	defer close(w.done)
	for {
		wait := noConfigTick
		if a := w.live(); a != nil {
			wait = min(maxSweepTick, a.sweep(ctx))
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// live is the app of the config running now, if it keeps its things in
// this worker's storage.
func (w *sweepWorker) live() *App {
	v, err := caddy.ActiveContext().AppIfConfigured("modelgate")
	if err != nil {
		return nil
	}
	a, ok := v.(*App)
	if !ok || a.store == nil || a.storageID != w.storageID {
		return nil
	}
	return a
}

// sweep deletes the expired objects of the app's storage, if it is due,
// and returns the sweep interval.
func (a *App) sweep(ctx context.Context) (interval time.Duration) {
	r := a.retention()
	interval = time.Duration(r.SweepInterval)
	log := a.logger.Named("retention")
	defer recoverLog(log, "sweeping expired objects")
	s := &retention.Sweeper{Storage: a.storage, Prefix: "modelgate", Kinds: a.retentionKinds(), Ledger: a.ledger,
		Interval: time.Duration(r.SweepInterval), Logger: log}
	if _, err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
		log.Error("sweeping expired objects failed; the next tick tries again", zap.Error(err))
	}
	return interval
}

// batch is the batch store's Retention: how long files that do
// not say are kept.
func (r RetentionConfig) batch() batch.Retention {
	return batch.Retention{Files: time.Duration(r.Files), Output: time.Duration(r.BatchOutput)}
}

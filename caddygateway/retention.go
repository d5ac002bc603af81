package caddygateway

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"

	"github.com/modelgate/modelgate/batch"
	"github.com/modelgate/modelgate/gateway"
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
// things are stored under it: a static key's (gateway.StaticOwnerPrefix and its
// name) takes the quota the configuration gives its name, counted apart
// from a managed owner of the same name.
func (c *StorageQuotaConfig) limit(owner string) int64 {
	if c == nil {
		return defaultStorageQuota
	}
	if q, ok := c.Owners[strings.TrimPrefix(owner, gateway.StaticOwnerPrefix)]; ok {
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
	a.storageQ = a.newStorageQuota()
	return nil
}

// retentionKinds are what owners store: files, and stored responses.
func (a *App) retentionKinds() []retention.Kind {
	return []retention.Kind{a.store.FileKind(), responseKind{s: a.storage, ttl: time.Duration(a.retention().Responses)}}
}

// storageQuota is the gateway's StorageQuota of this config, made once
// by provisionRetention (an app a test built without it gets one made
// now).
func (a *App) storageQuota() *gateway.StorageQuota {
	if q := a.storageQ; q != nil {
		return q
	}
	return a.newStorageQuota()
}

// newStorageQuota is the gateway's StorageQuota of this config: the
// ledger's counts against StorageQuota's limits.
func (a *App) newStorageQuota() *gateway.StorageQuota {
	return &gateway.StorageQuota{Ledger: a.ledger, Limit: a.StorageQuota.limit, Log: a.logger}
}

// storageRoom returns how many more bytes owner may store (-1: no limit),
// or the refusal of an owner at its quota already
// (gateway.StorageQuota.Room).
func (a *App) storageRoom(ctx context.Context, owner, param string) (int64, *providers.Error) {
	return a.storageQuota().Room(ctx, owner, param)
}

// reserveStorage counts n bytes that are about to be stored for owner,
// if they fit its quota, or returns the refusal
// (gateway.StorageQuota.Reserve).
func (a *App) reserveStorage(ctx context.Context, owner, param string, n int64) (release func(), perr *providers.Error) {
	return a.storageQuota().Reserve(ctx, owner, param, n)
}

// countStored counts delta more bytes stored for owner (fewer, when
// negative) (gateway.StorageQuota.Count).
func (a *App) countStored(ctx context.Context, owner string, delta int64) {
	a.storageQuota().Count(ctx, owner, delta)
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
		if !ok || !gateway.ValidResponseID(id) {
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
	if !gateway.ValidResponseID(o.Name) {
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

// waitResponseWrites waits, at most timeout, for the app's stored
// responses still on their way to the storage.
func (a *App) waitResponseWrites(timeout time.Duration) {
	if a.responseWrites == nil {
		return // not provisioned
	}
	done := make(chan struct{})
	go func() {
		a.responseWrites.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(timeout):
		a.logger.Warn("stored responses still being written at shutdown", zap.Duration("waited", timeout))
	}
}

package batch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelgate/modelgate/internal/storage"
	"go.uber.org/zap"

	"github.com/modelgate/modelgate/internal/ids"
)

// Live is what a Runner reads from the live configuration on every poll.
type Live struct {
	Settings Settings
	Executor Executor
	Logger   *zap.Logger
	// Finished, when set, is told of each batch this runner brought to a
	// final status (failed, completed, cancelled, expired), once, after
	// the batch's record is stored. A crash between the two loses the
	// call: it is at most once.
	Finished func(owner string, b Batch)
	// KeyGone, when set, reports whether the key that created a batch
	// (CreateParams.KeyID and KeyName, of owner) is gone for good:
	// deleted, or unknown. The runner then cancels the batch before
	// another of its lines runs; its unfinished lines end with code
	// CancelKeyRevoked. An error (the keys cannot be read just now)
	// decides nothing: the runner asks again at its next step.
	KeyGone func(ctx context.Context, owner, keyID, keyName string) (bool, error)
	// Cancelled, when set, is told the id of a batch this runner asked to
	// cancel (its key is gone), once the request is stored, so that the
	// other instances sharing the storage can be told to look now rather
	// than at their next poll.
	Cancelled func(batchID string)
	// Stored, when set, is told of the bytes of the output and error
	// files this runner wrote for owner, once they are files: what they
	// count against the owner's storage quota.
	Stored func(ctx context.Context, owner string, bytes int64)
	// Native, when set, returns the own batch API of the provider named
	// provider when lines routed to it go there (its batch mode is
	// native), else nil: they run in the gateway through Executor.
	Native func(provider string) NativeAPI
	// Accounting meters and admits the lines of native parts; nil: none.
	Accounting NativeAccounting
}

// finished tells lv.Finished of rec, if it listens.
func (lv Live) finished(rec *batchRecord) {
	if lv.Finished != nil {
		lv.Finished(rec.Owner, rec.Batch)
	}
}

// maxParts is how many parts one runner works on at once. Each part runs
// up to Settings.Workers requests; a bound on parts leaves the rest of a
// large batch for other instances to claim.
const maxParts = 4

// Runner executes the batches of a Store in the background. One runs per
// process and storage; several processes sharing a storage share the work.
// It holds no configuration: live returns the current one on each poll, so
// a config reload neither stops nor restarts it.
type Runner struct {
	store *Store
	live  func() (Live, bool)
	me    string // "<instance>/<process nonce>"
	poll  time.Duration

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	wake   chan struct{}

	workers *limiter
	current atomic.Pointer[Live] // the live config at the last poll
	routes  sync.Map             // endpoint+" "+model -> provider, cleared at each poll

	// listFailing is set while the storage cannot be listed, so that an
	// outage is logged once, not at every poll. Only the loop uses it.
	listFailing bool

	revokeMu sync.Mutex // held while a batch whose key is gone is cancelled

	mu        sync.Mutex
	parts     map[partKey]*active
	renewed   map[string]time.Time // batch ID -> last lease renewal
	providers map[string]*limiter
	seq       int
}

// active is a part this runner works on.
type active struct {
	cancel  context.CancelFunc
	ok, bad atomic.Int64 // results so far, reported with each renewal

	// native parts are not cancelled when their batch is cancelled or
	// expires: stop tells them to wind their provider batch down.
	native   bool
	stop     chan struct{}
	stopOnce sync.Once
}

// stopNative tells a native part to wind down.
func (a *active) stopNative() { a.stopOnce.Do(func() { close(a.stop) }) }

// maxNativeParts is how many native parts one runner follows at once:
// each is a poll every minute or so at most, and none counts against
// maxParts.
const maxNativeParts = 256

type partKey struct {
	batch string
	part  int
}

// NewRunner starts a runner for store. instance identifies this Caddy
// instance (its storage identity, stable across restarts); poll is how
// often the runner looks for work.
func NewRunner(store *Store, instance string, poll time.Duration, live func() (Live, bool)) *Runner {
	var nonce [6]byte
	_, _ = rand.Read(nonce[:])
	ctx, cancel := context.WithCancel(context.Background())
	r := &Runner{
		store: store, live: live, me: instance + "/" + hex.EncodeToString(nonce[:]), poll: poll,
		ctx: ctx, cancel: cancel, wake: make(chan struct{}, 1),
		workers:   newLimiter(DefaultSettings().Workers),
		parts:     make(map[partKey]*active),
		renewed:   make(map[string]time.Time),
		providers: make(map[string]*limiter),
	}
	r.wg.Add(1)
	go r.loop()
	return r
}

// Wake makes the runner poll now, as after a batch was created or
// cancelled here.
func (r *Runner) Wake() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Destruct stops the runner and waits for its work to stop; each running
// part writes its finished results first. It implements caddy.Destructor.
func (r *Runner) Destruct() error {
	r.cancel()
	r.wg.Wait()
	return nil
}

func (r *Runner) loop() {
	defer r.wg.Done()
	t := time.NewTicker(r.poll)
	defer t.Stop()
	for {
		r.tick()
		select {
		case <-r.ctx.Done():
			return
		case <-t.C:
		case <-r.wake:
		}
	}
}

// tick looks at every active batch once.
func (r *Runner) tick() {
	lv, ok := r.live()
	if !ok {
		return
	}
	lv.Settings = lv.Settings.withDefaults()
	if prev := r.current.Swap(&lv); prev == nil || prev.Executor != lv.Executor {
		r.routes.Clear() // a new config may route models elsewhere
	}
	defer func() {
		if v := recover(); v != nil {
			lv.Logger.Error("batch runner panicked", zap.String("panic", fmt.Sprint(v)))
		}
	}()
	r.workers.setLimit(lv.Settings.Workers)
	r.mu.Lock()
	for _, l := range r.providers {
		l.setLimit(lv.Settings.PerProvider)
	}
	r.mu.Unlock()

	batchIDs, err := r.store.list(r.ctx, path.Join(r.store.prefix, "active"))
	if err != nil {
		if !r.listFailing && r.ctx.Err() == nil {
			lv.Logger.Error("listing active batches failed; the runner tries again at every poll and says when it succeeds", zap.Error(err))
		}
		r.listFailing = true
		return
	}
	if r.listFailing {
		r.listFailing = false
		lv.Logger.Info("listing active batches works again")
	}
	for _, id := range batchIDs {
		if r.ctx.Err() != nil {
			return
		}
		if !ids.Valid(id, "batch_") {
			// Not a batch: a file system storage's temporary file of a
			// Store in progress. Deleting it would fail that Store.
			continue
		}
		if err := r.step(lv, id); err != nil && r.ctx.Err() == nil {
			lv.Logger.Error("batch step failed; retrying at the next poll", zap.String("batch_id", id), zap.Error(err))
		}
	}
}

// step moves one batch on as far as this runner can now.
func (r *Runner) step(lv Live, id string) error {
	ctx := r.ctx
	owner, err := r.store.storage.Load(ctx, r.store.activeKey(id))
	if storage.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	rec, err := r.store.batchRecord(ctx, string(owner), id)
	if errors.Is(err, ErrNotFound) {
		return r.store.storage.Delete(ctx, r.store.activeKey(id))
	}
	if err != nil {
		return err
	}
	if rec.terminal() {
		r.store.cleanUp(ctx, rec)
		return nil
	}
	now := r.store.now()
	_, _, cancelAsked := r.store.cancelAsked(ctx, rec)
	if !cancelAsked && rec.Status != StatusCancelling && r.keyGone(lv, rec) {
		if err := r.revoke(lv, rec); err != nil {
			return err
		}
		cancelAsked = true
	}
	deadline, ok := rec.deadline()
	expired := ok && !now.Before(deadline)

	switch {
	case cancelAsked || rec.Status == StatusCancelling:
		r.stopParts(id)
		if err := r.windDown(lv, rec); err != nil {
			return err
		}
		return r.finish(lv, rec, StatusCancelled)
	case expired:
		r.stopParts(id)
		if err := r.windDown(lv, rec); err != nil {
			return err
		}
		return r.finish(lv, rec, StatusExpired)
	case rec.Status == StatusValidating:
		_, err := r.store.withLock(ctx, id, lockWait, func() error { return r.validate(lv, id, string(owner)) })
		return err
	case rec.Status == StatusFinalizing:
		return r.finish(lv, rec, StatusCompleted)
	}
	return r.claim(lv, rec)
}

// keyGone asks lv whether the key that created rec is gone. An error
// decides nothing: it is logged, and the next step asks again.
func (r *Runner) keyGone(lv Live, rec *batchRecord) bool {
	if lv.KeyGone == nil {
		return false
	}
	gone, err := lv.KeyGone(r.ctx, rec.Owner, rec.KeyID, rec.KeyName)
	if err != nil {
		if r.ctx.Err() == nil {
			lv.Logger.Warn("could not tell whether the key that created a batch still exists; asking again at the next poll",
				zap.String("batch_id", rec.ID), zap.String("key_id", rec.KeyID), zap.Error(err))
		}
		return false
	}
	return gone
}

// revoke cancels rec because the key that created it is gone: the cancel
// request, with CancelKeyRevoked as its reason, is stored for every
// runner sharing the storage; this runner's parts of rec stop at once,
// and it is woken to finish rec.
func (r *Runner) revoke(lv Live, rec *batchRecord) error {
	// The workers of a part may all find the key gone at once: one asks.
	r.revokeMu.Lock()
	defer r.revokeMu.Unlock()
	if _, _, ok := r.store.cancelAsked(r.ctx, rec); !ok {
		if err := r.store.askCancel(r.ctx, rec, CancelKeyRevoked); err != nil {
			return fmt.Errorf("cancelling a batch whose key is gone: %w", err)
		}
		lv.Logger.Warn("batch cancelled: the key that created it was revoked", zap.String("batch_id", rec.ID),
			zap.String("key_id", rec.KeyID), zap.String("key_name", rec.KeyName))
		if lv.Cancelled != nil {
			lv.Cancelled(rec.ID)
		}
	}
	r.stopParts(rec.ID)
	r.Wake()
	return nil
}

// validate checks a batch's input under its lock and starts it or fails it.
func (r *Runner) validate(lv Live, id, owner string) error {
	ctx := r.ctx
	rec, err := r.store.batchRecord(ctx, owner, id)
	if err != nil || rec.Status != StatusValidating {
		return err // someone else got there first
	}
	v, err := r.store.validate(ctx, rec, lv.Executor, lv.Settings, lv.Native)
	if err != nil {
		return err
	}
	now := r.store.now().Unix()
	log := lv.Logger.With(zap.String("batch_id", id))
	if len(v.errors) > 0 {
		rec.Status, rec.FailedAt = StatusFailed, &now
		rec.Errors = &Errors{Object: "list", Data: v.errors}
		rec.RequestCounts.Total = v.total
		if err := r.store.storeJSON(ctx, path.Join(r.store.batchDir(owner, id), "batch.json"), rec); err != nil {
			return err
		}
		log.Info("batch input refused", zap.Int("errors", len(v.errors)), zap.String("first", v.errors[0].Message))
		lv.finished(rec)
		return r.store.storage.Delete(ctx, r.store.activeKey(id))
	}
	if err := r.store.storeJSON(ctx, r.store.claimsKey(rec), &claims{Parts: v.parts}); err != nil {
		return err
	}
	rec.Status, rec.InProgressAt, rec.Model = StatusInProgress, &now, v.model
	rec.RequestCounts.Total = v.total
	if err := r.store.storeJSON(ctx, path.Join(r.store.batchDir(owner, id), "batch.json"), rec); err != nil {
		return err
	}
	log.Info("batch validated", zap.Int("requests", v.total), zap.Int("parts", len(v.parts)))
	r.Wake()
	return nil
}

// claim renews this runner's claims on rec, takes parts of rec that nobody
// works on, up to this runner's share, and starts them; or finishes rec
// when every part is done. The claims are read without the lock first, so
// a runner with nothing to take does not contend for it.
func (r *Runner) claim(lv Live, rec *batchRecord) error {
	if err := r.renew(lv, rec); err != nil {
		return err
	}
	room, nativeRoom := r.rooms()

	now := r.store.now()
	c, err := r.store.loadClaims(r.ctx, rec)
	if err != nil {
		return err
	}
	if c.allDone() {
		return r.finish(lv, rec, StatusCompleted)
	}
	claimable := func(c *claims, i int) bool {
		p := &c.Parts[i]
		return !p.Done && !(p.Native != nil && p.Native.Closed) && !p.leasedByOther(r.me, now) && !r.running(rec.ID, i)
	}
	open := false
	for i := range c.Parts {
		open = open || claimable(c, i) && (c.Parts[i].Native == nil && room > 0 || c.Parts[i].Native != nil && nativeRoom > 0)
	}
	if !open {
		return nil
	}
	return r.take(lv, rec, now, func(c *claims, i int, gateway, native int) bool {
		if !claimable(c, i) {
			return false
		}
		if c.Parts[i].Native != nil {
			return native < nativeRoom
		}
		return gateway < room
	})
}

// rooms returns how many more gateway parts and native parts this runner
// may take on.
func (r *Runner) rooms() (gateway, native int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	gateway, native = maxParts, maxNativeParts
	for _, a := range r.parts {
		if a.native {
			native--
		} else {
			gateway--
		}
	}
	return gateway, native
}

// take claims the parts of rec that want says to, under the batch's
// lock, and starts them. want is told how many gateway and native parts
// were taken so far.
func (r *Runner) take(lv Live, rec *batchRecord, now time.Time, want func(c *claims, i int, gateway, native int) bool) error {
	var (
		mine            []int
		parts           []partState
		gateway, native int
	)
	_, err := r.store.updateClaims(r.ctx, rec, lockWait, func(c *claims) bool {
		for i := range c.Parts {
			if !want(c, i, gateway, native) {
				continue
			}
			if c.Parts[i].Native != nil {
				native++
			} else {
				gateway++
			}
			c.Parts[i].Holder, c.Parts[i].Until = r.me, now.Add(lv.Settings.Lease).UnixMilli()
			mine = append(mine, i)
		}
		parts = c.Parts
		return len(mine) > 0
	})
	if err != nil {
		return err
	}
	for _, i := range mine {
		r.startPart(lv, rec, i, parts[i])
	}
	return nil
}

// windDown takes the native parts of rec, cancelled or expired, whose
// provider batches are still to be cancelled and collected, and that
// nobody works on; they stop at their provider and keep its finished
// results.
func (r *Runner) windDown(lv Live, rec *batchRecord) error {
	if rec.InProgressAt == nil {
		return nil // not validated: no parts
	}
	if err := r.renew(lv, rec); err != nil {
		return err
	}
	c, err := r.store.loadClaims(r.ctx, rec)
	if storage.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	now := r.store.now()
	_, nativeRoom := r.rooms()
	due := func(c *claims, i int) bool {
		p := &c.Parts[i]
		return p.windingDown() && !p.leasedByOther(r.me, now) && !r.running(rec.ID, i)
	}
	open := false
	for i := range c.Parts {
		open = open || due(c, i)
	}
	if !open || nativeRoom <= 0 {
		return nil
	}
	return r.take(lv, rec, now, func(c *claims, i int, _, native int) bool {
		return due(c, i) && native < nativeRoom
	})
}

// renew extends, every third of the lease, the claims on the parts of rec
// this runner works on, and reports their progress; a part another runner
// holds now (this one was presumed dead) is stopped. One lock per batch,
// not per part, keeps the storage's lock traffic low.
func (r *Runner) renew(lv Live, rec *batchRecord) error {
	r.mu.Lock()
	mine := make(map[int]*active)
	for k, a := range r.parts {
		if k.batch == rec.ID {
			mine[k.part] = a
		}
	}
	if len(mine) == 0 {
		delete(r.renewed, rec.ID)
	}
	// The store's clock, as the lease's Until and renewed are on it.
	due := len(mine) > 0 && r.store.now().Sub(r.renewed[rec.ID]) >= lv.Settings.Lease/3
	r.mu.Unlock()
	if !due {
		return nil
	}
	now := r.store.now()
	ok, err := r.store.updateClaims(r.ctx, rec, lockWait, func(c *claims) bool {
		for i, a := range mine {
			p := &c.Parts[i]
			if p.Holder != r.me {
				lv.Logger.Warn("another instance took over a part; stopping it here",
					zap.String("batch_id", rec.ID), zap.Int("part", i), zap.String("holder", p.Holder))
				a.cancel()
				continue
			}
			p.Until = now.Add(lv.Settings.Lease).UnixMilli()
			p.Completed, p.Failed = int(a.ok.Load()), int(a.bad.Load())
		}
		return true
	})
	if ok && err == nil {
		r.mu.Lock()
		r.renewed[rec.ID] = now
		r.mu.Unlock()
	}
	return err
}

func (r *Runner) running(batchID string, part int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.parts[partKey{batchID, part}]
	return ok
}

func (r *Runner) runningBatch(batchID string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range r.parts {
		if k.batch == batchID {
			return true
		}
	}
	return false
}

// stopParts cancels this runner's work on a batch; each part writes its
// finished results and gives up its claim. Native parts are told to wind
// their provider batches down instead: they cancel them, collect what
// finished, and then give up their claims.
func (r *Runner) stopParts(batchID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, a := range r.parts {
		if k.batch != batchID {
			continue
		}
		if a.native {
			a.stopNative()
		} else {
			a.cancel()
		}
	}
}

func (r *Runner) providerLimiter(name string, n int) *limiter {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.providers[name]
	if l == nil {
		l = newLimiter(n)
		r.providers[name] = l
	}
	return l
}

// writerName names this runner's next checkpoint file of a part.
func (r *Runner) writerName() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seq++
	return fmt.Sprintf("%s-%09d", safeName(r.me), r.seq)
}

// safeName keeps letters, digits, '-' and '_' and turns the rest into '_'.
func safeName(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			b[i] = '_'
		}
	}
	return string(b)
}

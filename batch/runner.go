package batch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"path"
	"runtime/debug"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Live is what a Runner reads from the live configuration on every poll.
type Live struct {
	Settings Settings
	Executor Executor
	Logger   *zap.Logger
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

	mu        sync.Mutex
	parts     map[partKey]context.CancelFunc
	providers map[string]*limiter
	seq       int
}

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
		parts:     make(map[partKey]context.CancelFunc),
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
	defer func() {
		if v := recover(); v != nil {
			lv.Logger.Error("batch runner panicked", zap.Any("panic", v), zap.ByteString("stack", debug.Stack()))
		}
	}()
	r.workers.setLimit(lv.Settings.Workers)
	r.mu.Lock()
	for _, l := range r.providers {
		l.setLimit(lv.Settings.PerProvider)
	}
	r.mu.Unlock()

	ids, err := r.store.list(r.ctx, path.Join(r.store.prefix, "active"))
	if err != nil {
		lv.Logger.Error("listing active batches", zap.Error(err))
		return
	}
	for _, id := range ids {
		if r.ctx.Err() != nil {
			return
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
	if isNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	rec, err := r.store.batchRecord(ctx, string(owner), id)
	if err == ErrNotFound {
		return r.store.storage.Delete(ctx, r.store.activeKey(id))
	}
	if err != nil {
		return err
	}
	if rec.terminal() {
		return r.store.storage.Delete(ctx, r.store.activeKey(id))
	}
	now := r.store.now()
	_, cancelAsked := r.store.cancelAsked(ctx, rec)
	expired := rec.ExpiresAt != nil && now.Unix() >= *rec.ExpiresAt

	switch {
	case cancelAsked || rec.Status == StatusCancelling:
		r.stopParts(id)
		return r.finish(lv, rec, StatusCancelled)
	case expired:
		r.stopParts(id)
		return r.finish(lv, rec, StatusExpired)
	case rec.Status == StatusValidating:
		_, err := r.store.withLock(ctx, id, 2*time.Second, func() error { return r.validate(lv, id, string(owner)) })
		return err
	case rec.Status == StatusFinalizing:
		return r.finish(lv, rec, StatusCompleted)
	}
	return r.claim(lv, rec)
}

// validate checks a batch's input under its lock and starts it or fails it.
func (r *Runner) validate(lv Live, id, owner string) error {
	ctx := r.ctx
	rec, err := r.store.batchRecord(ctx, owner, id)
	if err != nil || rec.Status != StatusValidating {
		return err // someone else got there first
	}
	v, err := r.store.validate(ctx, rec, lv.Executor, lv.Settings)
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

// claim takes parts of rec that nobody works on, up to this runner's
// share, and starts them; or finishes rec when every part is done.
func (r *Runner) claim(lv Live, rec *batchRecord) error {
	r.mu.Lock()
	room := maxParts - len(r.parts)
	r.mu.Unlock()

	var (
		mine    []int
		parts   []partState
		allDone bool
	)
	now := r.store.now()
	_, err := r.store.updateClaims(r.ctx, rec, 2*time.Second, func(c *claims) bool {
		allDone = c.allDone()
		for i := range c.Parts {
			p := &c.Parts[i]
			if len(mine) == room || p.Done || p.leasedByOther(r.me, now) || r.running(rec.ID, i) {
				continue
			}
			p.Holder, p.Until = r.me, now.Add(lv.Settings.Lease).UnixMilli()
			mine = append(mine, i)
		}
		parts = c.Parts
		return len(mine) > 0
	})
	if err != nil {
		return err
	}
	if allDone {
		return r.finish(lv, rec, StatusCompleted)
	}
	for _, i := range mine {
		r.startPart(lv, rec, i, parts[i])
	}
	return nil
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
// finished results and gives up its claim.
func (r *Runner) stopParts(batchID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, cancel := range r.parts {
		if k.batch == batchID {
			cancel()
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

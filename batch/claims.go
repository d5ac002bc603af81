package batch

import (
	"context"
	"path"
	"strings"
	"time"

	"github.com/modelgate/modelgate/internal/storage"
)

// claims is the work plan of a validated batch (claims.json): its parts and
// who works on each. It is only changed under the batch's storage lock.
type claims struct {
	Parts []partState `json:"parts"`
}

// partState is one part: the requests [Start, Start+N) of the batch.
type partState struct {
	Start int `json:"start"`
	N     int `json:"n"`
	// Done: every request of the part has its result in a checkpoint.
	Done bool `json:"done,omitempty"`
	// Holder is the runner working on the part ("<instance>/<process>"),
	// until Until (Unix milliseconds) unless it renews its lease.
	Holder string `json:"holder,omitempty"`
	Until  int64  `json:"until,omitempty"`
	// Completed and Failed are the part's results at the last report.
	Completed int `json:"completed,omitempty"`
	Failed    int `json:"failed,omitempty"`
	// Chunks is the number of input chunks of a part written in several
	// (input/<n>-<k>); 0: one (input/<n>).
	Chunks int `json:"chunks,omitempty"`
	// Provider and Model are the provider and its own model name of
	// every line of a native part.
	Provider string `json:"provider,omitempty"`
	Model    string `json:"model,omitempty"`
	// Native is set for a part that goes to its provider's batch API.
	Native *nativeState `json:"native,omitempty"`
}

func (c *claims) progress() (completed, failed int) {
	for _, p := range c.Parts {
		completed += p.Completed
		failed += p.Failed
	}
	return completed, failed
}

func (c *claims) allDone() bool {
	for _, p := range c.Parts {
		if !p.Done {
			return false
		}
	}
	return true
}

// leased reports whether part i is held by a runner other than the caller's
// process that may still be alive: its lease has not run out, and it is not
// an earlier process of the caller's own instance (which cannot be running
// while this one is, as one instance is one process).
func (p *partState) leasedByOther(me string, now time.Time) bool {
	if p.Holder == "" || p.Holder == me || p.Until < now.UnixMilli() {
		return false
	}
	inst, _, _ := strings.Cut(p.Holder, "/")
	myInst, _, _ := strings.Cut(me, "/")
	return inst != myInst
}

func (s *Store) claimsKey(rec *batchRecord) string {
	return path.Join(s.batchDir(rec.Owner, rec.ID), "claims.json")
}

func (s *Store) loadClaims(ctx context.Context, rec *batchRecord) (*claims, error) {
	c := new(claims)
	return c, s.loadJSON(ctx, s.claimsKey(rec), c)
}

// lockWait is how long the runner waits for a batch's lock before it
// leaves the batch for the next poll. It is longer than the 2 s Caddy's
// file system storage takes to give up on a lock file left empty by a
// process killed while writing it: a shorter wait would time out before
// that and never get the lock.
const lockWait = 5 * time.Second

// withLock runs f holding the batch's storage lock, waiting at most wait
// for it. It reports false if the lock was not obtained in time.
func (s *Store) withLock(ctx context.Context, batchID string, wait time.Duration, f func() error) (bool, error) {
	lctx, cancel := context.WithTimeout(ctx, wait)
	unlock, err := storage.Lock(lctx, s.storage, lockName(batchID))
	cancel()
	if err != nil {
		if ctx.Err() == nil && lctx.Err() != nil {
			return false, nil // busy: someone else is at it
		}
		return false, err
	}
	defer unlock()
	return true, f()
}

// updateClaims loads claims under the batch's lock, lets f change them and
// stores them when f reports a change.
func (s *Store) updateClaims(ctx context.Context, rec *batchRecord, wait time.Duration, f func(c *claims) bool) (bool, error) {
	return s.withLock(ctx, rec.ID, wait, func() error {
		c, err := s.loadClaims(ctx, rec)
		if err != nil {
			return err
		}
		if !f(c) {
			return nil
		}
		return s.storeJSON(ctx, s.claimsKey(rec), c)
	})
}

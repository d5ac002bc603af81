package batch

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"path"
	"strconv"
	"sync"
	"time"

	"github.com/tidwall/gjson"
	"go.uber.org/zap"
)

// result is one request's result line, for the output file (ok) or the
// error file.
type result struct {
	index int // the request's position in the batch
	ok    bool
	line  []byte
}

// startPart runs part i of rec in the background until it is done, it is
// stopped (cancel, expiry, shutdown), or its claim is lost.
func (r *Runner) startPart(lv Live, rec *batchRecord, i int, ps partState) {
	ctx, cancel := context.WithCancel(r.ctx)
	// A native part watches the deadline itself: at its end it cancels
	// its provider batch and collects what finished.
	if deadline, ok := rec.deadline(); ok && ps.Native == nil {
		var c2 context.CancelFunc
		ctx, c2 = context.WithDeadline(ctx, deadline)
		c1 := cancel
		cancel = func() { c2(); c1() }
	}
	key := partKey{rec.ID, i}
	act := &active{cancel: cancel, native: ps.Native != nil, stop: make(chan struct{})}
	r.mu.Lock()
	r.parts[key] = act
	r.mu.Unlock()

	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer func() {
			r.mu.Lock()
			delete(r.parts, key)
			r.mu.Unlock()
			cancel()
		}()
		log := lv.Logger.With(zap.String("batch_id", rec.ID), zap.Int("part", i))
		defer func() {
			if v := recover(); v != nil {
				log.Error("batch part panicked", zap.String("panic", fmt.Sprint(v)))
			}
		}()
		run := r.runPart
		if ps.Native != nil {
			run = r.runNative
		}
		if err := run(ctx, lv, log, rec, i, ps, act); err != nil && r.ctx.Err() == nil {
			log.Error("batch part stopped; it will be taken up again", zap.Error(err))
		}
		r.Wake()
	}()
}

// partRun is the state of one part being worked on.
type partRun struct {
	r     *Runner
	rec   *batchRecord
	i     int
	ps    partState
	dir   string
	done  []bool
	nDone int
	act   *active  // ok and bad count the part's results
	buf   []result // finished since the last checkpoint
}

// runPart runs the open requests of part i until each has a result or ctx
// ends (cancel, expiry, shutdown, or the claim was lost: the runner's lease
// renewal cancels it), writing results at every checkpoint interval, and
// then gives up its claim.
func (r *Runner) runPart(ctx context.Context, lv Live, log *zap.Logger, rec *batchRecord, i int, ps partState, act *active) error {
	set := lv.Settings
	pr := &partRun{r: r, rec: rec, i: i, ps: ps, dir: r.store.batchDir(rec.Owner, rec.ID), done: make([]bool, ps.N), act: act}
	// Results finished before a crash or by an earlier holder count.
	if err := pr.readDone(); err != nil {
		return pr.release(lv, err)
	}

	// The open requests go to at most Workers goroutines that live as long
	// as the part: a goroutine per request grew its stack anew, through
	// reverse_proxy's depth, for every one (a tenth of a line's CPU).
	// The input is read a chunk at a time as the requests are handed out.
	open := ps.N - pr.nDone
	results := make(chan result)
	jobs := make(chan job)
	var wg sync.WaitGroup
	for range min(set.Workers, open) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for jb := range jobs {
				if res, ok := r.runLine(ctx, lv, log, rec, ps.Start+jb.j, jb.line); ok {
					// The loop below receives until every sender is
					// done, stopping or not: an answer is never dropped.
					results <- res
				}
			}
		}()
	}
	wg.Add(1)
	readErr := make(chan error, 1)
	go func() { // hand out the open requests until ctx ends
		defer wg.Done()
		defer close(jobs)
		err := r.store.eachInputLine(r.ctx, pr.dir, i, ps, func(j int, line []byte) error {
			if pr.done[j] {
				return nil
			}
			select {
			case jobs <- job{j, line}:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		if err != nil && ctx.Err() == nil {
			readErr <- err
		}
	}()
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()

	checkpoint := time.NewTicker(set.CheckpointInterval)
	defer checkpoint.Stop()
	for {
		select {
		case res := <-results:
			pr.add(res)
		case <-checkpoint.C:
			if err := pr.checkpoint(); err != nil {
				log.Warn("writing a checkpoint failed; retrying", zap.Error(err))
			}
		case <-finished:
			// Results still in the channel were sent before finished closed.
			for {
				select {
				case res := <-results:
					pr.add(res)
					continue
				default:
				}
				break
			}
			err := pr.lastCheckpoint(log, set.CheckpointInterval)
			select {
			case rerr := <-readErr:
				err = errors.Join(fmt.Errorf("reading the part's input: %w", rerr), err)
			default:
			}
			return pr.release(lv, err)
		}
	}
}

// job is an open request of a part: its position in the part and its line.
type job struct {
	j    int
	line []byte
}

// readDone marks the requests of the part that have a result in a
// checkpoint as done, and counts them.
func (pr *partRun) readDone() error {
	ps := pr.ps
	return pr.r.store.readCheckpoints(pr.r.ctx, pr.dir, pr.i, func(idx int, ok bool, _ []byte) {
		if idx >= ps.Start && idx < ps.Start+ps.N && !pr.done[idx-ps.Start] {
			pr.done[idx-ps.Start] = true
			pr.nDone++
			if ok {
				pr.act.ok.Add(1)
			} else {
				pr.act.bad.Add(1)
			}
		}
	})
}

// lastCheckpoint writes the part's last results. While the storage cannot
// be reached it keeps them and tries again, every interval at most: they
// are finished work, and a part that dropped them would send them upstream
// again once it is taken up. It gives up only when the runner stops, which
// loses them as a crash would.
func (pr *partRun) lastCheckpoint(log *zap.Logger, interval time.Duration) error {
	wait := min(100*time.Millisecond, interval)
	for tries := 0; ; tries++ {
		err := pr.checkpoint()
		if err == nil {
			if tries > 0 {
				log.Info("the part's last checkpoint is written", zap.Int("tries", tries+1))
			}
			return nil
		}
		if tries == 0 {
			log.Warn("writing the part's last checkpoint failed; keeping its results and retrying", zap.Error(err))
		}
		select {
		case <-pr.r.ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, interval)
	}
}

func (pr *partRun) add(res result) {
	j := res.index - pr.ps.Start
	if pr.done[j] {
		return
	}
	pr.done[j] = true
	pr.nDone++
	if res.ok {
		pr.act.ok.Add(1)
	} else {
		pr.act.bad.Add(1)
	}
	pr.buf = append(pr.buf, res)
}

// checkpoint writes the results finished since the last one as one new
// storage key, so a crash loses at most one interval's work.
func (pr *partRun) checkpoint() error {
	if len(pr.buf) == 0 {
		return nil
	}
	var b []byte
	for _, res := range pr.buf {
		b = strconv.AppendInt(b, int64(res.index), 10)
		if res.ok {
			b = append(b, " o "...)
		} else {
			b = append(b, " e "...)
		}
		b = append(b, res.line...)
		b = append(b, '\n')
	}
	key := path.Join(pr.dir, "results", fmt.Sprintf("%06d", pr.i), pr.r.writerName())
	// Written even while stopping: the results are finished work.
	if err := pr.r.store.files.Store(context.WithoutCancel(pr.r.ctx), key, b); err != nil {
		return err
	}
	pr.buf = pr.buf[:0]
	return nil
}

// release gives up the claim: the part is done when every request has a
// result in a checkpoint. cause is returned, or the release's own error.
func (pr *partRun) release(lv Live, cause error) error {
	done := cause == nil && pr.nDone == pr.ps.N
	ctx := context.WithoutCancel(pr.r.ctx)
	_, err := pr.r.store.updateClaims(ctx, pr.rec, max(lockWait, lv.Settings.Lease), func(c *claims) bool {
		p := &c.Parts[pr.i]
		if p.Holder != pr.r.me {
			return false
		}
		p.Holder, p.Until, p.Done = "", 0, done
		p.Completed, p.Failed = int(pr.act.ok.Load()), int(pr.act.bad.Load())
		return true
	})
	if cause != nil {
		return cause
	}
	return err
}

// runLine runs one request, retrying 429 and 5xx answers, and returns its
// result line. ok is false when the request was stopped before it had an
// answer; it then runs again later (or is reported as cancelled/expired).
func (r *Runner) runLine(ctx context.Context, lv Live, log *zap.Logger, rec *batchRecord, idx int, line []byte) (result, bool) {
	fields := gjson.GetManyBytes(line, "custom_id", "body")
	req := Request{BatchID: rec.ID, CustomID: fields[0].Str, Owner: rec.Owner, KeyID: rec.KeyID, KeyName: rec.KeyName,
		Endpoint: rec.Endpoint, Body: []byte(fields[1].Raw)}
	prov := r.providerLimiter(r.provider(lv, rec.Endpoint, req.Body), lv.Settings.PerProvider)

	var resp Response
	for attempt := 0; ; attempt++ {
		if err := prov.acquire(ctx); err != nil {
			return result{}, false
		}
		if err := r.workers.acquire(ctx); err != nil {
			prov.release()
			return result{}, false
		}
		// The executor of the config live at the last poll: after a
		// reload, the next attempt goes through the new config's providers.
		resp = r.current.Load().Executor.Do(ctx, req)
		r.workers.release()
		prov.release()
		if resp.KeyGone {
			// Not run, and no line of the batch may run any more: the
			// batch is cancelled, and this line ends as key_revoked.
			if err := r.revoke(lv, rec); err != nil {
				log.Error("cancelling the batch of a revoked key failed; its lines stay unrun and it is tried again at the next poll", zap.Error(err))
			}
			return result{}, false
		}
		if resp.Status == 0 {
			return result{}, false
		}
		// An answer is kept even when the part was stopped meanwhile: it
		// is finished work, and dropping it would send it upstream again.
		if resp.Final || !retryable(resp.Status) || attempt == lv.Settings.MaxRetries {
			break
		}
		if ctx.Err() != nil {
			return result{}, false // stopped before the retry
		}
		wait := backoff(lv.Settings.RetryBackoff, attempt, resp.RetryAfter)
		log.Debug("batch request will be retried", zap.String("custom_id", req.CustomID),
			zap.Int("status", resp.Status), zap.Duration("after", wait))
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return result{}, false
		}
	}
	ok := resp.Status >= 200 && resp.Status < 300
	if !ok {
		log.Warn("batch request failed", zap.String("custom_id", req.CustomID), zap.Int("status", resp.Status),
			zap.String("request_id", resp.RequestID), zap.String("error", gjson.GetBytes(resp.Body, "error.message").Str))
	}
	return result{index: idx, ok: ok, line: responseLine(rec.ID, idx, fields[0].Raw, resp)}, true
}

// provider returns the provider a request's model routes to, which the
// per-provider limit counts under. The route depends only on the model and
// the config, so it is looked up once per model and poll, not per request
// (Check validates the whole body). A model no longer routable since
// validation counts under "": Do answers its 404.
func (r *Runner) provider(lv Live, endpoint string, body []byte) string {
	model := gjson.GetBytes(body, "model").Str
	key := endpoint + " " + model
	if p, ok := r.routes.Load(key); ok {
		return p.(string)
	}
	route, _ := lv.Executor.Check(endpoint, body, nil)
	r.routes.Store(key, route.Provider)
	return route.Provider
}

func retryable(status int) bool { return status == 429 || status >= 500 }

// backoff is the wait before retry attempt+1: what retry-after asks, else
// base doubled per attempt with jitter, at most a minute.
func backoff(base time.Duration, attempt int, retryAfter time.Duration) time.Duration {
	if retryAfter > 0 {
		return min(retryAfter, 5*time.Minute)
	}
	d := base << min(attempt, 6)
	d = min(d, time.Minute)
	return d/2 + rand.N(d/2+1)
}

// requestID is the id of a batch's result line: stable, so a line written
// twice (after a crash) has one id.
func requestID(batchID string, idx int) string {
	sum := sha256.Sum256([]byte(batchID + "/" + strconv.Itoa(idx)))
	return "batch_req_" + hex.EncodeToString(sum[:12])
}

// responseLine is an output or error file line for an answered request.
func responseLine(batchID string, idx int, customIDRaw string, resp Response) []byte {
	b := make([]byte, 0, 128+len(resp.Body))
	b = append(b, `{"id":"`...)
	b = append(b, requestID(batchID, idx)...)
	b = append(b, `","custom_id":`...)
	b = append(b, customIDRaw...)
	b = append(b, `,"response":{"status_code":`...)
	b = strconv.AppendInt(b, int64(resp.Status), 10)
	b = append(b, `,"request_id":`...)
	b = appendJSONString(b, resp.RequestID)
	b = append(b, `,"body":`...)
	// Compacted: an answer may be pretty-printed, and a newline in it
	// would break the checkpoint record and the JSONL line.
	if gjson.ValidBytes(resp.Body) {
		b = appendCompact(b, resp.Body)
	} else { // not JSON, or empty
		b = append(b, "null"...)
	}
	return append(b, `},"error":null}`...)
}

// appendCompact appends src, a valid JSON value, without the whitespace
// between its tokens, as json.Compact does, without its scanner's work on
// every byte (it showed in the load harness's profiles of batch lines).
// Strings are copied whole, found by their closing quote; only the bytes
// between them are looked at one by one, and an answer written without
// whitespace is copied as it is.
//
// Not tidwall/pretty's (gjson's dependency): its Ugly allocates a copy of
// every body, and its UglyInPlace, compacting a copy where it lies, reads
// back the bytes before a quote to count backslashes after it has written
// over them (FuzzResponseLineBody found `{"":[ "\""] }` kept its last space).
func appendCompact(dst, src []byte) []byte {
	for i := 0; i < len(src); {
		q := bytes.IndexByte(src[i:], '"')
		if q < 0 {
			return appendWithoutSpace(dst, src[i:])
		}
		dst = appendWithoutSpace(dst, src[i:i+q])
		end := stringEnd(src, i+q)
		dst = append(dst, src[i+q:end]...)
		i = end
	}
	return dst
}

// appendWithoutSpace appends seg, JSON outside any string, without its
// spaces, tabs and line ends.
func appendWithoutSpace(dst, seg []byte) []byte {
	from := 0
	for j, c := range seg {
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			dst = append(dst, seg[from:j]...)
			from = j + 1
		}
	}
	return append(dst, seg[from:]...)
}

// stringEnd returns the index just past the JSON string that starts with
// the quote at b[i] (len(b) when it does not end).
// providers.SkipString does as much, but batch does not import providers.
func stringEnd(b []byte, i int) int {
	for j := i + 1; ; {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return len(b)
		}
		q := j + k
		n := 0 // backslashes before the quote: an odd number escapes it
		for p := q - 1; p > i && b[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return q + 1
		}
		j = q + 1
	}
}

// errorLine is an error file line for a request that got no answer.
func errorLine(batchID string, idx int, customIDRaw, code, message string) []byte {
	b := make([]byte, 0, 160)
	b = append(b, `{"id":"`...)
	b = append(b, requestID(batchID, idx)...)
	b = append(b, `","custom_id":`...)
	b = append(b, customIDRaw...)
	b = append(b, `,"response":null,"error":{"code":`...)
	b = appendJSONString(b, code)
	b = append(b, `,"message":`...)
	b = appendJSONString(b, message)
	return append(b, "}}"...)
}

func appendJSONString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a string always marshals
	return append(b, q...)
}

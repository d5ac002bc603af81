package batch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"
	"go.uber.org/zap"
)

// nativeRun is a native part being driven at its provider by this runner.
type nativeRun struct {
	r   *Runner
	lv  Live
	log *zap.Logger
	rec *batchRecord
	i   int
	ps  partState
	n   nativeState // the part's provider state, as last stored
	act *active
	pr  *partRun // the part's results, as a gateway part keeps them

	// skip marks the lines that are not in the submission: done before
	// it, or not encodable.
	skip []bool
	// okBase and badBase are the results the part had before the
	// provider's, which its progress counts add to.
	okBase, badBase int64
	// stopAt is when this run first saw the batch cancelled or expired.
	stopAt time.Time
	// gateway: the part was handed to the gateway.
	gateway bool
}

// errClaimLost says another runner holds the part now.
var errClaimLost = errors.New("another runner holds the part now")

// runNative drives native part i of rec: it submits the part to its
// provider's batch API (once: a stored intent comes first, the provider
// batch's reference right after), polls it with a backoff, cancels it
// when the batch is cancelled or expires, and collects its results into
// the part's checkpoints. A part the provider refuses, or whose provider
// no longer takes batches, runs in the gateway instead. It returns when
// the part is done, handed to the gateway, wound down, or stopped (the
// runner stops, or the claim was lost), and gives up its claim.
func (r *Runner) runNative(ctx context.Context, lv Live, log *zap.Logger, rec *batchRecord, i int, ps partState, act *active) error {
	nr := &nativeRun{r: r, lv: lv, log: log.With(zap.String("provider", ps.Provider), zap.String("marker", ps.Native.Marker)),
		rec: rec, i: i, ps: ps, n: *ps.Native, act: act}
	nr.pr = &partRun{r: r, rec: rec, i: i, ps: ps, dir: r.store.batchDir(rec.Owner, rec.ID), done: make([]bool, ps.N), act: act}
	err := nr.pr.readDone()
	if err == nil {
		nr.okBase, nr.badBase = act.ok.Load(), act.bad.Load()
		err = nr.run(ctx)
	}
	if errors.Is(err, errNativeCrash) {
		return nil // as a crash would: nothing more stored, the claim kept
	}
	if rerr := nr.pr.release(lv, nil); rerr != nil && err == nil {
		err = rerr
	}
	if errors.Is(err, errClaimLost) || ctx.Err() != nil {
		return nil //nolint:nilerr // another runner holds the part, or the runner stops: not a failure of the batch
	}
	return err
}

// run moves the part on until it has nothing more to do here.
func (nr *nativeRun) run(ctx context.Context) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if nr.n.Closed || nr.gateway {
			return nil
		}
		api := nr.api()
		stopping := nr.stopping()
		switch {
		case nr.n.Ref != nil:
			if api == nil {
				return nr.giveUp("its provider has no batch API in the configuration any more")
			}
			return nr.follow(ctx, api)
		case nr.n.Submitting != 0:
			if api == nil {
				return nr.giveUp("its provider has no batch API in the configuration any more")
			}
			if err := nr.resume(ctx, api, stopping); err != nil {
				return err
			}
		case stopping:
			// Never sent: nothing at the provider. Its lines end as the
			// batch does.
			return nil
		case api == nil:
			return nr.toGateway("its provider's batch mode is gateway now")
		default:
			if err := nr.begin(ctx, api); err != nil {
				return err
			}
		}
	}
}

// api is the provider's batch API in the live configuration, or nil.
func (nr *nativeRun) api() NativeAPI {
	lv := nr.r.current.Load()
	if lv == nil || lv.Native == nil {
		return nil
	}
	return lv.Native(nr.ps.Provider)
}

// stopping reports whether the batch was cancelled or has expired: the
// provider batch is to be cancelled, not waited for.
func (nr *nativeRun) stopping() bool {
	stop := false
	select {
	case <-nr.act.stop:
		stop = true
	default:
	}
	if !stop {
		if _, _, ok := nr.r.store.cancelAsked(nr.r.ctx, nr.rec); ok {
			stop = true
		} else if d, ok := nr.rec.deadline(); ok && !nr.r.store.now().Before(d) {
			stop = true
		}
	}
	if stop && nr.stopAt.IsZero() {
		nr.stopAt = nr.r.store.now()
	}
	return stop
}

// begin prepares the part's submission, reserves its cost, stores the
// intent to submit, and submits.
func (nr *nativeRun) begin(ctx context.Context, api NativeAPI) error {
	sub, estimate, err := nr.prepare(ctx, api)
	if err != nil {
		return err
	}
	nr.rebase()
	if sub.Count == 0 {
		return nr.finishPart() // every line already has its result
	}
	if acc := nr.lv.Accounting; acc != nil {
		refusal, err := acc.Reserve(ctx, nr.reservation(sub, estimate))
		if err != nil {
			nr.log.Warn("reserving the cost of a native batch part failed; trying again", zap.Error(err))
			return nr.sleep(ctx, nr.lv.Settings.NativePoll)
		}
		if refusal != nil {
			return nr.refuse(*refusal)
		}
		nr.n.Reserved = true
	}
	if err := nativeHook("reserved"); err != nil {
		return err
	}
	now := nr.r.store.now()
	if err := nr.store(ctx, func(n *nativeState) {
		n.Submitting, n.By, n.Reserved = now.UnixMilli(), nr.r.me, nr.n.Reserved
	}); err != nil {
		return err
	}
	if err := nativeHook("ahead"); err != nil {
		return err
	}
	sub.Since = now
	return nr.submit(ctx, api, sub)
}

// resume continues a submission that was begun but has no reference: it
// may have reached the provider. Find asks; only when the provider has
// no batch with the marker is the part submitted.
func (nr *nativeRun) resume(ctx context.Context, api NativeAPI, stopping bool) error {
	if wait := nr.inFlight(); wait > 0 {
		nr.log.Info("a submission begun by another instance may still be on its way; waiting before asking the provider", zap.Duration("wait", wait))
		return nr.sleep(ctx, wait)
	}
	sub, _, err := nr.prepare(ctx, api)
	if err != nil {
		return err
	}
	nr.rebase()
	sub.Since = time.UnixMilli(nr.n.Submitting)
	ref, found, err := api.Find(ctx, sub)
	if err != nil {
		nr.log.Warn("looking for the provider batch of a submission cut short failed; trying again", zap.Error(err))
		return nr.sleep(ctx, nr.lv.Settings.NativePoll)
	}
	if found {
		nr.log.Info("found the provider batch of a submission cut short", zap.String("provider_batch_id", ref.ID))
		return nr.storeRef(ctx, ref)
	}
	if stopping || sub.Count == 0 {
		return nr.close(ctx) // nothing reached the provider
	}
	return nr.submit(ctx, api, sub)
}

// inFlight is how long a submission another instance began may still be
// under way (its Submit's deadline): only then can Find be sure.
func (nr *nativeRun) inFlight() time.Duration {
	by, _, _ := strings.Cut(nr.n.By, "/")
	me, _, _ := strings.Cut(nr.r.me, "/")
	if by == me {
		return 0 // an earlier process of this instance: it is gone
	}
	end := time.UnixMilli(nr.n.Submitting).Add(nr.lv.Settings.NativeSubmitTimeout + time.Second)
	return end.Sub(nr.r.store.now())
}

// submit sends the part to the provider and stores the reference it
// answers with. A refusal hands the part to the gateway; another error is
// retried after Find, at the next turn.
func (nr *nativeRun) submit(ctx context.Context, api NativeAPI, sub *NativeSubmission) error {
	sctx, cancel := context.WithDeadline(ctx, sub.Since.Add(nr.lv.Settings.NativeSubmitTimeout))
	ref, err := api.Submit(sctx, sub)
	cancel()
	if refusal, ok := errors.AsType[*NativeRefusal](err); ok {
		nr.log.Warn("the provider refused the part as a batch; its lines run in the gateway at the live price", zap.Error(refusal))
		return nr.toGateway(refusal.Error())
	}
	if err != nil {
		nr.log.Warn("submitting a native batch part failed; asking the provider whether it arrived, then trying again", zap.Error(err))
		return nr.sleep(ctx, nr.lv.Settings.NativePoll)
	}
	if err := nativeHook("sent"); err != nil {
		return err
	}
	nr.log.Info("native batch part submitted", zap.String("provider_batch_id", ref.ID), zap.Int("requests", sub.Count))
	return nr.storeRef(ctx, ref)
}

// storeRef stores the provider batch's reference, trying until it is
// stored (or the runner stops: a restart finds it again).
func (nr *nativeRun) storeRef(ctx context.Context, ref NativeRef) error {
	wait := 100 * time.Millisecond
	for {
		err := nr.store(ctx, func(n *nativeState) { n.Ref = &ref })
		if err == nil || errors.Is(err, errClaimLost) {
			if err == nil {
				err = nativeHook("stored")
			}
			return err
		}
		nr.log.Warn("storing a provider batch's id failed; retrying", zap.Error(err))
		if err := nr.sleep(ctx, wait); err != nil {
			return err
		}
		wait = min(2*wait, nr.lv.Settings.NativePollMax)
	}
}

// follow polls the provider batch until it ends, cancelling it when the
// batch is cancelled or expires, and collects its results.
func (nr *nativeRun) follow(ctx context.Context, api NativeAPI) error {
	set := nr.lv.Settings
	wait := set.NativePoll
	ref := *nr.n.Ref
	for {
		st, err := api.Poll(ctx, ref)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			nr.log.Warn("polling a provider batch failed; trying again", zap.String("provider_batch_id", ref.ID), zap.Error(err))
		} else {
			nr.act.ok.Store(nr.okBase + int64(st.Completed))
			nr.act.bad.Store(nr.badBase + int64(st.Failed))
			if st.ended() {
				if st.Ref.ID != "" {
					ref = st.Ref
				}
				if err := nativeHook("ended"); err != nil {
					return err
				}
				return nr.ended(ctx, api, ref, st)
			}
		}
		if nr.stopping() {
			if !nr.n.CancelSent {
				if err := api.Cancel(ctx, ref); err != nil {
					nr.log.Warn("cancelling a provider batch failed; trying again", zap.String("provider_batch_id", ref.ID), zap.Error(err))
				} else if err := nr.store(ctx, func(n *nativeState) { n.CancelSent = true }); err != nil {
					return err
				}
			}
			if nr.r.store.now().Sub(nr.stopAt) > set.NativeCancelWait {
				return nr.giveUp("the provider did not end the cancelled batch in time")
			}
			wait = set.NativePoll
		}
		if err := nr.sleep(ctx, wait); err != nil {
			return err
		}
		wait = min(2*wait, set.NativePollMax)
	}
}

// ended handles a provider batch that has ended: its results are
// collected; one the provider failed as a whole runs in the gateway,
// unless the batch is stopping.
func (nr *nativeRun) ended(ctx context.Context, api NativeAPI, ref NativeRef, st NativeStatus) error {
	nr.act.ok.Store(nr.okBase) // the results collected count from here
	nr.act.bad.Store(nr.badBase)
	if st.State == NativeFailed {
		if nr.stopping() {
			return nr.close(ctx)
		}
		nr.log.Warn("the provider failed the batch part; its lines run in the gateway at the live price",
			zap.String("provider_batch_id", ref.ID), zap.String("message", st.Message))
		return nr.toGateway(st.Message)
	}
	return nr.collect(ctx, api, ref, st)
}

// collect writes the provider batch's results into the part's
// checkpoints, and an error line for each request it has none for, then
// settles them and marks the part done.
func (nr *nativeRun) collect(ctx context.Context, api NativeAPI, ref NativeRef, st NativeStatus) error {
	customIDs, err := nr.customIDs(ctx)
	if err != nil {
		return err
	}
	pr := nr.pr
	var pending []settle
	// Results are settled before the checkpoint that stores them: a crash
	// between the two collects them again and repeats the settlements
	// (which the accounting counts once per line), where the other order
	// would find them stored and never settle them.
	flush := func() error {
		nr.settle(ctx, pending)
		pending = pending[:0]
		if err := nativeHook("flushing"); err != nil {
			return err
		}
		return pr.checkpoint()
	}
	missingCode, missingMsg := nr.unfinished(st.State)
	size := 0
	err = api.Results(ctx, ref, st, func(res NativeResult) error {
		j, err := strconv.Atoi(res.Key)
		if err != nil || j < 0 || j >= nr.ps.N || pr.done[j] {
			return nil //nolint:nilerr // not a request of the part, or one it has: the first result wins
		}
		idx := nr.ps.Start + j
		var line []byte
		if res.Status != 0 {
			line = responseLine(nr.rec.ID, idx, customIDs[j], Response{Status: res.Status, RequestID: res.RequestID, Body: res.Body})
		} else {
			code, msg := res.Code, res.Message
			if code == "" || nr.n.CancelSent {
				code, msg = missingCode, missingMsg
			}
			line = errorLine(nr.rec.ID, idx, customIDs[j], code, msg)
		}
		pr.add(result{index: idx, ok: res.Status >= 200 && res.Status < 300, line: line})
		pending = append(pending, settle{idx: idx, customID: customIDs[j], status: res.Status, body: res.Body})
		size += len(line)
		if size >= ChunkSize/2 {
			size = 0
			return flush()
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("reading the provider batch's results: %w", err)
	}
	for j := range nr.ps.N {
		if !pr.done[j] {
			idx := nr.ps.Start + j
			pr.add(result{index: idx, line: errorLine(nr.rec.ID, idx, customIDs[j], missingCode, missingMsg)})
		}
	}
	if err := flush(); err != nil {
		return err
	}
	if err := nativeHook("collected"); err != nil {
		return err
	}
	nr.log.Info("native batch part collected", zap.String("provider_batch_id", ref.ID), zap.String("state", st.State))
	return nr.finishPart()
}

// unfinished is the error of a request an ended provider batch has no
// answer for. A provider batch the gateway cancelled because its batch was
// cancelled or expired leaves its unfinished requests to end as the batch
// does (batch_cancelled, batch_expired, key_revoked), whatever the
// provider calls them: an expired batch's provider batch ends cancelled.
func (nr *nativeRun) unfinished(state string) (code, msg string) {
	if nr.n.CancelSent && (state == NativeCancelled || state == NativeExpired) {
		return unfinishedError(nr.rec, nr.stopStatus())
	}
	return missingResult(state)
}

// stopStatus is the status the batch ends with now that it stops, as the
// runner decides it: cancelled when a cancel was asked, else expired once
// its window has ended.
func (nr *nativeRun) stopStatus() string {
	if _, _, asked := nr.r.store.cancelAsked(nr.r.ctx, nr.rec); asked || nr.rec.Status == StatusCancelling {
		return StatusCancelled
	}
	if d, ok := nr.rec.deadline(); ok && !nr.r.store.now().Before(d) {
		return StatusExpired
	}
	return StatusCancelled
}

// missingResult is the error of a request an ended provider batch has no
// result for.
func missingResult(state string) (code, msg string) {
	switch state {
	case NativeCancelled:
		return "batch_cancelled", "This request was not executed because the batch was cancelled."
	case NativeExpired:
		return "batch_expired", "This request could not be executed before the completion window expired."
	}
	return "result_missing", "The provider's batch ended without a result for this request."
}

// settle is one result to tell the accounting of.
type settle struct {
	idx      int
	customID string
	status   int
	body     []byte
}

// settle tells the accounting of results now stored.
func (nr *nativeRun) settle(ctx context.Context, results []settle) {
	acc := nr.lv.Accounting
	if acc == nil {
		return
	}
	res := nr.reservation(nil, 0)
	for _, s := range results {
		var custom string
		_ = gjsonUnquote(s.customID, &custom)
		acc.Settle(ctx, Settlement{Reservation: res, LineID: requestID(nr.rec.ID, s.idx), CustomID: custom, Status: s.status, Body: s.body})
	}
}

// gjsonUnquote reads the JSON string raw into s.
func gjsonUnquote(raw string, s *string) error {
	v := gjson.Parse(raw)
	if v.Type != gjson.String {
		return errors.New("not a string")
	}
	*s = v.Str
	return nil
}

// customIDs returns the raw custom_id of every line of the part.
func (nr *nativeRun) customIDs(ctx context.Context) ([]string, error) {
	ids := make([]string, nr.ps.N)
	err := nr.r.store.eachInputLine(ctx, nr.pr.dir, nr.i, nr.ps, func(j int, line []byte) error {
		ids[j] = gjson.GetBytes(line, "custom_id").Raw
		return nil
	})
	return ids, err
}

// prepare reads the part's lines once: it encodes each that has no
// result yet, writes an error line for one that cannot be encoded (the
// configuration changed since validation), and returns the submission of
// the others with their estimated cost.
func (nr *nativeRun) prepare(ctx context.Context, api NativeAPI) (*NativeSubmission, int64, error) {
	rec, ps := nr.rec, nr.ps
	sub := &NativeSubmission{Marker: nr.n.Marker, Endpoint: rec.Endpoint, Model: ps.Model}
	nr.skip = make([]bool, ps.N)
	var estimate int64
	err := nr.r.store.eachInputLine(ctx, nr.pr.dir, nr.i, ps, func(j int, line []byte) error {
		if nr.pr.done[j] {
			nr.skip[j] = true
			return nil
		}
		f := gjson.GetManyBytes(line, "custom_id", "body")
		body := []byte(f[1].Raw)
		record, err := api.Encode(rec.Endpoint, strconv.Itoa(j), body, ps.Model)
		if err != nil {
			nr.skip[j] = true
			e := Response{Status: http.StatusBadRequest, Body: errorBody(err.Error())}
			nr.pr.add(result{index: ps.Start + j, line: responseLine(rec.ID, ps.Start+j, f[0].Raw, e)})
			return nil
		}
		sub.Count++
		sub.Bytes += int64(len(record) + 1)
		if acc := nr.lv.Accounting; acc != nil {
			estimate += acc.Estimate(rec.Endpoint, ps.Provider, ps.Model, body)
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	if err := nr.pr.checkpoint(); err != nil {
		return nil, 0, err
	}
	sub.Records = func() io.ReadCloser { return nr.records(ctx, api) }
	return sub, estimate, nil
}

// errorBody is an error in OpenAI's shape.
func errorBody(msg string) []byte {
	b := []byte(`{"error":{"message":`)
	b = appendJSONString(b, msg)
	return append(b, `,"type":"invalid_request_error","param":null,"code":null}}`...)
}

// records streams the submission's records: the part's lines not
// skipped, encoded again, one chunk of input at a time.
func (nr *nativeRun) records(ctx context.Context, api NativeAPI) io.ReadCloser {
	pr, pw := io.Pipe()
	go func() {
		var buf []byte
		err := nr.r.store.eachInputLine(ctx, nr.pr.dir, nr.i, nr.ps, func(j int, line []byte) error {
			if nr.skip[j] {
				return nil
			}
			record, err := api.Encode(nr.rec.Endpoint, strconv.Itoa(j), []byte(gjson.GetBytes(line, "body").Raw), nr.ps.Model)
			if err != nil {
				return fmt.Errorf("request %d of the part no longer encodes: %w", j, err)
			}
			buf = append(append(buf, record...), '\n')
			if len(buf) >= 64<<10 {
				if _, err := pw.Write(buf); err != nil {
					return err
				}
				buf = buf[:0]
			}
			return nil
		})
		if err == nil && len(buf) > 0 {
			_, err = pw.Write(buf)
		}
		pw.CloseWithError(err)
	}()
	return pr
}

// reservation is the part's reservation (sub, when known, gives its size).
func (nr *nativeRun) reservation(sub *NativeSubmission, amount int64) Reservation {
	r := Reservation{ID: nr.n.Marker, BatchID: nr.rec.ID, Owner: nr.rec.Owner, KeyID: nr.rec.KeyID, KeyName: nr.rec.KeyName,
		Endpoint: nr.rec.Endpoint, Provider: nr.ps.Provider, Model: nr.ps.Model, Amount: amount}
	if sub != nil {
		r.Requests = sub.Count
	}
	return r
}

// refuse ends every line without a result with the accounting's refusal
// (a spent budget): the part is not sent.
func (nr *nativeRun) refuse(resp Response) error {
	ps := nr.ps
	err := nr.r.store.eachInputLine(nr.r.ctx, nr.pr.dir, nr.i, ps, func(j int, line []byte) error {
		if !nr.pr.done[j] {
			idx := ps.Start + j
			nr.pr.add(result{index: idx, line: responseLine(nr.rec.ID, idx, gjson.GetBytes(line, "custom_id").Raw, resp)})
		}
		return nil
	})
	if err == nil {
		err = nr.pr.checkpoint()
	}
	if err != nil {
		return err
	}
	nr.log.Warn("a native batch part was refused before it was sent", zap.Int("status", resp.Status))
	return nr.finishPart()
}

// finishPart marks the part done and closed, and releases its
// reservation.
func (nr *nativeRun) finishPart() error {
	if err := nr.store(nr.r.ctx, func(n *nativeState) { n.Closed = true }); err != nil {
		return err
	}
	nr.release()
	return nil
}

// close marks the part closed: nothing more comes from its provider.
// Its lines without results end as the batch does.
func (nr *nativeRun) close(ctx context.Context) error {
	err := nr.store(ctx, func(n *nativeState) { n.Closed = true })
	nr.release()
	return err
}

// giveUp closes the part without the provider's results, saying why.
func (nr *nativeRun) giveUp(why string) error {
	nr.log.Error("a native batch part is given up; its unfinished lines end without results", zap.String("why", why))
	return nr.close(nr.r.ctx)
}

// toGateway hands the part to the gateway: its lines without results run
// as live requests (at the live price).
func (nr *nativeRun) toGateway(why string) error {
	nr.log.Warn("a native batch part runs in the gateway", zap.String("why", why))
	nr.gateway = true
	_, err := nr.r.store.updateClaims(nr.r.ctx, nr.rec, max(lockWait, nr.lv.Settings.Lease), func(c *claims) bool {
		p := &c.Parts[nr.i]
		if p.Holder != nr.r.me || p.Native == nil {
			return false
		}
		p.Native = nil
		return true
	})
	nr.release()
	return err
}

// release gives back what is left of the part's reservation.
func (nr *nativeRun) release() {
	if acc := nr.lv.Accounting; acc != nil && nr.n.Reserved {
		acc.Release(nr.r.ctx, nr.reservation(nil, 0))
		nr.n.Reserved = false
	}
}

// store changes the part's provider state under the batch's lock, if this
// runner still holds the part (else errClaimLost).
func (nr *nativeRun) store(ctx context.Context, f func(n *nativeState)) error {
	lost := false
	ok, err := nr.r.store.updateClaims(context.WithoutCancel(ctx), nr.rec, max(lockWait, nr.lv.Settings.Lease), func(c *claims) bool {
		p := &c.Parts[nr.i]
		if p.Holder != nr.r.me || p.Native == nil {
			lost = true
			return false
		}
		f(p.Native)
		nr.n = *p.Native
		if nr.n.Closed {
			p.Done = nr.pr.nDone == nr.ps.N
		}
		return true
	})
	switch {
	case err != nil:
		return err
	case lost:
		nr.act.cancel()
		return errClaimLost
	case !ok:
		return errors.New("the batch's lock was busy")
	}
	return nil
}

// sleep waits d, or less when the part is told to stop (the first time).
func (nr *nativeRun) sleep(ctx context.Context, d time.Duration) error {
	stop := nr.act.stop
	if !nr.stopAt.IsZero() {
		stop = nil // seen already
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
	case <-stop:
	}
	return nil
}

// rebase makes the results the part has now the base its provider's
// progress counts add to.
func (nr *nativeRun) rebase() {
	nr.okBase, nr.badBase = nr.act.ok.Load(), nr.act.bad.Load()
}

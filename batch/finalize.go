package batch

import (
	"bytes"
	"context"
	"fmt"
	"path"
	"slices"
	"strconv"
	"time"

	"github.com/modelgate/modelgate/internal/ids"
	"github.com/modelgate/modelgate/internal/storage"
	"github.com/tidwall/gjson"
	"go.uber.org/zap"
)

// readCheckpoints calls f for every result record in part i's checkpoints.
// A record that is not whole (a torn write) is skipped: its request runs
// again.
func (s *Store) readCheckpoints(ctx context.Context, dir string, i int, f func(idx int, ok bool, line []byte)) error {
	prefix := path.Join(dir, "results", fmt.Sprintf("%06d", i))
	names, err := listIn(ctx, s.files, prefix)
	if err != nil {
		return err
	}
	for _, name := range names {
		b, err := s.files.Load(ctx, path.Join(prefix, name))
		if storage.IsNotExist(err) {
			continue
		}
		if err != nil {
			return err
		}
		for len(b) > 0 {
			rec, rest, whole := bytes.Cut(b, []byte{'\n'})
			b = rest
			if !whole {
				break
			}
			num, tail, _ := bytes.Cut(rec, []byte{' '})
			kind, line, _ := bytes.Cut(tail, []byte{' '})
			idx, err := strconv.Atoi(string(num))
			if err != nil || len(kind) != 1 || (kind[0] != 'o' && kind[0] != 'e') || len(line) == 0 {
				continue
			}
			f(idx, kind[0] == 'o', line)
		}
	}
	return nil
}

// finish ends rec as status (completed, cancelled or expired) once no
// runner works on it any more: it writes the output and error files from
// the checkpoints, one line per request (the first result of a request
// wins, should two runners have finished it), adds an error line for each
// request that never ran when the batch was cancelled or expired, and
// records the counts, the usage and the files. It runs under the batch's
// lock and is safe to repeat after a crash: the file IDs are chosen once.
func (r *Runner) finish(lv Live, rec *batchRecord, status string) error {
	if r.runningBatch(rec.ID) {
		return nil // our parts are stopping; the next poll finishes
	}
	ctx := r.ctx
	_, err := r.store.withLock(ctx, rec.ID, lockWait, func() error {
		rec, err := r.store.batchRecord(ctx, rec.Owner, rec.ID)
		if err != nil || rec.terminal() {
			return err
		}
		now := r.store.now()
		var c *claims
		// Validation stores the claims before it sets in_progress_at. A
		// batch cancelled before it was validated has neither, even when
		// a finish that stopped halfway stored it as cancelling.
		if rec.InProgressAt != nil {
			if c, err = r.store.loadClaims(ctx, rec); err != nil {
				return err
			}
			for i := range c.Parts {
				if !c.Parts[i].Done && c.Parts[i].leasedByOther(r.me, now) {
					return nil // another instance still works on it
				}
				if c.Parts[i].windingDown() {
					return nil // a provider batch is still to be cancelled and collected
				}
			}
			if status == StatusCompleted && !c.allDone() {
				return nil
			}
		} else {
			c = &claims{}
		}

		unix := now.Unix()
		switch status {
		case StatusCompleted:
			if rec.FinalizingAt == nil {
				rec.Status, rec.FinalizingAt = StatusFinalizing, &unix
			}
		case StatusCancelled:
			at, reason, ok := r.store.cancelAsked(ctx, rec)
			if rec.CancellingAt == nil {
				if !ok {
					at = unix
				}
				rec.Status, rec.CancellingAt = StatusCancelling, &at
			}
			if reason == CancelKeyRevoked && rec.Errors == nil {
				rec.Errors = &Errors{Object: "list", Data: []ErrorEntry{{Code: CancelKeyRevoked, Message: revokedMessage(rec)}}}
			}
		}
		if rec.OutputFileID == nil {
			rec.OutputFileID, rec.ErrorFileID = ptr(ids.New("file-", now)), ptr(ids.New("file-", now))
		}
		if err := r.store.storeJSON(ctx, path.Join(r.store.batchDir(rec.Owner, rec.ID), "batch.json"), rec); err != nil {
			return err
		}
		return r.writeResults(ctx, lv, rec, c, status)
	})
	return err
}

func (r *Runner) writeResults(ctx context.Context, lv Live, rec *batchRecord, c *claims, status string) error {
	s := r.store
	dir := s.batchDir(rec.Owner, rec.ID)
	out := s.newChunkWriter(ctx, s.fileDir(rec.Owner, *rec.OutputFileID))
	errs := s.newChunkWriter(ctx, s.fileDir(rec.Owner, *rec.ErrorFileID))
	var (
		counts RequestCounts
		usage  Usage
	)
	for i, ps := range c.Parts {
		seen := make([]bool, ps.N)
		err := s.readCheckpoints(ctx, dir, i, func(idx int, ok bool, line []byte) {
			j := idx - ps.Start
			if j < 0 || j >= ps.N || seen[j] {
				return
			}
			seen[j] = true
			w := errs
			if ok {
				w, counts.Completed = out, counts.Completed+1
				usage.add(lineUsage(line))
			} else {
				counts.Failed++
			}
			_, _ = w.Write(line)
			_, _ = w.Write([]byte{'\n'})
		})
		if err != nil {
			return err
		}
		if status == StatusCompleted {
			continue
		}
		code, msg := unfinishedError(rec, status)
		if !slices.Contains(seen, false) {
			continue
		}
		err = s.eachInputLine(ctx, dir, i, ps, func(j int, line []byte) error {
			if seen[j] {
				return nil
			}
			customID := gjson.GetBytes(line, "custom_id").Raw
			_, _ = errs.Write(errorLine(rec.ID, ps.Start+j, customID, code, msg))
			_, _ = errs.Write([]byte{'\n'})
			counts.Failed++
			return nil
		})
		if err != nil {
			return err
		}
	}
	if err := out.Close(); err != nil {
		return err
	}
	if err := errs.Close(); err != nil {
		return err
	}

	now := s.now()
	unix := now.Unix()
	ttl := shortest(time.Duration(rec.OutputExpiresAfter)*time.Second, lv.Settings.OutputRetention)
	var stored int64
	for _, f := range []struct {
		id **string
		w  *chunkWriter
	}{{&rec.OutputFileID, out}, {&rec.ErrorFileID, errs}} {
		if f.w.n == 0 {
			_ = s.files.Delete(ctx, s.fileDir(rec.Owner, **f.id))
			*f.id = nil
			continue
		}
		name := "batch_" + rec.ID + "_output.jsonl"
		if f.w == errs {
			name = "batch_" + rec.ID + "_error.jsonl"
		}
		meta := fileRecord{File: File{ID: **f.id, Object: "file", Bytes: f.w.n, CreatedAt: unix,
			Filename: name, Purpose: PurposeBatchOutput, Status: "processed"}, Owner: rec.Owner, Chunks: f.w.chunks}
		if ttl > 0 {
			meta.ExpiresAt = ptr(unix + seconds(ttl))
		}
		if err := s.storeJSON(ctx, path.Join(s.fileDir(rec.Owner, meta.ID), "meta.json"), meta); err != nil {
			return err
		}
		stored += f.w.n
	}
	if lv.Stored != nil && stored > 0 {
		lv.Stored(ctx, rec.Owner, stored)
	}

	counts.Total = rec.RequestCounts.Total
	rec.RequestCounts = counts
	if rec.Endpoint != EndpointRerank && rec.InProgressAt != nil {
		rec.Usage = &usage
	}
	rec.Status = status
	switch status {
	case StatusCompleted:
		rec.CompletedAt = &unix
	case StatusCancelled:
		rec.CancelledAt = &unix
	case StatusExpired:
		rec.ExpiredAt = &unix
	}
	if err := s.storeJSON(ctx, path.Join(dir, "batch.json"), rec); err != nil {
		return err
	}
	lv.Logger.Info("batch finished", zap.String("batch_id", rec.ID), zap.String("status", status),
		zap.Int("completed", counts.Completed), zap.Int("failed", counts.Failed))
	lv.finished(rec)

	s.cleanUp(ctx, rec)
	return nil
}

// unfinishedError is the code and message of the error a request of rec
// that never ran ends with, when rec ends as status (cancelled or
// expired). A batch cancelled because its key was revoked says so, as its
// errors do (finish set them before).
func unfinishedError(rec *batchRecord, status string) (code, msg string) {
	switch {
	case status == StatusExpired:
		return "batch_expired", "This request could not be executed before the completion window expired."
	case rec.Errors != nil && len(rec.Errors.Data) > 0 && rec.Errors.Data[0].Code == CancelKeyRevoked:
		return CancelKeyRevoked, "This request was not executed: " + revokedMessage(rec)
	}
	return "batch_cancelled", "This request was not executed because the batch was cancelled."
}

// revokedMessage says that the key that created rec was revoked, naming
// it (its name and id, never its secret).
func revokedMessage(rec *batchRecord) string {
	key := "the API key that created the batch"
	switch {
	case rec.KeyName != "" && rec.KeyID != "":
		key = fmt.Sprintf("the API key %q (%s) that created the batch", rec.KeyName, rec.KeyID)
	case rec.KeyName != "":
		key = fmt.Sprintf("the API key %q that created the batch", rec.KeyName)
	}
	return key + " was revoked, so the batch was cancelled."
}

// cleanUp removes what a finished batch no longer needs: its work parts and
// checkpoints are in the result files now. It runs after the terminal status
// is stored, and again when a runner meets a finished batch still marked
// active (an instance that stopped in between).
func (s *Store) cleanUp(ctx context.Context, rec *batchRecord) {
	dir := s.batchDir(rec.Owner, rec.ID)
	for _, k := range []string{"input", "results"} {
		_ = s.files.Delete(ctx, path.Join(dir, k))
	}
	for _, k := range []string{"claims.json", "cancel"} {
		_ = s.storage.Delete(ctx, path.Join(dir, k))
	}
	_ = s.storage.Delete(ctx, s.activeKey(rec.ID))
}

// lineUsage reads the usage of a chat answer in an output line.
func lineUsage(line []byte) Usage {
	u := gjson.GetBytes(line, "response.body.usage")
	if !u.Exists() {
		return Usage{}
	}
	f := gjson.GetMany(u.Raw, "prompt_tokens", "completion_tokens", "total_tokens",
		"prompt_tokens_details.cached_tokens", "completion_tokens_details.reasoning_tokens")
	return Usage{
		InputTokens:         f[0].Int(),
		InputTokensDetails:  CachedTokens{CachedTokens: f[3].Int()},
		OutputTokens:        f[1].Int(),
		OutputTokensDetails: ReasonTokens{ReasoningTokens: f[4].Int()},
		TotalTokens:         f[2].Int(),
	}
}

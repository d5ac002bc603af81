package usage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/modelgate/modelgate/internal/ids"
	"github.com/modelgate/modelgate/internal/storage"
	"github.com/modelgate/modelgate/pricing"
)

// Options configure a Recorder.
type Options struct {
	// Instance names this instance's records. It must stay the same
	// across restarts of the instance (so that a restart continues its
	// totals) and differ between instances that run at the same time
	// (two instances with one name are still counted right, but contend
	// for one record). Letters, digits, '.', '_' and '-'; at most 128.
	Instance string

	// Prefix is the storage folder of the records. Default:
	// "modelgate/usage".
	Prefix string

	// FlushInterval is how often the totals are written to the storage,
	// and so the most usage a crash can lose. Default: 10s.
	FlushInterval time.Duration

	// SpentCache is how long Spent may reuse the records it read (its
	// own instance's additions are always current). Default: 10s.
	SpentCache time.Duration

	// Logger receives flush failures and unreadable records. Default:
	// none.
	Logger *zap.Logger
}

// Recorder counts usage in memory and flushes it to a storage. It is safe
// for concurrent use.
type Recorder struct {
	st    storage.Storage
	opt   Options
	log   *zap.Logger
	now   func() time.Time
	begun bool

	mu      sync.Mutex
	pending map[Bucket]*Counts // counted since the last flush

	// flushMu orders flushes with the readers of the instance's own
	// records: a reader holding it sees each count either in a record or
	// in pending, never in both or neither. It guards the fields below.
	flushMu sync.Mutex
	id      string // this recorder's mark in the records it writes
	seq     int64  // the last batch written
	doubt   map[Day]*batch
	gen     int64 // records written; Spent's snapshots older are stale
	cache   map[spentRange]*spentSnapshot

	stop chan struct{}
	done chan struct{}
}

// New returns a Recorder on st. Start starts its periodic flushes.
func New(st storage.Storage, opt Options) (*Recorder, error) {
	if st == nil {
		return nil, errors.New("usage: no storage")
	}
	if err := checkInstance(opt.Instance); err != nil {
		return nil, err
	}
	if opt.Prefix == "" {
		opt.Prefix = "modelgate/usage"
	}
	opt.Prefix = strings.Trim(opt.Prefix, "/")
	if opt.FlushInterval <= 0 {
		opt.FlushInterval = 10 * time.Second
	}
	if opt.SpentCache <= 0 {
		opt.SpentCache = 10 * time.Second
	}
	log := opt.Logger
	if log == nil {
		log = zap.NewNop()
	}
	return &Recorder{st: st, opt: opt, log: log, now: time.Now, id: ids.New("rec_", time.Now()),
		pending: make(map[Bucket]*Counts), doubt: make(map[Day]*batch), cache: make(map[spentRange]*spentSnapshot)}, nil
}

func checkInstance(id string) error {
	if id == "" || len(id) > 128 || id[0] == '.' {
		return fmt.Errorf("usage: instance id %q: give 1 to 128 letters, digits, '.', '_' or '-', not starting with '.'", id)
	}
	for _, c := range []byte(id) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("usage: instance id %q: give 1 to 128 letters, digits, '.', '_' or '-', not starting with '.'", id)
		}
	}
	return nil
}

// Instance returns the instance id of the recorder's records.
func (r *Recorder) Instance() string { return r.opt.Instance }

// Start flushes every FlushInterval until Stop. Calling it again does
// nothing.
func (r *Recorder) Start() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.begun {
		return
	}
	r.begun = true
	r.stop, r.done = make(chan struct{}), make(chan struct{})
	go r.loop(r.stop, r.done)
}

func (r *Recorder) loop(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(r.opt.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), max(r.opt.FlushInterval, 30*time.Second))
			if err := r.Flush(ctx); err != nil {
				r.log.Error("usage not written to the storage; kept in memory for the next flush", zap.Error(err))
			}
			cancel()
		}
	}
}

// Stop ends the periodic flushes and flushes what is left. Usage added
// after Stop is kept until a Flush.
func (r *Recorder) Stop(ctx context.Context) error {
	r.mu.Lock()
	stop, done := r.stop, r.done
	r.stop = nil
	r.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
	return r.Flush(ctx)
}

// Add counts c in bucket b. It does no I/O, and in the steady state (a
// bucket counted in the previous flush interval too) it allocates nothing.
func (r *Recorder) Add(b Bucket, c Counts) {
	r.mu.Lock()
	p := r.pending[b]
	if p == nil {
		p = new(Counts)
		r.pending[b] = p
	}
	p.Add(c)
	r.mu.Unlock()
}

// take moves what was counted since the last flush out of pending, by
// day. Entries left zero since the previous take are dropped; the others
// are zeroed and kept, so that a busy bucket is not allocated again.
func (r *Recorder) take() map[Day][]record {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[Day][]record)
	for b, c := range r.pending {
		if *c == (Counts{}) {
			delete(r.pending, b)
			continue
		}
		out[b.Day] = append(out[b.Day], record{b, *c})
		*c = Counts{}
	}
	return out
}

// giveBack returns counts to pending after a failed flush.
func (r *Recorder) giveBack(recs []record) {
	for _, rec := range recs {
		r.Add(rec.b, rec.c)
	}
}

type record struct {
	b Bucket
	c Counts
}

// batch is what one flush adds to the record of one day, marked with a
// sequence number: a record keeps the last number each recorder wrote to
// it, so that a batch written again after a write that failed (but may
// have happened: a timeout after the storage took it) is added once.
type batch struct {
	seq  int64
	recs []record
}

// Flush writes what was counted since the last flush to the instance's
// records. What it could not write stays counted in memory for the next
// flush: a batch whose write failed is written again, as it is, before
// anything newer of its day.
func (r *Recorder) Flush(ctx context.Context) error {
	r.flushMu.Lock()
	defer r.flushMu.Unlock()
	var errs []error
	for day, b := range r.doubt {
		if err := r.flushDay(ctx, day, b); err != nil {
			errs = append(errs, fmt.Errorf("usage of %s: %w", day, err))
			continue
		}
		delete(r.doubt, day)
		r.gen++
	}
	for day, recs := range r.take() {
		if r.doubt[day] != nil {
			r.giveBack(recs) // after the batch in doubt
			continue
		}
		r.seq++
		b := &batch{seq: r.seq, recs: recs}
		if err := r.flushDay(ctx, day, b); err != nil {
			r.doubt[day] = b
			errs = append(errs, fmt.Errorf("usage of %s: %w", day, err))
			continue
		}
		r.gen++
	}
	return errors.Join(errs...)
}

func (r *Recorder) recordKey(day Day, instance string) string {
	return path.Join(r.opt.Prefix, day.String(), instance+".json")
}

func (r *Recorder) flushDay(ctx context.Context, day Day, b *batch) error {
	key := r.recordKey(day, r.opt.Instance)
	unlock, err := storage.Lock(ctx, r.st, "modelgate_usage_"+day.String()+"_"+r.opt.Instance)
	if err != nil {
		return err
	}
	defer unlock()
	totals := make(map[Bucket]*Counts, len(b.recs))
	applied := make(map[string]mark)
	data, err := r.st.Load(ctx, key)
	switch {
	case storage.IsNotExist(err):
	case err != nil:
		return err
	default:
		if err := decodeRecord(data, day, totals, applied); err != nil {
			// Keep the unreadable record for a person to look at, out
			// of the way; queries report it. Its counts are lost to the
			// totals from here on.
			aside := key + ".corrupt-" + strconv.FormatInt(r.now().Unix(), 10)
			if err := r.st.Store(ctx, aside, data); err != nil {
				return fmt.Errorf("record %s is unreadable and could not be set aside: %w", key, err)
			}
			r.log.Error("unreadable usage record set aside; its counts are missing from the totals",
				zap.String("record", key), zap.String("set_aside_as", aside), zap.Error(err))
			clear(totals)
			clear(applied)
		}
	}
	if applied[r.id].Seq >= b.seq {
		return nil // written before, by a write that reported a failure
	}
	for _, rec := range b.recs {
		t := totals[rec.b]
		if t == nil {
			t = new(Counts)
			totals[rec.b] = t
		}
		t.Add(rec.c)
	}
	now := r.now().UTC()
	applied[r.id] = mark{Seq: b.seq, At: now}
	for id, m := range applied {
		if now.Sub(m.At) > markLife {
			delete(applied, id)
		}
	}
	out, err := encodeRecord(r.opt.Instance, day, totals, applied)
	if err != nil {
		return err
	}
	return r.st.Store(ctx, key, out)
}

// markLife is how long a record keeps the mark of a recorder that stopped
// writing to it: a batch retried later than that after a failed write
// that did happen would be counted twice.
const markLife = 7 * 24 * time.Hour

// mark is the last batch a recorder wrote to a record.
type mark struct {
	Seq int64     `json:"seq"`
	At  time.Time `json:"at"`
}

// fileRecord is the JSON of a record: an instance's totals of one day.
type fileRecord struct {
	Version  int             `json:"version"`
	Instance string          `json:"instance"`
	Day      string          `json:"day"`
	Buckets  []fileBucket    `json:"buckets"`
	Applied  map[string]mark `json:"applied,omitempty"`
}

type fileBucket struct {
	KeyID            string `json:"key_id,omitempty"`
	KeyName          string `json:"key_name,omitempty"`
	Owner            string `json:"owner,omitempty"`
	Model            string `json:"model,omitempty"`
	Provider         string `json:"provider,omitempty"`
	ProviderType     string `json:"provider_type,omitempty"`
	Requests         int64  `json:"requests,omitempty"`
	InputTokens      int64  `json:"input_tokens,omitempty"`
	CachedTokens     int64  `json:"cached_tokens,omitempty"`
	CacheWriteTokens int64  `json:"cache_write_tokens,omitempty"`
	OutputTokens     int64  `json:"output_tokens,omitempty"`
	ReasoningTokens  int64  `json:"reasoning_tokens,omitempty"`
	Searches         int64  `json:"rerank_searches,omitempty"`
	EmbeddingTokens  int64  `json:"embedding_tokens,omitempty"`
	CacheHits        int64  `json:"cache_hits,omitempty"`
	CostNanos        int64  `json:"cost_nanodollars,omitempty"`
	Unpriced         int64  `json:"unpriced_requests,omitempty"`
}

const recordVersion = 1

func encodeRecord(instance string, day Day, totals map[Bucket]*Counts, applied map[string]mark) ([]byte, error) {
	f := fileRecord{Version: recordVersion, Instance: instance, Day: day.String(), Buckets: make([]fileBucket, 0, len(totals)),
		Applied: applied}
	for b, c := range totals {
		f.Buckets = append(f.Buckets, fileBucket{KeyID: b.KeyID, KeyName: b.KeyName, Owner: b.Owner, Model: b.Model,
			Provider: b.Provider, ProviderType: b.ProviderType, Requests: c.Requests, InputTokens: c.InputTokens,
			CachedTokens: c.CachedTokens, CacheWriteTokens: c.CacheWriteTokens, OutputTokens: c.OutputTokens,
			ReasoningTokens: c.ReasoningTokens, Searches: c.Searches, EmbeddingTokens: c.EmbeddingTokens,
			CacheHits: c.CacheHits, CostNanos: int64(c.Cost), Unpriced: c.Unpriced})
	}
	sortBuckets(f.Buckets)
	return json.MarshalIndent(f, "", "\t")
}

// decodeRecord adds the buckets of a record of day to into, and its
// recorders' marks to applied (when not nil).
func decodeRecord(data []byte, day Day, into map[Bucket]*Counts, applied map[string]mark) error {
	var f fileRecord
	if err := json.Unmarshal(data, &f); err != nil {
		return err
	}
	if f.Version != recordVersion {
		return fmt.Errorf("record version %d, want %d", f.Version, recordVersion)
	}
	if f.Day != day.String() {
		return fmt.Errorf("record of day %q found under %s", f.Day, day)
	}
	if applied != nil {
		maps.Copy(applied, f.Applied)
	}
	for _, fb := range f.Buckets {
		b := Bucket{KeyID: fb.KeyID, KeyName: fb.KeyName, Owner: fb.Owner, Model: fb.Model,
			Provider: fb.Provider, ProviderType: fb.ProviderType, Day: day}
		c := into[b]
		if c == nil {
			c = new(Counts)
			into[b] = c
		}
		c.Add(Counts{Requests: fb.Requests, InputTokens: fb.InputTokens, CachedTokens: fb.CachedTokens,
			CacheWriteTokens: fb.CacheWriteTokens, OutputTokens: fb.OutputTokens, ReasoningTokens: fb.ReasoningTokens,
			Searches: fb.Searches, EmbeddingTokens: fb.EmbeddingTokens, CacheHits: fb.CacheHits, Cost: pricing.Money(fb.CostNanos),
			Unpriced: fb.Unpriced})
	}
	return nil
}

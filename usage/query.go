package usage

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"path"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/modelgate/modelgate/internal/storage"
	"github.com/modelgate/modelgate/pricing"
)

// Query selects usage to sum.
type Query struct {
	// From and To bound the days summed: every UTC day that overlaps
	// [From, To). A zero From has no lower bound, a zero To no upper one.
	From, To time.Time
	// By are the dimensions rows are grouped by; none sums everything
	// into one row.
	By []Dimension
	// KeyID and Owner, when set, keep only that key's or owner's usage.
	KeyID, Owner string
	// KeepKey, when set, keeps only the usage of the key ids it accepts
	// (an account holder's view: its managed keys, or those it created).
	KeepKey func(keyID string) bool
}

// Row is the usage of one group.
type Row struct {
	// The values of the dimensions grouped by; the others are empty.
	// KeyName is the key's name on the last day of the range it was
	// used (a renamed key keeps one row). Day is set when grouped by
	// day.
	KeyID, KeyName         string
	Owner                  string
	Model                  string
	Provider, ProviderType string
	Day                    Day
	Counts
}

// Report is the answer to a Query.
type Report struct {
	// Rows, sorted by day, key, owner, model and provider.
	Rows []Row
	// Total sums every row.
	Total Counts
	// Unreadable names the records of the range that could not be read
	// (corrupt, or set aside as such): their usage is missing from the
	// report. Empty when the report is complete.
	Unreadable []string
}

const (
	minDay = Day(math.MinInt32)
	maxDay = Day(math.MaxInt32)
)

// days returns the inclusive range of days that overlap [from, to).
func days(from, to time.Time) (Day, Day) {
	lo, hi := minDay, maxDay
	if !from.IsZero() {
		lo = DayOf(from)
	}
	if !to.IsZero() {
		hi = DayOf(to.Add(-time.Nanosecond))
		if !to.After(from) && !from.IsZero() {
			hi = lo - 1 // empty
		}
	}
	return lo, hi
}

// Query sums every instance's usage (this instance's counted since the
// last flush included) over the days of q, grouped as q says.
func (r *Recorder) Query(ctx context.Context, q Query) (Report, error) {
	for _, d := range q.By {
		if _, err := ParseDimensions(string(d)); err != nil || d == "" {
			return Report{}, fmt.Errorf("cannot group usage by %q: use key, owner, model, provider or day", d)
		}
	}
	lo, hi := days(q.From, q.To)
	by := func(d Dimension) bool { return slices.Contains(q.By, d) }
	byKey, byOwner, byModel, byProvider, byDay := by(ByKey), by(ByOwner), by(ByModel), by(ByProvider), by(ByDay)
	type group struct {
		row     *Row
		nameDay Day
	}
	groups := make(map[Bucket]*group)
	add := func(b Bucket, c Counts) {
		if q.KeyID != "" && b.KeyID != q.KeyID || q.Owner != "" && b.Owner != q.Owner || q.KeepKey != nil && !q.KeepKey(b.KeyID) {
			return
		}
		var k Bucket
		if byKey {
			k.KeyID = b.KeyID
		}
		if byOwner {
			k.Owner = b.Owner
		}
		if byModel {
			k.Model = b.Model
		}
		if byProvider {
			k.Provider, k.ProviderType = b.Provider, b.ProviderType
		}
		if byDay {
			k.Day = b.Day
		}
		g := groups[k]
		if g == nil {
			g = &group{row: &Row{KeyID: k.KeyID, Owner: k.Owner, Model: k.Model, Provider: k.Provider,
				ProviderType: k.ProviderType, Day: k.Day}, nameDay: minDay}
			groups[k] = g
		}
		if byKey && (b.Day > g.nameDay || b.Day == g.nameDay && b.KeyName > g.row.KeyName) {
			g.row.KeyName, g.nameDay = b.KeyName, b.Day
		}
		g.row.Counts.Add(c)
	}
	r.flushMu.Lock()
	unreadable, err := r.scan(ctx, lo, hi, add)
	if err == nil {
		r.scanPending(lo, hi, add)
	}
	r.flushMu.Unlock()
	if err != nil {
		return Report{}, err
	}
	rep := Report{Rows: make([]Row, 0, len(groups)), Unreadable: unreadable}
	for _, g := range groups {
		rep.Rows = append(rep.Rows, *g.row)
		rep.Total.Add(g.row.Counts)
	}
	slices.SortFunc(rep.Rows, func(a, b Row) int {
		return cmp.Or(cmp.Compare(a.Day, b.Day), cmp.Compare(a.KeyID, b.KeyID), cmp.Compare(a.Owner, b.Owner),
			cmp.Compare(a.Model, b.Model), cmp.Compare(a.Provider, b.Provider), cmp.Compare(a.ProviderType, b.ProviderType))
	})
	return rep, nil
}

// scan calls fn with every bucket of every record of the days lo to hi
// (inclusive), and with the batches in doubt that their record does not
// hold, and returns the records it could not read. The caller holds
// flushMu.
func (r *Recorder) scan(ctx context.Context, lo, hi Day, fn func(Bucket, Counts)) ([]string, error) {
	dirs, err := r.list(ctx, r.opt.Prefix)
	if err != nil {
		return nil, err
	}
	var unreadable []string
	written := make(map[Day]int64) // the last batch of ours each of our records holds
	for _, dir := range dirs {
		day, err := ParseDay(path.Base(dir))
		if err != nil || day < lo || day > hi {
			continue
		}
		names, err := r.list(ctx, dir)
		if err != nil {
			return nil, err
		}
		for _, name := range names {
			base := path.Base(name)
			if strings.Contains(base, ".json.corrupt-") {
				unreadable = append(unreadable, name)
				continue
			}
			if !strings.HasSuffix(base, ".json") {
				continue
			}
			data, err := r.st.Load(ctx, name)
			if storage.IsNotExist(err) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("usage record %s: %w", name, err)
			}
			recs, applied := make(map[Bucket]*Counts), make(map[string]mark)
			if err := decodeRecord(data, day, recs, applied); err != nil {
				r.log.Error("unreadable usage record: its counts are missing", zap.String("record", name), zap.Error(err))
				unreadable = append(unreadable, name)
				continue
			}
			if base == r.opt.Instance+".json" {
				written[day] = applied[r.id].Seq
			}
			for b, c := range recs {
				fn(b, *c)
			}
		}
	}
	for day, b := range r.doubt {
		if day >= lo && day <= hi && written[day] < b.seq {
			for _, rec := range b.recs {
				fn(rec.b, rec.c)
			}
		}
	}
	return unreadable, nil
}

// scanPending calls fn with what was counted since the last flush on the
// days lo to hi. The caller holds flushMu.
func (r *Recorder) scanPending(lo, hi Day, fn func(Bucket, Counts)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for b, c := range r.pending {
		if b.Day >= lo && b.Day <= hi && *c != (Counts{}) {
			fn(b, *c)
		}
	}
}

// list lists a folder of the storage; a missing folder is empty.
func (r *Recorder) list(ctx context.Context, dir string) ([]string, error) {
	names, err := r.st.List(ctx, dir, false)
	if storage.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("usage records %s: %w", dir, err)
	}
	return names, nil
}

type spentRange struct {
	by     Dimension
	lo, hi Day
}

// spentSnapshot is the cost of every key (or owner …) over a range of
// days, as the records said at gen and at.
type spentSnapshot struct {
	gen  int64
	at   time.Time
	cost map[string]pricing.Money
}

// Spent returns the cost of the usage of one key, owner, model or provider
// (by names which; id is the key's id, the owner, the model or the
// provider's name) over the days that overlap [from, to), every instance's
// included: what a budget of that period has spent. This instance's usage
// is always current; the other instances' is as of their last flush,
// read at most SpentCache ago. Unreadable records are left out (and
// logged).
func (r *Recorder) Spent(ctx context.Context, by Dimension, id string, from, to time.Time) (pricing.Money, error) {
	field := bucketField(by)
	if field == nil {
		return 0, fmt.Errorf("usage: Spent by %q: use key, owner, model or provider", by)
	}
	lo, hi := days(from, to)
	rng := spentRange{by, lo, hi}
	r.flushMu.Lock()
	defer r.flushMu.Unlock()
	now := r.now()
	snap := r.cache[rng]
	if snap == nil || snap.gen != r.gen || now.Sub(snap.at) >= r.opt.SpentCache {
		snap = &spentSnapshot{gen: r.gen, at: now, cost: make(map[string]pricing.Money)}
		if _, err := r.scan(ctx, lo, hi, func(b Bucket, c Counts) { snap.cost[*field(&b)] += c.Cost }); err != nil {
			return 0, err
		}
		for k, s := range r.cache {
			if now.Sub(s.at) >= r.opt.SpentCache {
				delete(r.cache, k)
			}
		}
		r.cache[rng] = snap
	}
	spent := snap.cost[id]
	r.scanPending(lo, hi, func(b Bucket, c Counts) {
		if *field(&b) == id {
			spent += c.Cost
		}
	})
	return spent, nil
}

func bucketField(by Dimension) func(*Bucket) *string {
	switch by {
	case ByKey:
		return func(b *Bucket) *string { return &b.KeyID }
	case ByOwner:
		return func(b *Bucket) *string { return &b.Owner }
	case ByModel:
		return func(b *Bucket) *string { return &b.Model }
	case ByProvider:
		return func(b *Bucket) *string { return &b.Provider }
	}
	return nil
}

func sortBuckets(bs []fileBucket) {
	slices.SortFunc(bs, func(a, b fileBucket) int {
		return cmp.Or(cmp.Compare(a.KeyID, b.KeyID), cmp.Compare(a.Owner, b.Owner), cmp.Compare(a.Model, b.Model),
			cmp.Compare(a.Provider, b.Provider), cmp.Compare(a.ProviderType, b.ProviderType), cmp.Compare(a.KeyName, b.KeyName))
	})
}

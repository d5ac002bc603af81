package usage

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelgate/modelgate/internal/storage"
	"github.com/modelgate/modelgate/internal/storagetest"
	"github.com/modelgate/modelgate/pricing"
)

var (
	ctx = context.Background()
	d1  = DayOf(time.Date(2026, 7, 23, 12, 0, 0, 0, time.UTC))
	d2  = d1 + 1
	d3  = d1 + 2
)

func newRec(t testing.TB, st storage.Storage, instance string) *Recorder {
	t.Helper()
	r, err := New(st, Options{Instance: instance})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func query(t *testing.T, r *Recorder, q Query) Report {
	t.Helper()
	rep, err := r.Query(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func flush(t *testing.T, rs ...*Recorder) {
	t.Helper()
	for _, r := range rs {
		if err := r.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// one is the usage of one request: n input tokens, 2n output, n
// nano-dollars.
func one(n int64) Counts {
	return Counts{Requests: 1, InputTokens: n, OutputTokens: 2 * n, Cost: pricing.Money(n)}
}

func bucket(key, owner, model, provider string, day Day) Bucket {
	return Bucket{KeyID: key, KeyName: "name-" + key, Owner: owner, Model: model, Provider: provider, ProviderType: "openai", Day: day}
}

func TestDays(t *testing.T) {
	if d := DayOf(time.Unix(0, 0)); d != 0 {
		t.Fatalf("DayOf(epoch) = %d", d)
	}
	if d := DayOf(time.Unix(-1, 0)); d != -1 || d.String() != "1969-12-31" {
		t.Fatalf("DayOf(epoch-1s) = %d %s", d, d)
	}
	// A time in another zone is counted on its UTC day.
	tz := time.FixedZone("x", -5*3600)
	if d := DayOf(time.Date(2026, 7, 23, 22, 0, 0, 0, tz)); d.String() != "2026-07-24" {
		t.Fatalf("DayOf in UTC-5 = %s", d)
	}
	if d, err := ParseDay("2026-07-23"); err != nil || d != d1 || !d.Time().Equal(time.Date(2026, 7, 23, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("ParseDay = %v %v", d, err)
	}
	if _, err := ParseDay("2026-7-23"); err == nil {
		t.Fatal("ParseDay took a malformed day")
	}
	for _, tc := range []struct {
		from, to time.Time
		lo, hi   Day
	}{
		{d1.Time(), d3.Time(), d1, d2},                                 // To excluded at midnight
		{d1.Time().Add(time.Hour), d2.Time().Add(time.Second), d1, d2}, // days that overlap
		{time.Time{}, d2.Time(), minDay, d1},
		{d2.Time(), time.Time{}, d2, maxDay},
		{d2.Time(), d2.Time(), d2, d2 - 1}, // empty
	} {
		if lo, hi := days(tc.from, tc.to); lo != tc.lo || hi != tc.hi {
			t.Fatalf("days(%v, %v) = %v..%v, want %v..%v", tc.from, tc.to, lo, hi, tc.lo, tc.hi)
		}
	}
	if _, err := ParseDimensions("key, day"); err != nil {
		t.Fatal(err)
	}
	if _, err := ParseDimensions("key,colour"); err == nil {
		t.Fatal("ParseDimensions took colour")
	}
}

func TestInstanceIDs(t *testing.T) {
	st := storagetest.NewMemory()
	for _, id := range []string{"", ".hidden", "a/b", "a b", strings.Repeat("x", 129), "ü"} {
		if _, err := New(st, Options{Instance: id}); err == nil {
			t.Errorf("instance id %q accepted", id)
		}
	}
	for _, id := range []string{"gw-1", "host.example.com", "A_1"} {
		if _, err := New(st, Options{Instance: id}); err != nil {
			t.Errorf("instance id %q: %v", id, err)
		}
	}
}

// Usage is summed over instances and grouped by every dimension.
func TestQueryGroupings(t *testing.T) {
	st := storagetest.NewMemory()
	a, b := newRec(t, st, "a"), newRec(t, st, "b")
	a.Add(bucket("k1", "alice", "gpt-4o", "openai", d1), one(1))
	a.Add(bucket("k1", "alice", "gpt-4o", "openai", d1), one(1))
	a.Add(bucket("k1", "alice", "claude", "anthropic", d2), one(10))
	b.Add(bucket("k1", "alice", "gpt-4o", "openai", d2), one(100))
	b.Add(bucket("k2", "alice", "gpt-4o", "azure", d2), one(1000))
	b.Add(bucket("k3", "bob", "gpt-4o", "openai", d3), one(10000))
	b.Add(Bucket{KeyID: "k3", KeyName: "name-k3", Owner: "bob", Model: "mystery", Provider: "openai", ProviderType: "openai", Day: d3},
		Counts{Requests: 1, InputTokens: 5, Unpriced: 1})
	flush(t, a)
	// b is not flushed: its usage is still counted by its own queries.
	type row struct {
		id   string
		cost pricing.Money
		reqs int64
	}
	check := func(rep Report, label func(Row) string, want ...row) {
		t.Helper()
		if len(rep.Rows) != len(want) {
			t.Fatalf("%d rows, want %d: %+v", len(rep.Rows), len(want), rep.Rows)
		}
		var total pricing.Money
		for i, w := range want {
			r := rep.Rows[i]
			if label(r) != w.id || r.Cost != w.cost || r.Requests != w.reqs {
				t.Fatalf("row %d = %s %v %d, want %+v", i, label(r), r.Cost, r.Requests, w)
			}
			total += r.Cost
		}
		if rep.Total.Cost != total {
			t.Fatalf("total %v, rows sum to %v", rep.Total.Cost, total)
		}
	}
	all := Query{From: d1.Time(), To: d3.Time().Add(24 * time.Hour)}
	q := all
	q.By = []Dimension{ByKey}
	rep := query(t, b, q)
	check(rep, func(r Row) string { return r.KeyID + "/" + r.KeyName }, row{"k1/name-k1", 112, 4}, row{"k2/name-k2", 1000, 1}, row{"k3/name-k3", 10000, 2})
	if rep.Total.Unpriced != 1 || rep.Total.InputTokens != 11117 || rep.Total.OutputTokens != 2*11112 {
		t.Fatalf("total %+v", rep.Total)
	}
	q.By = []Dimension{ByOwner}
	check(query(t, b, q), func(r Row) string { return r.Owner + r.KeyID }, row{"alice", 1112, 5}, row{"bob", 10000, 2})
	q.By = []Dimension{ByModel}
	check(query(t, b, q), func(r Row) string { return r.Model }, row{"claude", 10, 1}, row{"gpt-4o", 11102, 5}, row{"mystery", 0, 1})
	q.By = []Dimension{ByProvider}
	check(query(t, b, q), func(r Row) string { return r.Provider }, row{"anthropic", 10, 1}, row{"azure", 1000, 1}, row{"openai", 10102, 5})
	q.By = []Dimension{ByDay}
	check(query(t, b, q), func(r Row) string { return r.Day.String() }, row{"2026-07-23", 2, 2}, row{"2026-07-24", 1110, 3}, row{"2026-07-25", 10000, 2})
	q.By = []Dimension{ByDay, ByKey}
	check(query(t, b, q), func(r Row) string { return r.Day.String() + " " + r.KeyID },
		row{"2026-07-23 k1", 2, 2}, row{"2026-07-24 k1", 110, 2}, row{"2026-07-24 k2", 1000, 1}, row{"2026-07-25 k3", 10000, 2})
	q.By = nil
	check(query(t, b, q), func(r Row) string { return r.KeyID }, row{"", 11112, 7})

	// Date ranges: From's day in, To's midnight out.
	q = Query{From: d2.Time(), To: d3.Time(), By: []Dimension{ByDay}}
	check(query(t, b, q), func(r Row) string { return r.Day.String() }, row{"2026-07-24", 1110, 3})
	q = Query{To: d2.Time(), By: []Dimension{ByDay}}
	check(query(t, b, q), func(r Row) string { return r.Day.String() }, row{"2026-07-23", 2, 2})
	// Filters.
	q = all
	q.Owner, q.By = "alice", []Dimension{ByKey}
	check(query(t, b, q), func(r Row) string { return r.KeyID }, row{"k1", 112, 4}, row{"k2", 1000, 1})
	q.KeyID, q.By = "k2", nil
	check(query(t, b, q), func(r Row) string { return r.KeyID }, row{"", 1000, 1})
	q = all
	q.KeepKey, q.By = func(id string) bool { return id != "k1" }, []Dimension{ByKey}
	check(query(t, b, q), func(r Row) string { return r.KeyID }, row{"k2", 1000, 1}, row{"k3", 10000, 2})
	// a does not see b's unflushed usage; after b's flush it does, once.
	q = all
	if rep := query(t, a, q); rep.Total.Cost != 12 {
		t.Fatalf("a sees %v before b flushed, want 12", rep.Total.Cost)
	}
	flush(t, b)
	for _, r := range []*Recorder{a, b} {
		if rep := query(t, r, q); rep.Total.Cost != 11112 || rep.Total.Requests != 7 {
			t.Fatalf("after both flushed: %+v", rep.Total)
		}
	}
	if _, err := a.Query(ctx, Query{By: []Dimension{"colour"}}); err == nil {
		t.Fatal("Query by colour")
	}
}

// A renamed key keeps one row, under its latest name.
func TestRenamedKey(t *testing.T) {
	r := newRec(t, storagetest.NewMemory(), "a")
	r.Add(Bucket{KeyID: "k", KeyName: "old", Day: d1}, one(1))
	r.Add(Bucket{KeyID: "k", KeyName: "new", Day: d2}, one(1))
	rep := query(t, r, Query{By: []Dimension{ByKey}})
	if len(rep.Rows) != 1 || rep.Rows[0].KeyName != "new" || rep.Rows[0].Requests != 2 {
		t.Fatalf("rows %+v", rep.Rows)
	}
}

// A restart (a new Recorder with the same instance id) continues the
// instance's totals; so do two recorders of one instance at once (the old
// and the new configuration during a reload).
func TestRestartContinuesTotals(t *testing.T) {
	st := storagetest.NewMemory()
	r1 := newRec(t, st, "gw")
	r1.Add(bucket("k", "o", "m", "p", d1), one(5))
	if err := r1.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	r2 := newRec(t, st, "gw")
	r2.Add(bucket("k", "o", "m", "p", d1), one(7))
	old := newRec(t, st, "gw") // still flushing alongside
	old.Add(bucket("k", "o", "m", "p", d1), one(11))
	flush(t, r2, old)
	r2.Add(bucket("k", "o", "m", "p", d1), one(13))
	flush(t, r2)
	rep := query(t, newRec(t, st, "reader"), Query{})
	if rep.Total.Cost != 36 || rep.Total.Requests != 4 {
		t.Fatalf("after restart %+v, want 36 over 4 requests", rep.Total)
	}
	if keys := st.Keys("modelgate/usage"); len(keys) != 1 || keys[0] != "modelgate/usage/2026-07-23/gw.json" {
		t.Fatalf("records %v", keys)
	}
}

// Many goroutines add while the recorders flush and queries run: the
// totals are exact at the end, whatever interleaving.
func TestConcurrentAddFlushQuery(t *testing.T) {
	st := storagetest.NewMemory()
	recs := []*Recorder{newRec(t, st, "a"), newRec(t, st, "b")}
	for _, r := range recs {
		r.opt.FlushInterval = time.Millisecond
		r.Start()
	}
	const goroutines, each = 8, 500
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := recs[g%2]
			for i := range each {
				r.Add(bucket(fmt.Sprint("k", i%5), "o", "m", "p", d1+Day(i%3)), one(int64(g+1)))
				if i%100 == 0 {
					if _, err := r.Query(ctx, Query{By: []Dimension{ByKey}}); err != nil {
						t.Error(err)
					}
					if _, err := r.Spent(ctx, ByOwner, "o", time.Time{}, time.Time{}); err != nil {
						t.Error(err)
					}
				}
			}
		}()
	}
	wg.Wait()
	for _, r := range recs {
		if err := r.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var want pricing.Money
	for g := range goroutines {
		want += pricing.Money(each * (g + 1))
	}
	rep := query(t, newRec(t, st, "reader"), Query{})
	if rep.Total.Cost != want || rep.Total.Requests != goroutines*each {
		t.Fatalf("total %+v, want cost %v over %d requests", rep.Total, want, goroutines*each)
	}
}

// A flush that fails keeps the usage for the next one.
func TestFlushFailureKeepsUsage(t *testing.T) {
	st := storagetest.NewMemory()
	r := newRec(t, st, "a")
	r.Add(bucket("k", "o", "m", "p", d1), one(3))
	st.Fail(errors.New("disk on fire"))
	if err := r.Flush(ctx); err == nil {
		t.Fatal("Flush to a failing storage reported no error")
	}
	r.Add(bucket("k", "o", "m", "p", d1), one(4))
	st.Fail(nil)
	// The batch in doubt counts once in a query, before and after the
	// next flush.
	if rep := query(t, r, Query{}); rep.Total.Cost != 7 {
		t.Fatalf("before the retry: %v, want 7", rep.Total.Cost)
	}
	flush(t, r) // writes the batch in doubt; the newer usage waits for it
	flush(t, r)
	if rep := query(t, newRec(t, st, "reader"), Query{}); rep.Total.Cost != 7 || rep.Total.Requests != 2 {
		t.Fatalf("after the storage came back: %+v", rep.Total)
	}
}

// storeThenFail is a storage whose Store writes and then reports a
// failure, as a Redis write whose reply timed out.
type storeThenFail struct {
	*storagetest.Memory
	mu   sync.Mutex
	fail bool
}

func (s *storeThenFail) Store(ctx context.Context, key string, v []byte) error {
	err := s.Memory.Store(ctx, key, v)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil && s.fail && strings.HasSuffix(key, ".json") {
		return errors.New("timeout waiting for the reply")
	}
	return err
}

// A write that happened but reported a failure is not counted twice when
// the batch is written again.
func TestAmbiguousFailureCountedOnce(t *testing.T) {
	st := &storeThenFail{Memory: storagetest.NewMemory()}
	r := newRec(t, st, "a")
	r.Add(bucket("k", "o", "m", "p", d1), one(3))
	flush(t, r)
	r.Add(bucket("k", "o", "m", "p", d1), one(4))
	st.fail = true
	if err := r.Flush(ctx); err == nil {
		t.Fatal("no error")
	}
	st.fail = false
	if rep := query(t, r, Query{}); rep.Total.Cost != 7 {
		t.Fatalf("in doubt: %v, want 7", rep.Total.Cost)
	}
	r.Add(bucket("k", "o", "m", "p", d1), one(5))
	flush(t, r)
	flush(t, r)
	if rep := query(t, newRec(t, st, "reader"), Query{}); rep.Total.Cost != 12 || rep.Total.Requests != 3 {
		t.Fatalf("after the retry: %+v, want 12 over 3", rep.Total)
	}
	if rep := query(t, r, Query{}); rep.Total.Cost != 12 {
		t.Fatalf("the writer's own query: %v", rep.Total.Cost)
	}
}

// A corrupt record: its own instance sets it aside and starts the day
// again; queries name it; Spent leaves it out; nothing fails.
func TestCorruptRecords(t *testing.T) {
	st := storagetest.NewMemory()
	a, b := newRec(t, st, "a"), newRec(t, st, "b")
	a.Add(bucket("k", "o", "m", "p", d1), one(3))
	b.Add(bucket("k", "o", "m", "p", d1), one(4))
	flush(t, a, b)
	if err := st.Store(ctx, "modelgate/usage/2026-07-23/b.json", []byte(`{"version":1,"day":"2026-07-23","buckets":[{"key_id":`)); err != nil {
		t.Fatal(err)
	}
	if err := st.Store(ctx, "modelgate/usage/2026-07-23/c.json", []byte(`{"version":1,"day":"2026-07-22","buckets":[]}`)); err != nil {
		t.Fatal(err)
	}
	rep := query(t, a, Query{})
	if rep.Total.Cost != 3 || len(rep.Unreadable) != 2 {
		t.Fatalf("report %+v", rep)
	}
	if s, err := a.Spent(ctx, ByKey, "k", time.Time{}, time.Time{}); err != nil || s != 3 {
		t.Fatalf("Spent = %v %v, want 3", s, err)
	}
	// b's next flush sets its record aside and writes a new one.
	b.Add(bucket("k", "o", "m", "p", d1), one(5))
	flush(t, b)
	rep = query(t, a, Query{})
	if rep.Total.Cost != 8 {
		t.Fatalf("after b's flush, %v, want 8", rep.Total.Cost)
	}
	var aside bool
	for _, u := range rep.Unreadable {
		aside = aside || strings.HasPrefix(u, "modelgate/usage/2026-07-23/b.json.corrupt-")
	}
	if !aside || len(rep.Unreadable) != 2 {
		t.Fatalf("unreadable %v: want c.json and b's record set aside", rep.Unreadable)
	}
	// Stray files are not records.
	if err := st.Store(ctx, "modelgate/usage/2026-07-23/notes.txt", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := st.Store(ctx, "modelgate/usage/not-a-day/a.json", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if rep := query(t, a, Query{}); rep.Total.Cost != 8 || len(rep.Unreadable) != 2 {
		t.Fatalf("stray files changed the report: %+v", rep)
	}
}

func TestSpent(t *testing.T) {
	st := storagetest.NewMemory()
	a, b := newRec(t, st, "a"), newRec(t, st, "b")
	now := d2.Time().Add(12 * time.Hour)
	a.now = func() time.Time { return now }
	a.Add(bucket("k1", "alice", "m", "p", d1), one(1))
	a.Add(bucket("k1", "alice", "m", "p", d2), one(10))
	b.Add(bucket("k2", "alice", "m", "p", d2), one(100))
	flush(t, b)
	spent := func(by Dimension, id string, from, to time.Time) pricing.Money {
		t.Helper()
		s, err := a.Spent(ctx, by, id, from, to)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if s := spent(ByKey, "k1", d2.Time(), d3.Time()); s != 10 {
		t.Fatalf("k1 on d2 = %v, want 10 (unflushed usage of its own counts)", s)
	}
	if s := spent(ByOwner, "alice", time.Time{}, time.Time{}); s != 111 {
		t.Fatalf("alice in total = %v, want 111", s)
	}
	if s := spent(ByOwner, "alice", d1.Time(), d2.Time()); s != 1 {
		t.Fatalf("alice on d1 = %v, want 1", s)
	}
	if s := spent(ByModel, "m", time.Time{}, time.Time{}); s != 111 {
		t.Fatalf("model m = %v", s)
	}
	// Its own new usage is current at once; another instance's is read
	// again after SpentCache.
	a.Add(bucket("k1", "alice", "m", "p", d2), one(1000))
	b.Add(bucket("k2", "alice", "m", "p", d2), one(10000))
	flush(t, b)
	if s := spent(ByOwner, "alice", time.Time{}, time.Time{}); s != 1111 {
		t.Fatalf("alice = %v, want 1111 (b's new flush not yet read)", s)
	}
	now = now.Add(a.opt.SpentCache)
	if s := spent(ByOwner, "alice", time.Time{}, time.Time{}); s != 11111 {
		t.Fatalf("alice after the cache time = %v, want 11111", s)
	}
	// Its own flush does not count its usage twice or lose it.
	flush(t, a)
	if s := spent(ByOwner, "alice", time.Time{}, time.Time{}); s != 11111 {
		t.Fatalf("alice after a's flush = %v, want 11111", s)
	}
	if _, err := a.Spent(ctx, ByDay, "x", time.Time{}, time.Time{}); err == nil {
		t.Fatal("Spent by day")
	}
}

// Records are JSON a person can read.
func TestRecordFormat(t *testing.T) {
	st := storagetest.NewMemory()
	r := newRec(t, st, "gw")
	r.Add(Bucket{KeyID: "key_1", KeyName: "ci", Owner: "alice", Model: "gpt-4o", Provider: "main", ProviderType: "openai", Day: d1},
		Counts{Requests: 2, InputTokens: 100, CachedTokens: 40, CacheWriteTokens: 10, OutputTokens: 50, ReasoningTokens: 20,
			Searches: 3, EmbeddingTokens: 7, CacheHits: 1, Cost: 1234, Unpriced: 1})
	flush(t, r)
	data, err := st.Load(ctx, "modelgate/usage/2026-07-23/gw.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"instance": "gw"`, `"day": "2026-07-23"`, `"key_id": "key_1"`, `"key_name": "ci"`,
		`"owner": "alice"`, `"model": "gpt-4o"`, `"provider": "main"`, `"provider_type": "openai"`, `"requests": 2`,
		`"input_tokens": 100`, `"cached_tokens": 40`, `"cache_write_tokens": 10`, `"output_tokens": 50`,
		`"reasoning_tokens": 20`, `"rerank_searches": 3`, `"embedding_tokens": 7`, `"cache_hits": 1`, `"cost_nanodollars": 1234`,
		`"unpriced_requests": 1`, `"applied"`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("record lacks %s:\n%s", want, data)
		}
	}
	totals := make(map[Bucket]*Counts)
	if err := decodeRecord(data, d1, totals, nil); err != nil {
		t.Fatal(err)
	}
	for b, c := range totals {
		if b.KeyName != "ci" || c.ReasoningTokens != 20 || c.CacheHits != 1 || c.Cost != 1234 {
			t.Fatalf("round trip: %+v %+v", b, c)
		}
	}
}

// Add in the steady state: one bucket per key, each counted again.
func BenchmarkAdd(b *testing.B) {
	r := newRec(b, storagetest.NewMemory(), "a")
	bs := make([]Bucket, 64)
	for i := range bs {
		bs[i] = Bucket{KeyID: fmt.Sprintf("key_%024d", i), KeyName: "service", Owner: "team-a", Model: "gpt-4o-mini",
			Provider: "openai", ProviderType: "openai", Day: d1}
	}
	c := Counts{Requests: 1, InputTokens: 1200, OutputTokens: 300, Cost: 360_000}
	for i := range bs {
		r.Add(bs[i], c)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		r.Add(bs[i&63], c)
		i++
	}
}

func BenchmarkAddParallel(b *testing.B) {
	r := newRec(b, storagetest.NewMemory(), "a")
	bk := Bucket{KeyID: "key_1", KeyName: "service", Owner: "team-a", Model: "gpt-4o-mini", Provider: "openai", ProviderType: "openai", Day: d1}
	c := Counts{Requests: 1, InputTokens: 1200, OutputTokens: 300, Cost: 360_000}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r.Add(bk, c)
		}
	})
}

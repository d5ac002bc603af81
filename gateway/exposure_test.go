package gateway

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"go.uber.org/zap"

	"github.com/modelgate/modelgate/internal/storagetest"
	"github.com/modelgate/modelgate/keys"
)

func TestFindKeys(t *testing.T) {
	k1, _ := keys.Generate()
	k2, _ := keys.Generate()
	last := byte('0')
	if k1[len(k1)-1] == '0' {
		last = '1'
	}
	bad := k1[:len(k1)-1] + string(last) // another checksum digit: a look-alike
	if keys.WellFormed(bad) {
		t.Fatal("the look-alike passes the checksum")
	}
	for _, tc := range []struct {
		name, in string
		want     []string
	}{
		{"none", `{"messages":[{"role":"user","content":"hello"}]}`, nil},
		{"in a prompt", `{"content":"my key is ` + k1 + `, keep it"}`, []string{k1}},
		{"two, in JSON strings", `["` + k1 + `","x` + `y",{"k":"` + k2 + `"}]`, []string{k1, k2}},
		{"at the very start and end", k1 + " " + k2, []string{k1, k2}},
		{"checksum wrong: a look-alike", `"` + bad + `"`, nil},
		{"cut short", `"` + k1[:30] + `"`, nil},
		{"inside a longer token", `"x` + k1 + `"`, nil},
		{"followed by more base62", `"` + k1 + `A"`, nil},
		{"prefix alone, many times", strings.Repeat("mgk_", 100), nil},
		{"in a URL query", "key=" + k1 + "&x=1", []string{k1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := findKeys([]byte(tc.in))
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("found %v, want %v", got, tc.want)
			}
		})
	}
}

func FuzzFindKeys(f *testing.F) {
	k, _ := keys.Generate()
	f.Add([]byte("a " + k + " b mgk_ mgk_x"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, s := range findKeys(b) {
			if !keys.WellFormed(s) || !bytes.Contains(b, []byte(s)) {
				t.Fatalf("found %q in %q", s, b)
			}
		}
	})
}

// BenchmarkExposureScan is what looking for managed keys costs a request
// that holds none — nearly all of them: one search for "mgk_" over a 16 KiB
// chat body.
func BenchmarkExposureScan(b *testing.B) {
	body := []byte(`{"model":"gpt-4o","messages":[{"role":"user","content":"` + strings.Repeat("the quick brown fox jumps over the lazy dog ", 16384/44) + `"}]}`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if findKeys(body) != nil {
			b.Fatal("found a key")
		}
	}
}

// countingStorage counts the reads of a storage.
type countingStorage struct {
	keys.Storage
	loads, lists atomic.Int64
}

func (c *countingStorage) Load(ctx context.Context, key string) ([]byte, error) {
	c.loads.Add(1)
	return c.Storage.Load(ctx, key)
}

func (c *countingStorage) List(ctx context.Context, dir string, recursive bool) ([]string, error) {
	c.lists.Add(1)
	return c.Storage.List(ctx, dir, recursive)
}

// newExposureGateway is a gateway with managed keys on s, enough to find
// and mark keys exposed, whose Observer counts what it is told.
func newExposureGateway(t *testing.T, s keys.Storage) (*Gateway, *countingObserver) {
	t.Helper()
	obs := &countingObserver{}
	g, err := New(Config{Managed: keys.NewManager(s, "modelgate"), Observer: obs, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	return g, obs
}

// countingObserver counts what a gateway tells its Observer.
type countingObserver struct {
	noObserver
	mu       sync.Mutex
	skipped  map[string]int
	exposed  []keys.Key
	outcomes []*Outcome
}

func (o *countingObserver) Answered(_ *Call, out *Outcome) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.outcomes = append(o.outcomes, out)
}

func (o *countingObserver) answered() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.outcomes)
}

func (o *countingObserver) ExposureSkipped(reason string, n int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.skipped == nil {
		o.skipped = map[string]int{}
	}
	o.skipped[reason] += n
}

func (o *countingObserver) KeyExposed(k keys.Key, _ keys.Exposure, _ bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.exposed = append(o.exposed, k)
}

func (o *countingObserver) skips(reason string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.skipped[reason]
}

// TestScanExposureFakeKeys: a prompt full of fake managed keys (well
// formed, as anyone can write them) costs a bounded number of storage
// reads — one per distinct key up to maxExposureLookups, never a read of
// every key — and the real keys among them are still marked exposed: one
// this instance knows, wherever it is in the prompt, and one another
// instance created that this one has not loaded yet, among the first
// looked up.
func TestScanExposureFakeKeys(t *testing.T) {
	ctx := context.Background()
	cs := &countingStorage{Storage: storagetest.NewMemory()}
	g, obs := newExposureGateway(t, cs)
	for i := range 16 {
		if _, _, err := g.managed.Create(ctx, keys.NewKey{Name: fmt.Sprint("k", i)}); err != nil {
			t.Fatal(err)
		}
	}
	known, knownSecret, err := g.managed.Create(ctx, keys.NewKey{Name: "known"})
	if err != nil {
		t.Fatal(err)
	}
	elsewhere, elsewhereSecret, err := keys.NewManager(cs, "modelgate").Create(ctx, keys.NewKey{Name: "elsewhere"})
	if err != nil {
		t.Fatal(err)
	}
	const fakes = 5000
	var prompt strings.Builder
	prompt.WriteString(elsewhereSecret + " ")
	for i := range fakes {
		f, _ := keys.Generate()
		prompt.WriteString(f + " ")
		if i < maxExposureLookups-1 { // repeated: looked up once
			prompt.WriteString(f + " ")
		}
	}
	prompt.WriteString(knownSecret)
	body := []byte(`{"model":"oa/gpt-4o-mini","max_tokens":256,"messages":[{"role":"user","content":"` + prompt.String() + `"}]}`)

	cs.loads.Store(0)
	cs.lists.Store(0)
	g.scanExposure("POST /v1/chat/completions", "", body, &Key{Name: "alice", Owner: "a"})
	g.WaitExposures()
	loads, lists := cs.loads.Load(), cs.lists.Load()

	for _, k := range []keys.Key{known, elsewhere} {
		got, err := g.managed.Get(ctx, k.ID)
		if err != nil || got.ExposedAt == nil || got.Exposure.Source != "the request content of POST /v1/chat/completions, sent by key alice (owner a)" {
			t.Errorf("%s: %+v, %v; want it exposed", k.Name, got.Exposure, err)
		}
	}
	// A lookup of each key not in memory (the one from elsewhere and 15
	// fakes), and for each real key one read to find it and one to mark it.
	if loads > maxExposureLookups+4 || lists != 0 {
		t.Errorf("%d loads and %d lists of storage for one request, want at most %d loads and no list", loads, lists, maxExposureLookups+4)
	}
	if got := obs.skips("request_cap"); got != fakes-(maxExposureLookups-1) {
		t.Errorf("request_cap counted %v keys, want %d", got, fakes-(maxExposureLookups-1))
	}
	if len(obs.exposed) != 2 {
		t.Errorf("the Observer was told of %d exposed keys, want 2", len(obs.exposed))
	}
}

// TestExposureQueue: the checks run one at a time, known keys first; a
// digest waiting is not queued twice; storage lookups past
// maxQueuedLookups are dropped and counted, known keys never.
func TestExposureQueue(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	obs := &countingObserver{}
	var mu sync.Mutex
	var ran []exposureCheck
	running, most := 0, 0
	q := newExposureQueue(func(c exposureCheck) {
		mu.Lock()
		running++
		most = max(most, running)
		first := len(ran) == 0
		ran = append(ran, c)
		mu.Unlock()
		if first {
			close(started)
			<-release
		}
		mu.Lock()
		running--
		mu.Unlock()
	}, zap.NewNop(), obs.ExposureSkipped)
	check := func(i int, known bool) exposureCheck {
		c := exposureCheck{known: known}
		c.digest[0], c.digest[1], c.digest[2] = byte(i), byte(i>>8), 1
		if known {
			c.digest[2] = 2
		}
		return c
	}

	q.add([]exposureCheck{check(0, false)}) // runs, and blocks the queue
	<-started
	const extra = 100
	var flood []exposureCheck
	for i := 1; i <= maxQueuedLookups+extra; i++ {
		flood = append(flood, check(i, false))
	}
	q.add(flood)
	q.add([]exposureCheck{check(1, false), check(0, false)}) // waiting, running: not again
	q.add([]exposureCheck{check(7, true), check(7, true)})
	close(release)
	q.wait()

	if got := obs.skips("queue_full"); got != extra {
		t.Errorf("queue_full counted %v, want %d", got, extra)
	}
	if want := 1 + 1 + maxQueuedLookups; len(ran) != want {
		t.Fatalf("%d checks ran, want %d", len(ran), want)
	}
	if ran[1] != check(7, true) {
		t.Errorf("the known key ran in place %d, not right after the check under way", slices.Index(ran, check(7, true)))
	}
	if most != 1 {
		t.Errorf("%d checks ran at once", most)
	}
	// The queue starts again after it stopped.
	q.add([]exposureCheck{check(0, false)})
	q.wait()
	if len(ran) != 3+maxQueuedLookups {
		t.Errorf("a check after the queue stopped did not run")
	}
}

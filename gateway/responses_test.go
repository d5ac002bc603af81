package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"
	"go.uber.org/zap"

	"github.com/modelgate/modelgate/internal/storage"
	"github.com/modelgate/modelgate/internal/storagetest"
)

// gatedStorage holds every Store until release is closed.
type gatedStorage struct {
	*storagetest.Memory
	release chan struct{}
	fail    error
}

func (g *gatedStorage) Store(ctx context.Context, key string, value []byte) error {
	<-g.release
	if g.fail != nil {
		return g.fail
	}
	return g.Memory.Store(ctx, key, value)
}

// TestResponseStoreWritesLater: a stored response (or a pointer) is
// readable at once while the storage is still writing it, is in the
// storage once written, and a delete waits for the write (else the write
// would bring the response back); the host's wait group of writes (which
// its cleanup waits for) counts each one until it is written.
func TestResponseStoreWritesLater(t *testing.T) {
	ctx := context.Background()
	g := &gatedStorage{Memory: storagetest.NewMemory(), release: make(chan struct{})}
	var wg sync.WaitGroup
	rs := ResponseStore{Storage: g, ID: t.Name(), Writes: &wg}

	rs.saveLater(ctx, "alice", "resp_1", []byte(`{"provider":"oa"}`), zap.NewNop())
	if rec, err := rs.load(ctx, "alice", "resp_1"); err != nil || string(rec) != `{"provider":"oa"}` {
		t.Fatalf("pending write not found: %s %v", rec, err)
	}
	if _, err := rs.load(ctx, "bob", "resp_1"); !storage.IsNotExist(err) {
		t.Fatalf("another owner reads it: %v", err)
	}
	if _, err := g.Memory.Load(ctx, rs.key("alice", "resp_1")); !storage.IsNotExist(err) {
		t.Fatalf("written before the storage let it: %v", err)
	}

	deleted := make(chan error, 1)
	go func() { deleted <- rs.delete(ctx, "alice", "resp_1") }()
	select {
	case err := <-deleted:
		t.Fatalf("delete did not wait for the write: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	close(g.release)
	if err := <-deleted; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if _, err := rs.load(ctx, "alice", "resp_1"); !storage.IsNotExist(err) {
		t.Fatalf("deleted response still there: %v", err)
	}

	// Written: in the storage, and no longer pending.
	rs.saveLater(ctx, "alice", "resp_2", []byte(`{"provider":"oa"}`), zap.NewNop())
	wg.Wait()
	if pendingWrites.get(rs.ID, rs.key("alice", "resp_2")) != nil {
		t.Error("a finished write is still pending")
	}
	if rec, err := g.Memory.Load(ctx, rs.key("alice", "resp_2")); err != nil || string(rec) != `{"provider":"oa"}` {
		t.Errorf("not in the storage: %s %v", rec, err)
	}

	// A failed write is forgotten (and logged), as a failed synchronous
	// write was.
	g.fail = errors.New("disk full")
	rs.saveLater(ctx, "alice", "resp_3", []byte(`{}`), zap.NewNop())
	wg.Wait()
	if _, err := rs.load(ctx, "alice", "resp_3"); !storage.IsNotExist(err) {
		t.Errorf("a failed write is readable: %v", err)
	}

	// The host's cleanup waits for its writes.
	gate := &gatedStorage{Memory: storagetest.NewMemory(), release: make(chan struct{})}
	writes := new(sync.WaitGroup)
	rs = ResponseStore{Storage: gate, ID: t.Name() + "/host", Writes: writes}
	rs.saveLater(ctx, "alice", "resp_4", []byte(`{}`), zap.NewNop())
	cleaned := make(chan struct{})
	go func() { writes.Wait(); close(cleaned) }()
	select {
	case <-cleaned:
		t.Fatal("the wait for the host's writes did not wait for a write")
	case <-time.After(20 * time.Millisecond):
	}
	close(gate.release)
	<-cleaned
	if _, err := gate.Memory.Load(ctx, rs.key("alice", "resp_4")); err != nil {
		t.Errorf("write lost at shutdown: %v", err)
	}
}

// TestResponseStoreWritesNowWhenShared: with a shared state (a cluster),
// a record is in the storage when saveLater returns, where the other
// instances read it.
func TestResponseStoreWritesNowWhenShared(t *testing.T) {
	ctx := context.Background()
	g := &gatedStorage{Memory: storagetest.NewMemory(), release: make(chan struct{})}
	rs := ResponseStore{Storage: g, ID: t.Name(), Writes: new(sync.WaitGroup), Now: true}
	saved := make(chan struct{})
	go func() {
		rs.saveLater(ctx, "alice", "resp_1", []byte(`{"provider":"oa"}`), zap.NewNop())
		close(saved)
	}()
	select {
	case <-saved:
		t.Fatal("saveLater returned before the storage had the record")
	case <-time.After(20 * time.Millisecond):
	}
	close(g.release)
	<-saved
	if rec, err := g.Memory.Load(ctx, rs.key("alice", "resp_1")); err != nil || string(rec) != `{"provider":"oa"}` {
		t.Errorf("not in the storage: %s %v", rec, err)
	}
	if pendingWrites.get(rs.ID, rs.key("alice", "resp_1")) != nil {
		t.Error("a write made on the request path is left pending")
	}
}

// countingGate is a gatedStorage that counts the Stores waiting at its gate.
type countingGate struct {
	gatedStorage
	waiting atomic.Int32
}

func (g *countingGate) Store(ctx context.Context, key string, value []byte) error {
	g.waiting.Add(1)
	return g.gatedStorage.Store(ctx, key, value)
}

// TestResponseStoreQueueFull: with every writer busy and the queue full
// (the storage not keeping up), a request writes its own record and waits
// for it, rather than queue without bound; nothing queued is lost.
func TestResponseStoreQueueFull(t *testing.T) {
	ctx := context.Background()
	g := &countingGate{gatedStorage: gatedStorage{Memory: storagetest.NewMemory(), release: make(chan struct{})}}
	var wg sync.WaitGroup
	rs := ResponseStore{Storage: g, ID: t.Name(), Writes: &wg}
	until := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}

	// Fill the writers and the queue, one record at a time so that none
	// finds the queue full before the writers have taken theirs.
	n := storageWriters + maxPendingWrites
	for i := range n {
		until("room in the queue", func() bool { return len(pendingWrites.queue) < cap(pendingWrites.queue) })
		rs.saveLater(ctx, "alice", fmt.Sprintf("resp_%d", i), []byte(`{}`), zap.NewNop())
	}
	until("every writer at the storage and a full queue", func() bool {
		return g.waiting.Load() == storageWriters && len(pendingWrites.queue) == maxPendingWrites
	})

	saved := make(chan struct{})
	go func() {
		rs.saveLater(ctx, "alice", "resp_direct", []byte(`{"direct":true}`), zap.NewNop())
		close(saved)
	}()
	until("the direct write at the storage", func() bool { return g.waiting.Load() == storageWriters+1 })
	select {
	case <-saved:
		t.Fatal("saveLater returned before the storage had the record, with the queue full")
	default:
	}
	if pendingWrites.get(rs.ID, rs.key("alice", "resp_direct")) != nil {
		t.Error("a record written by its request is in the pending table")
	}
	if len(pendingWrites.queue) != maxPendingWrites {
		t.Errorf("queue holds %d, want %d", len(pendingWrites.queue), maxPendingWrites)
	}

	close(g.release)
	<-saved
	wg.Wait()
	for i := range n {
		id := fmt.Sprintf("resp_%d", i)
		if _, err := g.Memory.Load(ctx, rs.key("alice", id)); err != nil {
			t.Fatalf("%s lost: %v", id, err)
		}
		if pendingWrites.get(rs.ID, rs.key("alice", id)) != nil {
			t.Fatalf("%s still pending after it was written", id)
		}
	}
	if rec, err := g.Memory.Load(ctx, rs.key("alice", "resp_direct")); err != nil || string(rec) != `{"direct":true}` {
		t.Errorf("the direct write: %s %v", rec, err)
	}
}

// A response its provider stores is fetched from that provider with a
// query the gateway writes itself: the client's query never reaches the
// provider as it came — a key or an option in it stays at the gateway.
func TestStoredResponseQueryRebuilt(t *testing.T) {
	g := newTestGateway(t)
	up := g.upstreams["oa"]
	o, _ := g.serve(t, APIResponses, []byte(`{"model":"oa/gpt-4o-mini","max_output_tokens":256,"instructions":"You are a terse assistant.","input":"Summarise the plot of Hamlet in one sentence please"}`), g.static)
	id := gjson.GetBytes(o.Body, "id").Str
	if o.Status != http.StatusOK || id == "" {
		t.Fatalf("POST: %d %s", o.Status, o.Body)
	}
	get := func(id string, items bool, query string) *Outcome {
		t.Helper()
		q, err := url.ParseQuery(query)
		if err != nil {
			t.Fatal(err)
		}
		o := &Outcome{}
		g.StoredResponse(context.Background(), StoredRequest{Method: http.MethodGet, Owner: g.static.StorageOwner(), ID: id, Items: items, Query: q}, o)
		return o
	}
	for _, tc := range []struct {
		name, query, path, wantQuery string
		items                        bool
	}{
		{"GET", "include[]=reasoning.encrypted_content&api_key=sk-client-secret&store=false",
			"/v1/responses/" + id, "include%5B%5D=reasoning.encrypted_content", false},
		{"GET without a query", "foo=bar", "/v1/responses/" + id, "", false},
		{"input_items", "limit=2&order=asc&Authorization=Bearer+x",
			"/v1/responses/" + id + "/input_items", "limit=2&order=asc", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(up.requests())
			get(id, tc.items, tc.query)
			sent := up.requests()[before:]
			if len(sent) != 1 || sent[0].URL.Path != tc.path || sent[0].URL.RawQuery != tc.wantQuery {
				t.Fatalf("the provider was sent %v, want one %s?%s", sent, tc.path, tc.wantQuery)
			}
		})
	}
	t.Run("refused before the provider", func(t *testing.T) {
		before := len(up.requests())
		for _, tc := range []struct {
			query string
			items bool
		}{{"stream=true", false}, {"include[]=a%26api_key%3Dx", false}, {"limit=1000", true}} {
			o := get(id, tc.items, tc.query)
			if o.Status != http.StatusBadRequest || gjson.GetBytes(o.Body, "error.type").Str != "invalid_request_error" {
				t.Errorf("%s: %d %s", tc.query, o.Status, o.Body)
			}
		}
		if sent := up.requests()[before:]; len(sent) != 0 {
			t.Errorf("refused requests reached the provider: %v", sent)
		}
	})
}

// fakeNow is a clock a test moves.
type fakeNow struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeNow) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeNow) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// Stored responses expire their retention after their creation: a
// translated response's record by its created_at, a pointer to one its
// provider stores by when the gateway learnt of it. Expired, they are not
// found (for GET and for previous_response_id alike), and the host's
// retention sweep deletes them; a pointer from before pointers were dated
// does not expire here (the sweep dates it by when it was written).
func TestStoredResponsesExpire(t *testing.T) {
	ctx := context.Background()
	mem := storagetest.NewMemory()
	start := time.Now()
	clk := &fakeNow{t: start}
	rs := ResponseStore{Storage: mem, ID: t.Name(), Writes: new(sync.WaitGroup), Now: true, TTL: time.Hour, Clock: clk.now}
	log := zap.NewNop()

	record := `{"input":[],"response":{"id":"resp_made","object":"response","created_at":` + strconv.FormatInt(start.Unix(), 10) + `,"output":[]}}`
	rs.saveLater(ctx, "alice", "resp_made", []byte(record), log)
	savePointer(ctx, rs, "alice", "resp_passed", "oa", log)
	if err := mem.Store(ctx, rs.key("alice", "resp_old"), []byte(`{"provider":"oa"}`)); err != nil {
		t.Fatal(err)
	}
	if p, _ := mem.Load(ctx, rs.key("alice", "resp_passed")); gjson.GetBytes(p, "created_at").Int() != start.Unix() {
		t.Errorf("a pointer without its time: %s", p)
	}
	check := func(when string, want map[string]error) {
		t.Helper()
		for id, wantErr := range want {
			if _, err := loadRecord(ctx, rs, "alice", id); !errors.Is(err, wantErr) {
				t.Errorf("%s: loading %s: %v, want %v", when, id, err, wantErr)
			}
		}
	}
	check("at once", map[string]error{"resp_made": nil, "resp_passed": errPointer, "resp_old": errPointer})
	clk.advance(time.Hour - time.Second)
	check("an hour less a second on", map[string]error{"resp_made": nil, "resp_passed": errPointer})
	clk.advance(time.Second)
	check("an hour on", map[string]error{"resp_made": errStoredNotExist, "resp_passed": errStoredNotExist, "resp_old": errPointer})
}

package caddygateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
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
// would bring the response back); the app's Cleanup waits for its writes.
func TestResponseStoreWritesLater(t *testing.T) {
	ctx := context.Background()
	g := &gatedStorage{Memory: storagetest.NewMemory(), release: make(chan struct{})}
	var wg sync.WaitGroup
	rs := responseStore{s: g, id: t.Name(), writes: &wg}

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
	if pendingWrites.get(rs.id, rs.key("alice", "resp_2")) != nil {
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

	// Cleanup waits for the app's writes.
	gate := &gatedStorage{Memory: storagetest.NewMemory(), release: make(chan struct{})}
	a := &App{logger: zap.NewNop(), storage: nil, responseWrites: new(sync.WaitGroup), responsesID: t.Name() + "/app"}
	rs = responseStore{s: gate, id: a.responsesID, writes: a.responseWrites}
	rs.saveLater(ctx, "alice", "resp_4", []byte(`{}`), zap.NewNop())
	cleaned := make(chan struct{})
	go func() { a.waitResponseWrites(10 * time.Second); close(cleaned) }()
	select {
	case <-cleaned:
		t.Fatal("Cleanup did not wait for a write")
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
	rs := responseStore{s: g, id: t.Name(), writes: new(sync.WaitGroup), now: true}
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
	if pendingWrites.get(rs.id, rs.key("alice", "resp_1")) != nil {
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
	rs := responseStore{s: g, id: t.Name(), writes: &wg}
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
	if pendingWrites.get(rs.id, rs.key("alice", "resp_direct")) != nil {
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
		if pendingWrites.get(rs.id, rs.key("alice", id)) != nil {
			t.Fatalf("%s still pending after it was written", id)
		}
	}
	if rec, err := g.Memory.Load(ctx, rs.key("alice", "resp_direct")); err != nil || string(rec) != `{"direct":true}` {
		t.Errorf("the direct write: %s %v", rec, err)
	}
}

// upstreamRecorder sends requests on to next and keeps their URLs.
type upstreamRecorder struct {
	next http.RoundTripper
	mu   sync.Mutex
	urls []*url.URL
}

func (u *upstreamRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	u.mu.Lock()
	u.urls = append(u.urls, r.URL)
	u.mu.Unlock()
	return u.next.RoundTrip(r)
}

func (u *upstreamRecorder) sent() []*url.URL {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.urls)
}

// recordUpstream records what g's provider name is sent.
func (g *benchGateway) recordUpstream(name string) *upstreamRecorder {
	tr := g.app.providers[name].base.proxy.Transport.(*authTransport)
	rec := &upstreamRecorder{next: tr.next}
	tr.next = rec
	return rec
}

// serve sends method path (with its query) and body through
// modelgate_auth and modelgate with the key.
func (g *benchGateway) serve(t testing.TB, method, target string, body []byte, key string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	r := httptest.NewRequest(method, "http://gateway.example"+target, bytes.NewReader(body))
	r.Header.Set("Authorization", "Bearer "+key)
	if body != nil {
		r.Header.Set("Content-Type", "application/json")
	}
	r = caddyhttp.PrepareRequest(r, caddy.NewReplacer(), rec, g.server)
	if err := g.serveModelgate(rec, r); err != nil {
		t.Fatal(err)
	}
	return rec
}

// A response its provider stores is fetched from that provider with a
// query the gateway writes itself: the client's query never reaches the
// provider as it came — a key or an option in it stays at the gateway.
func TestStoredResponseQueryRebuilt(t *testing.T) {
	g := newBenchGateway(t)
	up := g.recordUpstream("oa")
	rec := g.serve(t, http.MethodPost, "/v1/responses", benchResponsesBody("oa/gpt-4o-mini"), benchStaticKey)
	id := gjson.Get(rec.Body.String(), "id").Str
	if rec.Code != http.StatusOK || id == "" {
		t.Fatalf("POST: %d %s", rec.Code, rec.Body)
	}
	g.app.waitResponseWrites(time.Minute) // the pointer

	for _, tc := range []struct {
		name, target, path, query string
	}{
		{"GET", "/v1/responses/" + id + "?include[]=reasoning.encrypted_content&api_key=sk-client-secret&store=false",
			"/v1/responses/" + id, "include%5B%5D=reasoning.encrypted_content"},
		{"GET without a query", "/v1/responses/" + id + "?foo=bar", "/v1/responses/" + id, ""},
		{"input_items", "/v1/responses/" + id + "/input_items?limit=2&order=asc&Authorization=Bearer+x",
			"/v1/responses/" + id + "/input_items", "limit=2&order=asc"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(up.sent())
			g.serve(t, http.MethodGet, tc.target, nil, benchStaticKey)
			sent := up.sent()[before:]
			if len(sent) != 1 || sent[0].Path != tc.path || sent[0].RawQuery != tc.query {
				t.Fatalf("the provider was sent %v, want one %s?%s", sent, tc.path, tc.query)
			}
		})
	}
	t.Run("refused before the provider", func(t *testing.T) {
		before := len(up.sent())
		for _, target := range []string{"/v1/responses/" + id + "?stream=true", "/v1/responses/" + id + "?include[]=a%26api_key%3Dx",
			"/v1/responses/" + id + "/input_items?limit=1000"} {
			rec := g.serve(t, http.MethodGet, target, nil, benchStaticKey)
			if rec.Code != http.StatusBadRequest || gjson.Get(rec.Body.String(), "error.type").Str != "invalid_request_error" {
				t.Errorf("%s: %d %s", target, rec.Code, rec.Body)
			}
		}
		if sent := up.sent()[before:]; len(sent) != 0 {
			t.Errorf("refused requests reached the provider: %v", sent)
		}
	})
}

package caddygateway

import (
	"context"
	"net/http"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/gateway"
	"github.com/modelgate/modelgate/internal/storage"
	"github.com/modelgate/modelgate/internal/storagetest"
	"github.com/modelgate/modelgate/retention"
	"github.com/modelgate/modelgate/state"
)

// The retention sweep deletes stored responses once their retention has
// passed since they were written — a translated response's record, a
// pointer to one its provider stores, a pointer from before pointers were
// dated — and nothing else of the owner's folder. (That they are gone for
// their owner at once is gateway's TestStoredResponsesExpire.)
func TestStoredResponsesSwept(t *testing.T) {
	ctx := context.Background()
	mem := storagetest.NewMemory()
	start := time.Now()
	dir := path.Join(storage.OwnerDir("modelgate", "alice"), "responses")
	for _, id := range []string{"resp_made", "resp_passed", "resp_old"} {
		if err := mem.Store(ctx, path.Join(dir, id+".json"), []byte(`{"provider":"oa"}`)); err != nil {
			t.Fatal(err)
		}
	}
	if err := mem.Store(ctx, path.Join(dir, "resp_made.json.tmp123"), []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	sweep := func(at time.Time) retention.Result {
		t.Helper()
		sw := &retention.Sweeper{Storage: mem, Prefix: "modelgate", Kinds: []retention.Kind{responseKind{s: mem, ttl: time.Hour}},
			Interval: time.Nanosecond, Now: func() time.Time { return at }}
		res, err := sw.Sweep(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := sweep(start.Add(time.Hour - time.Second)); res.Deleted["responses"] != 0 {
		t.Fatalf("swept before their time: %+v", res)
	}
	if res := sweep(start.Add(time.Hour + time.Second)); res.Deleted["responses"] != 3 {
		t.Fatalf("the sweep: %+v", res)
	}
	if left := mem.Keys(storage.OwnerDir("modelgate", "alice") + "/"); len(left) != 1 {
		t.Errorf("the sweep left %v, want the temporary file alone", left)
	}
}

// withQuota gives g's app a storage quota of limit bytes per owner,
// counted on an in-process state, over g's files and stored responses.
func withQuota(g *benchGateway, limit int64) {
	a := g.app
	a.state = state.NewLocal()
	a.StorageQuota = &StorageQuotaConfig{Owner: &limit}
	a.ledger = retention.NewLedger(a.state, ledgerTTL, a.retentionKinds()...)
	a.storageQ = a.newStorageQuota()
	if err := a.provisionGateway(); err != nil { // the core counts against the new ledger
		panic(err)
	}
}

func (g *benchGateway) used(t testing.TB, owner string) int64 {
	t.Helper()
	g.app.waitResponseWrites(time.Minute)
	n, err := g.app.ledger.Used(context.Background(), storage.OwnerDir("modelgate", gateway.StaticOwnerPrefix+owner))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Each owner's files, batch results and stored responses count against
// its storage quota: an upload that does not fit, a batch, or a response
// the gateway would store for an owner at its quota is refused with 400
// storage_quota_exceeded in OpenAI's shape, and nothing is kept; deleting
// makes room again.
func TestStorageQuota(t *testing.T) {
	g := newBenchGateway(t)
	withFiles(t, g)
	withQuota(g, 1000)
	file := func(n int) []byte { return []byte(strings.Repeat("x", n-1) + "\n") }
	upload := func(n int) (int, string) {
		body, ct := multipartUpload(t, "batch", file(n))
		rec := g.upload(t, benchStaticKey, body, ct)
		return rec.Code, rec.Body.String()
	}
	refused := func(what string, status int, body, param string) {
		t.Helper()
		if status != http.StatusBadRequest || gjson.Get(body, "error.type").Str != "invalid_request_error" ||
			gjson.Get(body, "error.code").Str != "storage_quota_exceeded" || gjson.Get(body, "error.param").Str != param {
			t.Errorf("%s: %d %s, want 400 storage_quota_exceeded (param %q)", what, status, body, param)
		}
	}

	status, body := upload(600)
	first := gjson.Get(body, "id").Str
	if status != http.StatusOK || first == "" {
		t.Fatalf("600 bytes of 1000: %d %s", status, body)
	}
	status, body = upload(600)
	refused("600 more bytes", status, body, "file")
	if status, body = upload(300); status != http.StatusOK {
		t.Fatalf("300 more bytes: %d %s", status, body)
	}
	status, body = upload(200) // 100 bytes of room: refused while it is read
	refused("200 bytes with 100 left", status, body, "file")
	if n := g.used(t, "bench"); n != 900 {
		t.Errorf("bench stores %d bytes, want 900", n)
	}

	// A stored response the gateway translates counts too, once written;
	// at the quota, a response it would store is refused, one it would
	// not is served.
	responses := benchResponsesBody("claude/claude-sonnet-4-5")
	rec := g.serve(t, http.MethodPost, "/v1/responses", responses, benchStaticKey)
	stored := gjson.Get(rec.Body.String(), "id").Str
	if rec.Code != http.StatusOK || stored == "" {
		t.Fatalf("a stored response with room: %d %s", rec.Code, rec.Body)
	}
	if n := g.used(t, "bench"); n <= 1000 {
		t.Fatalf("bench stores %d bytes after a stored response, want more than 1000", n)
	}
	rec = g.serve(t, http.MethodPost, "/v1/responses", responses, benchStaticKey)
	refused("a stored response at the quota", rec.Code, rec.Body.String(), "store")
	notStored := []byte(strings.Replace(string(responses), `{"model"`, `{"store":false,"model"`, 1))
	if rec := g.serve(t, http.MethodPost, "/v1/responses", notStored, benchStaticKey); rec.Code != http.StatusOK {
		t.Errorf("a response not stored, at the quota: %d %s", rec.Code, rec.Body)
	}
	rec = g.serve(t, http.MethodPost, "/v1/batches", []byte(`{"input_file_id":"`+first+`","endpoint":"/v1/chat/completions","completion_window":"24h"}`), benchStaticKey)
	refused("a batch at the quota", rec.Code, rec.Body.String(), "")

	// Deleting gives the bytes back.
	for _, path := range []string{"/v1/files/" + first, "/v1/responses/" + stored} {
		if rec := g.serve(t, http.MethodDelete, path, nil, benchStaticKey); rec.Code != http.StatusOK {
			t.Fatalf("DELETE %s: %d %s", path, rec.Code, rec.Body)
		}
	}
	if n := g.used(t, "bench"); n != 300 {
		t.Errorf("bench stores %d bytes after its deletions, want 300", n)
	}
	if status, body = upload(200); status != http.StatusOK {
		t.Errorf("200 bytes after deletions: %d %s", status, body)
	}
	// What is counted is what the storage holds.
	if counted, err := g.app.ledger.Count(context.Background(), storage.OwnerDir("modelgate", gateway.StaticOwnerPrefix+"bench")); err != nil || counted != g.used(t, "bench") {
		t.Errorf("counted %d bytes (%v) for what the storage holds, %d as it went", counted, err, g.used(t, "bench"))
	}
}

// An owner's own quota wins over every owner's; 0 is none.
func TestStorageQuotaLimit(t *testing.T) {
	var c *StorageQuotaConfig
	if got := c.limit("x"); got != defaultStorageQuota {
		t.Errorf("no config: %d", got)
	}
	five, none := int64(5), int64(0)
	for _, tc := range []struct {
		c     StorageQuotaConfig
		owner string
		want  int64
	}{
		{StorageQuotaConfig{}, "a", defaultStorageQuota},
		{StorageQuotaConfig{Owner: &five}, "a", 5},
		{StorageQuotaConfig{Owner: &none}, "a", 0},
		{StorageQuotaConfig{Owner: &five, Owners: map[string]int64{"a": 0}}, "a", 0},
		{StorageQuotaConfig{Owners: map[string]int64{"a": 7}}, "a", 7},
		{StorageQuotaConfig{Owners: map[string]int64{"a": 7}}, "b", defaultStorageQuota},
	} {
		if got := tc.c.limit(tc.owner); got != tc.want {
			t.Errorf("%+v for %s: %d, want %d", tc.c, tc.owner, got, tc.want)
		}
	}
	r := (*RetentionConfig)(nil).withDefaults()
	if time.Duration(r.Files) != 30*24*time.Hour || time.Duration(r.BatchOutput) != 30*24*time.Hour ||
		time.Duration(r.Responses) != 30*24*time.Hour || time.Duration(r.SweepInterval) != time.Hour {
		t.Errorf("retention defaults %+v", r)
	}
	if r := (&RetentionConfig{Files: caddy.Duration(time.Hour)}).withDefaults(); time.Duration(r.Files) != time.Hour || r.Responses == 0 {
		t.Errorf("a retention of files alone: %+v", r)
	}
}

// BenchmarkStorageQuota is what the storage quota adds to a request that
// stores something on one instance (an in-process state): the check
// before (storageRoom) and the count after (countStored), for an owner
// whose count is seeded.
func BenchmarkStorageQuota(b *testing.B) {
	g := newBenchGateway(b)
	withFiles(b, g)
	withQuota(g, 1<<40)
	ctx := context.Background()
	if _, perr := g.app.storageRoom(ctx, gateway.StaticOwnerPrefix+"bench", "store"); perr != nil {
		b.Fatal(perr)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, perr := g.app.storageRoom(ctx, gateway.StaticOwnerPrefix+"bench", "store"); perr != nil {
			b.Fatal(perr)
		}
		g.app.countStored(ctx, gateway.StaticOwnerPrefix+"bench", 1)
	}
}

// The retention worker belongs to the storage, not to a config: a reload
// (the new config starts before the old one stops) shares it, and the
// last config to stop stops it.
func TestSweepWorkerAcrossReloads(t *testing.T) {
	old, next := &App{storageID: t.Name()}, &App{storageID: t.Name()}
	if err := old.startSweeper(); err != nil {
		t.Fatal(err)
	}
	w := old.sweeper
	if err := next.startSweeper(); err != nil {
		t.Fatal(err)
	}
	if next.sweeper != w {
		t.Fatal("the new config started a second worker")
	}
	if err := old.stopSweeper(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.done:
		t.Fatal("the old config's Stop stopped the worker the new one uses")
	default:
	}
	if err := next.stopSweeper(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the worker did not stop with the last config")
	}
	if refs, ok := sweepers.References(t.Name()); ok || refs != 0 {
		t.Errorf("%d references left", refs)
	}
}

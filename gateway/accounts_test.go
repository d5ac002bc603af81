package gateway

import (
	"context"
	"net/http"
	"sync"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/accounts"
	"github.com/modelgate/modelgate/batch"
	"github.com/modelgate/modelgate/internal/storagetest"
	"github.com/modelgate/modelgate/keys"
	"github.com/modelgate/modelgate/providers/responses"
)

// suspendedObserver counts the calls refused for a suspended account.
type suspendedObserver struct {
	noObserver
	mu sync.Mutex
	n  int
}

func (o *suspendedObserver) Suspended() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.n++
}

// TestBatchLineOfSuspendedAccount: a batch line of a key whose account is
// suspended is refused with 403 account_suspended, counted, and never
// reaches the provider; a line of another key runs.
func TestBatchLineOfSuspendedAccount(t *testing.T) {
	g := newTestGateway(t)
	obs := &suspendedObserver{}
	g.cfg.Observer = obs
	g.cfg.Blocked = func(k *Key) bool { return k.ID == g.managed.ID }
	g.rebuild(t)
	ex := g.BatchExecutor()
	body := chatBody("oa/gpt-4o-mini", "", "hi")

	resp := ex.Do(context.Background(), batch.Request{BatchID: "batch_x", CustomID: "a", Owner: g.managed.Owner, KeyID: g.managed.ID,
		Endpoint: batch.EndpointChat, Body: body})
	if resp.Status != http.StatusForbidden || gjson.GetBytes(resp.Body, "error.code").Str != "account_suspended" {
		t.Errorf("a line of a suspended account: %d %s, want 403 account_suspended", resp.Status, resp.Body)
	}
	if n := len(g.upstreams["oa"].requests()); n != 0 {
		t.Errorf("the provider got %d requests of a suspended account", n)
	}
	if obs.n != 1 {
		t.Errorf("%d refusals observed, want 1", obs.n)
	}

	resp = ex.Do(context.Background(), batch.Request{BatchID: "batch_y", CustomID: "a", Owner: g.static.StorageOwner(), KeyName: g.static.Name,
		Endpoint: batch.EndpointChat, Body: body})
	if resp.Status != http.StatusOK {
		t.Errorf("a line of another key: %d %s", resp.Status, resp.Body)
	}
}

// TestExposedRecordedInAudit: a managed key's first exposure is recorded
// in its account's audit log, as done by the scanner that reported it;
// a second report records nothing more.
func TestExposedRecordedInAudit(t *testing.T) {
	st := storagetest.NewMemory()
	managed := keys.NewManager(st, "modelgate")
	audit := accounts.NewAuditLog(st, "modelgate")
	g, err := New(Config{Managed: managed, Observer: noObserver{},
		Accounts: &accounts.Service{Keys: managed, Accounts: accounts.NewManager(st, "modelgate"), Audit: audit}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	k, secret, err := managed.Create(ctx, keys.NewKey{Name: "leaky", Owner: "team"})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		found, err := g.Exposed(ctx, keys.Digest(secret), keys.Exposure{Reporter: "github", URL: "https://github.com/x/y"}, nil)
		if err != nil || !found {
			t.Fatalf("Exposed: %v, %v", found, err)
		}
	}
	page, err := audit.List(ctx, "team", accounts.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var exposed []accounts.Entry
	for _, e := range page.Data {
		if e.Action == "key.exposed" {
			exposed = append(exposed, e)
		}
	}
	if len(exposed) != 1 || exposed[0].Actor.Kind != accounts.ActorScanner || exposed[0].Actor.Identity != "github" ||
		exposed[0].Target.ID != k.ID {
		t.Errorf("the audit log's key.exposed entries: %+v, want one by the scanner github for %s", exposed, k.ID)
	}
}

// TestResponsesBuiltinTools: a built-in tool the provider cannot run is
// dropped and named in X-Modelgate-Dropped-Tools by default, and refused
// with 400 unsupported_parameter under the refuse policy; a request
// without one has no such header.
func TestResponsesBuiltinTools(t *testing.T) {
	g := newTestGateway(t)
	body := []byte(`{"model":"claude/claude-sonnet-4-5","input":"hi","store":false,"tools":[{"type":"image_generation"}]}`)
	o, _ := g.serve(t, APIResponses, body, g.static)
	if o.Status != http.StatusOK || o.Header.Get(responses.DroppedToolsHeader) != "image_generation" {
		t.Errorf("dropped: %d %q %s", o.Status, o.Header.Get(responses.DroppedToolsHeader), o.Body)
	}
	plain := []byte(`{"model":"claude/claude-sonnet-4-5","input":"hi","store":false}`)
	if o, _ := g.serve(t, APIResponses, plain, g.static); o.Status != http.StatusOK || o.Header.Get(responses.DroppedToolsHeader) != "" {
		t.Errorf("no built-in tool: %d %q", o.Status, o.Header.Get(responses.DroppedToolsHeader))
	}

	g.cfg.BuiltinTools = responses.BuiltinRefuse
	g.rebuild(t)
	o, _ = g.serve(t, APIResponses, body, g.static)
	if o.Status != http.StatusBadRequest || gjson.GetBytes(o.Body, "error.code").Str != "unsupported_parameter" {
		t.Errorf("refused: %d %s, want 400 unsupported_parameter", o.Status, o.Body)
	}
}

package gateway

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelgate/modelgate/internal/storagetest"
	"github.com/modelgate/modelgate/quota"
	"github.com/modelgate/modelgate/state"
	"github.com/modelgate/modelgate/usage"
)

// TestAdmitHeldWhileStateDown: while the shared state is known to be
// unreachable, a call is admitted from the slices of the limits and the
// budget this instance holds, and the standby engine counts nothing; a
// call those slices do not cover goes to the standby.
func TestAdmitHeldWhileStateDown(t *testing.T) {
	tg := newTestGateway(t)
	rec, err := usage.New(storagetest.NewMemory(), usage.Options{Instance: "test", Prefix: "modelgate/usage"})
	if err != nil {
		t.Fatal(err)
	}
	q, err := quota.New(quota.Config{State: state.NewLocal(), Spender: rec,
		Lease: &quota.Leasing{Life: 5 * time.Second, Interval: 10 * time.Millisecond, Horizon: time.Second, Idle: 5 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	q.Start()
	t.Cleanup(func() { _ = q.Stop(context.Background()) })
	standby, err := quota.New(quota.Config{State: state.NewLocal(), Spender: rec})
	if err != nil {
		t.Fatal(err)
	}
	var down atomic.Bool
	tg.cfg.Usage = rec
	tg.cfg.Limits = Limits{Quota: q, Standby: standby, Policies: fullPolicies{}, StateDown: down.Load}
	tg.rebuild(t)
	body := chatBody("oa/gpt-4o-mini", `,"max_tokens":16`, "hi")

	// The instance learns its rate of use and leases slices of it.
	for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); {
		if o, _ := tg.serve(t, APIChat, body, tg.managed); o.Status != http.StatusOK {
			t.Fatalf("warming up: %d %s", o.Status, o.Body)
		}
		time.Sleep(time.Millisecond)
	}

	down.Store(true)
	subjects := fullPolicies{}.Subjects(tg.managed)
	standbyRequests := func() int64 {
		st, err := standby.Status(context.Background(), subjects)
		if err != nil {
			t.Fatal(err)
		}
		return subjects.Key.Limits.RequestsPerMinute - st.Key.Requests.Remaining
	}
	if o, _ := tg.serve(t, APIChat, body, tg.managed); o.Status != http.StatusOK {
		t.Fatalf("with the state down: %d %s", o.Status, o.Body)
	}
	if n := standbyRequests(); n != 0 {
		t.Errorf("the standby counted %d requests while the instance held slices that covered them", n)
	}
	// A call larger than any slice: the standby counts it.
	large := chatBody("oa/gpt-4o-mini", `,"max_tokens":100000000`, "hi")
	if o, _ := tg.serve(t, APIChat, large, tg.managed); o.Status != http.StatusOK {
		t.Fatalf("a large call with the state down: %d %s", o.Status, o.Body)
	}
	if n := standbyRequests(); n != 1 {
		t.Errorf("the standby counted %d requests, want the large one", n)
	}
}

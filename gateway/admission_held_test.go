package gateway

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelgate/modelgate/internal/storagetest"
	"github.com/modelgate/modelgate/pricing"
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

// TestAdmitHeldAcrossMinute: while the shared state is unreachable, the
// slices of the rate limits are of the minute they were leased in. Once
// the minute has turned, a call is admitted on the standby for its rate
// limits, and from the budgets' slices for its budget: what it spends
// reaches the shared state's budget once the state is back, as what the
// calls admitted from slices spend does.
func TestAdmitHeldAcrossMinute(t *testing.T) {
	tg := newTestGateway(t)
	rec, err := usage.New(storagetest.NewMemory(), usage.Options{Instance: "test", Prefix: "modelgate/usage"})
	if err != nil {
		t.Fatal(err)
	}
	// The clock stands two seconds before a minute turns.
	var offset atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	turn := time.Now().Truncate(time.Minute).Add(time.Minute)
	offset.Store(int64(time.Until(turn.Add(-2 * time.Second))))
	q, err := quota.New(quota.Config{State: state.NewLocal(), Spender: rec, Now: now,
		Lease: &quota.Leasing{Life: 5 * time.Second, Interval: 10 * time.Millisecond, Horizon: time.Second, Idle: 5 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	q.Start()
	t.Cleanup(func() { _ = q.Stop(context.Background()) })
	standby, err := quota.New(quota.Config{State: state.NewLocal(), Spender: rec, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	var down atomic.Bool
	tg.cfg.Usage = rec
	tg.cfg.Limits = Limits{Quota: q, Standby: standby, Policies: fullPolicies{}, StateDown: down.Load}
	tg.rebuild(t)
	body := chatBody("oa/gpt-4o-mini", `,"max_tokens":16`, "hi")
	var cost pricing.Money
	serve := func(what string) *Outcome {
		o, _ := tg.serve(t, APIChat, body, tg.managed)
		if o.Status != http.StatusOK || !o.Priced {
			t.Fatalf("%s: %d %s", what, o.Status, o.Body)
		}
		cost += o.Cost
		return o
	}
	for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); {
		serve("warming up")
		time.Sleep(time.Millisecond)
	}

	down.Store(true)
	offset.Add(int64(3 * time.Second)) // the minute turns while the state is unreachable
	subjects := fullPolicies{}.Subjects(tg.managed)
	st, err := standby.Status(context.Background(), subjects)
	if err != nil {
		t.Fatal(err)
	}
	before := st.Key.Requests.Remaining
	o := serve("after the minute turned")
	if st, err = standby.Status(context.Background(), subjects); err != nil {
		t.Fatal(err)
	}
	if n := before - st.Key.Requests.Remaining; n != 1 {
		t.Errorf("the standby counted %d requests of the new minute, want 1", n)
	}
	if o.Header.Get("x-ratelimit-limit-requests") == "" {
		t.Errorf("no rate-limit headers: %v", o.Header)
	}

	// The state is back: every call's cost is in its budget, once.
	down.Store(false)
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, err := q.Status(context.Background(), subjects)
		if err != nil {
			t.Fatal(err)
		}
		spent := st.Key.Budget.Spent
		if spent > cost || spent < cost && time.Now().After(deadline) {
			t.Fatalf("the budget shows %s spent; the calls cost %s", spent, cost)
		}
		if spent == cost {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
}

package gateway

import (
	"context"
	"fmt"
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

// leasingGateway is a test gateway whose limits and budgets are leased
// from an in-process state, with a standby engine. While down is set the
// state refuses every Apply, as a hung Redis does past its timeout, and
// the gateway is told it is unreachable.
type leasingGateway struct {
	*testGateway
	q, standby *quota.Quota
	down       atomic.Bool
}

// downState is a state that refuses every Apply while *down.
type downState struct {
	state.State
	down *atomic.Bool
}

func (d downState) Apply(ctx context.Context, scope string, ops []state.Op, res []state.Result) (bool, error) {
	if d.down.Load() {
		return false, fmt.Errorf("%w: down", state.ErrUnavailable)
	}
	return d.State.Apply(ctx, scope, ops, res)
}

// newLeasingGateway makes a leasing gateway whose engines read the clock
// now (nil: time.Now).
func newLeasingGateway(t *testing.T, now func() time.Time) *leasingGateway {
	t.Helper()
	lg := &leasingGateway{testGateway: newTestGateway(t)}
	rec, err := usage.New(storagetest.NewMemory(), usage.Options{Instance: "test", Prefix: "modelgate/usage"})
	if err != nil {
		t.Fatal(err)
	}
	lg.q, err = quota.New(quota.Config{State: downState{state.NewLocal(), &lg.down}, Spender: rec, Now: now,
		Lease: &quota.Leasing{Life: 5 * time.Second, Interval: 10 * time.Millisecond, Horizon: time.Second, Idle: 5 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	lg.q.Start()
	t.Cleanup(func() { _ = lg.q.Stop(context.Background()) })
	if lg.standby, err = quota.New(quota.Config{State: state.NewLocal(), Spender: rec, Now: now}); err != nil {
		t.Fatal(err)
	}
	lg.cfg.Usage = rec
	lg.cfg.Limits = Limits{Quota: lg.q, Standby: lg.standby, Policies: fullPolicies{}, StateDown: lg.down.Load}
	lg.rebuild(t)
	return lg
}

// warmUp serves calls for 300 ms: the instance learns its rate of use
// and leases slices of it. each is told of every call's outcome.
func (lg *leasingGateway) warmUp(t *testing.T, body []byte, each func(*Outcome)) {
	t.Helper()
	for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); {
		o, _ := lg.serve(t, APIChat, body, lg.managed)
		if o.Status != http.StatusOK {
			t.Fatalf("warming up: %d %s", o.Status, o.Body)
		}
		if each != nil {
			each(o)
		}
		time.Sleep(time.Millisecond)
	}
}

// standbyRequests is how many requests of the key's current minute the
// standby counted.
func (lg *leasingGateway) standbyRequests(t *testing.T) int64 {
	t.Helper()
	subjects := fullPolicies{}.Subjects(lg.managed)
	st, err := lg.standby.Status(context.Background(), subjects)
	if err != nil {
		t.Fatal(err)
	}
	return subjects.Key.Limits.RequestsPerMinute - st.Key.Requests.Remaining
}

// TestAdmitHeldWhileStateDown: while the shared state is known to be
// unreachable, a call is admitted from the slices of the limits and the
// budget this instance holds, and the standby engine counts nothing; a
// call those slices do not cover goes to the standby.
func TestAdmitHeldWhileStateDown(t *testing.T) {
	lg := newLeasingGateway(t, nil)
	body := chatBody("oa/gpt-4o-mini", `,"max_tokens":16`, "hi")
	lg.warmUp(t, body, nil)

	lg.down.Store(true)
	if o, _ := lg.serve(t, APIChat, body, lg.managed); o.Status != http.StatusOK {
		t.Fatalf("with the state down: %d %s", o.Status, o.Body)
	}
	if n := lg.standbyRequests(t); n != 0 {
		t.Errorf("the standby counted %d requests while the instance held slices that covered them", n)
	}
	// A call larger than any slice: the standby counts it.
	large := chatBody("oa/gpt-4o-mini", `,"max_tokens":100000000`, "hi")
	if o, _ := lg.serve(t, APIChat, large, lg.managed); o.Status != http.StatusOK {
		t.Fatalf("a large call with the state down: %d %s", o.Status, o.Body)
	}
	if n := lg.standbyRequests(t); n != 1 {
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
	// The clock stands two seconds before a minute turns.
	var offset atomic.Int64
	turn := time.Now().Truncate(time.Minute).Add(time.Minute)
	offset.Store(int64(time.Until(turn.Add(-2 * time.Second))))
	lg := newLeasingGateway(t, func() time.Time { return time.Now().Add(time.Duration(offset.Load())) })
	body := chatBody("oa/gpt-4o-mini", `,"max_tokens":16`, "hi")
	var cost pricing.Money
	lg.warmUp(t, body, func(o *Outcome) { cost += o.Cost })

	lg.down.Store(true)
	offset.Add(int64(3 * time.Second)) // the minute turns while the state is unreachable
	o, _ := lg.serve(t, APIChat, body, lg.managed)
	if o.Status != http.StatusOK || !o.Priced {
		t.Fatalf("after the minute turned: %d %s", o.Status, o.Body)
	}
	cost += o.Cost
	if n := lg.standbyRequests(t); n != 1 {
		t.Errorf("the standby counted %d requests of the new minute, want 1", n)
	}
	if o.Header.Get("x-ratelimit-limit-requests") == "" {
		t.Errorf("no rate-limit headers: %v", o.Header)
	}

	// The state is back: every call's cost is in its budget, once.
	lg.down.Store(false)
	subjects := fullPolicies{}.Subjects(lg.managed)
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, err := lg.q.Status(context.Background(), subjects)
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

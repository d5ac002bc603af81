package keys

import (
	"errors"
	"testing"
)

func TestPolicy(t *testing.T) {
	ctx, _, m, s := setup()
	k, _, err := m.Create(ctx, NewKey{Name: "ci", Limits: &Limits{RequestsPerMinute: 60, ConcurrentRequests: 2},
		Budget: &Budget{USD: "25.50", Period: "month"}})
	if err != nil {
		t.Fatal(err)
	}
	if k.Limits == nil || k.Limits.RequestsPerMinute != 60 || k.Budget == nil || k.Budget.USD != "25.50" {
		t.Fatalf("created %+v", k)
	}
	// Stored: another manager reads it back.
	other := NewManager(s, "modelgate")
	got, err := other.Get(ctx, k.ID)
	if err != nil || got.Limits == nil || got.Limits.ConcurrentRequests != 2 || got.Budget.Period != "month" {
		t.Fatalf("read back %+v %v", got, err)
	}
	var told []string
	m.Changed = func(id string) { told = append(told, id) }
	up, err := m.SetPolicy(ctx, k.ID, Policy{Limits: &Limits{TokensPerMinute: 1000}})
	if err != nil || up.Limits.TokensPerMinute != 1000 || up.Limits.RequestsPerMinute != 0 || up.Budget != nil || len(told) != 1 {
		t.Fatalf("SetPolicy: %+v %v (told %v)", up, err, told)
	}
	if got, _ := other.Get(ctx, k.ID); got.Budget != nil || got.Limits.TokensPerMinute != 1000 {
		t.Errorf("after SetPolicy the storage has %+v", got)
	}
	if _, err := m.SetPolicy(ctx, "key_00000000000000000000000000", Policy{}); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown key: %v", err)
	}
	for _, tc := range []struct {
		p     Policy
		param string
	}{
		{Policy{Limits: &Limits{RequestsPerMinute: -1}}, "limits.requests_per_minute"},
		{Policy{Budget: &Budget{USD: "1e3", Period: "day"}}, "budget.usd"},
		{Policy{Budget: &Budget{USD: "-5", Period: "day"}}, "budget.usd"},
		{Policy{Budget: &Budget{USD: "5.1234567", Period: "day"}}, "budget.usd"},
		{Policy{Budget: &Budget{USD: "5", Period: "week"}}, "budget.period"},
	} {
		_, err := m.SetPolicy(ctx, k.ID, tc.p)
		var inv *InvalidError
		if !errors.As(err, &inv) || inv.Param != tc.param {
			t.Errorf("%+v: %v, want an InvalidError of %s", tc.p, err, tc.param)
		}
		if _, _, err := m.Create(ctx, NewKey{Name: "x", Limits: tc.p.Limits, Budget: tc.p.Budget}); !errors.As(err, &inv) || inv.Param != tc.param {
			t.Errorf("Create %+v: %v", tc.p, err)
		}
	}
}

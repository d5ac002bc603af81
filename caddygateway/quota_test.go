package caddygateway

import (
	"testing"

	"github.com/modelgate/modelgate/keys"
	"github.com/modelgate/modelgate/quota"
)

func TestSubjects(t *testing.T) {
	lc := &LimitsConfig{
		Key:    &keys.Policy{Limits: &keys.Limits{RequestsPerMinute: 10}},
		Owners: map[string]*keys.Policy{"team": {Budget: &keys.Budget{USD: "2.5", Period: "day"}}},
	}
	if err := lc.provision(); err != nil {
		t.Fatal(err)
	}
	a := &App{Limits: lc}
	s := a.subjects(&Key{Name: "ci", Owner: "team"})
	if s.Key.ID != "static:ci" || s.Key.Limits.RequestsPerMinute != 10 || s.Owner.ID != "team" ||
		s.Owner.Budget != (quota.Budget{Amount: 2_500_000_000, Period: quota.Day}) {
		t.Errorf("static key: %+v", s)
	}
	own := &Key{Name: "m", ID: "key_1", Owner: "other", Budget: &keys.Budget{USD: "0.000001", Period: "total"}}
	s = a.subjects(own)
	if s.Key.ID != "key_1" || s.Key.Budget.Amount != 1000 || s.Owner.Budget.Amount != 0 {
		t.Errorf("managed key: %+v", s)
	}
	if s := (&App{}).subjects(&Key{Name: "x", Owner: "x"}); s.Key.Limits != (quota.Limits{}) || s.Key.Budget != (quota.Budget{}) ||
		s.Owner.Limits != (quota.Limits{}) || s.Owner.Budget != (quota.Budget{}) {
		t.Errorf("nothing configured, yet %+v is enforced", s)
	}
}

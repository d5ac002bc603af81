package caddygateway

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/modelgate/modelgate/gateway"
	"github.com/modelgate/modelgate/guardrails"
	"github.com/modelgate/modelgate/pricing"
)

// TestObserve checks that each observation lands in the series of its
// labels, the first time and through the cached children after.
func TestObserve(t *testing.T) {
	requests := func(code string) float64 {
		return sample(t, metrics.requests, map[string]string{"endpoint": "chat_completions", "provider": "metrics-test", "code": code})
	}
	ok0, limited0 := requests("200"), requests("429")
	for range 3 {
		observeRequest("chat_completions", "metrics-test", 200)
	}
	observeRequest("chat_completions", "metrics-test", 429)
	if got := requests("200") - ok0; got != 3 {
		t.Errorf("requests 200: +%v, want +3", got)
	}
	if got := requests("429") - limited0; got != 1 {
		t.Errorf("requests 429: +%v, want +1", got)
	}

	tokens := func(model, kind string) float64 {
		return sample(t, metrics.tokens, map[string]string{"provider": "metrics-test", "model": model, "kind": kind})
	}
	cost := func(model string) float64 {
		return sample(t, metrics.cost, map[string]string{"provider": "metrics-test", "model": model})
	}
	unpriced := func(model string) float64 {
		return sample(t, metrics.unpriced, map[string]string{"provider": "metrics-test", "model": model})
	}
	in0, out0, cost0, unpriced0 := tokens("m", "input"), tokens("m", "output"), cost("m"), unpriced("other")
	priced := &gateway.Outcome{Usage: gateway.Usage{Prompt: 100, Completion: 7, Known: true}, Cost: pricing.Money(2500), Priced: true}
	for range 2 {
		observeUsage("metrics-test", "m", priced)
	}
	observeUsage("metrics-test", "other", &gateway.Outcome{Usage: priced.Usage})
	if in, out := tokens("m", "input")-in0, tokens("m", "output")-out0; in != 200 || out != 14 {
		t.Errorf("tokens input +%v output +%v, want +200 +14", in, out)
	}
	// The counter adds floats: what it held before (a run of -count > 1)
	// leaves the difference within rounding of the two costs.
	if got, want := cost("m")-cost0, 2*pricing.Money(2500).Dollars(); math.Abs(got-want) > 1e-12 {
		t.Errorf("cost +%v, want +%v", got, want)
	}
	if got := unpriced("other") - unpriced0; got != 1 {
		t.Errorf("unpriced +%v, want +1", got)
	}
	if got := cost("other"); got != 0 {
		t.Errorf("an unpriced request added %v to the cost", got)
	}

	// A provider call without an answer is counted under "error".
	upstream := func(code string) float64 {
		return sample(t, metrics.upstream, map[string]string{"provider": "metrics-test", "code": code})
	}
	errors0, ok0 := upstream("error"), upstream("200")
	observeUpstream("metrics-test", 0, time.Millisecond)
	observeUpstream("metrics-test", 0, time.Millisecond)
	observeUpstream("metrics-test", 200, time.Millisecond)
	if e, ok := upstream("error")-errors0, upstream("200")-ok0; e != 2 || ok != 1 {
		t.Errorf("upstream observations: error +%v, 200 +%v; want +2, +1", e, ok)
	}
}

var guardRuns atomic.Int64

// TestGuardDecisionsCounted: each guard's series are in the decisions
// metric at 0 from the config that makes the guard, a decision the gateway
// reports is counted in its guard's tally, and a guard of the same name in
// the next config (a reload) counts on in the same series.
func TestGuardDecisionsCounted(t *testing.T) {
	// Guards of names of their own each run: the tallies are the
	// process's, and a second run (-count) finds them counted.
	run := guardRuns.Add(1)
	name := func(g string) string { return fmt.Sprint(g, run) }
	count := func(guard, action string) float64 {
		return sample(t, guardCollector{}, map[string]string{"guard": name(guard), "action": action})
	}
	engine := func(guards ...string) *guardrails.Engine {
		cfg := guardrails.Config{}
		for _, g := range guards {
			cfg.Guards = append(cfg.Guards, guardrails.GuardConfig{Name: name(g), Type: "pii"})
		}
		eng, err := guardrails.New(cfg, guardrails.Options{Tally: guardTally})
		if err != nil {
			t.Fatal(err)
		}
		return eng
	}
	eng := engine("counted-a", "counted-b")
	reg := prometheus.NewRegistry()
	reg.MustRegister(guardCollector{})
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := map[string]int{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "guard" && m.GetCounter().GetValue() == 0 {
					series[l.GetValue()]++
				}
			}
		}
	}
	for _, g := range []string{"counted-a", "counted-b"} {
		if series[name(g)] != guardrails.NumActions {
			t.Errorf("%s: %d series at 0 at provisioning, want one for each of the %d actions", g, series[name(g)], guardrails.NumActions)
		}
	}
	// Decisions as the engines make them: a text of an e-mail address
	// masked by the first guard (the next sees it masked), one without
	// let through by both.
	decide := func(eng *guardrails.Engine, text string) []guardrails.Decision {
		var r guardrails.Result
		eng.Check(context.Background(), &r, guardrails.Chat, guardrails.Request,
			[]byte(`{"messages":[{"role":"user","content":"`+text+`"}]}`), &guardrails.Scope{})
		return r.Decisions
	}
	eng.Count(decide(eng, "write to bob@example.org"))
	eng.Count(decide(eng, "hello"))
	// The next config has counted-b first, and a guard of its own.
	next := engine("counted-b", "counted-c")
	next.Count(decide(next, "or to alice@example.org"))
	for _, w := range []struct {
		guard, action string
		want          float64
	}{{"counted-a", "mask", 1}, {"counted-a", "allow", 1}, {"counted-b", "mask", 1}, {"counted-b", "allow", 2}, {"counted-c", "allow", 1}, {"counted-c", "mask", 0}} {
		if got := count(w.guard, w.action); got != w.want {
			t.Errorf("%s %s: %v, want %v", w.guard, w.action, got, w.want)
		}
	}
}

// sample is the value of a counter, or the observation count of a
// histogram, in the series of c with exactly these labels (0: none yet).
func sample(t *testing.T, c prometheus.Collector, labels map[string]string) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
	series:
		for _, m := range f.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, l := range m.GetLabel() {
				if labels[l.GetName()] != l.GetValue() {
					continue series
				}
			}
			if h := m.GetHistogram(); h != nil {
				return float64(h.GetSampleCount())
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

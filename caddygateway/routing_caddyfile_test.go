package caddygateway

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/modelgate/modelgate/routing"
)

func TestUnmarshalRouting(t *testing.T) {
	for _, tc := range []struct {
		name, block string
		want        string // the JSON of the config, or the error's text
		err         bool
	}{
		{name: "empty", block: "routing {\n}", want: `{}`},
		{name: "every setting", block: `routing {
			breaker {
				consecutive_failures 3
				error_rate 0.25
				min_requests 8
				window 20s
				open_for 5s
				max_open_for 1m
				half_open_probes 3
			}
			cooldown {
				default 500ms
				max 90s
			}
			retry_budget {
				ratio 15%
				min_per_second 0.5
				window 5s
			}
			latency_samples 4
			first_token_timeout 3s
			idle_timeout 45s
		}`, want: `{"breaker":{"consecutive_failures":3,"error_rate":0.25,"min_requests":8,"window":20000000000,"open_for":5000000000,` +
			`"max_open_for":60000000000,"half_open_probes":3},"cooldown":{"default":500000000,"max":90000000000},` +
			`"retry_budget":{"ratio":0.15,"min_per_second":0.5,"window":5000000000},"latency_samples":4,` +
			`"first_token_timeout":3000000000,"idle_timeout":45000000000}`},
		{name: "off", block: "routing {\n breaker off\n retry_budget off\n}", want: `{"breaker":{"off":true},"retry_budget":{"off":true}}`},
		{name: "off then on", block: "routing {\n breaker off\n breaker {\n open_for 1s\n }\n}", want: `{"breaker":{"open_for":1000000000}}`},
		{name: "argument", block: "routing on {\n}", err: true, want: "wrong argument count"},
		{name: "unknown", block: "routing {\n fallback on\n}", err: true, want: `unrecognized routing option "fallback"`},
		{name: "breaker unknown", block: "routing {\n breaker {\n trips 3\n }\n}", err: true, want: `unrecognized breaker option "trips"`},
		{name: "breaker maybe", block: "routing {\n breaker maybe\n}", err: true, want: "wrong argument count"},
		{name: "zero failures", block: "routing {\n breaker {\n consecutive_failures 0\n }\n}", err: true, want: "not a whole number of at least 1"},
		{name: "rate zero", block: "routing {\n breaker {\n error_rate 0\n }\n}", err: true, want: "not a share above 0"},
		{name: "rate word", block: "routing {\n retry_budget {\n ratio most\n }\n}", err: true, want: "not a share above 0"},
		{name: "negative floor", block: "routing {\n retry_budget {\n min_per_second -1\n }\n}", err: true, want: "min_per_second"},
		{name: "bad duration", block: "routing {\n cooldown {\n max forever\n }\n}", err: true, want: `max: "forever" is not a duration`},
		{name: "zero duration", block: "routing {\n idle_timeout 0s\n}", err: true, want: "idle_timeout"},
		{name: "cooldown max below default", block: "routing {\n cooldown {\n default 1m\n max 1s\n }\n}", err: true, want: "cooldown max 1s is shorter than the default 1m0s"},
		{name: "value missing", block: "routing {\n latency_samples\n}", err: true, want: "wrong argument count"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := caddyfile.NewTestDispenser(tc.block)
			d.Next()
			var a App
			err := a.unmarshalRouting(d)
			if tc.err {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("err = %v, want one saying %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, _ := json.Marshal(a.Routing)
			if string(got) != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// Engine turns the app's aliases and routing settings into the engine's
// configuration, which builds a router.
func TestRoutingEngine(t *testing.T) {
	c := &RoutingConfig{
		Breaker:           &RoutingBreaker{ConsecutiveFailures: 2, OpenFor: caddy.Duration(time.Minute)},
		Cooldown:          &RoutingCooldown{Max: caddy.Duration(time.Minute)},
		RetryBudget:       &RoutingRetryBudget{Off: true},
		FirstTokenTimeout: caddy.Duration(5 * time.Second),
		Aliases: map[string]*AliasRouting{
			"smart": {Policy: "latency", Targets: map[string]*TargetRouting{
				"b/y": {Priority: 1, IdleTimeout: caddy.Duration(time.Second)}}},
		},
	}
	models := map[string][]string{"smart": {"a/x", "b/y"}, "plain": {"c/z/with/slashes"}}
	cfg, err := c.Engine(models)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Breaker.ConsecutiveFailures != 2 || cfg.Breaker.OpenFor != time.Minute || cfg.Cooldown.Max != time.Minute ||
		!cfg.RetryBudget.Off || cfg.FirstTokenTimeout != 5*time.Second {
		t.Fatalf("settings %+v", cfg)
	}
	if len(cfg.Aliases) != 2 || cfg.Aliases[0].Name != "plain" || cfg.Aliases[1].Name != "smart" {
		t.Fatalf("aliases %+v", cfg.Aliases)
	}
	plain, smart := cfg.Aliases[0], cfg.Aliases[1]
	if plain.Policy != routing.Ordered || plain.Targets[0] != (routing.TargetConfig{Provider: "c", Model: "z/with/slashes"}) {
		t.Fatalf("plain %+v", plain)
	}
	if smart.Policy != routing.LowestLatency || smart.Targets[0] != (routing.TargetConfig{Provider: "a", Model: "x"}) ||
		smart.Targets[1] != (routing.TargetConfig{Provider: "b", Model: "y", Priority: 1, IdleTimeout: time.Second}) {
		t.Fatalf("smart %+v", smart)
	}
	r, err := routing.New(cfg, routing.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if tg := r.Target("b/y"); tg.FirstTokenTimeout() != 5*time.Second || tg.IdleTimeout() != time.Second {
		t.Fatalf("b/y timeouts %v %v", tg.FirstTokenTimeout(), tg.IdleTimeout())
	}

	// A target listed twice is one target: the engine offers each once.
	if cfg, err := c.Engine(map[string][]string{"smart": {"a/x", "b/y", "a/x"}}); err != nil || len(cfg.Aliases[0].Targets) != 2 {
		t.Fatalf("a repeated target: %+v, %v", cfg.Aliases, err)
	}

	var none *RoutingConfig
	if cfg, err := none.Engine(models); err != nil || len(cfg.Aliases) != 2 {
		t.Fatalf("nil config: %+v, %v", cfg, err)
	}
	for _, bad := range []struct {
		c    *RoutingConfig
		want string
	}{
		{&RoutingConfig{Aliases: map[string]*AliasRouting{"nope": {}}}, `alias "nope" is not a model alias`},
		{&RoutingConfig{Aliases: map[string]*AliasRouting{"smart": {Targets: map[string]*TargetRouting{"d/w": {}}}}}, `alias smart has no target "d/w"`},
		{&RoutingConfig{Aliases: map[string]*AliasRouting{"smart": {Policy: "fastest"}}}, `routing policy "fastest"`},
		{&RoutingConfig{Breaker: &RoutingBreaker{ErrorRate: 3}}, "error_rate"},
	} {
		if _, err := bad.c.Engine(models); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("Engine = %v, want an error saying %q", err, bad.want)
		}
	}
}

// The model block sets an alias's policy and its targets' settings, and
// may add targets.
func TestUnmarshalModelBlock(t *testing.T) {
	a := App{ProvidersRaw: map[string]json.RawMessage{"oa": nil, "cl": nil}}
	d := caddyfile.NewTestDispenser(`model smart oa/gpt-4o {
		policy weighted
		target oa/gpt-4o weight 3
		target cl/claude weight 1 priority 2 first_token_timeout 4s
	}`)
	d.Next()
	if err := a.unmarshalModel(d); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(a.Models["smart"], " "); got != "oa/gpt-4o cl/claude" {
		t.Fatalf("targets %s", got)
	}
	got, _ := json.Marshal(a.Routing)
	want := `{"aliases":{"smart":{"policy":"weighted","targets":{"cl/claude":{"weight":1,"priority":2,"first_token_timeout":4000000000},"oa/gpt-4o":{"weight":3}}}}}`
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	for _, tc := range []struct{ block, want string }{
		{"model x oa/a {\n policy\n}", "wrong argument count"},
		{"model x oa/a {\n target\n}", "target wants <provider>/<model>"},
		{"model x oa/a {\n target oa/a weight\n}", "target wants <provider>/<model>"},
		{"model x oa/a {\n target oa/a speed 3\n}", `unrecognized setting "speed"`},
		{"model x oa/a {\n target oa/a priority high\n}", `priority: "high" is not a whole number`},
		{"model x oa/a {\n target oa/a idle_timeout -1s\n}", "idle_timeout"},
		{"model x oa/a {\n target oa/a\n target oa/a\n}", "target oa/a is given twice"},
		{"model x oa/a {\n fallback on\n}", `unrecognized option "fallback"`},
		{"model x {\n policy ordered\n}", "at least one <provider>/<model> target is required"},
	} {
		a := App{ProvidersRaw: map[string]json.RawMessage{"oa": nil}}
		d := caddyfile.NewTestDispenser(tc.block)
		d.Next()
		if err := a.unmarshalModel(d); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want one saying %q", tc.block, err, tc.want)
		}
	}
}

package caddygateway

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/modelgate/modelgate/routing"
)

// RoutingConfig tunes how model aliases choose among their targets and
// keep failing ones out of rotation: circuit breakers, the providers'
// cool-downs, the retry budget, stream timeouts, and each alias's policy
// (docs/routing.md). Every setting has a default; the aliases keep their
// targets in Models, and their policies and target settings here.
type RoutingConfig struct {
	// Breaker tunes the circuit breaker of every target.
	Breaker *RoutingBreaker `json:"breaker,omitempty"`

	// Cooldown bounds the cool-downs providers ask for with a 429 (or a
	// 503 that says when to come back).
	Cooldown *RoutingCooldown `json:"cooldown,omitempty"`

	// RetryBudget bounds the attempts after a request's first, per alias.
	RetryBudget *RoutingRetryBudget `json:"retry_budget,omitempty"`

	// LatencySamples is about how many recent answers a target's latency
	// average follows. Default: 10.
	LatencySamples int `json:"latency_samples,omitempty"`

	// FirstTokenTimeout is how long a stream may take to send its first
	// byte before the next target is tried, for targets without their
	// own. Default: none.
	FirstTokenTimeout caddy.Duration `json:"first_token_timeout,omitempty"`

	// IdleTimeout is how long a stream may go silent after its first byte
	// before it is cut, for targets without their own. Default: none.
	IdleTimeout caddy.Duration `json:"idle_timeout,omitempty"`

	// Aliases are the policies of the aliases of Models, and the settings
	// of their targets, by alias. Default: ordered, every target alike.
	Aliases map[string]*AliasRouting `json:"aliases,omitempty"`
}

// RoutingBreaker tunes the circuit breakers: a target opens after
// ConsecutiveFailures failures in a row, or when ErrorRate of at least
// MinRequests attempts in Window failed; it is then skipped for OpenFor
// (doubled after each failed trial, up to MaxOpenFor), then lets
// HalfOpenProbes trial requests through, whose success closes it.
type RoutingBreaker struct {
	// Off turns the breakers off. Default: on.
	Off bool `json:"off,omitempty"`
	// Default: 5.
	ConsecutiveFailures int `json:"consecutive_failures,omitempty"`
	// Between 0 and 1. Default: 0.5.
	ErrorRate float64 `json:"error_rate,omitempty"`
	// Default: 20.
	MinRequests int `json:"min_requests,omitempty"`
	// Default: 30s.
	Window caddy.Duration `json:"window,omitempty"`
	// Default: 30s.
	OpenFor caddy.Duration `json:"open_for,omitempty"`
	// Default: 5m.
	MaxOpenFor caddy.Duration `json:"max_open_for,omitempty"`
	// Default: 1.
	HalfOpenProbes int `json:"half_open_probes,omitempty"`
}

// RoutingCooldown bounds cool-downs.
type RoutingCooldown struct {
	// Default is the cool-down of a 429 whose headers say nothing usable.
	// Default: 1s.
	Default caddy.Duration `json:"default,omitempty"`
	// Max caps every cool-down, whatever the provider's headers say.
	// Default: 5m.
	Max caddy.Duration `json:"max,omitempty"`
}

// RoutingRetryBudget is the retry budget of each alias: over Window, the
// attempts after a request's first may be at most Ratio of its requests
// plus MinPerSecond per second of Window.
type RoutingRetryBudget struct {
	// Off lifts the budget. Default: on.
	Off bool `json:"off,omitempty"`
	// Between 0 and 1. Default: 0.2.
	Ratio float64 `json:"ratio,omitempty"`
	// Default: 3.
	MinPerSecond float64 `json:"min_per_second,omitempty"`
	// Default: 10s.
	Window caddy.Duration `json:"window,omitempty"`
}

// AliasRouting is one alias's policy and the settings of its targets.
type AliasRouting struct {
	// Policy is ordered, weighted, latency or cost. Default: ordered.
	Policy string `json:"policy,omitempty"`
	// Targets are settings of the alias's targets, by
	// "<provider>/<model>".
	Targets map[string]*TargetRouting `json:"targets,omitempty"`
}

// TargetRouting is the settings of one target of an alias.
type TargetRouting struct {
	// Weight is the target's share under the weighted policy. Default: 1.
	Weight int `json:"weight,omitempty"`
	// Priority is the target's group: lower first. Default: 0.
	Priority int `json:"priority,omitempty"`
	// FirstTokenTimeout and IdleTimeout override RoutingConfig's.
	FirstTokenTimeout caddy.Duration `json:"first_token_timeout,omitempty"`
	IdleTimeout       caddy.Duration `json:"idle_timeout,omitempty"`
}

// Engine returns the routing engine's configuration of the aliases
// models defines (alias → "<provider>/<model>" targets, in order) under
// these settings, and checks it: an alias or target named here that
// models lacks is an error. A target an alias lists twice is one target.
// A nil c is every default.
func (c *RoutingConfig) Engine(models map[string][]string) (routing.Config, error) {
	var out routing.Config
	if c == nil {
		c = new(RoutingConfig)
	}
	if b := c.Breaker; b != nil {
		out.Breaker = routing.BreakerConfig{Off: b.Off, ConsecutiveFailures: b.ConsecutiveFailures, ErrorRate: b.ErrorRate,
			MinRequests: b.MinRequests, Window: time.Duration(b.Window), OpenFor: time.Duration(b.OpenFor),
			MaxOpenFor: time.Duration(b.MaxOpenFor), HalfOpenProbes: b.HalfOpenProbes}
	}
	if cd := c.Cooldown; cd != nil {
		out.Cooldown = routing.CooldownConfig{Default: time.Duration(cd.Default), Max: time.Duration(cd.Max)}
	}
	if rb := c.RetryBudget; rb != nil {
		out.RetryBudget = routing.BudgetConfig{Off: rb.Off, Ratio: rb.Ratio, MinPerSecond: rb.MinPerSecond, Window: time.Duration(rb.Window)}
	}
	out.LatencySamples = c.LatencySamples
	out.FirstTokenTimeout, out.IdleTimeout = time.Duration(c.FirstTokenTimeout), time.Duration(c.IdleTimeout)
	for name, ar := range c.Aliases {
		targets, ok := models[name]
		if !ok {
			return routing.Config{}, fmt.Errorf("routing: alias %q is not a model alias", name)
		}
		for key := range ar.Targets {
			if !slices.Contains(targets, key) {
				return routing.Config{}, fmt.Errorf("routing: alias %s has no target %q", name, key)
			}
		}
	}
	names := make([]string, 0, len(models))
	for name := range models {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		ac := routing.AliasConfig{Name: name}
		ar := c.Aliases[name]
		if ar != nil && ar.Policy != "" {
			p, err := routing.ParsePolicy(ar.Policy)
			if err != nil {
				return routing.Config{}, fmt.Errorf("alias %s: %w", name, err)
			}
			ac.Policy = p
		}
		for i, key := range models[name] {
			if slices.Contains(models[name][:i], key) {
				continue // listed before: a target is offered once per request
			}
			provider, model, _ := strings.Cut(key, "/")
			tc := routing.TargetConfig{Provider: provider, Model: model}
			if ar != nil && ar.Targets[key] != nil {
				tr := ar.Targets[key]
				tc.Weight, tc.Priority = tr.Weight, tr.Priority
				tc.FirstTokenTimeout, tc.IdleTimeout = time.Duration(tr.FirstTokenTimeout), time.Duration(tr.IdleTimeout)
			}
			ac.Targets = append(ac.Targets, tc)
		}
		out.Aliases = append(out.Aliases, ac)
	}
	if err := out.Validate(); err != nil {
		return routing.Config{}, fmt.Errorf("routing: %w", err)
	}
	return out, nil
}

// unmarshalModel reads "model <alias> <provider>/<model>... [{ … }]":
//
//	model <alias> [<provider>/<model>...] {
//	    policy ordered|weighted|latency|cost
//	    target <provider>/<model> [weight <n>] [priority <n>] [first_token_timeout <d>] [idle_timeout <d>]
//	}
//
// A target line sets a listed target's settings, or adds the target after
// those listed.
func (a *App) unmarshalModel(d *caddyfile.Dispenser) error {
	var alias string
	if !d.Args(&alias) {
		return d.ArgErr()
	}
	targets := d.RemainingArgs()
	if _, dup := a.Models[alias]; dup {
		return d.Errf("model alias %q is defined twice", alias)
	}
	var ar *AliasRouting
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		if ar == nil {
			ar = new(AliasRouting)
		}
		switch opt := d.Val(); opt {
		case "policy":
			if !d.AllArgs(&ar.Policy) {
				return d.ArgErr()
			}
			if _, err := routing.ParsePolicy(ar.Policy); err != nil {
				return d.Errf("model %s: %v", alias, err)
			}
		case "target":
			key, tr, err := unmarshalTargetLine(d)
			if err != nil {
				return d.Errf("model %s: %v", alias, err)
			}
			if _, dup := ar.Targets[key]; dup {
				return d.Errf("model %s: target %s is given twice", alias, key)
			}
			if ar.Targets == nil {
				ar.Targets = make(map[string]*TargetRouting)
			}
			ar.Targets[key] = tr
			if !slices.Contains(targets, key) {
				targets = append(targets, key)
			}
		default:
			return d.Errf("model %s: unrecognized option %q (policy, target)", alias, opt)
		}
	}
	defined := func(name string) bool { _, ok := a.ProvidersRaw[name]; return ok }
	if err := checkAlias(alias, targets, defined); err != nil {
		return d.Errf("%v (providers must be defined before the aliases that use them)", err)
	}
	if a.Models == nil {
		a.Models = make(map[string][]string)
	}
	a.Models[alias] = targets
	if ar != nil {
		if a.Routing == nil {
			a.Routing = new(RoutingConfig)
		}
		if a.Routing.Aliases == nil {
			a.Routing.Aliases = make(map[string]*AliasRouting)
		}
		a.Routing.Aliases[alias] = ar
		only := &RoutingConfig{Aliases: map[string]*AliasRouting{alias: ar}}
		if _, err := only.Engine(map[string][]string{alias: targets}); err != nil {
			return d.Errf("model %s: %v", alias, err)
		}
	}
	return nil
}

// unmarshalTargetLine reads "target <provider>/<model> [weight <n>]
// [priority <n>] [first_token_timeout <d>] [idle_timeout <d>]".
func unmarshalTargetLine(d *caddyfile.Dispenser) (string, *TargetRouting, error) {
	args := d.RemainingArgs()
	if len(args) == 0 || len(args)%2 != 1 {
		return "", nil, fmt.Errorf("target wants <provider>/<model> and pairs of a setting and its value")
	}
	key, tr := args[0], new(TargetRouting)
	for i := 1; i < len(args); i += 2 {
		opt, v := args[i], args[i+1]
		var err error
		switch opt {
		case "weight":
			tr.Weight, err = routingWhole(opt, v, 1)
		case "priority":
			tr.Priority, err = strconv.Atoi(v)
			if err != nil {
				err = fmt.Errorf("priority: %q is not a whole number", v)
			}
		case "first_token_timeout":
			tr.FirstTokenTimeout, err = routingDuration(opt, v)
		case "idle_timeout":
			tr.IdleTimeout, err = routingDuration(opt, v)
		default:
			err = fmt.Errorf("target %s: unrecognized setting %q (weight, priority, first_token_timeout, idle_timeout)", key, opt)
		}
		if err != nil {
			return "", nil, err
		}
	}
	return key, tr, nil
}

// unmarshalRouting reads the routing { … } block:
//
//	routing {
//	    breaker off | {
//	        consecutive_failures <n>
//	        error_rate           <ratio>|<percent>%
//	        min_requests         <n>
//	        window               <duration>
//	        open_for             <duration>
//	        max_open_for         <duration>
//	        half_open_probes     <n>
//	    }
//	    cooldown {
//	        default <duration>
//	        max     <duration>
//	    }
//	    retry_budget off | {
//	        ratio          <ratio>|<percent>%
//	        min_per_second <n>
//	        window         <duration>
//	    }
//	    latency_samples     <n>
//	    first_token_timeout <duration>
//	    idle_timeout        <duration>
//	}
func (a *App) unmarshalRouting(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	if a.Routing == nil {
		a.Routing = new(RoutingConfig)
	}
	c := a.Routing
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt := d.Val()
		var err error
		switch opt {
		case "breaker":
			err = c.unmarshalBreaker(d)
		case "cooldown":
			err = c.unmarshalCooldown(d)
		case "retry_budget":
			err = c.unmarshalRetryBudget(d)
		case "latency_samples", "first_token_timeout", "idle_timeout":
			var v string
			if !d.AllArgs(&v) {
				return d.ArgErr()
			}
			switch opt {
			case "latency_samples":
				c.LatencySamples, err = routingWhole(opt, v, 1)
			case "first_token_timeout":
				c.FirstTokenTimeout, err = routingDuration(opt, v)
			default:
				c.IdleTimeout, err = routingDuration(opt, v)
			}
		default:
			return d.Errf("unrecognized routing option %q (breaker, cooldown, retry_budget, latency_samples, first_token_timeout, idle_timeout)", opt)
		}
		if err != nil {
			return d.Errf("routing %v", err)
		}
	}
	if _, err := (&RoutingConfig{Breaker: c.Breaker, Cooldown: c.Cooldown, RetryBudget: c.RetryBudget,
		LatencySamples: c.LatencySamples}).Engine(nil); err != nil {
		return d.Err(err.Error())
	}
	return nil
}

// routingSettings reads a block of "<name> <value>" lines, or "off" in
// its place where off is not nil; set takes each line.
func routingSettings(d *caddyfile.Dispenser, off *bool, set func(opt, v string) error) error {
	if d.NextArg() {
		if off == nil || d.Val() != "off" || d.NextArg() {
			return d.ArgErr()
		}
		*off = true
		return nil
	}
	if off != nil {
		*off = false
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt := d.Val()
		var v string
		if !d.AllArgs(&v) {
			return d.ArgErr()
		}
		if err := set(opt, v); err != nil {
			return err
		}
	}
	return nil
}

func (c *RoutingConfig) unmarshalBreaker(d *caddyfile.Dispenser) error {
	if c.Breaker == nil {
		c.Breaker = new(RoutingBreaker)
	}
	b := c.Breaker
	return routingSettings(d, &b.Off, func(opt, v string) (err error) {
		switch opt {
		case "consecutive_failures":
			b.ConsecutiveFailures, err = routingWhole(opt, v, 1)
		case "error_rate":
			b.ErrorRate, err = routingRatio(opt, v)
		case "min_requests":
			b.MinRequests, err = routingWhole(opt, v, 1)
		case "window":
			b.Window, err = routingDuration(opt, v)
		case "open_for":
			b.OpenFor, err = routingDuration(opt, v)
		case "max_open_for":
			b.MaxOpenFor, err = routingDuration(opt, v)
		case "half_open_probes":
			b.HalfOpenProbes, err = routingWhole(opt, v, 1)
		default:
			err = fmt.Errorf("unrecognized breaker option %q (consecutive_failures, error_rate, min_requests, window, open_for, max_open_for, half_open_probes)", opt)
		}
		return err
	})
}

func (c *RoutingConfig) unmarshalCooldown(d *caddyfile.Dispenser) error {
	if c.Cooldown == nil {
		c.Cooldown = new(RoutingCooldown)
	}
	cd := c.Cooldown
	return routingSettings(d, nil, func(opt, v string) (err error) {
		switch opt {
		case "default":
			cd.Default, err = routingDuration(opt, v)
		case "max":
			cd.Max, err = routingDuration(opt, v)
		default:
			err = fmt.Errorf("unrecognized cooldown option %q (default, max)", opt)
		}
		return err
	})
}

func (c *RoutingConfig) unmarshalRetryBudget(d *caddyfile.Dispenser) error {
	if c.RetryBudget == nil {
		c.RetryBudget = new(RoutingRetryBudget)
	}
	rb := c.RetryBudget
	return routingSettings(d, &rb.Off, func(opt, v string) (err error) {
		switch opt {
		case "ratio":
			rb.Ratio, err = routingRatio(opt, v)
		case "min_per_second":
			rb.MinPerSecond, err = strconv.ParseFloat(v, 64)
			if err != nil || rb.MinPerSecond < 0 {
				err = fmt.Errorf("min_per_second: %q is not a number of at least 0", v)
			}
		case "window":
			rb.Window, err = routingDuration(opt, v)
		default:
			err = fmt.Errorf("unrecognized retry_budget option %q (ratio, min_per_second, window)", opt)
		}
		return err
	})
}

// routingWhole reads a whole number of at least least.
func routingWhole(opt, v string, least int) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < least {
		return 0, fmt.Errorf("%s: %q is not a whole number of at least %d", opt, v, least)
	}
	return n, nil
}

// routingDuration reads a duration above 0, such as 30s.
func routingDuration(opt, v string) (caddy.Duration, error) {
	dur, err := caddy.ParseDuration(v)
	if err != nil || dur <= 0 {
		return 0, fmt.Errorf("%s: %q is not a duration such as 30s", opt, v)
	}
	return caddy.Duration(dur), nil
}

// routingRatio reads a share above 0 and at most 1: 0.2, or 20%.
func routingRatio(opt, v string) (float64, error) {
	s, pct := strings.CutSuffix(v, "%")
	f, err := strconv.ParseFloat(s, 64)
	if pct {
		f /= 100
	}
	if err != nil || !(f > 0 && f <= 1) {
		return 0, fmt.Errorf("%s: %q is not a share above 0 and at most 1 (such as 0.2 or 20%%)", opt, v)
	}
	return f, nil
}

package gateway

import (
	"fmt"
	"sort"
	"strings"
)

// routes turn a request's model into the targets to try, per the routing
// rules: "<provider>/<model>" when <provider> is configured, else a bare
// name resolved by alias, by a provider's models list, then by the default
// provider.
type routes struct {
	providers       map[string]*Provider
	aliases         map[string][]string // alias -> "<provider>/<model>" targets
	bare            map[string]string   // bare model name -> provider name, from models lists
	defaultProvider string
}

// newRoutes indexes the providers' models lists; the same bare name in
// two lists is an error, since nothing would say which serves it.
func newRoutes(provs map[string]*Provider, aliases map[string][]string, defaultProvider string) (routes, error) {
	r := routes{providers: provs, aliases: aliases, bare: make(map[string]string), defaultProvider: defaultProvider}
	for _, name := range sortedKeys(provs) {
		for _, m := range provs[name].Models {
			if other, dup := r.bare[m]; dup {
				return routes{}, fmt.Errorf("model %q is listed by providers %q and %q: add a model alias to say which serves the bare name", m, other, name)
			}
			r.bare[m] = name
		}
	}
	return r, nil
}

// resolve returns the targets of model, in the order they are tried; none
// when nothing routes it.
func (r *routes) resolve(model string) []Target {
	if pname, rest, ok := strings.Cut(model, "/"); ok && rest != "" {
		if p, ok := r.providers[pname]; ok {
			return []Target{{Provider: p, Model: rest}}
		}
	}
	if targets, ok := r.aliases[model]; ok {
		out := make([]Target, 0, len(targets))
		for _, t := range targets {
			pname, m, _ := strings.Cut(t, "/")
			out = append(out, Target{Provider: r.providers[pname], Model: m})
		}
		return out
	}
	if pname, ok := r.bare[model]; ok {
		return []Target{{Provider: r.providers[pname], Model: model}}
	}
	if r.defaultProvider != "" {
		return []Target{{Provider: r.providers[r.defaultProvider], Model: model}}
	}
	return nil
}

// byDefault reports whether only the default provider takes model: no
// configured provider is named in it, no alias is it, no models list has
// it. Nothing in the configuration says such a model exists.
func (r *routes) byDefault(model string) bool {
	if pname, rest, ok := strings.Cut(model, "/"); ok && rest != "" {
		if _, ok := r.providers[pname]; ok {
			return false
		}
	}
	_, alias := r.aliases[model]
	_, listed := r.bare[model]
	return !alias && !listed && r.defaultProvider != ""
}

// A ModelID is a model name a client can use, and who owns it (the
// provider that lists it, or "modelgate" for an alias).
type ModelID struct{ ID, Owner string }

// ModelIDs lists every model name a client can use without knowing the
// configuration: the aliases and each provider's listed models as
// "<provider>/<model>", sorted.
func (g *Gateway) ModelIDs() []ModelID {
	var out []ModelID
	for alias := range g.routes.aliases {
		out = append(out, ModelID{ID: alias, Owner: "modelgate"})
	}
	for name, p := range g.routes.providers {
		for _, m := range p.Models {
			out = append(out, ModelID{ID: name + "/" + m, Owner: name})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// route tells a batch line's model's first target, whose provider the
// batch engine's per-provider limit counts it against and whose batch API
// may take it, or why it cannot run at the endpoint e. upstream, the
// provider's own name of the model, is empty when the first target's
// provider does not serve e (the line runs in the gateway, on a later
// target).
func (r *routes) route(e *endpoint, model string) (provider, upstream string, err error) {
	targets := r.resolve(model)
	if len(targets) == 0 {
		return "", "", fmt.Errorf("the model %q does not exist", model)
	}
	for i, t := range targets {
		if e.serves(t.Provider) {
			if i == 0 {
				upstream = t.Model
			}
			return targets[0].Provider.Name, upstream, nil
		}
	}
	return "", "", fmt.Errorf("no provider of the model %q serves %s", model, e.label)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

package caddygateway

import (
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/modelgate/modelgate/gateway"
	"github.com/modelgate/modelgate/keys"
	"github.com/modelgate/modelgate/respcache"
)

// metrics are modelgate's collectors. They are created once per process and
// registered into every config's registry (Caddy makes a new one per
// config), so counts carry on across reloads. Labels hold only configured
// names and status codes, never a client-chosen model name, so their
// cardinality stays bounded.
var metrics = struct {
	requests  *prometheus.CounterVec
	upstream  *prometheus.HistogramVec
	fallbacks *prometheus.CounterVec
	tokens    *prometheus.CounterVec
	cost      *prometheus.CounterVec
	unpriced  *prometheus.CounterVec
	ttft      *prometheus.HistogramVec
	refusals  *prometheus.CounterVec
	exposure  *prometheus.CounterVec
	audit     *prometheus.CounterVec
	suspended prometheus.Counter
	cache     *prometheus.CounterVec
}{
	requests: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "caddy", Subsystem: "modelgate", Name: "requests_total",
		Help: "Requests answered by modelgate, by endpoint, provider that answered (empty: none) and status code.",
	}, []string{"endpoint", "provider", "code"}),
	upstream: prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "caddy", Subsystem: "modelgate", Name: "upstream_duration_seconds",
		Help:    "Time of each provider call, streams included, by provider and the provider's status code (\"error\": no answer).",
		Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300},
	}, []string{"provider", "code"}),
	fallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "caddy", Subsystem: "modelgate", Name: "fallbacks_total",
		Help: "Provider calls that failed (unreachable, 429, 5xx) and passed the request on to the next target.",
	}, []string{"provider"}),
	tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "caddy", Subsystem: "modelgate", Name: "tokens_total",
		Help: "Tokens the answered requests used, by provider, model (\"other\" for a model neither the configuration nor the price table knows) and kind: input (prompt, cached included), cached, output (reasoning included), reasoning, embedding.",
	}, []string{"provider", "model", "kind"}),
	cost: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "caddy", Subsystem: "modelgate", Name: "cost_dollars_total",
		Help: "What the answered requests cost at the price table's rates, in US dollars, by provider and model. Unpriced requests are not in it: see unpriced_requests_total.",
	}, []string{"provider", "model"}),
	unpriced: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "caddy", Subsystem: "modelgate", Name: "unpriced_requests_total",
		Help: "Answered requests whose model has no price (or whose usage is unknown), by provider and model: their cost is unknown, never zero.",
	}, []string{"provider", "model"}),
	ttft: prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "caddy", Subsystem: "modelgate", Name: "time_to_first_token_seconds",
		Help:    "Time from a streamed request's arrival to its first event reaching the client, by provider.",
		Buckets: []float64{0.05, 0.1, 0.2, 0.35, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10, 30},
	}, []string{"provider"}),
	refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "caddy", Subsystem: "modelgate", Name: "limit_refusals_total",
		Help: "Requests refused by a limit or a budget, by what refused them (requests, tokens, concurrent, budget, unpriced: an unpriced model under a budget) and whose limit it was (key, owner).",
	}, []string{"limit", "scope"}),
	exposure: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "caddy", Subsystem: "modelgate", Name: "exposure_checks_skipped_total",
		Help: "Well-formed managed keys found in requests that no key in memory has and that were not looked up in storage, by reason: request_cap (past the lookups one request may cause; each occurrence counts) or queue_full (the queue of lookups was full). Keys in memory are always checked.",
	}, []string{"reason"}),
	audit: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "caddy", Subsystem: "modelgate", Name: "audit_entries_total",
		Help: "Audit entries of changes to keys, accounts and members, by action and result: stored, or failed (the storage refused it; the entry is in the log at ERROR).",
	}, []string{"action", "result"}),
	suspended: prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "caddy", Subsystem: "modelgate", Name: "account_suspended_refusals_total",
		Help: "Requests and batch lines refused because their key's account is suspended or deleted.",
	}),
	cache: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "caddy", Subsystem: "modelgate", Name: "cache_requests_total",
		Help: "Requests the response cache served, by endpoint and what it did: hit (answered from the cache), miss (looked up, sent to the provider) or bypass (not looked up: Cache-Control no-cache or no-store, or a request whose answer is not kept).",
	}, []string{"api", "status"}),
}

// registerMetrics adds modelgate's collectors to a config's registry.
func registerMetrics(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{metrics.requests, metrics.upstream, metrics.fallbacks,
		metrics.tokens, metrics.cost, metrics.unpriced, metrics.ttft, metrics.refusals, metrics.exposure, metrics.audit, metrics.suspended, metrics.cache,
		guardCollector{}, routingCollector{}} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return err
			}
		}
	}
	return nil
}

// The collectors' children are looked up by their label values on every
// request: WithLabelValues checks and hashes each value and takes the
// vec's lock, and the status code is formatted first. The children are
// cached here by the values themselves (bounded as the labels are:
// configured names, known models or "other", status codes).
var (
	upstreamChildren children[struct {
		provider string
		status   int
	}, prometheus.Observer]
	requestChildren children[struct {
		endpoint, provider string
		status             int
	}, prometheus.Counter]
	tokenChildren children[struct{ provider, model, kind string }, prometheus.Counter]
	costChildren  children[struct {
		provider, model string
		priced          bool
	}, prometheus.Counter]
	ttftChildren  children[string, prometheus.Observer]
	cacheChildren children[struct{ api, status string }, prometheus.Counter]
)

// children is a cache of a vec's children by their label values.
type children[K comparable, C any] struct {
	mu sync.RWMutex
	m  map[K]C
}

// get returns the child for k, made by child the first time.
func (c *children[K, C]) get(k K, child func() C) C {
	c.mu.RLock()
	v, ok := c.m[k]
	c.mu.RUnlock()
	if ok {
		return v
	}
	v = child()
	c.mu.Lock()
	if c.m == nil {
		c.m = make(map[K]C)
	}
	c.m[k] = v
	c.mu.Unlock()
	return v
}

// statusLabel is a status code as the metrics label it; 0: "error".
func statusLabel(status int) string {
	if status > 0 {
		return strconv.Itoa(status)
	}
	return "error"
}

// observeUpstream records one provider call; status 0 means no answer.
func observeUpstream(provider string, status int, took time.Duration) {
	upstreamChildren.get(struct {
		provider string
		status   int
	}{provider, status}, func() prometheus.Observer {
		return metrics.upstream.WithLabelValues(provider, statusLabel(status))
	}).Observe(took.Seconds())
}

// observeRequest records one answered request.
func observeRequest(endpoint, provider string, status int) {
	requestChildren.get(struct {
		endpoint, provider string
		status             int
	}{endpoint, provider, status}, func() prometheus.Counter {
		return metrics.requests.WithLabelValues(endpoint, provider, strconv.Itoa(status))
	}).Inc()
}

// observeUsage counts what one answered request used and cost.
func observeUsage(provider, model string, o *gateway.Outcome) {
	u, cost, priced := o.Usage, o.Cost, o.Priced
	// A cache hit's tokens did not go to the provider.
	hit := o.Cache == respcache.StatusHit
	add := func(kind string, n int64) {
		if n > 0 && !hit {
			tokenChildren.get(struct{ provider, model, kind string }{provider, model, kind}, func() prometheus.Counter {
				return metrics.tokens.WithLabelValues(provider, model, kind)
			}).Add(float64(n))
		}
	}
	add("input", u.Prompt)
	add("cached", u.Cached)
	add("output", u.Completion)
	add("reasoning", u.Reasoning)
	add("embedding", u.Embedding)
	// Priced requests add their cost; unpriced ones are counted apart.
	c := costChildren.get(struct {
		provider, model string
		priced          bool
	}{provider, model, priced}, func() prometheus.Counter {
		if priced {
			return metrics.cost.WithLabelValues(provider, model)
		}
		return metrics.unpriced.WithLabelValues(provider, model)
	})
	if priced {
		c.Add(cost.Dollars())
	} else {
		c.Inc()
	}
	if o.Streamed && !o.FirstByte.IsZero() {
		ttftChildren.get(provider, func() prometheus.Observer {
			return metrics.ttft.WithLabelValues(provider)
		}).Observe(o.FirstByte.Sub(o.Start).Seconds())
	}
}

// exposureSkipped is the counter of keys found in requests and not looked
// up, for the reason.
func exposureSkipped(reason string) prometheus.Counter {
	return metrics.exposure.WithLabelValues(reason)
}

// observer is the app's gateway.Observer: what the gateway does goes into
// the metrics, the events and the log.
type observer struct{ a *App }

var _ gateway.Observer = observer{}

func (observer) Upstream(provider string, status int, took time.Duration) {
	observeUpstream(provider, status, took)
}

func (observer) Fallback(_ *gateway.Call, t gateway.Target) {
	metrics.fallbacks.WithLabelValues(t.Provider.Name).Inc()
}

// Answered counts the call, and what it used when it was settled.
func (ob observer) Answered(c *gateway.Call, o *gateway.Outcome) {
	provider := ""
	if p := o.Target.Provider; p != nil {
		provider = p.Name
		if o.Settled {
			observeUsage(p.Name, ob.a.modelLabel(p, o.Target.Model), o)
		}
	}
	observeRequest(c.API.String(), provider, o.Status)
}

func (observer) Refused(limit, scope string) {
	metrics.refusals.WithLabelValues(limit, scope).Inc()
}

func (observer) ExposureSkipped(reason string, n int) {
	exposureSkipped(reason).Add(float64(n))
}

func (observer) Suspended() { metrics.suspended.Inc() }

// CacheLookup counts what the response cache did with a request.
func (observer) CacheLookup(api, status string) {
	cacheChildren.get(struct{ api, status string }{api, status}, func() prometheus.Counter {
		return metrics.cache.WithLabelValues(api, status)
	}).Inc()
}

// KeyExposed emits key_exposed through Caddy's events app.
func (ob observer) KeyExposed(k keys.Key, e keys.Exposure, revoked bool) {
	a := ob.a
	a.events.Emit(a.ctx, "key_exposed", map[string]any{
		"key_id": k.ID, "name": k.Name, "owner": k.Owner, "hint": k.Hint,
		"reporter": e.Reporter, "url": e.URL, "source": e.Source, "revoked": revoked,
	})
}

// modelLabel is the model as the metrics name it: a model the
// configuration or the price table knows, else "other", so that a client
// cannot grow the metrics without bound by inventing model names.
func (a *App) modelLabel(p *gateway.Provider, model string) string {
	for _, m := range p.Models {
		if m == model {
			return model
		}
	}
	if _, ok := a.knownModels[p.Name+"/"+model]; ok {
		return model
	}
	if e, ok := a.prices.Lookup(p.Type, model); ok {
		return e.Model()
	}
	return "other"
}

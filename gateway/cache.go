package gateway

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/modelgate/modelgate/respcache"
)

// This file puts the response cache (respcache/, docs/cache.md) on the
// request path. After a call is admitted, and before its first target is
// tried, the cache is looked up under the call's key: the account, the
// API, the route and everything in the request that shapes the answer. A
// hit is answered from the stored answer — as JSON, or replayed as the
// API's events when the client asked for a stream — and settled as a
// cache hit: it counted against the rate limits when it was admitted, its
// cost (the cache_hit price) goes to the budgets and its usage records
// count it. A miss goes to the providers; a 2xx answer that reached the
// client whole is stored for the next request.

// cacheAPI is the API of the cache that keeps a's answers; false for an
// API whose answers are not kept (count_tokens, file uploads).
func cacheAPI(a API) (respcache.API, bool) {
	switch a {
	case APIChat:
		return respcache.Chat, true
	case APIEmbeddings:
		return respcache.Embeddings, true
	case APIRerank:
		return respcache.Rerank, true
	case APIResponses:
		return respcache.Responses, true
	case APIMessages:
		return respcache.Messages, true
	}
	return "", false
}

// callCache is what the cache knows of one call it looked up: the key, the
// API, what the client's Cache-Control lets it do, and for a streamed
// answer that may be stored the collector that rebuilds it.
type callCache struct {
	cache *respcache.Cache
	key   respcache.Key
	api   respcache.API
	pol   respcache.Policy
	entry respcache.Entry
	hit   bool
	col   *respcache.Collector
}

// cacheFor looks the call up in the cache, and sets the outcome's cache
// status (o.Cache and its header). It returns nil when the cache is off
// or does not serve the call: no key (answers belong to an account), a
// batch line, an API whose answers are not kept.
func (g *Gateway) cacheFor(ctx context.Context, c *Call, o *Outcome, targets []Target) *callCache {
	api, ok := cacheAPI(c.API)
	if g.cache == nil || !ok || c.Key == nil || c.Batch != nil {
		return nil
	}
	cc := &callCache{cache: g.cache, api: api, pol: respcache.PolicyOf(c.Header)}
	key, err := respcache.KeyOf(respcache.Request{Account: c.Key.Owner, API: api, Model: targets[0].String(),
		Body: c.Body, Header: c.Header})
	if err != nil {
		// A Responses request run in the background: its answer is a
		// queued response, not the answer.
		cc.pol = respcache.Policy{}
	}
	cc.key = key
	if cc.pol.Lookup {
		e, hit, err := g.cache.Lookup(ctx, key)
		if err != nil {
			g.warnCache("the response cache could not be read; the request goes to the provider", err)
		}
		cc.entry, cc.hit = e, hit
	}
	o.Cache = cc.pol.Status(cc.hit)
	setHeader(o.Header, respcache.HeaderName, o.Cache)
	g.obs.CacheLookup(c.API.String(), o.Cache)
	return cc
}

// sink returns where a stream of the call c goes: the client's sink,
// and, when the client asked for a stream whose answer may be stored, a
// collector that rebuilds the answer from every byte the client is sent.
func (cc *callCache) sink(c *Call) Sink {
	s := c.Sink
	if cc == nil || !cc.pol.Store || s == nil || !lookup(c.Body, "stream").Bool() {
		return s
	}
	cc.col = cc.cache.Collector(cc.api)
	return collectingSink{Sink: s, col: cc.col}
}

// collectingSink is a client's sink that writes what the client was sent
// into a collector too.
type collectingSink struct {
	Sink
	col *respcache.Collector
}

func (s collectingSink) Write(p []byte) (int, error) {
	n, err := s.Sink.Write(p)
	_, _ = s.col.Write(p[:n])
	return n, err
}

// store keeps the answer a provider gave the call, which reached the
// client whole (o, settled with its 2xx), when the client's policy lets
// it: the body the client got, or the answer rebuilt from the stream it
// was sent.
func (g *Gateway) cacheStore(ctx context.Context, cc *callCache, o *Outcome) {
	if cc == nil || !cc.pol.Store || o.Status >= 300 {
		return
	}
	used := cacheUsage(o.Usage)
	body := o.Body
	if o.Streamed {
		if cc.col == nil {
			return
		}
		var err error
		if body, err = cc.col.Answer(used); err != nil {
			g.log.Debug("the streamed answer is not stored in the response cache", zap.Error(err))
			return
		}
	}
	t := o.Target
	err := g.cache.Store(ctx, cc.key, cc.api, respcache.Entry{Body: body, Usage: used, Provider: t.Provider.Name, Model: t.Model})
	switch {
	case errors.Is(err, respcache.ErrTooLarge), errors.Is(err, respcache.ErrNotAnswer):
		g.log.Debug("the answer is not stored in the response cache", zap.Error(err))
	case err != nil:
		g.warnCache("the response cache could not store an answer", err)
	}
}

// serveHit answers the call from the cache's entry: the stored answer,
// as JSON or, when the client asked for a stream, replayed as its API's
// events; then settles it as a cache hit.
func (g *Gateway) serveHit(ctx context.Context, c *Call, o *Outcome, rq *request, adm admission, cc *callCache) {
	e := cc.entry
	t := Target{Provider: g.providers[e.Provider], Model: e.Model}
	if t.Provider == nil {
		// Gone since the answer was stored (a reload): the record keeps
		// its name.
		t.Provider = &Provider{Name: e.Provider}
	}
	o.Target, o.Tried = t, []Target{t}
	body, perr := g.guardAnswer(ctx, c, rq, e.Body)
	if perr != nil {
		adm.done(ctx, nil)
		o.fail(rq.endpoint.apiOf(), perr)
		return
	}
	stream := lookup(c.Body, "stream").Bool() && c.Sink != nil
	if !stream {
		setHeader(o.Header, "Content-Type", "application/json")
		o.answer(body)
	} else if !g.replay(c, o, cc.api, body) {
		adm.done(ctx, nil)
		return
	}
	g.settleHit(ctx, o, adm, e.Usage)
}

// replay streams the stored answer body to the call's sink as its API's
// events. False when it cannot be replayed (then o has the error).
func (g *Gateway) replay(c *Call, o *Outcome, api respcache.API, body []byte) bool {
	events, err := respcache.Replay(nil, api, body, lookup(c.Body, "stream_options.include_usage").Bool())
	if err != nil {
		o.fail(endpointOf(c.API).apiOf(), asProviderError(err))
		return false
	}
	h := o.Header
	setHeader(h, "Content-Type", "text/event-stream")
	setHeader(h, "Cache-Control", "no-cache")
	delete(h, "Content-Length")
	c.Sink.WriteHeader(http.StatusOK)
	o.Status, o.Streamed, o.FirstByte = http.StatusOK, true, time.Now()
	if _, err := c.Sink.Write(events); err == nil {
		_ = c.Sink.Flush()
	}
	return true
}

// settleHit settles a call answered from the cache: the usage the stored
// answer had (which the tokens-per-minute limits count), priced as a
// cache hit (the model's cache_hit price, else the configuration's, else
// nothing), in the usage records as a cache hit.
func (g *Gateway) settleHit(ctx context.Context, o *Outcome, adm admission, u respcache.Usage) {
	o.Usage = Usage{Prompt: u.Prompt, Cached: u.Cached, CacheWrite: u.CacheWrite, CacheWrite1h: u.CacheWrite1h,
		Completion: u.Completion, Reasoning: u.Reasoning, Searches: u.Searches, Embedding: u.Embedding, Known: true}
	pu := pricingUsage(o.Usage)
	pu.CacheHits = 1
	o.Cost, o.Priced = g.prices.Cost(o.Target.Provider.Type, o.Target.Model, pu)
	o.Settled = true
	g.recordUsage(o, adm)
	adm.done(ctx, o)
}

// cacheUsage is what a call used as the cache keeps it with its answer.
func cacheUsage(u Usage) respcache.Usage {
	return respcache.Usage{Prompt: u.Prompt, Cached: u.Cached, CacheWrite: u.CacheWrite, CacheWrite1h: u.CacheWrite1h,
		Completion: u.Completion, Reasoning: u.Reasoning, Searches: u.Searches, Embedding: u.Embedding}
}

var lastCacheWarning atomic.Int64

// warnCache logs, at most every 10 seconds, that the cache could not be
// used (the shared state unreachable): the call is served without it.
func (g *Gateway) warnCache(msg string, err error) {
	now := time.Now().UnixMilli()
	if last := lastCacheWarning.Load(); now-last < 10_000 || !lastCacheWarning.CompareAndSwap(last, now) {
		return
	}
	g.log.Warn(msg, zap.Error(err))
}

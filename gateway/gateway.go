// Package gateway is modelgate's core: it serves a call to the unified API —
// a typed call in, a typed outcome out — without Caddy. It routes the call's
// model to its targets, admits it by the limits and budgets of its key and
// owner, translates it for each target's provider in turn, sends it through
// the provider's Upstream and falls back to the next target while nothing has
// reached the client, then settles what the answer used (usage as data, cost,
// usage records). It keeps the Responses API's stored responses, reports
// managed keys found in requests, and runs batch lines (BatchExecutor).
//
// The host (package caddygateway) reads requests and writes outcomes, and
// implements Upstream over Caddy's reverse_proxy (caddygateway/upstream) and
// Observer over Caddy's metrics and events. The contract is
// docs/design/core.md.
package gateway

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/modelgate/modelgate/accounts"
	"github.com/modelgate/modelgate/guardrails"
	"github.com/modelgate/modelgate/keys"
	"github.com/modelgate/modelgate/pricing"
	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/quota"
	"github.com/modelgate/modelgate/respcache"
	"github.com/modelgate/modelgate/routing"
	"github.com/modelgate/modelgate/usage"
)

// An Upstream carries requests to one provider.
type Upstream interface {
	// Send sends req and writes the provider's answer into w as it comes:
	// headers, status, body, flushes (w implements FlushError). It returns
	// when the answer has ended. A body the provider broke off returns an
	// error that wraps ErrAborted; a provider that did not answer in time
	// one that wraps ErrTimeout; one the gateway could not authenticate to
	// one that wraps ErrCredentials; an unreachable provider an error with
	// nothing written. ctx is the call's: a host's values in it (Caddy's
	// request context) stay there for the upstream to use.
	Send(ctx context.Context, req providers.Request, stream bool, w http.ResponseWriter) error
}

// The errors an Upstream's Send wraps to say what became of a request.
var (
	ErrAborted     = errors.New("the provider broke off its answer")
	ErrTimeout     = errors.New("the provider did not answer in time")
	ErrCredentials = errors.New("the gateway could not authenticate to the provider")
)

// Endpoints are the translators of the unified API's endpoints that a
// provider type serves; nil means the type does not serve that endpoint.
type Endpoints struct {
	// Chat serves POST /v1/chat/completions.
	Chat providers.Chat

	// Rerank serves POST /v1/rerank.
	Rerank providers.Rerank

	// Embeddings serves POST /v1/embeddings.
	Embeddings providers.Embeddings

	// Responses passes POST /v1/responses through to the provider's own
	// Responses API (OpenAI, Azure OpenAI). A provider without it still
	// serves the Responses API when it serves Chat: translated.
	Responses providers.Native

	// Messages passes POST /v1/messages and /v1/messages/count_tokens
	// through to the provider's own Messages API (Anthropic). A provider
	// without it still serves the Messages API when it serves Chat:
	// translated.
	Messages providers.Native
}

// A Provider is a configured provider: its name, its type (the price
// table's key), the models it lists, its translators and its upstream.
type Provider struct {
	Name   string
	Type   string   // the provider type, as modelgate.providers.<type>
	Models []string // the models it serves under their own names
	Endpoints
	Upstream Upstream

	// Address and Port are the host and port of the provider's API, for
	// the spans of the calls it is sent (server.address, server.port);
	// empty and 0 when not known.
	Address string
	Port    int

	// chatError is Chat.Error, bound once (by NewProvider) rather than for
	// every request: a method value of an interface is an allocation.
	chatError func(status int, header http.Header, body []byte) *providers.Error
}

// NewProvider returns the provider name of type typ.
func NewProvider(name, typ string, models []string, e Endpoints, up Upstream) *Provider {
	p := &Provider{Name: name, Type: typ, Models: models, Endpoints: e, Upstream: up}
	if e.Chat != nil {
		p.chatError = e.Chat.Error
	}
	return p
}

// chatErrorMapper returns Chat.Error, bound once by NewProvider (a
// provider a test put together itself gets it bound here).
func (p *Provider) chatErrorMapper() func(status int, header http.Header, body []byte) *providers.Error {
	if p.chatError != nil {
		return p.chatError
	}
	return p.Chat.Error
}

// Policies say which limits and budgets apply to a key and its owner.
type Policies interface {
	// Subjects are what key's requests count against: the key, under its
	// own policy or the configured one, and its owner.
	Subjects(key *Key) quota.Subjects
	// AllowUnpriced reports whether keys and owners with a budget may use
	// models without a price (their requests then count nothing against
	// it).
	AllowsUnpriced() bool
}

// An Observer is told what the gateway does, for metrics, events and
// traces: the host implements it. Its methods are called on the request
// path and must not block.
type Observer interface {
	// Upstream is told of each request to a provider: its status (0: no
	// answer) and how long it took, streams included.
	Upstream(provider string, status int, took time.Duration)
	// Fallback is told that a target of a call failed and the next one is
	// tried.
	Fallback(c *Call, t Target)
	// Answered is told of each call once it has ended: its outcome,
	// settled when a provider answered it.
	Answered(c *Call, o *Outcome)
	// Refused is told that a limit ("requests", "tokens", "concurrent",
	// "budget", "unpriced") of a key or its owner (scope "key", "owner")
	// refused a call.
	Refused(limit, scope string)
	// ExposureSkipped is told of n managed keys found in requests that
	// were not looked up: "request_cap" or "queue_full".
	ExposureSkipped(reason string, n int)
	// KeyExposed is told of a managed key's first exposure.
	KeyExposed(k keys.Key, e keys.Exposure, revoked bool)
	// Suspended is told that a call of a key whose account is suspended
	// or deleted was refused.
	Suspended()
	// CacheLookup is told what the response cache did with a call of api
	// (its label, as API.String names it): respcache.StatusHit,
	// StatusMiss or StatusBypass.
	CacheLookup(api, status string)
	// Guarded is told what the guards decided about a call's request or
	// answer (a stream's: once it has ended) when a guard did more than
	// allow it, one decision per guard applied; model is the model as the
	// client named it. Every decision, allow included, is counted in the
	// engine's tallies (guardrails.Tally), which a host's metrics read.
	Guarded(c *Call, model string, ds []guardrails.Decision)
}

// Limits are how calls are admitted: the quota engine, on the shared
// state, and the standby engine on an in-process state that counts while
// the shared one cannot be reached.
type Limits struct {
	Quota    *quota.Quota // nil: nothing is limited
	Standby  *quota.Quota // nil: none
	Policies Policies     // nil: no limits, no budgets

	// StateDown reports whether the shared state is known unreachable;
	// SetStateDown is told that a request found it so. Both may be nil.
	StateDown    func() bool
	SetStateDown func(err error)
}

// Config is what New makes a gateway of.
type Config struct {
	// Providers by name; Aliases map a bare model name to its
	// "<provider>/<model>" targets, tried in order; DefaultProvider serves
	// bare names nothing else claims.
	Providers       map[string]*Provider
	Aliases         map[string][]string
	DefaultProvider string
	// BuiltinTools is the Responses translator's policy for the built-in
	// tools a provider cannot run (responses.BuiltinDrop, …; "": drop).
	BuiltinTools string

	Prices *pricing.Prices // the price table; nil: the one shipped (pricing.Load)
	Limits Limits
	Usage  *usage.Recorder // the usage records; nil: none are kept

	// Managed are the managed keys (exposure, batch lines); StaticKeys
	// the static keys by name (batch lines of static keys run under them).
	Managed *keys.Manager
	// Blocked reports whether key's account is suspended or deleted: the
	// lines of its batches are refused (nil: none is). The host refuses
	// its live requests before they become calls.
	Blocked func(key *Key) bool
	// Accounts records in the account's audit log what becomes of its
	// keys (a key found exposed); nil: nothing is recorded.
	Accounts   *accounts.Service
	StaticKeys map[string]*Key

	// Responses is where the Responses API keeps stored responses.
	Responses ResponseStore

	// StorageQuota bounds what owners store; nil: nothing.
	StorageQuota *StorageQuota

	// Cache is the response cache; nil: off.
	Cache *respcache.Cache

	// Guards are the guards of requests and answers (docs/guardrails.md);
	// nil: none.
	Guards *guardrails.Engine

	Observer Observer    // nil: nobody is told
	Logger   *zap.Logger // nil: nothing is logged

	// Tracing says what the spans of traced calls hold (trace.go).
	Tracing Tracing

	// Router routes the aliases (and the "<provider>/<model>" targets they
	// list): their policies, circuit breakers, cool-downs, retry budget
	// and stream timeouts. It must know the aliases of Aliases. nil: every
	// alias tries its targets in order, each once.
	Router *routing.Router
}

// A Gateway serves calls. It is safe for concurrent use.
type Gateway struct {
	routes    routes
	providers map[string]*Provider
	prices    *pricing.Prices
	limits    Limits
	usage     *usage.Recorder
	managed   *keys.Manager
	static    map[string]*Key
	responses ResponseStore
	storage   *StorageQuota
	cache     *respcache.Cache
	accounts  *accounts.Service
	blocked   func(*Key) bool
	// builtinTools is the Responses translator's policy for built-in
	// tools (responses.BuiltinDrop, …).
	builtinTools string
	obs          Observer
	log          *zap.Logger
	tracing      Tracing
	guards       *guardrails.Engine

	exposures *exposureQueue
	reporter  atomic.Pointer[ExposureReporter]

	router *routing.Router // nil: no routing engine
}

// New returns the gateway of c. A bare model name listed by two providers
// is an error, since nothing would say which serves it. Every alias target
// and the default provider must name a provider of c (the host's
// configuration checks that).
func New(c Config) (*Gateway, error) {
	g := &Gateway{providers: c.Providers, prices: c.Prices, limits: c.Limits, usage: c.Usage, managed: c.Managed,
		static: c.StaticKeys, responses: c.Responses, storage: c.StorageQuota, cache: c.Cache, builtinTools: c.BuiltinTools, accounts: c.Accounts, blocked: c.Blocked, obs: c.Observer, log: c.Logger,
		tracing: c.Tracing, guards: c.Guards, router: c.Router}
	if g.obs == nil {
		g.obs = noObserver{}
	}
	if g.log == nil {
		g.log = zap.NewNop()
	}
	if g.storage == nil {
		g.storage = &StorageQuota{}
	}
	g.responses.quota = g.storage
	var err error
	if g.prices == nil {
		if g.prices, err = pricing.Load(nil); err != nil {
			return nil, err
		}
	}
	if g.routes, err = newRoutes(c.Providers, c.Aliases, c.DefaultProvider); err != nil {
		return nil, err
	}
	g.exposures = newExposureQueue(g.checkExposure, g.log, g.obs.ExposureSkipped)
	return g, nil
}

// Provider returns the provider name, or nil.
func (g *Gateway) Provider(name string) *Provider { return g.providers[name] }

// noObserver is told nothing.
type noObserver struct{}

func (noObserver) Upstream(string, int, time.Duration)          {}
func (noObserver) Fallback(*Call, Target)                       {}
func (noObserver) Answered(*Call, *Outcome)                     {}
func (noObserver) Refused(string, string)                       {}
func (noObserver) ExposureSkipped(string, int)                  {}
func (noObserver) KeyExposed(keys.Key, keys.Exposure, bool)     {}
func (noObserver) Suspended()                                   {}
func (noObserver) CacheLookup(string, string)                   {}
func (noObserver) Guarded(*Call, string, []guardrails.Decision) {}

package caddygateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyevents"
	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"

	"github.com/modelgate/modelgate/accounts"
	"github.com/modelgate/modelgate/batch"
	"github.com/modelgate/modelgate/gateway"
	"github.com/modelgate/modelgate/guardrails"
	"github.com/modelgate/modelgate/keys"
	"github.com/modelgate/modelgate/pricing"
	"github.com/modelgate/modelgate/providers/responses"
	"github.com/modelgate/modelgate/quota"
	"github.com/modelgate/modelgate/respcache"
	"github.com/modelgate/modelgate/retention"
	"github.com/modelgate/modelgate/routing"
	"github.com/modelgate/modelgate/state"
	"github.com/modelgate/modelgate/usage"
)

func init() {
	caddy.RegisterModule(App{})
}

// App is the modelgate app. It owns the providers, the model routes and the
// static keys that the modelgate and modelgate_auth handlers of the same
// config use.
type App struct {
	// Providers keyed by the name requests use in "<provider>/<model>". The
	// provider type is the module name inline, under "type".
	ProvidersRaw map[string]json.RawMessage `json:"providers,omitempty" caddy:"namespace=modelgate.providers inline_key=type"`

	// Models maps a bare model name (an alias) to its targets, each
	// "<provider>/<model>", tried in order: the next one is tried when the
	// previous could not be reached or answered 429 or 5xx, as long as nothing
	// has been sent to the client yet.
	Models map[string][]string `json:"models,omitempty"`

	// Routing tunes how aliases choose among their targets and keep
	// failing ones out of rotation: circuit breakers, the providers'
	// cool-downs, a retry budget, stream timeouts, each alias's policy.
	// Default: every setting's default, aliases ordered.
	Routing *RoutingConfig `json:"routing,omitempty"`

	// DefaultProvider serves bare model names that neither an alias nor a
	// provider's models list claims. Default: none (such names get 404).
	DefaultProvider string `json:"default_provider,omitempty"`

	// BuiltinTools is what becomes of a built-in tool of a Responses
	// request (web_search, image_generation, code_interpreter, …) that
	// the model's provider has no equivalent of, when the request is
	// translated: "drop" leaves it out and names it in the
	// X-Modelgate-Dropped-Tools response header; "refuse" answers 400
	// unsupported_parameter. A web search goes to the provider's own
	// where it has one (Anthropic's, Gemini's Google Search). Default:
	// drop.
	BuiltinTools string `json:"builtin_tools,omitempty"`

	// Keys are static API keys, managed in the config.
	Keys []StaticKey `json:"keys,omitempty"`

	// Batch tunes the batch engine (the Files and Batch APIs). It is on
	// with the defaults when absent.
	Batch *BatchConfig `json:"batch,omitempty"`

	// Limits are the rate limits and budgets of keys and owners. Default:
	// none.
	Limits *LimitsConfig `json:"limits,omitempty"`

	// Accounts are the account holders' members and group rules, and the
	// audit log's retention. Default: every identity that signs in to the
	// key settings page owns the account of its name.
	Accounts *AccountsConfig `json:"accounts,omitempty"`

	// Retention is how long files, batch results and stored responses
	// are kept. Default: 30 days each, swept hourly.
	Retention *RetentionConfig `json:"retention,omitempty"`

	// StorageQuota bounds the bytes each owner keeps in the storage.
	// Default: 10 GiB per owner.
	StorageQuota *StorageQuotaConfig `json:"storage_quota,omitempty"`

	// Cache configures the response cache: an exact repeat of a request by
	// the same account is answered without a provider call. Default: off.
	Cache *CacheConfig `json:"cache,omitempty"`

	// Guardrails are the guards of requests and answers (PII, patterns,
	// a screening service, moderation). Default: none.
	Guardrails *guardrails.Config `json:"guardrails,omitempty"`

	// Tracing says what the spans of traced calls hold (see
	// docs/tracing.md); the spans come with Caddy's tracing handler in the
	// route. Default: no prompts or answers in spans.
	Tracing *TracingConfig `json:"tracing,omitempty"`

	// Prices override and extend the price table shipped in the binary
	// (pricing/prices.json): a JSON price file and entries of their own.
	// Default: the shipped table alone.
	Prices *pricing.Config `json:"prices,omitempty"`

	// KeyRefresh is how often managed keys are reloaded from the storage:
	// the longest a key created or deleted on another instance sharing the
	// storage takes to work, or to stop working, here. Default: 10s.
	KeyRefresh caddy.Duration `json:"key_refresh,omitempty"`

	// StorageRaw is where files, batches and their results live, and the
	// locks that instances sharing it coordinate with. Default: Caddy's
	// configured storage. Instances that share it form a cluster.
	StorageRaw json.RawMessage `json:"storage,omitempty" caddy:"namespace=caddy.storage inline_key=module"`

	// FileStorageRaw is where the bytes of files (uploads, batch input
	// parts, results) go, when they should not sit in the storage of
	// records and locks: a cluster on Redis keeps coordination in Redis
	// and 200 MiB uploads on a shared file system or object store.
	// Default: the app's storage.
	FileStorageRaw json.RawMessage `json:"file_storage,omitempty" caddy:"namespace=caddy.storage inline_key=module"`

	// State is where counters, leases and messages between instances
	// live: "shared" on the storage when it offers shared state (storage
	// redis does), or "local", in this process. Default: shared when the
	// storage offers it, else local.
	State string `json:"state,omitempty"`

	providers    map[string]*gateway.Provider
	gw           *gateway.Gateway // serves the calls of the unified API and batch lines
	keys         map[[32]byte]*Key
	staticByName map[string]*Key // the static keys by name: batch lines of static keys run under them
	logger       *zap.Logger

	storage     certmagic.Storage
	fileStorage certmagic.Storage // file bytes, when not in storage
	storageID   string
	managed     *keys.Manager // managed keys, in storage
	stopKeys    func()        // stops the key refresher

	accounts *accounts.Manager // account records, in storage
	audit    *accounts.AuditLog
	service  *accounts.Service

	store     *batch.Store
	runner    *batch.Runner
	ledger    *retention.Ledger          // owners' stored bytes, for the storage quota
	storageQ  *gateway.StorageQuota      // the ledger against the storage quota's limits
	sweeper   *sweepWorker               // deletes what expired; shared with the configs on the same storage
	batchExec batch.Executor             // one per config: the runner tells configs apart by it
	native    map[string]batch.NativeAPI // the providers' own batch APIs, where their batch mode is native

	prices      *pricing.Prices
	knownModels map[string]struct{} // "<provider>/<model>" an alias names

	router      *routing.Router // the aliases' routing engine (routing.go)
	stopRouting func()          // stops sharing it with the other instances

	state       state.State
	stateShared bool
	closeState  func() error
	stopShared  func()
	health      *health

	quota        *quota.Quota    // limits and budgets, on state
	standbyQuota *quota.Quota    // on an in-process state, while a shared one is unreachable
	usage        *usage.Recorder // the usage records, in storage

	cache        *respcache.Cache // the response cache; nil: off
	releaseCache func()           // gives back the in-memory answers Provision took

	ctx    caddy.Context
	events *caddyevents.App

	responseWrites *sync.WaitGroup // stored responses and pointers still being written (gateway.ResponseStore)
	responsesID    string          // storageIdentity(storage), for the response store
}

// CaddyModule returns the Caddy module information.
func (App) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "modelgate",
		New: func() caddy.Module { return new(App) },
	}
}

// Provision loads the providers and checks that every route points at one.
// It starts nothing: validation-only loads provision and then cancel.
func (a *App) Provision(ctx caddy.Context) error {
	a.ctx, a.logger = ctx, ctx.Logger()
	ev, err := ctx.App("events")
	if err != nil {
		return fmt.Errorf("events app: %w", err)
	}
	a.events = ev.(*caddyevents.App)
	if reg := ctx.GetMetricsRegistry(); reg != nil {
		if err := registerMetrics(reg); err != nil {
			return fmt.Errorf("registering metrics: %w", err)
		}
	}
	mods, err := ctx.LoadModule(a, "ProvidersRaw")
	if err != nil {
		return fmt.Errorf("loading providers: %w", err)
	}
	a.providers = make(map[string]*gateway.Provider, len(mods.(map[string]any)))
	for name, m := range mods.(map[string]any) {
		p, ok := m.(Provider)
		if !ok {
			return fmt.Errorf("provider %q: module %T does not implement the modelgate provider contract (caddygateway.Provider)", name, m)
		}
		b := p.Base()
		if !b.provisioned() {
			return fmt.Errorf("provider %q: module %T did not call ProvisionBase in its Provision", name, m)
		}
		gp := gateway.NewProvider(name, string(p.CaddyModule().ID.Name()), b.Models, p.Endpoints(), b.upstream)
		gp.Address, gp.Port = serverAddress(b.baseURL)
		a.providers[name] = gp
		a.provisionNative(name, p)
	}
	switch a.BuiltinTools {
	case "", responses.BuiltinDrop, responses.BuiltinRefuse:
	default:
		return fmt.Errorf("builtin_tools must be %s or %s, not %q", responses.BuiltinDrop, responses.BuiltinRefuse, a.BuiltinTools)
	}
	if err := a.provisionPrices(); err != nil {
		return err
	}

	a.keys, err = provisionStaticKeys(a.Keys)
	if err != nil {
		return err
	}
	a.staticByName = make(map[string]*Key, len(a.keys))
	for _, k := range a.keys {
		a.staticByName[k.Name] = k
	}
	if err := a.provisionStorage(ctx); err != nil {
		return err
	}
	if err := a.provisionState(); err != nil {
		return err
	}
	if err := a.provisionQuota(); err != nil {
		return err
	}
	if err := a.provisionManagedKeys(ctx); err != nil {
		return err
	}
	if err := a.provisionAccounts(ctx); err != nil {
		return err
	}
	if err := a.provisionBatch(); err != nil {
		return err
	}
	if err := a.provisionRetention(); err != nil {
		return err
	}
	if err := a.provisionCache(); err != nil {
		return err
	}
	if err := a.provisionRouter(); err != nil {
		return err
	}
	return a.provisionGateway()
}

// provisionGateway makes the gateway that serves this config's calls, of
// what Provision set up.
func (a *App) provisionGateway() error {
	guards, err := a.provisionGuards()
	if err != nil {
		return err
	}
	a.gw, err = gateway.New(gateway.Config{
		Providers:       a.providers,
		Aliases:         a.Models,
		DefaultProvider: a.DefaultProvider,
		BuiltinTools:    a.BuiltinTools,
		Prices:          a.prices,
		Limits: gateway.Limits{Quota: a.quota, Standby: a.standbyQuota, Policies: policies{a},
			StateDown:    a.health.stateDown.Load,
			SetStateDown: func(err error) { a.setStateDown(true, err) }},
		Usage:      a.usage,
		Managed:    a.managed,
		Accounts:   a.service,
		Blocked:    a.accountBlocked,
		StaticKeys: a.staticByName,
		Responses: gateway.ResponseStore{Storage: a.storage, ID: a.responsesID, Writes: a.responseWrites, Now: a.stateShared,
			TTL: time.Duration(a.retention().Responses)},
		StorageQuota: a.storageQuota(),
		Cache:        a.cache,
		Guards:       guards,
		Observer:     observer{a},
		Logger:       a.logger,
		Tracing:      a.Tracing.gateway(),
		Router:       a.router,
	})
	if err != nil {
		return err
	}
	a.batchExec = a.gw.BatchExecutor()
	return nil
}

// Validate checks that every alias target and the default provider name a
// configured provider.
func (a *App) Validate() error {
	if err := a.Limits.validate(); err != nil {
		return err
	}
	if a.Cache != nil {
		if _, err := a.Cache.Engine(); err != nil {
			return err
		}
	}
	if a.Accounts != nil {
		if err := a.Accounts.Validate(); err != nil {
			return fmt.Errorf("accounts: %w", err)
		}
	}
	for _, alias := range sortedKeys(a.Models) {
		if err := checkAlias(alias, a.Models[alias], func(name string) bool { return a.providers[name] != nil }); err != nil {
			return err
		}
	}
	if a.DefaultProvider != "" {
		if _, ok := a.providers[a.DefaultProvider]; !ok {
			return fmt.Errorf("default_provider %q is not a configured provider", a.DefaultProvider)
		}
	}
	return nil
}

// Start acquires the batch runner of this config's storage, or shares the
// one already running: during a reload the new config's Start runs before
// the old config's Stop, so the runner's reference count never reaches zero
// and running batches go on.
func (a *App) Start() error {
	v, _, err := runners.LoadOrNew(a.storageID, func() (caddy.Destructor, error) {
		id, err := caddy.InstanceID()
		if err != nil {
			return nil, fmt.Errorf("batch runner: instance ID: %w", err)
		}
		return batch.NewRunner(a.store, id.String(), time.Duration(a.Batch.PollInterval), liveBatch), nil
	})
	if err != nil {
		return err
	}
	a.runner = v.(*batch.Runner)
	if err := a.startSweeper(); err != nil {
		return err
	}
	a.startKeyRefresh()
	a.startShared()
	a.startRouter()
	a.usage.Start()
	a.quota.Start()
	return nil
}

// Stop releases this config's reference to the batch runner; the last one
// stops it, after each running part has written its finished results.
func (a *App) Stop() error {
	if a.quota != nil {
		// What was settled in slices reaches the shared state, and the
		// unused slices go back to the other instances.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := a.quota.Stop(ctx); err != nil {
			a.logger.Warn("settling the slices of limits in the shared state", zap.Error(err))
		}
		cancel()
	}
	if a.usage != nil {
		// What was counted since the last flush is written now.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := a.usage.Stop(ctx); err != nil {
			a.logger.Error("writing the usage records", zap.Error(err))
		}
		cancel()
	}
	if a.stopShared != nil {
		a.stopShared()
		a.stopShared = nil
	}
	a.stopRouter()
	a.stopKeyRefresh()
	if a.runner == nil {
		return nil
	}
	a.runner = nil
	_, err := runners.Delete(a.storageID)
	return errors.Join(err, a.stopSweeper())
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// checkAlias checks an alias's targets: each "<provider>/<model>" with a
// provider that defined reports as configured.
func checkAlias(alias string, targets []string, defined func(name string) bool) error {
	if len(targets) == 0 {
		return fmt.Errorf("model %s: at least one <provider>/<model> target is required", alias)
	}
	for _, t := range targets {
		pname, model, ok := strings.Cut(t, "/")
		if !ok || pname == "" || model == "" {
			return fmt.Errorf("model %s: target %q is not <provider>/<model>", alias, t)
		}
		if !defined(pname) {
			return fmt.Errorf("model %s: target %q names provider %q, which is not defined", alias, t, pname)
		}
	}
	return nil
}

// provisionPrices loads the price table: the shipped one, then the
// configured file and entries.
func (a *App) provisionPrices() error {
	cfg := a.Prices
	if cfg != nil && cfg.File != "" {
		c := *cfg
		c.File = caddy.NewReplacer().ReplaceKnown(c.File, "")
		cfg = &c
	}
	p, err := pricing.Load(cfg)
	if err != nil {
		return fmt.Errorf("prices: %w", err)
	}
	a.prices = p
	a.knownModels = make(map[string]struct{})
	for _, targets := range a.Models {
		for _, t := range targets {
			a.knownModels[t] = struct{}{}
		}
	}
	return nil
}

// Cleanup releases the state Provision took.
func (a *App) Cleanup() error {
	a.waitResponseWrites(10 * time.Second)
	a.cleanupState()
	if a.releaseCache != nil {
		a.releaseCache()
		a.releaseCache = nil
	}
	return nil
}

// Interface guards
var (
	_ caddy.App          = (*App)(nil)
	_ caddy.Provisioner  = (*App)(nil)
	_ caddy.Validator    = (*App)(nil)
	_ caddy.CleanerUpper = (*App)(nil)
)

package caddygateway

import (
	"encoding/hex"
	"encoding/json"
	"sort"
	"strconv"
	"strings"

	"github.com/modelgate/modelgate/keys"
	"github.com/modelgate/modelgate/pricing"
	"github.com/modelgate/modelgate/providers/responses"

	"github.com/dustin/go-humanize"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
)

func init() {
	httpcaddyfile.RegisterGlobalOption("modelgate", parseModelgateOption)
}

// parseModelgateOption sets up the modelgate app from the global option
// block. Several blocks merge into one app. Syntax:
//
//	modelgate {
//	    provider <name> <type> {
//	        base_url <url>
//	        api_key  <secret>
//	        models   <model>...
//	        <type-specific options>
//	        proxy {
//	            <reverse_proxy subdirectives>
//	        }
//	    }
//	    model <alias> <provider>/<model> [<provider>/<model>...] [{
//	        policy ordered|weighted|latency|cost
//	        target <provider>/<model> [weight <n>] [priority <n>] [first_token_timeout <d>] [idle_timeout <d>]
//	    }]
//	    default_provider <name>
//	    builtin_tools    drop|refuse
//	    key <name> <secret>
//	    key_refresh <duration>
//	    batch {
//	        workers             <n>
//	        per_provider        <n>
//	        max_requests        <n>
//	        max_file_size       <size>
//	        completion_window   <duration>
//	        max_retries         <n>
//	        retry_backoff       <duration>
//	        checkpoint_interval <duration>
//	        part_lines          <n>
//	        lease               <duration>
//	        poll_interval       <duration>
//	    }
//	    storage <module> { … }
//	    file_storage <module> { … }
//	    state local|shared
//	    limits {
//	        key   [<static key>] [rpm <n>] [tpm <n>] [concurrent <n>] [budget <usd> day|month|total]
//	        owner [<owner>]      [rpm <n>] [tpm <n>] [concurrent <n>] [budget <usd> day|month|total]
//	        allow_unpriced
//	        leases off | leases { life <duration>  share <n>  horizon <duration>  idle <duration> }
//	    }
//	    accounts {
//	        member <identity> <account> owner|admin|member|viewer
//	        group  <group>    <account> owner|admin|member|viewer
//	        personal_accounts on|off
//	        audit_retention <duration>
//	    }
//	    prices {
//	        file <path>
//	        cache_hit <$/1k>
//	        model <type>/<model> input <$/M> cached <$/M> cache_write <$/M> cache_write_1h <$/M> output <$/M> search <$/1k> embedding <$/M> cache_hit <$/1k>
//	    }
//	    cache {
//	        ttl            <duration>
//	        max_entries    <n>
//	        max_size       <size>
//	        max_entry_size <size>
//	        storage        memory|shared
//	    }
//	    retention {
//	        files          <duration>
//	        batch_output   <duration>
//	        responses      <duration>
//	        sweep_interval <duration>
//	    }
//	    storage_quota {
//	        owner [<owner>] <size>|unlimited
//	    }
//	    guardrails {
//	        guard <name> { … }   (see unmarshalGuardrails)
//	    }
//	    tracing {
//	        capture_content
//	    }
//	    routing {
//	        breaker off | { consecutive_failures, error_rate, min_requests, window, open_for, max_open_for, half_open_probes }
//	        cooldown { default, max }
//	        retry_budget off | { ratio, min_per_second, window }
//	        latency_samples     <n>
//	        first_token_timeout <duration>
//	        idle_timeout        <duration>
//	    }
//	}
func parseModelgateOption(d *caddyfile.Dispenser, existing any) (any, error) {
	app := new(App)
	if existing != nil {
		prev, ok := existing.(httpcaddyfile.App)
		if !ok {
			return nil, d.Errf("unexpected existing modelgate option value %T", existing)
		}
		if err := json.Unmarshal(prev.Value, app); err != nil {
			return nil, d.Errf("merging modelgate blocks: %v", err)
		}
	}
	if err := app.UnmarshalCaddyfile(d); err != nil {
		return nil, err
	}
	return httpcaddyfile.App{Name: "modelgate", Value: caddyconfig.JSON(app, nil)}, nil
}

// UnmarshalCaddyfile reads a modelgate global option block into the app;
// see parseModelgateOption for the syntax.
func (a *App) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the option name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		switch d.Val() {
		case "provider":
			if err := a.unmarshalProvider(d); err != nil {
				return err
			}
		case "model":
			if err := a.unmarshalModel(d); err != nil {
				return err
			}
		case "routing":
			if err := a.unmarshalRouting(d); err != nil {
				return err
			}
		case "builtin_tools":
			if !d.AllArgs(&a.BuiltinTools) {
				return d.ArgErr()
			}
			if a.BuiltinTools != responses.BuiltinDrop && a.BuiltinTools != responses.BuiltinRefuse {
				return d.Errf("builtin_tools must be %s or %s, not %q", responses.BuiltinDrop, responses.BuiltinRefuse, a.BuiltinTools)
			}
		case "default_provider":
			if !d.NextArg() {
				return d.ArgErr()
			}
			name := d.Val()
			if d.NextArg() {
				return d.ArgErr()
			}
			if _, ok := a.ProvidersRaw[name]; !ok {
				return d.Errf("default_provider %q is not defined (define providers before naming the default)", name)
			}
			a.DefaultProvider = name
		case "key":
			var name, secret string
			if !d.Args(&name, &secret) || d.NextArg() {
				return d.ArgErr()
			}
			for _, k := range a.Keys {
				if k.Name == name {
					return d.Errf("key %q is defined twice", name)
				}
			}
			k := StaticKey{Name: name}
			if hasPlaceholder(secret) {
				k.Secret = secret
			} else {
				sum := keys.Digest(secret)
				k.SHA256 = hex.EncodeToString(sum[:])
			}
			a.Keys = append(a.Keys, k)
		case "key_refresh":
			var v string
			if !d.AllArgs(&v) {
				return d.ArgErr()
			}
			dur, err := caddy.ParseDuration(v)
			if err != nil || dur <= 0 {
				return d.Errf("key_refresh: %q is not a duration such as 10s", v)
			}
			a.KeyRefresh = caddy.Duration(dur)
		case "batch":
			if err := a.unmarshalBatch(d); err != nil {
				return err
			}
		case "storage", "file_storage":
			dst := &a.StorageRaw
			if d.Val() == "file_storage" {
				dst = &a.FileStorageRaw
			}
			if *dst != nil {
				return d.Errf("%s is defined twice", d.Val())
			}
			raw, err := unmarshalStorage(d)
			if err != nil {
				return err
			}
			*dst = raw
		case "limits":
			if a.Limits == nil {
				a.Limits = new(LimitsConfig)
			}
			if err := a.Limits.unmarshalLimits(d); err != nil {
				return err
			}
		case "accounts":
			if a.Accounts == nil {
				a.Accounts = new(AccountsConfig)
			}
			if err := a.Accounts.unmarshalAccounts(d); err != nil {
				return err
			}
		case "prices":
			if d.NextArg() {
				return d.ArgErr()
			}
			if a.Prices == nil {
				a.Prices = new(pricing.Config)
			}
			for nesting := d.Nesting(); d.NextBlock(nesting); {
				line := append([]string{d.Val()}, d.RemainingArgs()...)
				if err := a.Prices.UnmarshalLine(line); err != nil {
					return d.Errf("prices: %v", err)
				}
			}
		case "retention":
			if err := a.unmarshalRetention(d); err != nil {
				return err
			}
		case "cache":
			if a.Cache != nil {
				return d.Err("cache is defined twice")
			}
			a.Cache = new(CacheConfig)
			if err := a.Cache.UnmarshalCaddyfile(d); err != nil {
				return err
			}
		case "guardrails":
			if err := a.unmarshalGuardrails(d); err != nil {
				return err
			}
		case "tracing":
			if a.Tracing != nil {
				return d.Err("tracing is defined twice")
			}
			a.Tracing = new(TracingConfig)
			if err := a.Tracing.UnmarshalCaddyfile(d); err != nil {
				return err
			}
		case "storage_quota":
			if err := a.unmarshalStorageQuota(d); err != nil {
				return err
			}
		case "state":
			if !d.AllArgs(&a.State) {
				return d.ArgErr()
			}
			if a.State != stateLocal && a.State != stateShared {
				return d.Errf("state: %q is not local or shared", a.State)
			}
		default:
			return d.Errf("unrecognized modelgate option %q", d.Val())
		}
	}
	return nil
}

// unmarshalStorage reads "<storage|file_storage> <module> { … }" through
// the storage module's own Caddyfile parsing.
func unmarshalStorage(d *caddyfile.Dispenser) (json.RawMessage, error) {
	if !d.NextArg() {
		return nil, d.ArgErr()
	}
	name := d.Val()
	mod, err := caddyfile.UnmarshalModule(d, "caddy.storage."+name)
	if err != nil {
		return nil, err
	}
	if _, ok := mod.(caddy.StorageConverter); !ok {
		return nil, d.Errf("module %s is not a storage module", name)
	}
	return caddyconfig.JSONModuleObject(mod, "module", name, nil), nil
}

// unmarshalBatch reads the batch { … } block.
func (a *App) unmarshalBatch(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	if a.Batch == nil {
		a.Batch = new(BatchConfig)
	}
	c := a.Batch
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt := d.Val()
		var arg string
		if !d.AllArgs(&arg) {
			return d.ArgErr()
		}
		count := func(dst *int) error {
			n, err := strconv.Atoi(arg)
			if err != nil || n < 1 {
				return d.Errf("batch %s: %q is not a whole number above 0", opt, arg)
			}
			*dst = n
			return nil
		}
		duration := func(dst *caddy.Duration) error {
			v, err := caddy.ParseDuration(arg)
			if err != nil || v <= 0 {
				return d.Errf("batch %s: %q is not a duration such as 30s", opt, arg)
			}
			*dst = caddy.Duration(v)
			return nil
		}
		var err error
		switch opt {
		case "workers":
			err = count(&c.Workers)
		case "per_provider":
			err = count(&c.PerProvider)
		case "max_requests":
			err = count(&c.MaxRequests)
		case "part_lines":
			err = count(&c.PartLines)
		case "max_retries":
			n, perr := strconv.Atoi(arg)
			if perr != nil || n < 0 {
				return d.Errf("batch max_retries: %q is not a whole number", arg)
			}
			c.MaxRetries = &n
		case "max_file_size":
			n, perr := humanize.ParseBytes(arg)
			if perr != nil || n == 0 {
				return d.Errf("batch max_file_size: %q is not a size such as 200MiB", arg)
			}
			c.MaxFileSize = int64(n)
		case "completion_window":
			err = duration(&c.CompletionWindow)
		case "retry_backoff":
			err = duration(&c.RetryBackoff)
		case "checkpoint_interval":
			err = duration(&c.CheckpointInterval)
		case "lease":
			err = duration(&c.Lease)
		case "poll_interval":
			err = duration(&c.PollInterval)
		default:
			return d.Errf("unrecognized batch option %q", opt)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// unmarshalRetention reads the retention { … } block.
func (a *App) unmarshalRetention(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	if a.Retention == nil {
		a.Retention = new(RetentionConfig)
	}
	c := a.Retention
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt := d.Val()
		var dst *caddy.Duration
		switch opt {
		case "files":
			dst = &c.Files
		case "batch_output":
			dst = &c.BatchOutput
		case "responses":
			dst = &c.Responses
		case "sweep_interval":
			dst = &c.SweepInterval
		default:
			return d.Errf("unrecognized retention option %q (files, batch_output, responses, sweep_interval)", opt)
		}
		var arg string
		if !d.AllArgs(&arg) {
			return d.ArgErr()
		}
		v, err := caddy.ParseDuration(arg)
		if err != nil || v <= 0 {
			return d.Errf("retention %s: %q is not a duration such as 720h or 30d", opt, arg)
		}
		*dst = caddy.Duration(v)
	}
	return nil
}

// unmarshalStorageQuota reads the storage_quota { … } block: lines
// "owner <size>" (every owner without a line of its own) and "owner
// <owner> <size>"; a size of 0 or unlimited is no quota.
func (a *App) unmarshalStorageQuota(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	if a.StorageQuota == nil {
		a.StorageQuota = new(StorageQuotaConfig)
	}
	c := a.StorageQuota
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		if d.Val() != "owner" {
			return d.Errf("storage_quota: %q is not owner", d.Val())
		}
		args := d.RemainingArgs()
		var name, size string
		switch len(args) {
		case 1:
			size = args[0]
		case 2:
			name, size = args[0], args[1]
		default:
			return d.ArgErr()
		}
		var n uint64
		if size != "unlimited" {
			var err error
			if n, err = humanize.ParseBytes(size); err != nil || n > 1<<62 {
				return d.Errf("storage_quota owner %s: %q is not a size such as 10GiB (or 0 or unlimited, for none)", name, size)
			}
		}
		q := int64(n)
		switch {
		case name == "" && c.Owner != nil:
			return d.Err("storage_quota owner (the default) is given twice")
		case name == "":
			c.Owner = &q
		default:
			if _, dup := c.Owners[name]; dup {
				return d.Errf("storage_quota owner %s is given twice", name)
			}
			if c.Owners == nil {
				c.Owners = make(map[string]int64)
			}
			c.Owners[name] = q
		}
	}
	return nil
}

// unmarshalProvider reads "provider <name> <type> { … }" through the type's
// own module.
func (a *App) unmarshalProvider(d *caddyfile.Dispenser) error {
	var name, typ string
	if !d.Args(&name, &typ) {
		return d.ArgErr()
	}
	if strings.Contains(name, "/") {
		return d.Errf("provider name %q must not contain '/'", name)
	}
	if _, dup := a.ProvidersRaw[name]; dup {
		return d.Errf("provider %q is defined twice", name)
	}
	id := "modelgate.providers." + typ
	if _, err := caddy.GetModule(id); err != nil {
		return d.Errf("provider %s: unknown provider type %q (known types: %s)", name, typ, strings.Join(providerTypes(), ", "))
	}
	unm, err := caddyfile.UnmarshalModule(d, id)
	if err != nil {
		return err
	}
	if a.ProvidersRaw == nil {
		a.ProvidersRaw = make(map[string]json.RawMessage)
	}
	a.ProvidersRaw[name] = caddyconfig.JSONModuleObject(unm, "type", typ, nil)
	return nil
}

// providerTypes lists the registered provider types.
func providerTypes() []string {
	var types []string
	for _, m := range caddy.GetModules("modelgate.providers") {
		types = append(types, m.ID.Name())
	}
	sort.Strings(types)
	return types
}

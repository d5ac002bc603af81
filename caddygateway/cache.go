package caddygateway

import (
	"fmt"
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/dustin/go-humanize"

	"github.com/modelgate/modelgate/respcache"
	"github.com/modelgate/modelgate/state"
)

// CacheConfig configures the response cache: an exact repeat of a
// request, by the same account, is answered with the stored answer,
// without a provider call (see docs/cache.md). Its presence turns the
// cache on.
type CacheConfig struct {
	// TTL is how long an answer is served after it was stored. Default:
	// 1h.
	TTL caddy.Duration `json:"ttl,omitempty"`

	// MaxEntries bounds the answers kept in memory on one instance; the
	// least recently used go first. Default: 10000.
	MaxEntries int `json:"max_entries,omitempty"`

	// MaxSize bounds the bytes of the answers kept in memory on one
	// instance. Default: 64 MiB.
	MaxSize int64 `json:"max_size,omitempty"`

	// MaxEntrySize is the largest answer stored, in memory or on the
	// shared state; a larger one is served and not stored. Default: 1 MiB.
	MaxEntrySize int64 `json:"max_entry_size,omitempty"`

	// Storage is where answers are kept: "memory" on this instance, or
	// "shared" on the app's shared state (Redis), where every instance
	// answers from what any instance stored. Default: shared when the
	// app's state is shared, else memory.
	Storage string `json:"storage,omitempty"`
}

// Where a CacheConfig keeps answers.
const (
	cacheMemory = "memory"
	cacheShared = "shared"
)

// Engine returns the response cache engine's configuration, and an error
// for a value out of range.
func (c *CacheConfig) Engine() (respcache.Config, error) {
	rc := respcache.Config{
		TTL:          time.Duration(c.TTL),
		MaxEntries:   c.MaxEntries,
		MaxBytes:     c.MaxSize,
		MaxEntrySize: c.MaxEntrySize,
	}
	if c.Storage != "" && c.Storage != cacheMemory && c.Storage != cacheShared {
		return rc, fmt.Errorf("cache: storage %q is not memory or shared", c.Storage)
	}
	return rc, rc.Validate()
}

// UnmarshalCaddyfile reads the cache block of the modelgate option; the
// block may be empty (the defaults) or left out entirely:
//
//	cache {
//		ttl            <duration>
//		max_entries    <n>
//		max_size       <size>
//		max_entry_size <size>
//		storage        memory|shared
//	}
func (c *CacheConfig) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt := d.Val()
		var arg string
		if !d.AllArgs(&arg) {
			return d.ArgErr()
		}
		size := func(dst *int64) error {
			n, err := humanize.ParseBytes(arg)
			if err != nil || n == 0 || n > 1<<62 {
				return d.Errf("cache %s: %q is not a size such as 64MiB", opt, arg)
			}
			*dst = int64(n)
			return nil
		}
		var err error
		switch opt {
		case "ttl":
			v, perr := caddy.ParseDuration(arg)
			if perr != nil || v < time.Second {
				return d.Errf("cache ttl: %q is not a duration of a second or more, such as 10m", arg)
			}
			c.TTL = caddy.Duration(v)
		case "max_entries":
			n, perr := strconv.Atoi(arg)
			if perr != nil || n < 1 {
				return d.Errf("cache max_entries: %q is not a whole number above 0", arg)
			}
			c.MaxEntries = n
		case "max_size":
			err = size(&c.MaxSize)
		case "max_entry_size":
			err = size(&c.MaxEntrySize)
		case "storage":
			if arg != cacheMemory && arg != cacheShared {
				return d.Errf("cache storage: %q is not memory or shared", arg)
			}
			c.Storage = arg
		default:
			return d.Errf("unrecognized cache option %q", opt)
		}
		if err != nil {
			return err
		}
	}
	if _, err := c.Engine(); err != nil {
		return d.Err(err.Error())
	}
	return nil
}

// memoryCaches keeps each config's in-memory answers across config
// reloads, by the storage and the cache's configuration: a reload that
// changes neither keeps what was stored.
var memoryCaches = caddy.NewUsagePool()

type memoryCache struct{ *respcache.Memory }

func (memoryCache) Destruct() error { return nil }

// provisionCache makes the response cache the app configures (nil: off):
// on the shared state when storage says shared, or when it says nothing
// and the app's state is shared; else in memory on this instance.
func (a *App) provisionCache() error {
	if a.Cache == nil {
		return nil
	}
	cfg, err := a.Cache.Engine()
	if err != nil {
		return err
	}
	var store respcache.Store
	values, hasValues := a.state.(state.Values)
	switch shared := a.Cache.Storage == cacheShared || a.Cache.Storage == "" && a.stateShared; {
	case shared && hasValues:
		store = respcache.NewShared(values)
	default:
		if shared {
			a.logger.Warn("cache storage shared: the app's state is not shared; answers are kept in memory on this instance")
		}
		cfg = cfg.WithDefaults()
		key := fmt.Sprintf("%s %d %d %d %d", a.storageID, cfg.TTL, cfg.MaxEntries, cfg.MaxBytes, cfg.MaxEntrySize)
		v, _, err := memoryCaches.LoadOrNew(key, func() (caddy.Destructor, error) {
			return memoryCache{respcache.NewMemory(cfg)}, nil
		})
		if err != nil {
			return err
		}
		store = v.(memoryCache).Memory
		a.releaseCache = func() { _, _ = memoryCaches.Delete(key) }
	}
	a.cache, err = respcache.New(cfg, store)
	return err
}

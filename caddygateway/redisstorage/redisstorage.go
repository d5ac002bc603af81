// Package redisstorage is the Caddy storage module caddy.storage.modelgate_redis:
// Caddy's storage (certificates, ACME accounts, locks, and everything
// modelgate keeps there) on Redis, so that several Caddy instances share
// it. The logic lives in state/redisstore; this package is its Caddy
// wrapper: JSON and Caddyfile configuration, placeholders, and clients
// shared across config reloads.
package redisstorage

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/certmagic"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/modelgate/modelgate/state/redisclient"
	"github.com/modelgate/modelgate/state/redisstore"
)

func init() {
	caddy.RegisterModule(Storage{})
}

// Storage keeps Caddy's storage in Redis: a standalone server, a Redis
// Cluster, or a master found through Sentinels, as Addresses and
// MasterName say. Several gateways can share one Redis with different
// KeyPrefix values.
//
// Addresses, Username, Password, SentinelUsername, SentinelPassword,
// MasterName, KeyPrefix and the TLS file names may hold placeholders such
// as {env.REDIS_PASSWORD}, resolved at provisioning; secrets never reach a
// log (String redacts them).
type Storage struct {
	redisclient.Options

	// KeyPrefix starts every key this storage writes. Default: "caddy".
	KeyPrefix string `json:"key_prefix,omitempty"`

	// LockTTL is how long a lock outlives its holder's last renewal: the
	// time a crashed instance's locks block the others. Default: 10s.
	LockTTL caddy.Duration `json:"lock_ttl,omitempty"`

	resolved redisclient.Options
	prefix   string
	poolKey  string
	client   redis.UniversalClient
	store    *redisstore.Storage
	logger   *zap.Logger
}

// CaddyModule returns the Caddy module information.
func (Storage) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "caddy.storage.modelgate_redis",
		New: func() caddy.Module { return new(Storage) },
	}
}

// clients holds one go-redis client per connection configuration, shared
// by every module instance (and the modelgate app) with equal options,
// so a config reload keeps its connections.
var clients = caddy.NewUsagePool()

type pooledClient struct{ redis.UniversalClient }

func (c pooledClient) Destruct() error { return c.Close() }

var setLogger sync.Once

// AcquireClient returns the shared client for opts (placeholders already
// resolved), creating it on first use. Call release when done with it; the
// last release closes it.
func AcquireClient(opts redisclient.Options) (client redis.UniversalClient, release func() error, err error) {
	setLogger.Do(func() {
		// go-redis writes connection errors to standard error; route
		// them to Caddy's log instead, at debug level (an outage is
		// reported by whoever needs Redis, once, not per dial).
		log := caddy.Log().Named("redis")
		redis.SetLogger(redisclient.Logger(func(format string, args ...any) {
			log.Debug(strings.TrimSpace(fmt.Sprintf(format, args...)))
		}))
	})
	key := opts.Key()
	v, _, err := clients.LoadOrNew(key, func() (caddy.Destructor, error) {
		c, err := redisclient.New(opts)
		if err != nil {
			return nil, err
		}
		return pooledClient{c}, nil
	})
	if err != nil {
		return nil, nil, err
	}
	var once sync.Once
	return v.(pooledClient).UniversalClient, func() error {
		var err error
		once.Do(func() { _, err = clients.Delete(key) })
		return err
	}, nil
}

// Provision resolves placeholders and connects (lazily: Redis need not be
// up yet).
func (s *Storage) Provision(ctx caddy.Context) error {
	s.logger = ctx.Logger()
	repl := caddy.NewReplacer()
	r := func(v string) string { return repl.ReplaceKnown(v, "") }
	o := s.Options
	o.Addresses = make([]string, 0, len(s.Addresses))
	for _, a := range s.Addresses {
		// One placeholder may hold several addresses: "a:6379 b:6379".
		o.Addresses = append(o.Addresses, strings.Fields(r(a))...)
	}
	o.Username, o.Password = r(o.Username), r(o.Password)
	o.SentinelUsername, o.SentinelPassword = r(o.SentinelUsername), r(o.SentinelPassword)
	o.MasterName = r(o.MasterName)
	if o.TLS != nil {
		t := *o.TLS
		t.CACert, t.ClientCert, t.ClientKey, t.ServerName = r(t.CACert), r(t.ClientCert), r(t.ClientKey), r(t.ServerName)
		o.TLS = &t
	}
	s.resolved = o
	s.prefix = r(s.KeyPrefix)
	if s.prefix == "" {
		s.prefix = "caddy"
	}
	if err := s.Validate(); err != nil {
		return err
	}
	client, release, err := AcquireClient(o)
	if err != nil {
		return fmt.Errorf("redis storage: %w", err)
	}
	store, err := redisstore.New(client, redisstore.Options{KeyPrefix: s.prefix,
		LockTTL: time.Duration(s.LockTTL), Logger: s.logger})
	if err != nil {
		_ = release()
		return err
	}
	s.client, s.store, s.poolKey = client, store, o.Key()
	s.logger.Debug("redis storage provisioned", zap.Stringer("redis", s))
	return nil
}

// Validate checks the configuration (after Provision: with placeholders
// resolved).
func (s *Storage) Validate() error {
	if err := s.resolved.Validate(); err != nil {
		return err
	}
	if strings.ContainsAny(s.prefix, "{}") {
		return fmt.Errorf("redis storage key_prefix %q must not contain braces", s.prefix)
	}
	if s.LockTTL != 0 && time.Duration(s.LockTTL) < time.Second {
		return errors.New("redis storage lock_ttl must be at least 1s")
	}
	return nil
}

// CertMagicStorage implements caddy.StorageConverter.
func (s *Storage) CertMagicStorage() (certmagic.Storage, error) {
	if s.store == nil {
		return nil, errors.New("redis storage used before provisioning")
	}
	return s.store, nil
}

// Client returns the module's go-redis client, shared with every user of
// the same connection options, between Provision and Cleanup. The
// modelgate app runs its shared state on it.
func (s *Storage) Client() redis.UniversalClient { return s.client }

// Cleanup releases the shared client; the last user closes it. Locks
// still held go on being renewed while the client lives (an operation of
// the previous config may still hold one) and expire otherwise.
func (s *Storage) Cleanup() error {
	if s.poolKey == "" {
		return nil
	}
	_, err := clients.Delete(s.poolKey)
	s.poolKey = ""
	return err
}

// String describes the storage for logs, secrets redacted.
func (s *Storage) String() string {
	o := s.resolved
	if o.Addresses == nil {
		o = s.Options
	}
	prefix := s.prefix
	if prefix == "" {
		prefix = s.KeyPrefix
	}
	return fmt.Sprintf("%s key_prefix=%s", o, prefix)
}

// Interface guards.
var (
	_ caddy.Provisioner      = (*Storage)(nil)
	_ caddy.Validator        = (*Storage)(nil)
	_ caddy.CleanerUpper     = (*Storage)(nil)
	_ caddy.StorageConverter = (*Storage)(nil)
	_ fmt.Stringer           = (*Storage)(nil)
)

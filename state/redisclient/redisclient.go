// Package redisclient turns connection options (standalone, Sentinel or
// Cluster addresses, credentials, TLS) into a go-redis UniversalClient with
// bounded timeouts, for the Redis storage and the Redis state alike. It
// imports nothing of Caddy; the Caddy module embeds Options in its JSON.
package redisclient

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// Options say how to reach Redis. The zero value with one address is a
// plain standalone connection.
type Options struct {
	// Addresses are host:port pairs. One address: a standalone server
	// (or, with Cluster, a cluster's configuration endpoint). Several: the
	// nodes of a Redis Cluster. With MasterName: the Sentinels.
	// Default: 127.0.0.1:6379.
	Addresses []string `json:"addresses,omitempty"`

	// Username and Password authenticate (Redis 6 ACL users, or only a
	// password for requirepass).
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`

	// DB is the database number, standalone and Sentinel only (a Cluster
	// has only database 0). Default: 0.
	DB int `json:"db,omitempty"`

	// MasterName is the name of the master the Sentinels at Addresses
	// watch; setting it selects Sentinel mode.
	MasterName string `json:"master_name,omitempty"`

	// SentinelUsername and SentinelPassword authenticate to the
	// Sentinels themselves, when they require it.
	SentinelUsername string `json:"sentinel_username,omitempty"`
	SentinelPassword string `json:"sentinel_password,omitempty"`

	// Cluster selects Cluster mode with a single address (a configuration
	// endpoint, as managed services offer). Several addresses without
	// MasterName select it anyway.
	Cluster bool `json:"cluster,omitempty"`

	// TLS, when present (even empty), connects with TLS.
	TLS *TLS `json:"tls,omitempty"`

	// DialTimeout bounds connecting. Default: 2s.
	DialTimeout Duration `json:"dial_timeout,omitempty"`

	// Timeout bounds each command's read and write. A request that needs
	// Redis gets an error after at most about this long when Redis does
	// not answer; it never hangs. Default: 2s.
	Timeout Duration `json:"timeout,omitempty"`

	// PoolSize is the number of connections per node. Default: go-redis's,
	// 10 per CPU.
	PoolSize int `json:"pool_size,omitempty"`
}

// TLS configures TLS to Redis. An empty TLS verifies the server against
// the system's roots and Addresses' host names.
type TLS struct {
	// CACert is a PEM file of the certificate authorities to trust instead
	// of the system's.
	CACert string `json:"ca_cert,omitempty"`
	// ClientCert and ClientKey are PEM files of a client certificate and
	// its key, for servers that ask for one.
	ClientCert string `json:"client_cert,omitempty"`
	ClientKey  string `json:"client_key,omitempty"`
	// ServerName overrides the name the server's certificate must have.
	ServerName string `json:"server_name,omitempty"`
	// InsecureSkipVerify accepts any server certificate. For tests only.
	InsecureSkipVerify bool `json:"insecure_skip_verify,omitempty"`
}

// Duration is a time.Duration that reads "2s" or nanoseconds from JSON,
// as caddy.Duration does, and writes nanoseconds, as Caddy's adapted
// configs do.
type Duration time.Duration

// UnmarshalJSON accepts a duration string or a number of nanoseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		*d = Duration(v)
		return nil
	}
	var n int64
	if err := json.Unmarshal(b, &n); err != nil {
		return err
	}
	*d = Duration(n)
	return nil
}

const (
	defaultAddress = "127.0.0.1:6379"
	defaultTimeout = 2 * time.Second
)

// Mode is "standalone", "sentinel" or "cluster", as New will connect.
func (o Options) Mode() string {
	switch {
	case o.MasterName != "":
		return "sentinel"
	case len(o.Addresses) > 1 || o.Cluster:
		return "cluster"
	}
	return "standalone"
}

// Validate reports options that cannot work.
func (o Options) Validate() error {
	for _, a := range o.Addresses {
		if a == "" || !strings.Contains(a, ":") {
			return fmt.Errorf("redis address %q is not host:port", a)
		}
	}
	if o.DB < 0 {
		return fmt.Errorf("redis db %d is negative", o.DB)
	}
	if o.DB != 0 && o.Mode() == "cluster" {
		return errors.New("a Redis Cluster has only db 0")
	}
	if o.Cluster && o.MasterName != "" {
		return errors.New("redis: cluster and master_name (Sentinel) exclude each other")
	}
	if o.TLS != nil && (o.TLS.ClientCert == "") != (o.TLS.ClientKey == "") {
		return errors.New("redis tls: client_cert and client_key go together")
	}
	if o.DialTimeout < 0 || o.Timeout < 0 || o.PoolSize < 0 {
		return errors.New("redis: negative timeout or pool size")
	}
	return nil
}

// Universal returns the go-redis options these Options make.
func (o Options) Universal() (*redis.UniversalOptions, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	addrs := o.Addresses
	if len(addrs) == 0 {
		addrs = []string{defaultAddress}
	}
	dial, timeout := time.Duration(o.DialTimeout), time.Duration(o.Timeout)
	if dial == 0 {
		dial = defaultTimeout
	}
	if timeout == 0 {
		timeout = defaultTimeout
	}
	u := &redis.UniversalOptions{
		Addrs:            addrs,
		Username:         o.Username,
		Password:         o.Password,
		DB:               o.DB,
		MasterName:       o.MasterName,
		SentinelUsername: o.SentinelUsername,
		SentinelPassword: o.SentinelPassword,
		IsClusterMode:    o.Cluster,
		DialTimeout:      dial,
		// Two dial attempts: an unreachable server fails fast rather
		// than after go-redis's default five.
		DialerRetries:      2,
		DialerRetryTimeout: 100 * time.Millisecond,
		ReadTimeout:        timeout,
		WriteTimeout:       timeout,
		PoolTimeout:        timeout + time.Second,
		PoolSize:           o.PoolSize,
		// A context's deadline bounds a command too, and one retry at
		// most keeps an unreachable Redis from stacking waits.
		ContextTimeoutEnabled: true,
		MaxRetries:            1,
		ClientName:            "modelgate",
		// Self-hosted Redis and Valkey have no maintenance notifications;
		// do not probe for them on every connection.
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	}
	if o.TLS != nil {
		tc, err := o.TLS.config()
		if err != nil {
			return nil, err
		}
		u.TLSConfig = tc
	}
	return u, nil
}

// Logger adapts a printf-style function for go-redis's global logger
// (redis.SetLogger), which otherwise writes to standard error.
type Logger func(format string, args ...any)

// Printf implements go-redis's logging interface.
func (l Logger) Printf(_ context.Context, format string, args ...any) { l(format, args...) }

// New connects (lazily: no command is sent until the first use).
func New(o Options) (redis.UniversalClient, error) {
	u, err := o.Universal()
	if err != nil {
		return nil, err
	}
	return redis.NewUniversalClient(u), nil
}

func (t *TLS) config() (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName, InsecureSkipVerify: t.InsecureSkipVerify}
	if t.CACert != "" {
		pem, err := os.ReadFile(t.CACert)
		if err != nil {
			return nil, fmt.Errorf("redis tls ca_cert: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("redis tls ca_cert %s holds no PEM certificate", t.CACert)
		}
		c.RootCAs = pool
	}
	if t.ClientCert != "" {
		cert, err := tls.LoadX509KeyPair(t.ClientCert, t.ClientKey)
		if err != nil {
			return nil, fmt.Errorf("redis tls client certificate: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// Key identifies the connection these options make, for sharing one
// client among users with equal options. It holds no secret in clear
// (passwords enter it hashed).
func (o Options) Key() string {
	c := o
	c.Password = hash(o.Password)
	c.SentinelPassword = hash(o.SentinelPassword)
	b, _ := json.Marshal(c)
	return string(b)
}

func hash(s string) string {
	if s == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:8])
}

// String describes the options for logs, with the passwords redacted.
func (o Options) String() string {
	addrs := o.Addresses
	if len(addrs) == 0 {
		addrs = []string{defaultAddress}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "redis %s %s", o.Mode(), strings.Join(addrs, ","))
	if o.MasterName != "" {
		fmt.Fprintf(&b, " master=%s", o.MasterName)
	}
	if o.DB != 0 {
		fmt.Fprintf(&b, " db=%d", o.DB)
	}
	if o.Username != "" {
		fmt.Fprintf(&b, " user=%s", o.Username)
	}
	if o.Password != "" {
		b.WriteString(" password=[REDACTED]")
	}
	if o.SentinelPassword != "" {
		b.WriteString(" sentinel_password=[REDACTED]")
	}
	if o.TLS != nil {
		b.WriteString(" tls")
	}
	return b.String()
}

package redisstorage

import (
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/modelgate/modelgate/state/redisclient"
)

// UnmarshalCaddyfile sets up the storage from Caddyfile tokens, as the
// global option `storage modelgate_redis` or inside `modelgate { storage modelgate_redis }`.
// Syntax:
//
//	storage modelgate_redis [<host:port>...] {
//		address           <host:port>...   # repeatable; several: a Cluster, or the Sentinels
//		username          <user>
//		password          <password>
//		db                <n>
//		key_prefix        <prefix>          # default caddy
//		master_name       <name>            # Sentinel: the master's name
//		sentinel_username <user>
//		sentinel_password <password>
//		cluster                             # Cluster through one configuration endpoint
//		tls {                               # or a bare `tls`: system roots
//			ca_cert              <pem file>
//			client_cert          <cert pem file> <key pem file>
//			server_name          <name>
//			insecure_skip_verify
//		}
//		dial_timeout      <duration>        # default 2s
//		timeout           <duration>        # per command; default 2s
//		pool_size         <n>
//		lock_ttl          <duration>        # default 10s
//	}
func (s *Storage) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the module name
	s.Addresses = append(s.Addresses, d.RemainingArgs()...)
	for d.NextBlock(0) {
		opt := d.Val()
		switch opt {
		case "address", "addresses":
			args := d.RemainingArgs()
			if len(args) == 0 {
				return d.ArgErr()
			}
			s.Addresses = append(s.Addresses, args...)
		case "username", "password", "key_prefix", "master_name", "sentinel_username", "sentinel_password":
			var v string
			if !d.AllArgs(&v) {
				return d.ArgErr()
			}
			*map[string]*string{
				"username": &s.Username, "password": &s.Password, "key_prefix": &s.KeyPrefix,
				"master_name": &s.MasterName, "sentinel_username": &s.SentinelUsername,
				"sentinel_password": &s.SentinelPassword,
			}[opt] = v
		case "db", "pool_size":
			var v string
			if !d.AllArgs(&v) {
				return d.ArgErr()
			}
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return d.Errf("%s: %q is not a number of 0 or more", opt, v)
			}
			if opt == "db" {
				s.DB = n
			} else {
				s.PoolSize = n
			}
		case "cluster":
			if d.NextArg() {
				return d.ArgErr()
			}
			s.Cluster = true
		case "dial_timeout", "timeout", "lock_ttl":
			var v string
			if !d.AllArgs(&v) {
				return d.ArgErr()
			}
			dur, err := caddy.ParseDuration(v)
			if err != nil || dur <= 0 {
				return d.Errf("%s: %q is not a positive duration", opt, v)
			}
			switch opt {
			case "dial_timeout":
				s.DialTimeout = redisclient.Duration(dur)
			case "timeout":
				s.Timeout = redisclient.Duration(dur)
			default:
				s.LockTTL = caddy.Duration(dur)
			}
		case "tls":
			if err := s.unmarshalTLS(d); err != nil {
				return err
			}
		default:
			return d.Errf("unrecognized redis storage option '%s'", opt)
		}
	}
	return nil
}

func (s *Storage) unmarshalTLS(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	if s.TLS == nil {
		s.TLS = new(redisclient.TLS)
	}
	t := s.TLS
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "ca_cert":
			if !d.AllArgs(&t.CACert) {
				return d.ArgErr()
			}
		case "client_cert":
			if !d.AllArgs(&t.ClientCert, &t.ClientKey) {
				return d.Err("client_cert takes a certificate file and a key file")
			}
		case "server_name":
			if !d.AllArgs(&t.ServerName) {
				return d.ArgErr()
			}
		case "insecure_skip_verify":
			if d.NextArg() {
				return d.ArgErr()
			}
			t.InsecureSkipVerify = true
		default:
			return d.Errf("unrecognized redis tls option '%s'", d.Val())
		}
	}
	return nil
}

var _ caddyfile.Unmarshaler = (*Storage)(nil)

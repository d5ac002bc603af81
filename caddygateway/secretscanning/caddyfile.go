package secretscanning

import (
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

func init() {
	httpcaddyfile.RegisterHandlerDirective("modelgate_secret_scanning", parseSecretScanningCaddyfile)
	// Before the auth directives: the alert endpoint is authenticated by
	// its signature, not by a bearer key, and answers without calling next.
	httpcaddyfile.RegisterDirectiveOrder("modelgate_secret_scanning", httpcaddyfile.Before, "basic_auth")
}

func parseSecretScanningCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	s := new(SecretScanning)
	err := s.UnmarshalCaddyfile(h.Dispenser)
	return s, err
}

// UnmarshalCaddyfile sets up the secret-scanning alert endpoint. Syntax:
//
//	modelgate_secret_scanning [<matcher>] {
//	    github|gitlab [{
//	        public_key <key_identifier> <pem_file>
//	        keys_url   <url>|off
//	        token      <token>
//	    }]
//	    auto_revoke
//	    settings_url <url>
//	    smtp <host:port> {
//	        from     <address>
//	        username <user>
//	        password <password>
//	        tls      starttls|require_starttls|implicit|none
//	        timeout  <duration>
//	    }
//	    notify <owner> <address>
//	    notify_default <address>
//	}
func (h *SecretScanning) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		switch opt := d.Val(); opt {
		case "github", "gitlab":
			if d.NextArg() {
				return d.ArgErr()
			}
			for _, r := range h.Reporters {
				if r.Name == opt {
					return d.Errf("%s is configured twice", opt)
				}
			}
			rc := ReporterConfig{Name: opt}
			for d.NextBlock(1) {
				switch d.Val() {
				case "public_key":
					var k PublicKeyConfig
					if !d.AllArgs(&k.ID, &k.File) {
						return d.ArgErr()
					}
					rc.PublicKeys = append(rc.PublicKeys, k)
				case "keys_url":
					if !d.AllArgs(&rc.KeysURL) {
						return d.ArgErr()
					}
				case "token":
					if !d.AllArgs(&rc.Token) {
						return d.ArgErr()
					}
				default:
					return d.Errf("unrecognized %s option %q", opt, d.Val())
				}
			}
			h.Reporters = append(h.Reporters, rc)
		case "auto_revoke":
			if d.NextArg() {
				return d.ArgErr()
			}
			h.AutoRevoke = true
		case "settings_url":
			if !d.AllArgs(&h.SettingsURL) {
				return d.ArgErr()
			}
		case "smtp":
			if h.SMTP != nil {
				return d.Err("smtp is configured twice")
			}
			s := new(SMTPConfig)
			if !d.AllArgs(&s.Address) {
				return d.ArgErr()
			}
			for d.NextBlock(1) {
				switch d.Val() {
				case "from":
					if !d.AllArgs(&s.From) {
						return d.ArgErr()
					}
				case "username":
					if !d.AllArgs(&s.Username) {
						return d.ArgErr()
					}
				case "password":
					if !d.AllArgs(&s.Password) {
						return d.ArgErr()
					}
				case "tls":
					if !d.AllArgs(&s.TLS) {
						return d.ArgErr()
					}
				case "timeout":
					var v string
					if !d.AllArgs(&v) {
						return d.ArgErr()
					}
					dur, err := caddy.ParseDuration(v)
					if err != nil {
						return d.Errf("smtp timeout: %v", err)
					}
					s.Timeout = caddy.Duration(dur)
				default:
					return d.Errf("unrecognized smtp option %q", d.Val())
				}
			}
			h.SMTP = s
		case "notify":
			var owner, addr string
			if !d.AllArgs(&owner, &addr) {
				return d.ArgErr()
			}
			if h.Notify == nil {
				h.Notify = make(map[string]string)
			}
			if _, dup := h.Notify[owner]; dup {
				return d.Errf("notify %s is configured twice", owner)
			}
			h.Notify[owner] = addr
		case "notify_default":
			if !d.AllArgs(&h.NotifyDefault) {
				return d.ArgErr()
			}
		default:
			return d.Errf("unrecognized modelgate_secret_scanning option %q", opt)
		}
	}
	return nil
}

var _ caddyfile.Unmarshaler = (*SecretScanning)(nil)

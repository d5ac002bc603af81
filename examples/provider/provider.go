// Package quillprovider is a modelgate provider type in a Go module of its
// own: the Caddy module modelgate.providers.quill, which serves chat
// completions through Quill's API (package quill). It is written as any
// third party writes one, against modelgate's exported provider contract,
// and tested against modelgate's conformance kit; modelgate imports
// nothing of it. Build it into Caddy beside modelgate:
//
//	xcaddy build --with github.com/modelgate/modelgate --with example.com/modelgate-provider-quill
//
// and configure it in the modelgate block of the Caddyfile:
//
//	provider quill quill {
//		key_id {env.QUILL_KEY_ID}
//		secret {env.QUILL_SECRET}
//		models quill-1
//	}
package quillprovider

import (
	"fmt"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/modelgate/modelgate/caddygateway"

	"example.com/modelgate-provider-quill/quill"
)

func init() {
	caddy.RegisterModule(Provider{})
}

// Provider is the quill provider type.
type Provider struct {
	caddygateway.ProviderBase

	// KeyID names the key Quill signs requests with (a placeholder is
	// resolved).
	KeyID string `json:"key_id,omitempty"`

	// Secret is the key's secret, which signs every request (a
	// placeholder is resolved). It never leaves the gateway: only
	// signatures do, and an answer that quotes it has it scrubbed.
	Secret string `json:"secret,omitempty"`

	chat quill.Chat
}

// providerType is what the quill type tells modelgate about itself; its
// Auth is set per provider, in Provision.
var providerType = caddygateway.ProviderType{Name: "quill", BaseURL: "https://api.quill.example"}

// CaddyModule returns the Caddy module information.
func (Provider) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "modelgate.providers.quill", New: func() caddy.Module { return new(Provider) }}
}

// Provision resolves the key and sets up the signer and the provider's
// reverse_proxy.
func (p *Provider) Provision(ctx caddy.Context) error {
	repl := caddy.NewReplacer()
	keyID, secret := repl.ReplaceKnown(p.KeyID, ""), repl.ReplaceKnown(p.Secret, "")
	if keyID == "" || secret == "" {
		return fmt.Errorf("provider type quill needs key_id and secret (is the environment variable set?)")
	}
	t := providerType
	t.Auth = quill.Signer{KeyID: keyID, Secret: []byte(secret)}
	t.Secrets = []string{secret}
	return p.ProvisionBase(ctx, t)
}

// UnmarshalCaddyfile reads the provider block: the options every type
// shares (base_url, models, proxy) and key_id and secret.
func (p *Provider) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	err := p.UnmarshalBlock(d, providerType, func(d *caddyfile.Dispenser) (bool, error) {
		var to *string
		switch d.Val() {
		case "key_id":
			to = &p.KeyID
		case "secret":
			to = &p.Secret
		default:
			return false, nil
		}
		if !d.AllArgs(to) {
			return true, d.ArgErr()
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	if p.KeyID == "" || p.Secret == "" {
		return d.Err("provider type quill needs key_id and secret (for example: secret {env.QUILL_SECRET})")
	}
	if p.APIKey != "" {
		return d.Err("provider type quill signs its requests: give key_id and secret, not api_key")
	}
	return nil
}

// Base returns the common configuration.
func (p *Provider) Base() *caddygateway.ProviderBase { return &p.ProviderBase }

// Endpoints says the quill type serves chat completions (and, through
// them, the Responses and Messages APIs, translated).
func (p *Provider) Endpoints() caddygateway.Endpoints {
	return caddygateway.Endpoints{Chat: p.chat}
}

// Interface guards
var (
	_ caddygateway.Provider = (*Provider)(nil)
	_ caddy.Provisioner     = (*Provider)(nil)
	_ caddyfile.Unmarshaler = (*Provider)(nil)
)

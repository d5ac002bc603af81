// Package cohereprovider is the Caddy module of the cohere provider type,
// modelgate.providers.cohere: Cohere's own APIs behind the translators of
// package providers/cohere (chat, embeddings) and providers/rerank's
// Cohere format (rerank).
package cohereprovider

import (
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/modelgate/modelgate/caddygateway"
	"github.com/modelgate/modelgate/providers/cohere"
	"github.com/modelgate/modelgate/providers/rerank"
)

func init() {
	caddy.RegisterModule(Provider{})
}

// Provider is a provider that speaks Cohere's API v2: chat completions are
// translated to and from POST /v2/chat (streams included), embeddings to
// POST /v2/embed, and rerank to POST /v2/rerank. The key is sent as
// "Authorization: Bearer <api_key>". It takes the options every provider
// type takes and no others.
type Provider struct {
	caddygateway.ProviderBase
}

// providerType describes the type to the host.
var providerType = caddygateway.ProviderType{
	Name:        "cohere",
	BaseURL:     "https://api.cohere.com",
	KeyRequired: true,
}

// CaddyModule returns the Caddy module information.
func (Provider) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "modelgate.providers.cohere",
		New: func() caddy.Module { return new(Provider) },
	}
}

// Provision sets up the reverse proxy to the provider.
func (p *Provider) Provision(ctx caddy.Context) error {
	return p.ProvisionBase(ctx, providerType)
}

// UnmarshalCaddyfile reads a Cohere provider block. Syntax:
//
//	provider <name> cohere {
//	    base_url <url>
//	    api_key  <secret>
//	    models   <model>...
//	    proxy { <reverse_proxy subdirectives> }
//	}
func (p *Provider) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return p.UnmarshalBlock(d, providerType, nil)
}

// Base returns the provider's common configuration.
func (p *Provider) Base() *caddygateway.ProviderBase { return &p.ProviderBase }

// Endpoints returns the translators: Cohere serves chat, rerank and
// embeddings.
func (p *Provider) Endpoints() caddygateway.Endpoints {
	return caddygateway.Endpoints{Chat: cohere.Chat{}, Rerank: rerank.Cohere, Embeddings: cohere.Embeddings{}}
}

// Interface guards
var (
	_ caddy.Provisioner     = (*Provider)(nil)
	_ caddyfile.Unmarshaler = (*Provider)(nil)
	_ caddygateway.Provider = (*Provider)(nil)
)

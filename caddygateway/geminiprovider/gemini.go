// Package geminiprovider is the Caddy module of the gemini provider type,
// modelgate.providers.gemini: Google's Gemini Developer API behind the
// translator of package providers/gemini (chat and embeddings).
package geminiprovider

import (
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/modelgate/modelgate/batch"
	"github.com/modelgate/modelgate/caddygateway"
	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/gemini"
)

func init() {
	caddy.RegisterModule(Provider{})
}

// Provider is the Gemini Developer API
// (https://generativelanguage.googleapis.com/v1beta). Unified chat requests
// become generateContent and streamGenerateContent requests, embeddings
// batchEmbedContents requests; the answers, streamed or not, are translated
// back. The key is sent as "x-goog-api-key". The type has no options of its
// own: the API version is the base URL's last segment.
type Provider struct {
	caddygateway.ProviderBase

	// Batch is where batches send this provider's lines: "native", to
	// its own batch API at its batch price, or "gateway", as live
	// requests. Default: native.
	Batch string `json:"batch,omitempty"`

	chat gemini.Chat
}

// providerType describes the type to the host.
var providerType = caddygateway.ProviderType{
	Name:        "gemini",
	BaseURL:     gemini.DefaultBaseURL,
	KeyRequired: true,
	KeyHeader:   "x-goog-api-key",
}

// CaddyModule returns the Caddy module information.
func (Provider) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "modelgate.providers.gemini",
		New: func() caddy.Module { return new(Provider) },
	}
}

// Provision sets up the translator and the reverse proxy to the provider.
func (p *Provider) Provision(ctx caddy.Context) error {
	p.chat = gemini.Chat{}
	return p.ProvisionBase(ctx, providerType)
}

// UnmarshalCaddyfile reads a Gemini provider block. Syntax:
//
//	provider <name> gemini {
//	    base_url <url>     # default https://generativelanguage.googleapis.com/v1beta
//	    api_key  <secret>
//	    models   <model>...
//	    batch    native|gateway
//	    proxy { <reverse_proxy subdirectives> }
//	}
func (p *Provider) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return p.UnmarshalBlock(d, providerType, func(d *caddyfile.Dispenser) (bool, error) {
		if d.Val() != "batch" {
			return false, nil
		}
		return true, caddygateway.ParseBatchMode(d, &p.Batch)
	})
}

// Base returns the provider's common configuration.
func (p *Provider) Base() *caddygateway.ProviderBase { return &p.ProviderBase }

// Endpoints returns the translators: Gemini serves chat and embeddings.
func (p *Provider) Endpoints() caddygateway.Endpoints {
	return caddygateway.Endpoints{Chat: p.chat, Embeddings: gemini.Embeddings{Chat: p.chat}}
}

// Interface guards
var (
	_ caddy.Provisioner     = (*Provider)(nil)
	_ caddyfile.Unmarshaler = (*Provider)(nil)
	_ caddygateway.Provider = (*Provider)(nil)
)

// BatchMode is where batches send the provider's lines: its Batch
// option, else the type's default (native: its API has batches).
func (p *Provider) BatchMode() string { return caddygateway.BatchMode(p.Batch, providerType.Name) }

// NativeBatches returns the Gemini API's batch mode (inline requests),
// whose requests are translated as live ones: the provider's lines go
// there while its batch mode is native.
func (p *Provider) NativeBatches(send providers.Send) batch.NativeAPI {
	return gemini.Batches{Send: send, Chat: p.chat}
}

var _ caddygateway.NativeBatcher = (*Provider)(nil)

package caddymodule

import (
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/rerank"
)

// rerankPresets are the rerank-only provider types. TEI and Infinity are
// self-hosted: they have no public endpoint, so base_url is required.
var rerankPresets = []providerDefaults{
	{typeName: "cohere", baseURL: "https://api.cohere.com", keyNeeded: true, rerank: rerank.Cohere},
	{typeName: "jina", baseURL: "https://api.jina.ai/v1", keyNeeded: true, rerank: rerank.Jina},
	{typeName: "voyage", baseURL: "https://api.voyageai.com/v1", keyNeeded: true, rerank: rerank.Voyage},
	{typeName: "mixedbread", baseURL: "https://api.mixedbread.com/v1", keyNeeded: true, rerank: rerank.Mixedbread},
	{typeName: "tei", rerank: rerank.TEI},
	{typeName: "infinity", rerank: rerank.Infinity},
}

func init() {
	for _, d := range rerankPresets {
		caddy.RegisterModule(Reranker{defaults: d})
	}
}

// Reranker is a provider that serves rerank only: Cohere (v2 rerank), Jina,
// Voyage, Mixedbread, Hugging Face text-embeddings-inference (tei) or
// Infinity. Its key, when it has one, is sent as "Authorization: Bearer
// <api_key>".
type Reranker struct {
	ProviderBase

	defaults providerDefaults
}

// CaddyModule returns the Caddy module information.
func (p Reranker) CaddyModule() caddy.ModuleInfo {
	d := p.defaults
	return caddy.ModuleInfo{
		ID:  caddy.ModuleID("modelgate.providers." + d.typeName),
		New: func() caddy.Module { return &Reranker{defaults: d} },
	}
}

// Provision sets up the reverse proxy to the provider.
func (p *Reranker) Provision(ctx caddy.Context) error {
	d := p.defaults
	d.authHeader = "Authorization"
	return p.provision(ctx, d)
}

// UnmarshalCaddyfile reads a rerank provider block. Syntax:
//
//	provider <name> <cohere|jina|voyage|mixedbread|tei|infinity> {
//	    base_url <url>
//	    api_key  <secret>
//	    models   <model>...
//	    proxy { <reverse_proxy subdirectives> }
//	}
func (p *Reranker) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return p.unmarshalCaddyfile(d, p.defaults, nil)
}

func (p *Reranker) providerBase() *ProviderBase        { return &p.ProviderBase }
func (p *Reranker) chatTranslator() providers.Chat     { return nil }
func (p *Reranker) rerankTranslator() providers.Rerank { return p.defaults.rerank }

// Interface guards
var (
	_ caddy.Provisioner     = (*Reranker)(nil)
	_ caddyfile.Unmarshaler = (*Reranker)(nil)
	_ providerModule        = (*Reranker)(nil)
)

package caddymodule

import (
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/openai"
	"github.com/modelgate/modelgate/providers/rerank"
)

// presets are the provider types that differ only in their defaults: the
// OpenAI-compatible chat providers (type openai with a base_url serves any
// other compatible server), two of which also serve rerank, and the
// rerank-only providers. TEI and Infinity are self-hosted: they have no
// public endpoint, so base_url is required.
var presets = []providerDefaults{
	{typeName: "openai", baseURL: "https://api.openai.com/v1", keyNeeded: true, chat: openai.Chat{}},
	{typeName: "groq", baseURL: "https://api.groq.com/openai/v1", keyNeeded: true, chat: openai.Chat{}},
	{typeName: "mistral", baseURL: "https://api.mistral.ai/v1", keyNeeded: true, chat: openai.Chat{}},
	{typeName: "together", baseURL: "https://api.together.xyz/v1", keyNeeded: true, chat: openai.Chat{}, rerank: rerank.Together},
	{typeName: "fireworks", baseURL: "https://api.fireworks.ai/inference/v1", keyNeeded: true, chat: openai.Chat{}},
	{typeName: "deepseek", baseURL: "https://api.deepseek.com/v1", keyNeeded: true, chat: openai.Chat{}},
	{typeName: "openrouter", baseURL: "https://openrouter.ai/api/v1", keyNeeded: true, chat: openai.Chat{}},
	{typeName: "xai", baseURL: "https://api.x.ai/v1", keyNeeded: true, chat: openai.Chat{}},
	{typeName: "perplexity", baseURL: "https://api.perplexity.ai", keyNeeded: true, chat: openai.Chat{}},
	{typeName: "deepinfra", baseURL: "https://api.deepinfra.com/v1/openai", keyNeeded: true, chat: openai.Chat{}},
	{typeName: "cerebras", baseURL: "https://api.cerebras.ai/v1", keyNeeded: true, chat: openai.Chat{}},
	{typeName: "vllm", baseURL: "http://localhost:8000/v1", chat: openai.Chat{}, rerank: rerank.VLLM},
	{typeName: "ollama", baseURL: "http://localhost:11434/v1", chat: openai.Chat{}},
	{typeName: "cohere", baseURL: "https://api.cohere.com", keyNeeded: true, rerank: rerank.Cohere},
	{typeName: "jina", baseURL: "https://api.jina.ai/v1", keyNeeded: true, rerank: rerank.Jina},
	{typeName: "voyage", baseURL: "https://api.voyageai.com/v1", keyNeeded: true, rerank: rerank.Voyage},
	{typeName: "mixedbread", baseURL: "https://api.mixedbread.com/v1", keyNeeded: true, rerank: rerank.Mixedbread},
	{typeName: "tei", rerank: rerank.TEI},
	{typeName: "infinity", rerank: rerank.Infinity},
}

func init() {
	for _, d := range presets {
		caddy.RegisterModule(Preset{defaults: d})
	}
}

// Preset is a provider type defined by its defaults: an OpenAI-compatible
// chat provider — OpenAI itself (type openai, or any compatible server with a
// base_url), groq, mistral, together, fireworks, deepseek, openrouter, xai,
// perplexity, deepinfra, cerebras, vllm, ollama — or a rerank provider:
// cohere, jina, voyage, mixedbread, tei, infinity (vllm and together serve
// rerank too). The key, when the type takes one, is sent as
// "Authorization: Bearer <api_key>".
type Preset struct {
	ProviderBase

	defaults providerDefaults
}

// CaddyModule returns the Caddy module information.
func (p Preset) CaddyModule() caddy.ModuleInfo {
	d := p.defaults
	return caddy.ModuleInfo{
		ID:  caddy.ModuleID("modelgate.providers." + d.typeName),
		New: func() caddy.Module { return &Preset{defaults: d} },
	}
}

// Provision sets up the reverse proxy to the provider.
func (p *Preset) Provision(ctx caddy.Context) error {
	d := p.defaults
	d.authHeader = "Authorization"
	return p.provision(ctx, d)
}

// UnmarshalCaddyfile reads the provider block. Syntax:
//
//	provider <name> <type> {
//	    base_url <url>
//	    api_key  <secret>
//	    models   <model>...
//	    proxy { <reverse_proxy subdirectives> }
//	}
func (p *Preset) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return p.unmarshalCaddyfile(d, p.defaults, nil)
}

func (p *Preset) providerBase() *ProviderBase        { return &p.ProviderBase }
func (p *Preset) chatTranslator() providers.Chat     { return p.defaults.chat }
func (p *Preset) rerankTranslator() providers.Rerank { return p.defaults.rerank }

// Interface guards
var (
	_ caddy.Provisioner     = (*Preset)(nil)
	_ caddyfile.Unmarshaler = (*Preset)(nil)
	_ providerModule        = (*Preset)(nil)
)

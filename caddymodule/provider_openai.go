package caddymodule

import (
	"github.com/caddyserver/caddy/v2"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/openai"
	"github.com/modelgate/modelgate/providers/rerank"
)

// openAIPresets are the OpenAI-compatible provider types: each is
// modelgate.providers.<type>, differing only in its default base URL and
// whether it needs a key. Type "openai" with a base_url serves any other
// compatible server.
var openAIPresets = []providerDefaults{
	{typeName: "openai", baseURL: "https://api.openai.com/v1", keyNeeded: true},
	{typeName: "groq", baseURL: "https://api.groq.com/openai/v1", keyNeeded: true},
	{typeName: "mistral", baseURL: "https://api.mistral.ai/v1", keyNeeded: true},
	{typeName: "together", baseURL: "https://api.together.xyz/v1", keyNeeded: true, rerank: rerank.Together},
	{typeName: "fireworks", baseURL: "https://api.fireworks.ai/inference/v1", keyNeeded: true},
	{typeName: "deepseek", baseURL: "https://api.deepseek.com/v1", keyNeeded: true},
	{typeName: "openrouter", baseURL: "https://openrouter.ai/api/v1", keyNeeded: true},
	{typeName: "xai", baseURL: "https://api.x.ai/v1", keyNeeded: true},
	{typeName: "perplexity", baseURL: "https://api.perplexity.ai", keyNeeded: true},
	{typeName: "deepinfra", baseURL: "https://api.deepinfra.com/v1/openai", keyNeeded: true},
	{typeName: "cerebras", baseURL: "https://api.cerebras.ai/v1", keyNeeded: true},
	{typeName: "vllm", baseURL: "http://localhost:8000/v1", rerank: rerank.VLLM},
	{typeName: "ollama", baseURL: "http://localhost:11434/v1"},
}

func init() {
	for _, d := range openAIPresets {
		caddy.RegisterModule(OpenAI{defaults: d})
	}
}

// OpenAI is a provider that speaks OpenAI's chat completions API: OpenAI
// itself (type openai) or a compatible server, either through a named preset
// (groq, mistral, together, fireworks, deepseek, openrouter, xai,
// perplexity, deepinfra, cerebras, vllm, ollama) that knows its public
// endpoint, or through type openai with a base_url. The key is sent as
// "Authorization: Bearer <api_key>"; vllm and ollama need none. vllm and
// together also serve rerank, in their own formats.
type OpenAI struct {
	ProviderBase

	defaults providerDefaults
}

// CaddyModule returns the Caddy module information.
func (p OpenAI) CaddyModule() caddy.ModuleInfo {
	d := p.defaults
	return caddy.ModuleInfo{
		ID:  caddy.ModuleID("modelgate.providers." + d.typeName),
		New: func() caddy.Module { return &OpenAI{defaults: d} },
	}
}

// Provision sets up the reverse proxy to the provider.
func (p *OpenAI) Provision(ctx caddy.Context) error {
	d := p.defaults
	d.authHeader = "Authorization"
	return p.provision(ctx, d)
}

func (p *OpenAI) providerBase() *ProviderBase        { return &p.ProviderBase }
func (p *OpenAI) chatTranslator() providers.Chat     { return openai.Chat{} }
func (p *OpenAI) rerankTranslator() providers.Rerank { return p.defaults.rerank }

// Interface guards
var (
	_ caddy.Provisioner = (*OpenAI)(nil)
	_ providerModule    = (*OpenAI)(nil)
)

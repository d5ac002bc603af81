package caddymodule

import (
	"github.com/caddyserver/caddy/v2"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/anthropic"
)

func init() {
	caddy.RegisterModule(Anthropic{})
}

// Anthropic is a provider that speaks Anthropic's Messages API. Unified chat
// requests are translated into Messages requests and the answers, streamed
// or not, back into chat completions. The key is sent as "x-api-key".
type Anthropic struct {
	ProviderBase

	// MaxTokens is the max_tokens sent when the client sets neither
	// max_completion_tokens nor max_tokens (Anthropic requires one).
	// Default: 4096.
	MaxTokens int `json:"max_tokens,omitempty"`

	// Version is the anthropic-version header. Default: 2023-06-01.
	Version string `json:"version,omitempty"`

	chat *anthropic.Chat
}

// CaddyModule returns the Caddy module information.
func (Anthropic) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "modelgate.providers.anthropic",
		New: func() caddy.Module { return new(Anthropic) },
	}
}

// Provision sets up the translator and the reverse proxy to the provider.
func (p *Anthropic) Provision(ctx caddy.Context) error {
	p.chat = &anthropic.Chat{MaxTokens: p.MaxTokens, Version: p.Version}
	return p.provision(ctx, providerDefaults{
		typeName:   "anthropic",
		baseURL:    "https://api.anthropic.com",
		keyNeeded:  true,
		authHeader: "x-api-key",
	})
}

func (p *Anthropic) providerBase() *ProviderBase        { return &p.ProviderBase }
func (p *Anthropic) chatTranslator() providers.Chat     { return p.chat }
func (p *Anthropic) rerankTranslator() providers.Rerank { return nil }

// Interface guards
var (
	_ caddy.Provisioner = (*Anthropic)(nil)
	_ providerModule    = (*Anthropic)(nil)
)

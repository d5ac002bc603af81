package caddygateway

import (
	"fmt"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/modelgate/modelgate/batch"
	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/embeddings"
	"github.com/modelgate/modelgate/providers/openai"
	"github.com/modelgate/modelgate/providers/rerank"
)

// presets are the provider types whose wire format is a row of a table
// rather than a package of their own: the OpenAI-compatible chat providers
// (type openai with a base_url serves any other compatible server), and the
// rerank and embeddings providers whose formats providers/rerank and
// providers/embeddings describe. TEI and Infinity are self-hosted: they have
// no public endpoint, so base_url is required. Each is a module
// modelgate.providers.<name>; the key, when the type takes one, is sent as
// "Authorization: Bearer <api_key>".
var presets = []preset{
	{name: "openai", baseURL: "https://api.openai.com/v1", keyRequired: true, endpoints: Endpoints{Chat: openai.Chat{}, Embeddings: embeddings.OpenAI, Responses: openai.Native{}},
		batches: func(send providers.Send) batch.NativeAPI { return openai.Batches{Send: send} }},
	{name: "groq", baseURL: "https://api.groq.com/openai/v1", keyRequired: true, endpoints: Endpoints{Chat: openai.Chat{}}},
	{name: "mistral", baseURL: "https://api.mistral.ai/v1", keyRequired: true, endpoints: Endpoints{Chat: openai.Chat{}, Embeddings: embeddings.Mistral}},
	{name: "together", baseURL: "https://api.together.xyz/v1", keyRequired: true, endpoints: Endpoints{Chat: openai.Chat{}, Rerank: rerank.Together, Embeddings: embeddings.Together}},
	{name: "fireworks", baseURL: "https://api.fireworks.ai/inference/v1", keyRequired: true, endpoints: Endpoints{Chat: openai.Chat{}, Embeddings: embeddings.Together}},
	{name: "deepseek", baseURL: "https://api.deepseek.com/v1", keyRequired: true, endpoints: Endpoints{Chat: openai.Chat{}}},
	{name: "openrouter", baseURL: "https://openrouter.ai/api/v1", keyRequired: true, endpoints: Endpoints{Chat: openai.Chat{CacheControl: true}}},
	{name: "xai", baseURL: "https://api.x.ai/v1", keyRequired: true, endpoints: Endpoints{Chat: openai.Chat{}}},
	{name: "perplexity", baseURL: "https://api.perplexity.ai", keyRequired: true, endpoints: Endpoints{Chat: openai.Chat{}}},
	{name: "deepinfra", baseURL: "https://api.deepinfra.com/v1/openai", keyRequired: true, endpoints: Endpoints{Chat: openai.Chat{}, Embeddings: embeddings.Together}},
	{name: "cerebras", baseURL: "https://api.cerebras.ai/v1", keyRequired: true, endpoints: Endpoints{Chat: openai.Chat{}}},
	{name: "vllm", baseURL: "http://localhost:8000/v1", endpoints: Endpoints{Chat: openai.Chat{}, Rerank: rerank.VLLM, Embeddings: embeddings.VLLM}},
	{name: "ollama", baseURL: "http://localhost:11434/v1", endpoints: Endpoints{Chat: openai.Chat{}, Embeddings: embeddings.Ollama}},
	{name: "jina", baseURL: "https://api.jina.ai/v1", keyRequired: true, endpoints: Endpoints{Rerank: rerank.Jina, Embeddings: embeddings.Jina}},
	{name: "voyage", baseURL: "https://api.voyageai.com/v1", keyRequired: true, endpoints: Endpoints{Rerank: rerank.Voyage, Embeddings: embeddings.Voyage}},
	{name: "mixedbread", baseURL: "https://api.mixedbread.com/v1", keyRequired: true, endpoints: Endpoints{Rerank: rerank.Mixedbread}},
	{name: "tei", endpoints: Endpoints{Rerank: rerank.TEI, Embeddings: embeddings.TEI}},
	{name: "infinity", endpoints: Endpoints{Rerank: rerank.Infinity, Embeddings: embeddings.Infinity}},
}

// preset is one row of the presets table.
type preset struct {
	name        string
	baseURL     string
	keyRequired bool
	endpoints   Endpoints
	// batches, when set, is the type's own batch API (its base URL ends
	// in /v1, as OpenAI's does): the type takes the batch option.
	batches func(send providers.Send) batch.NativeAPI
}

func (p preset) providerType() ProviderType {
	return ProviderType{Name: p.name, BaseURL: p.baseURL, KeyRequired: p.keyRequired}
}

func init() {
	for _, p := range presets {
		caddy.RegisterModule(Preset{preset: p})
	}
}

// Preset is a provider type defined by a row of the presets table: an
// OpenAI-compatible chat provider — OpenAI itself (type openai, or any
// compatible server with a base_url), groq, mistral, together, fireworks,
// deepseek, openrouter, xai, perplexity, deepinfra, cerebras, vllm, ollama —
// or a rerank provider: jina, voyage, mixedbread, tei, infinity (vllm and
// together serve rerank too). Cohere, with a wire format of its own, is a
// package of its own: caddygateway/cohereprovider. The key, when the type takes one,
// is sent as "Authorization: Bearer <api_key>".
type Preset struct {
	ProviderBase

	// Batch is where batches send this provider's lines, for a type with
	// batches of its own (openai): "native", to its batch API at its
	// batch price, or "gateway", as live requests. Default: native.
	Batch string `json:"batch,omitempty"`

	preset preset
}

// CaddyModule returns the Caddy module information.
func (p Preset) CaddyModule() caddy.ModuleInfo {
	row := p.preset
	return caddy.ModuleInfo{
		ID:  caddy.ModuleID("modelgate.providers." + row.name),
		New: func() caddy.Module { return &Preset{preset: row} },
	}
}

// Provision sets up the reverse proxy to the provider.
func (p *Preset) Provision(ctx caddy.Context) error {
	if _, err := batch.ParseMode(p.Batch); err != nil {
		return err
	}
	if p.Batch != "" && p.preset.batches == nil {
		return fmt.Errorf("provider type %s has no batch option: its lines always run in the gateway", p.preset.name)
	}
	return p.ProvisionBase(ctx, p.preset.providerType())
}

// UnmarshalCaddyfile reads the provider block. Syntax:
//
//	provider <name> <type> {
//	    base_url <url>
//	    api_key  <secret>
//	    models   <model>...
//	    batch    native|gateway   # openai only
//	    proxy { <reverse_proxy subdirectives> }
//	}
func (p *Preset) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	var option func(d *caddyfile.Dispenser) (bool, error)
	if p.preset.batches != nil {
		option = func(d *caddyfile.Dispenser) (bool, error) {
			if d.Val() != "batch" {
				return false, nil
			}
			return true, ParseBatchMode(d, &p.Batch)
		}
	}
	return p.UnmarshalBlock(d, p.preset.providerType(), option)
}

// Base returns the provider's common configuration.
func (p *Preset) Base() *ProviderBase { return &p.ProviderBase }

// Endpoints returns the row's translators.
func (p *Preset) Endpoints() Endpoints { return p.preset.endpoints }

// BatchMode is where batches send the provider's lines: its batch
// option, else the type's default (native for a type with batches of its
// own).
func (p *Preset) BatchMode() string {
	if p.preset.batches == nil {
		return batch.ModeGateway
	}
	return BatchMode(p.Batch, p.preset.name)
}

// NativeBatches returns the row's batch API, nil for a type without one.
func (p *Preset) NativeBatches(send providers.Send) batch.NativeAPI {
	if p.preset.batches == nil {
		return nil
	}
	return p.preset.batches(send)
}

// Interface guards
var (
	_ caddy.Provisioner     = (*Preset)(nil)
	_ caddyfile.Unmarshaler = (*Preset)(nil)
	_ Provider              = (*Preset)(nil)
	_ NativeBatcher         = (*Preset)(nil)
)

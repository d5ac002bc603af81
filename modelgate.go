// Package modelgate is an LLM gateway built as Caddy v2 modules: one
// OpenAI-shaped HTTP API in front of many model providers.
//
// This root package exists so that xcaddy can plug the whole project in by
// its module path:
//
//	xcaddy build v2.11.9 --with github.com/modelgate/modelgate@v0.0.0=.
//
// It blank-imports every package of Caddy modules, as caddy-l4's imports.go
// does: the host (caddygateway: the app, the handlers, the provider contract
// and the preset provider types), each provider type with a wire format of
// its own (caddygateway/...), key administration, secret
// scanning, and the Redis storage for clusters. providers/, batch/ and
// keys/ hold the engines; none of them imports Caddy.
package modelgate

import (
	_ "github.com/modelgate/modelgate/caddygateway"                   // the app, handlers, presets
	_ "github.com/modelgate/modelgate/caddygateway/anthropicprovider" // modelgate.providers.anthropic
	_ "github.com/modelgate/modelgate/caddygateway/azureprovider"     // modelgate.providers.azure_openai
	_ "github.com/modelgate/modelgate/caddygateway/bedrockprovider"   // modelgate.providers.bedrock
	_ "github.com/modelgate/modelgate/caddygateway/cohereprovider"    // modelgate.providers.cohere
	_ "github.com/modelgate/modelgate/caddygateway/geminiprovider"    // modelgate.providers.gemini
	_ "github.com/modelgate/modelgate/caddygateway/keyadmin"          // admin API, key settings page, CLI
	_ "github.com/modelgate/modelgate/caddygateway/redisstorage"      // caddy.storage.modelgate_redis
	_ "github.com/modelgate/modelgate/caddygateway/secretscanning"    // secret-scanning endpoint
	_ "github.com/modelgate/modelgate/caddygateway/vertexprovider"    // modelgate.providers.vertex
)

// Package modelgate is an LLM gateway built as Caddy v2 modules: one
// OpenAI-shaped HTTP API in front of many model providers.
//
// This root package exists so that xcaddy can plug the whole project in by
// its module path:
//
//	xcaddy build v2.11.9 --with github.com/modelgate/modelgate@v0.0.0=.
//
// It blank-imports every package of Caddy modules, as caddy-l4's imports.go
// does: the host (caddymodule: the app, the handlers, the provider contract
// and the preset provider types), each provider type with a wire format of
// its own (caddymodule/provider/...), key administration, secret
// scanning, and the Redis storage for clusters. providers/, batch/ and
// keys/ hold the engines; none of them imports Caddy.
package modelgate

import (
	_ "github.com/modelgate/modelgate/caddymodule"                    // the app, handlers, presets
	_ "github.com/modelgate/modelgate/caddymodule/keyadmin"           // admin API, key settings page, CLI
	_ "github.com/modelgate/modelgate/caddymodule/provider/anthropic" // modelgate.providers.anthropic
	_ "github.com/modelgate/modelgate/caddymodule/provider/azure"     // modelgate.providers.azure_openai
	_ "github.com/modelgate/modelgate/caddymodule/provider/bedrock"   // modelgate.providers.bedrock
	_ "github.com/modelgate/modelgate/caddymodule/provider/cohere"    // modelgate.providers.cohere
	_ "github.com/modelgate/modelgate/caddymodule/provider/gemini"    // modelgate.providers.gemini
	_ "github.com/modelgate/modelgate/caddymodule/provider/vertex"    // modelgate.providers.vertex
	_ "github.com/modelgate/modelgate/caddymodule/redisstorage"       // caddy.storage.redis
	_ "github.com/modelgate/modelgate/caddymodule/scanning"           // secret-scanning endpoint
)

// Package modelgate is an LLM gateway built as Caddy v2 modules: one
// OpenAI-shaped HTTP API in front of many model providers.
//
// This root package exists so that xcaddy can plug the whole project in by
// its module path:
//
//	xcaddy build v2.11.9 --with github.com/modelgate/modelgate@v0.0.0=.
//
// The modules themselves live in the caddymodule package; providers holds the
// translators and batch the batch engine, neither of which imports Caddy.
package modelgate

import _ "github.com/modelgate/modelgate/caddymodule" // registers the Caddy modules

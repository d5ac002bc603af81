// Package caddygateway holds modelgate's Caddy modules. It is the only package
// of the project that imports Caddy.
//
// Modules:
//
//   - modelgate: the app (global option "modelgate"): providers, model
//     routes, static keys.
//   - modelgate.providers.<type>: one guest module per provider type, each a
//     translator from package providers plus Caddy's own reverse_proxy.
//   - http.handlers.modelgate_auth: bearer-key authentication (directive
//     "modelgate_auth").
//   - http.handlers.modelgate: the unified API under /v1 (directive
//     "modelgate").
//
// Placeholders set per request: {http.modelgate.key} (the key's name, never
// the secret) and {http.auth.user.id} by modelgate_auth;
// {http.modelgate.provider} and {http.modelgate.model} by modelgate, for the
// provider and model that answered (or was last tried).
package caddygateway

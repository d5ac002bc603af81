package caddygateway

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/modelgate/modelgate/caddygateway/upstream"
	"github.com/modelgate/modelgate/gateway"
	"github.com/modelgate/modelgate/providers"
)

// Provider is the contract of a provider type: a guest module of the
// modelgate app in the namespace modelgate.providers, such as
// modelgate.providers.anthropic. Third parties add their own types by
// registering a module that implements it, in a Go module of their own:
//
//	type Acme struct {
//		caddygateway.ProviderBase
//		chat acme.Chat // a providers.Chat translator
//	}
//
//	func (Acme) CaddyModule() caddy.ModuleInfo {
//		return caddy.ModuleInfo{ID: "modelgate.providers.acme", New: func() caddy.Module { return new(Acme) }}
//	}
//
//	func (p *Acme) Provision(ctx caddy.Context) error {
//		return p.ProvisionBase(ctx, caddygateway.ProviderType{Name: "acme", BaseURL: "https://api.acme.example", KeyRequired: true})
//	}
//
//	func (p *Acme) Base() *caddygateway.ProviderBase     { return &p.ProviderBase }
//	func (p *Acme) Endpoints() caddygateway.Endpoints { return caddygateway.Endpoints{Chat: p.chat} }
//
// A provider is a translator (package providers' contracts) plus Caddy's own
// reverse_proxy, which ProviderBase provisions from the provider's config
// (caddygateway/upstream): requests reach the provider only through it, from
// the HTTP handlers and from batch workers alike.
type Provider interface {
	caddy.Module

	// Base returns the provider's common configuration, which the module's
	// Provision set up with ProviderBase.ProvisionBase.
	Base() *ProviderBase

	// Endpoints returns the translators of the endpoints the provider type
	// serves. A request for an endpoint whose translator is nil gets 400
	// unsupported_endpoint (or goes to the next target of an alias).
	Endpoints() Endpoints
}

// Endpoints are the translators of the unified API's endpoints that a
// provider type serves; nil means the type does not serve that endpoint:
// Chat (POST /v1/chat/completions), Rerank, Embeddings, and Responses and
// Messages, which pass those APIs through to a provider that speaks them
// (a provider without them still serves them through Chat, translated).
type Endpoints = gateway.Endpoints

// ProviderType is what a provider type tells ProviderBase.ProvisionBase
// (and ProviderBase.UnmarshalBlock) about itself.
type ProviderType struct {
	// Name is the type's name, as in modelgate.providers.<name>; it appears
	// in configuration errors.
	Name string

	// BaseURL is the base URL used when the config gives none. Empty: the
	// config must give one (self-hosted servers).
	BaseURL string

	// KeyRequired makes api_key mandatory (unless Auth is set).
	KeyRequired bool

	// KeyHeader is the header that carries api_key: empty sends it as
	// "Authorization: Bearer <api_key>"; any other header (x-api-key,
	// api-key, x-goog-api-key) carries the key as it is.
	KeyHeader string

	// Auth, when set, authenticates the gateway to the provider instead of
	// api_key: a request signer (AWS SigV4) or a source of short-lived
	// tokens (Google, Azure Entra ID). See Authenticator.
	Auth Authenticator

	// Secrets are the other secrets of the provider's configuration, such
	// as a client secret or an AWS secret key and session token,
	// resolved. Like api_key, and like the credentials a request to the
	// provider carries, they are scrubbed from the provider's answers —
	// their headers, bodies and streams — before anything reads them:
	// nothing the gateway passes on or logs repeats them.
	Secrets []string
}

// ProviderBase is the configuration every provider type shares: where the
// provider is, how to authenticate, which models it serves, and how Caddy's
// reverse_proxy reaches it. Provider modules embed it.
type ProviderBase struct {
	// BaseURL is the provider's API root; translators append their paths to
	// it (e.g. "/chat/completions"). Placeholders such as {env.*} are
	// resolved at provision time. Default: the provider type's public
	// endpoint.
	BaseURL string `json:"base_url,omitempty"`

	// APIKey is the provider's key, usually a placeholder such as
	// {env.OPENAI_API_KEY}, resolved at provision time. It is sent only to
	// this provider, in the header its API expects.
	APIKey string `json:"api_key,omitempty"`

	// Models lists the models this provider serves under their own names:
	// they appear in GET /v1/models and are routable by bare name.
	Models []string `json:"models,omitempty"`

	// Proxy is the configuration of the reverse_proxy handler that carries
	// requests to the provider: load balancing across several upstreams,
	// health checks, timeouts, TLS, retries. Upstreams default to the base
	// URL's host; the transport to HTTP, with TLS for https base URLs.
	Proxy json.RawMessage `json:"proxy,omitempty"`

	upstream *upstream.Upstream // the provider's reverse_proxy
	baseURL  *url.URL           // the resolved base URL
}

// Key returns api_key with its placeholders resolved: empty when none is
// configured or the environment variable it names is empty. Provider types
// whose authentication depends on the key read it here.
func (b *ProviderBase) Key() string {
	return caddy.NewReplacer().ReplaceKnown(b.APIKey, "")
}

// ProvisionBase resolves the base URL and the credential and loads the
// reverse proxy that carries requests to the provider. A provider module
// calls it from its Provision.
func (b *ProviderBase) ProvisionBase(ctx caddy.Context, t ProviderType) error {
	repl := caddy.NewReplacer()
	rawURL := repl.ReplaceKnown(b.BaseURL, "")
	if rawURL == "" {
		rawURL = t.BaseURL
	}
	if rawURL == "" {
		return fmt.Errorf("base_url is required for provider type %s", t.Name)
	}
	u, err := ParseBaseURL("base_url", rawURL)
	if err != nil {
		return err
	}
	auth := t.Auth
	if auth == nil {
		if key := b.Key(); key != "" {
			if t.KeyHeader == "" {
				auth = HeaderAuth{Header: "Authorization", Value: "Bearer " + key}
			} else {
				auth = HeaderAuth{Header: t.KeyHeader, Value: key}
			}
		} else if t.KeyRequired {
			if b.APIKey == "" {
				return fmt.Errorf("provider type %s needs api_key", t.Name)
			}
			return fmt.Errorf("api_key %s is empty (is the environment variable set?)", b.APIKey)
		}
	}

	b.baseURL = u
	b.upstream, err = upstream.New(ctx, upstream.Config{BaseURL: u, Proxy: b.Proxy, Auth: auth,
		Secrets: append([]string{b.Key()}, t.Secrets...)})
	return err
}

// ParseBaseURL checks raw, the value of option, as a base URL: an
// absolute http:// or https:// URL without a query or fragment, under
// which requests' paths are appended. Provider types check their own URL
// options with it.
func ParseBaseURL(option, raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%s %q must be an absolute http:// or https:// URL", option, raw)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("%s %q must not have a query or fragment", option, raw)
	}
	return u, nil
}

// ProvisionService loads the reverse proxy of a service a provider calls
// besides its own API, such as the bucket and the control plane of a
// cloud's batch jobs (docs/design/native-batches.md), and returns the
// transport of its requests, as gateway.NativeSend makes it: through
// Caddy's reverse_proxy to t.BaseURL, which is required, authenticated by
// t.Auth, with t.Secrets scrubbed from the answers. The service takes
// none of the provider's proxy options, whose upstreams are the
// provider's hosts. A provider module calls it from its Provision; Caddy
// cleans the proxy up with the module.
func ProvisionService(ctx caddy.Context, t ProviderType) (providers.Send, error) {
	if t.BaseURL == "" {
		return nil, fmt.Errorf("provider type %s: a service needs its base URL", t.Name)
	}
	u, err := ParseBaseURL("service URL", t.BaseURL)
	if err != nil {
		return nil, err
	}
	up, err := upstream.New(ctx, upstream.Config{BaseURL: u, Auth: t.Auth, Secrets: t.Secrets})
	if err != nil {
		return nil, err
	}
	return gateway.NativeSend(up), nil
}

// provisioned reports whether ProvisionBase has run.
func (b *ProviderBase) provisioned() bool { return b.upstream != nil }

// UnmarshalBlock reads a provider block: the options every type shares
// (base_url, api_key, models, proxy) and, through option, the type's own.
// The dispenser is at the provider type, as caddyfile.UnmarshalModule leaves
// it; option reports whether it knew the subdirective under the cursor. A
// provider module's UnmarshalCaddyfile calls it. Syntax:
//
//	provider <name> <type> {
//	    base_url <url>
//	    api_key  <secret>
//	    models   <model>...
//	    <the type's own options>
//	    proxy { <reverse_proxy subdirectives> }
//	}
func (b *ProviderBase) UnmarshalBlock(d *caddyfile.Dispenser, t ProviderType, option func(d *caddyfile.Dispenser) (bool, error)) error {
	d.Next() // the provider type
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		switch d.Val() {
		case "base_url":
			if !d.AllArgs(&b.BaseURL) {
				return d.ArgErr()
			}
		case "api_key":
			if !d.AllArgs(&b.APIKey) {
				return d.ArgErr()
			}
		case "models":
			models := d.RemainingArgs()
			if len(models) == 0 {
				return d.ArgErr()
			}
			b.Models = append(b.Models, models...)
		case "proxy":
			raw, err := upstream.UnmarshalProxy(d)
			if err != nil {
				return err
			}
			b.Proxy = raw
		default:
			known := false
			if option != nil {
				var err error
				if known, err = option(d); err != nil {
					return err
				}
			}
			if !known {
				return d.Errf("unrecognized option %q for provider type %s", d.Val(), t.Name)
			}
		}
	}
	if t.KeyRequired && t.Auth == nil && b.APIKey == "" {
		return d.Errf("provider type %s needs api_key (for example: api_key {env.%s_API_KEY})", t.Name, strings.ToUpper(t.Name))
	}
	return nil
}

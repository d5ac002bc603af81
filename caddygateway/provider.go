package caddygateway

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"

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
// reverse_proxy, which ProviderBase provisions from the provider's config:
// requests reach the provider only through it, from the HTTP handlers and
// from batch workers alike.
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
// provider type serves; nil means the type does not serve that endpoint.
type Endpoints struct {
	// Chat serves POST /v1/chat/completions.
	Chat providers.Chat

	// Rerank serves POST /v1/rerank.
	Rerank providers.Rerank

	// Embeddings serves POST /v1/embeddings.
	Embeddings providers.Embeddings

	// Responses passes POST /v1/responses through to the provider's own
	// Responses API (OpenAI, Azure OpenAI). A provider without it still
	// serves the Responses API when it serves Chat: translated.
	Responses providers.Native

	// Messages passes POST /v1/messages and /v1/messages/count_tokens
	// through to the provider's own Messages API (Anthropic). A provider
	// without it still serves the Messages API when it serves Chat:
	// translated.
	Messages providers.Native
}

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

	proxy    *reverseproxy.Handler
	basePath string // the base URL's path, escaped, without a trailing slash
	host     string // the Host header of requests to the provider (upstreamHost)
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
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("base_url %q must be an absolute http:// or https:// URL", rawURL)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("base_url %q must not have a query or fragment", rawURL)
	}
	b.basePath = strings.TrimSuffix(u.EscapedPath(), "/")
	b.host = upstreamHost(u)

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

	raw, err := proxyConfig(b.Proxy, u)
	if err != nil {
		return err
	}
	mod, err := ctx.LoadModuleByID("http.handlers.reverse_proxy", raw)
	if err != nil {
		return fmt.Errorf("loading reverse_proxy: %v", err)
	}
	b.proxy = mod.(*reverseproxy.Handler)
	// The credential lives in the transport, set here in memory: it never
	// appears in the config (nor in Caddy's autosave of it).
	tr := b.proxy.Transport.(*authTransport)
	tr.auth = auth
	tr.secrets = newProviderSecrets(append([]string{b.Key()}, t.Secrets...)...)
	return nil
}

// provisioned reports whether ProvisionBase has run.
func (b *ProviderBase) provisioned() bool { return b.proxy != nil }

// providerIdleConnsPerHost is how many idle connections modelgate keeps to
// each provider host unless the provider's proxy block says otherwise
// (transport http { keepalive_idle_conns_per_host <n> }). Caddy's default,
// 32, suits a web backend; a provider is one host taking many concurrent
// requests from every client of the gateway, and whenever more than 32 of
// them end at once the rest of the connections are closed and, moments
// later, dialled again (with a TLS handshake each for a provider on https).
// docs/performance.md has what the pool suite of the load harness
// measured with each size. An idle connection costs some tens of
// KiB (buffers, two goroutines, TLS state) and exists only after as many
// were in use at once; idle ones close after 2 minutes. 1024 keeps the pool
// from churning at any concurrency one instance sustains.
const providerIdleConnsPerHost = 1024

// proxyConfig completes the user's reverse_proxy configuration with what
// reaching the provider at u requires: upstreams from the base URL unless
// given; modelgate's transport (Caddy's HTTP transport, TLS for https, plus
// the provider's authentication, see authTransport); and, where the user
// gave request header operations, the upstream's Host header and the
// deletion of the Via and X-Forwarded-* headers that would tell the
// provider about the gateway's clients (without them, upstreamRequest and
// the transport see to both).
//
// Defaults that differ from Caddy's, each kept only where the user's proxy
// block does not set it: up to providerIdleConnsPerHost idle connections
// per provider host (keep_alive.max_idle_conns_per_host). HTTP versions stay
// Caddy's default, 1.1 and 2: a provider on https that offers HTTP/2 (as
// OpenAI, Anthropic and Google do) gets it, every request a stream on a few
// shared connections, which needs no idle pool.
func proxyConfig(user json.RawMessage, u *url.URL) (json.RawMessage, error) {
	cfg := map[string]any{}
	if len(user) > 0 {
		if err := json.Unmarshal(user, &cfg); err != nil {
			return nil, fmt.Errorf("proxy: %v", err)
		}
	}
	if _, ok := cfg["upstreams"]; !ok {
		if _, dyn := cfg["dynamic_upstreams"]; !dyn {
			port := u.Port()
			if port == "" {
				port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
			}
			cfg["upstreams"] = []any{map[string]any{"dial": net.JoinHostPort(u.Hostname(), port)}}
		}
	}
	transport, _ := cfg["transport"].(map[string]any)
	if transport == nil {
		transport = map[string]any{"protocol": "http"}
		cfg["transport"] = transport
	}
	if transport["protocol"] != "http" {
		return nil, fmt.Errorf("proxy: transport %v is not supported; providers use the http transport", transport["protocol"])
	}
	transport["protocol"] = "modelgate"
	keepAlive := child(transport, "keep_alive")
	if _, ok := keepAlive["max_idle_conns_per_host"]; !ok {
		keepAlive["max_idle_conns_per_host"] = providerIdleConnsPerHost
	}
	if u.Scheme == "https" {
		tls, _ := transport["tls"].(map[string]any)
		if tls == nil {
			tls = map[string]any{}
			transport["tls"] = tls
		}
		if _, ok := tls["server_name"]; !ok {
			tls["server_name"] = u.Hostname()
		}
	}
	// A proxy block with request header operations gets the Host header
	// and the deletions among them, as it always did. Without one, the
	// provider's reverse_proxy has none: header operations make it copy
	// every request's headers into a new map and apply each operation,
	// some twenty allocations per request. upstreamRequest sets
	// the Host and omits the X-Forwarded-* headers, and the transport drops
	// the Via header (outgoingHeader), which is the same request on the
	// wire.
	if headers, _ := cfg["headers"].(map[string]any); headers != nil {
		if req, _ := headers["request"].(map[string]any); req != nil {
			set := child(req, "set")
			if _, ok := set["Host"]; !ok {
				set["Host"] = []any{upstreamHost(u)}
			}
			del, _ := req["delete"].([]any)
			req["delete"] = append(del, "Via", "X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host")
		}
	}
	return json.Marshal(cfg)
}

// upstreamHost is the Host header of requests to the provider at base URL
// u: its host, and its port only when the URL names one.
func upstreamHost(u *url.URL) string {
	// u.Host without an empty port ("host:"); an IPv6 address keeps its
	// brackets, which a Host header needs.
	return strings.TrimSuffix(u.Host, ":")
}

// child returns m[key] as an object, creating it when absent.
func child(m map[string]any, key string) map[string]any {
	c, _ := m[key].(map[string]any)
	if c == nil {
		c = map[string]any{}
		m[key] = c
	}
	return c
}

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
			raw, err := unmarshalProxy(d)
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

// unmarshalProxy reads a "proxy { … }" block with reverse_proxy's own
// Caddyfile parser, so every reverse_proxy subdirective works there
// (to, lb_policy, health_uri, transport http { … }, …); handle_response is
// not supported.
func unmarshalProxy(d *caddyfile.Dispenser) (json.RawMessage, error) {
	rp := new(reverseproxy.Handler)
	seg := d.NewFromNextSegment()
	if err := rp.UnmarshalCaddyfile(seg); err != nil {
		return nil, err
	}
	if len(rp.HandleResponse) > 0 {
		return nil, d.Err("proxy: handle_response is not supported in a provider's proxy block")
	}
	return json.Marshal(rp)
}

// provider is a configured provider as the dispatcher uses it.
type provider struct {
	name string
	typ  string // the provider type, as modelgate.providers.<typ>: the price table's key
	base *ProviderBase
	Endpoints

	// chatError is Chat.Error, bound once (by newProvider) rather than
	// for every request: a method value of an interface is an allocation.
	chatError func(status int, header http.Header, body []byte) *providers.Error
}

// newProvider is the provider name of type typ, as the dispatcher uses it.
func newProvider(name, typ string, base *ProviderBase, e Endpoints) *provider {
	p := &provider{name: name, typ: typ, base: base, Endpoints: e}
	if e.Chat != nil {
		p.chatError = e.Chat.Error
	}
	return p
}

// chatErrorMapper returns Chat.Error, bound once by newProvider (a
// provider a test put together itself gets it bound here).
func (p *provider) chatErrorMapper() func(status int, header http.Header, body []byte) *providers.Error {
	if p.chatError != nil {
		return p.chatError
	}
	return p.Chat.Error
}

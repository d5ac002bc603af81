package caddymodule

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"

	"github.com/modelgate/modelgate/providers"
)

// providerModule is implemented by every modelgate.providers.* module.
type providerModule interface {
	caddy.Module
	providerBase() *ProviderBase
	// chatTranslator returns the provider's chat translator, or nil when the
	// provider type serves no chat completions.
	chatTranslator() providers.Chat
	// rerankTranslator returns the provider's rerank translator, or nil when
	// the provider type serves no rerank.
	rerankTranslator() providers.Rerank
}

// provider is a configured provider as the handlers use it.
type provider struct {
	name   string
	base   *ProviderBase
	chat   providers.Chat
	rerank providers.Rerank
}

// ProviderBase is the configuration every provider type shares: where the
// provider is, how to authenticate, which models it serves, and how Caddy's
// reverse_proxy reaches it.
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
	basePath string
}

// credential is the header that authenticates the gateway to a provider.
// Its value is a secret: it goes into the provider's transport only.
type credential struct {
	header string // "Authorization" or a custom header such as "x-api-key"; empty: none
	value  string
}

// providerDefaults is what a provider type contributes to its base.
type providerDefaults struct {
	typeName   string
	baseURL    string
	keyNeeded  bool
	authHeader string           // "Authorization" (Bearer) or a custom header such as "x-api-key"
	chat       providers.Chat   // the type's chat translator, if it serves chat
	rerank     providers.Rerank // the type's rerank format, if it serves rerank
}

// provision resolves the base configuration and loads the reverse proxy.
func (b *ProviderBase) provision(ctx caddy.Context, d providerDefaults) error {
	repl := caddy.NewReplacer()
	rawURL := repl.ReplaceKnown(b.BaseURL, "")
	if rawURL == "" {
		rawURL = d.baseURL
	}
	if rawURL == "" {
		return fmt.Errorf("base_url is required for provider type %s", d.typeName)
	}
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("base_url %q must be an absolute http:// or https:// URL", rawURL)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("base_url %q must not have a query or fragment", rawURL)
	}
	b.basePath = strings.TrimSuffix(u.Path, "/")

	var cred credential
	if key := repl.ReplaceKnown(b.APIKey, ""); key != "" {
		cred = credential{header: d.authHeader, value: key}
		if d.authHeader == "Authorization" {
			cred.value = "Bearer " + key
		}
	} else if d.keyNeeded {
		if b.APIKey == "" {
			return fmt.Errorf("provider type %s needs api_key", d.typeName)
		}
		return fmt.Errorf("api_key %s is empty (is the environment variable set?)", b.APIKey)
	}

	raw, err := proxyConfig(b.Proxy, u, cred)
	if err != nil {
		return err
	}
	mod, err := ctx.LoadModuleByID("http.handlers.reverse_proxy", raw)
	if err != nil {
		return fmt.Errorf("loading reverse_proxy: %v", err)
	}
	b.proxy = mod.(*reverseproxy.Handler)
	return nil
}

// proxyConfig completes the user's reverse_proxy configuration with what
// reaching the provider at u requires: upstreams from the base URL unless
// given; the HTTP transport (TLS for https) with the provider's credential
// (see credentialTransport); the upstream's Host header; and none of the
// X-Forwarded-* headers that would tell the provider about the gateway's
// clients.
func proxyConfig(user json.RawMessage, u *url.URL, cred credential) (json.RawMessage, error) {
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
	if cred.header != "" {
		transport["credential_header"] = cred.header
		transport["credential"] = cred.value
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
	headers, _ := cfg["headers"].(map[string]any)
	if headers == nil {
		headers = map[string]any{}
		cfg["headers"] = headers
	}
	req, _ := headers["request"].(map[string]any)
	if req == nil {
		req = map[string]any{}
		headers["request"] = req
	}
	set, _ := req["set"].(map[string]any)
	if set == nil {
		set = map[string]any{}
		req["set"] = set
	}
	if _, ok := set["Host"]; !ok {
		host := u.Host
		if u.Port() == "" {
			host = u.Hostname()
		}
		set["Host"] = []any{host}
	}
	del, _ := req["delete"].([]any)
	req["delete"] = append(del, "Via", "X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host")
	return json.Marshal(cfg)
}

// noNext ends reverse_proxy's handler chain.
var noNext = caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { return nil })

// upstreamRequest builds the request reverse_proxy sends to the provider. It
// starts from a fresh header map, so nothing of the client's request (its
// gateway key above all) reaches the provider except the translated body.
// The provider's own credential is added by the transport.
func (b *ProviderBase) upstreamRequest(r *http.Request, preq providers.Request, stream bool) *http.Request {
	r2 := new(http.Request)
	*r2 = *r
	u := *r.URL
	u.Path = b.basePath + preq.Path
	u.RawPath = ""
	u.RawQuery = preq.Query
	r2.URL = &u
	r2.Method = http.MethodPost
	r2.RequestURI = ""

	h := make(http.Header, 6+len(preq.Header))
	h["Content-Type"] = []string{"application/json"}
	if stream {
		h["Accept"] = []string{"text/event-stream"}
	} else {
		h["Accept"] = []string{"application/json"}
	}
	h["Accept-Encoding"] = []string{"identity"} // translators need plain bytes
	h["User-Agent"] = []string{"modelgate"}
	for k, v := range preq.Header {
		h[k] = v
	}
	r2.Header = h
	r2.Trailer = nil

	body := preq.Body
	r2.Body = newBytesBody(body)
	r2.ContentLength = int64(len(body))
	r2.GetBody = func() (io.ReadCloser, error) { return newBytesBody(body), nil }
	r2.TransferEncoding = nil
	r2.Close = false

	// Each provider call gets its own copy of the request variables:
	// reverse_proxy writes into them before it sends, while a connection an
	// earlier call (a fallback's first target) began to dial may still read
	// them in net/http's dial goroutine.
	if vars, ok := r.Context().Value(caddyhttp.VarsCtxKey).(map[string]any); ok {
		r2 = r2.WithContext(context.WithValue(r.Context(), caddyhttp.VarsCtxKey, maps.Clone(vars)))
	}
	return r2
}

func newBytesBody(b []byte) io.ReadCloser { return io.NopCloser(bytes.NewReader(b)) }

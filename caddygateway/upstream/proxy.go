package upstream

import (
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
)

// providerIdleConnsPerHost is how many idle connections modelgate keeps to
// each provider host unless the provider's proxy block says otherwise
// (transport http { keepalive_idle_conns_per_host <n> }). Caddy's default,
// 32, suits a web backend; a provider is one host taking many concurrent
// requests from every client of the gateway, and whenever more than 32 of
// them end at once the rest of the connections are closed and, moments
// later, dialled again (with a TLS handshake each for a provider on https):
// the pool churns, and the gateway's throughput falls well below plain
// reverse_proxy's (docs/performance.md). An idle connection costs some
// tens of KiB (buffers, two goroutines, TLS state) and exists only after as
// many were in use at once; idle ones close after 2 minutes. 1024 keeps the
// pool from churning at any concurrency one instance sustains.
const providerIdleConnsPerHost = 1024

// proxyConfig completes the user's reverse_proxy configuration with what
// reaching the provider at u requires: upstreams from the base URL unless
// given; modelgate's transport (Caddy's HTTP transport, TLS for https, plus
// the provider's authentication, see authTransport); and, where the user
// gave request header operations, the upstream's Host header and the
// deletion of the Via and X-Forwarded-* headers that would tell the
// provider about the gateway's clients (without them, request and the
// transport see to both).
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
			return nil, fmt.Errorf("proxy: %w", err)
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
	// some twenty allocations per request. request sets the Host and
	// omits the X-Forwarded-* headers, and the transport drops the Via
	// header (outgoingHeader), which is the same request on the wire.
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

// UnmarshalProxy reads a "proxy { … }" block with reverse_proxy's own
// Caddyfile parser, so every reverse_proxy subdirective works there
// (to, lb_policy, health_uri, transport http { … }, …); handle_response is
// not supported. The dispenser is at "proxy".
func UnmarshalProxy(d *caddyfile.Dispenser) (json.RawMessage, error) {
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

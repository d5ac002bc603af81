package upstream

import (
	"encoding/json"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

func TestProxyConfig(t *testing.T) {
	for _, tc := range []struct {
		name, base, user string
		want             string
		err              string
	}{
		{
			name: "https defaults",
			base: "https://api.anthropic.com",
			want: `{"upstreams":[{"dial":"api.anthropic.com:443"}],
				"transport":{"protocol":"modelgate","tls":{"server_name":"api.anthropic.com"},"keep_alive":{"max_idle_conns_per_host":1024}}}`,
		},
		{
			name: "http with port, no key",
			base: "http://127.0.0.1:8000/v1",
			want: `{"upstreams":[{"dial":"127.0.0.1:8000"}],
				"transport":{"protocol":"modelgate","keep_alive":{"max_idle_conns_per_host":1024}}}`,
		},
		{
			name: "user upstreams, transport and headers kept",
			base: "http://vllm.internal/v1",
			user: `{"upstreams":[{"dial":"10.0.0.5:8000"},{"dial":"10.0.0.6:8000"}],
				"transport":{"protocol":"http","dial_timeout":1000},
				"headers":{"request":{"set":{"X-Team":["ml"]},"delete":["X-Debug"]}}}`,
			want: `{"upstreams":[{"dial":"10.0.0.5:8000"},{"dial":"10.0.0.6:8000"}],
				"transport":{"protocol":"modelgate","dial_timeout":1000,"keep_alive":{"max_idle_conns_per_host":1024}},
				"headers":{"request":{"set":{"X-Team":["ml"],"Host":["vllm.internal"]},"delete":["X-Debug","Via","X-Forwarded-For","X-Forwarded-Proto","X-Forwarded-Host"]}}}`,
		},
		{
			name: "user request headers completed, IPv6 host without port",
			base: "https://[2001:db8::1]/v1",
			user: `{"headers":{"request":{"add":{"X-Team":["ml"]}}}}`,
			want: `{"upstreams":[{"dial":"[2001:db8::1]:443"}],
				"transport":{"protocol":"modelgate","tls":{"server_name":"2001:db8::1"},"keep_alive":{"max_idle_conns_per_host":1024}},
				"headers":{"request":{"add":{"X-Team":["ml"]},"set":{"Host":["[2001:db8::1]"]},"delete":["Via","X-Forwarded-For","X-Forwarded-Proto","X-Forwarded-Host"]}}}`,
		},
		{
			name: "user response headers only: no request operations added",
			base: "https://api.openai.com/v1",
			user: `{"headers":{"response":{"delete":["Server"]}}}`,
			want: `{"upstreams":[{"dial":"api.openai.com:443"}],
				"transport":{"protocol":"modelgate","tls":{"server_name":"api.openai.com"},"keep_alive":{"max_idle_conns_per_host":1024}},
				"headers":{"response":{"delete":["Server"]}}}`,
		},
		{
			name: "user keep-alive settings win",
			base: "https://api.openai.com/v1",
			user: `{"transport":{"protocol":"http","keep_alive":{"max_idle_conns_per_host":8,"idle_timeout":5000000000},"versions":["1.1"]}}`,
			want: `{"upstreams":[{"dial":"api.openai.com:443"}],
				"transport":{"protocol":"modelgate","keep_alive":{"max_idle_conns_per_host":8,"idle_timeout":5000000000},"versions":["1.1"],"tls":{"server_name":"api.openai.com"}}}`,
		},
		{
			name: "keep-alive off kept off",
			base: "http://127.0.0.1:8000/v1",
			user: `{"transport":{"protocol":"http","keep_alive":{"enabled":false}}}`,
			want: `{"upstreams":[{"dial":"127.0.0.1:8000"}],
				"transport":{"protocol":"modelgate","keep_alive":{"enabled":false,"max_idle_conns_per_host":1024}}}`,
		},
		{
			name: "other transports refused",
			base: "http://x/v1",
			user: `{"transport":{"protocol":"fastcgi"}}`,
			err:  "transport fastcgi is not supported",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, _ := url.Parse(tc.base)
			got, err := proxyConfig(json.RawMessage(tc.user), u)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var g, w any
			_ = json.Unmarshal(got, &g)
			if err := json.Unmarshal([]byte(tc.want), &w); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(g, w) {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestProviderPoolDefaults loads providers' reverse_proxy from proxy
// blocks and reads the pool of the HTTP transport that carries their
// requests: the default is providerIdleConnsPerHost idle connections per
// host, HTTP/1.1 and HTTP/2 (negotiated with an https provider that offers
// it); what a provider's proxy block sets wins.
func TestProviderPoolDefaults(t *testing.T) {
	for _, tc := range []struct {
		name, base, proxy string
		idle              int
		keepAlivesOff     bool
		h2                bool
	}{
		{name: "defaults", base: "https://api.openai.com/v1", idle: providerIdleConnsPerHost, h2: true},
		{name: "http base url", base: "http://127.0.0.1:8000/v1", idle: providerIdleConnsPerHost, h2: true},
		{name: "the user's pool", base: "https://api.openai.com/v1", idle: 16, h2: true,
			proxy: "proxy {\n transport http {\n keepalive_idle_conns_per_host 16\n }\n}"},
		{name: "keep-alive off", base: "https://api.openai.com/v1", idle: providerIdleConnsPerHost, keepAlivesOff: true, h2: true,
			proxy: "proxy {\n transport http {\n keepalive off\n }\n}"},
		{name: "HTTP/1.1 only", base: "https://api.openai.com/v1", idle: providerIdleConnsPerHost,
			proxy: "proxy {\n transport http {\n versions 1.1\n }\n}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var raw json.RawMessage
			if tc.proxy != "" {
				d := caddyfile.NewTestDispenser(tc.proxy)
				d.Next()
				var err error
				if raw, err = UnmarshalProxy(d); err != nil {
					t.Fatal(err)
				}
			}
			ctx, err := caddy.ProvisionContext(&caddy.Config{})
			if err != nil {
				t.Fatal(err)
			}
			base, _ := url.Parse(tc.base)
			u, err := New(ctx, Config{BaseURL: base, Proxy: raw})
			if err != nil {
				t.Fatal(err)
			}
			rt := u.proxy.Transport.(*authTransport).HTTPTransport.Transport
			if rt.MaxIdleConnsPerHost != tc.idle {
				t.Errorf("MaxIdleConnsPerHost %d, want %d", rt.MaxIdleConnsPerHost, tc.idle)
			}
			if rt.DisableKeepAlives != tc.keepAlivesOff {
				t.Errorf("DisableKeepAlives %v, want %v", rt.DisableKeepAlives, tc.keepAlivesOff)
			}
			// http2.ConfigureTransport registers "h2" for TLS connections.
			if _, h2 := rt.TLSNextProto["h2"]; h2 != tc.h2 {
				t.Errorf("HTTP/2 configured: %v, want %v", h2, tc.h2)
			}
		})
	}
}

func TestUpstreamHost(t *testing.T) {
	for _, tc := range []struct{ base, want string }{
		{"https://api.openai.com/v1", "api.openai.com"},
		{"http://127.0.0.1:8080/v1", "127.0.0.1:8080"},
		{"https://api.example.com:443/v1", "api.example.com:443"},
		{"http://[::1]/v1", "[::1]"},
		{"http://[::1]:9000/v1", "[::1]:9000"},
		{"http://example.com:/v1", "example.com"},
	} {
		u, err := url.Parse(tc.base)
		if err != nil {
			t.Fatal(err)
		}
		if got := upstreamHost(u); got != tc.want {
			t.Errorf("upstreamHost(%s) = %q, want %q", tc.base, got, tc.want)
		}
	}
}

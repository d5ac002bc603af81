package caddymodule

import (
	"encoding/json"
	"net/url"
	"reflect"
	"strings"
	"testing"
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
				"transport":{"protocol":"modelgate","tls":{"server_name":"api.anthropic.com"}},
				"headers":{"request":{"set":{"Host":["api.anthropic.com"]},"delete":["Via","X-Forwarded-For","X-Forwarded-Proto","X-Forwarded-Host"]}}}`,
		},
		{
			name: "http with port, no key",
			base: "http://127.0.0.1:8000/v1",
			want: `{"upstreams":[{"dial":"127.0.0.1:8000"}],
				"transport":{"protocol":"modelgate"},
				"headers":{"request":{"set":{"Host":["127.0.0.1:8000"]},"delete":["Via","X-Forwarded-For","X-Forwarded-Proto","X-Forwarded-Host"]}}}`,
		},
		{
			name: "user upstreams, transport and headers kept",
			base: "http://vllm.internal/v1",
			user: `{"upstreams":[{"dial":"10.0.0.5:8000"},{"dial":"10.0.0.6:8000"}],
				"transport":{"protocol":"http","dial_timeout":1000},
				"headers":{"request":{"set":{"X-Team":["ml"]},"delete":["X-Debug"]}}}`,
			want: `{"upstreams":[{"dial":"10.0.0.5:8000"},{"dial":"10.0.0.6:8000"}],
				"transport":{"protocol":"modelgate","dial_timeout":1000},
				"headers":{"request":{"set":{"X-Team":["ml"],"Host":["vllm.internal"]},"delete":["X-Debug","Via","X-Forwarded-For","X-Forwarded-Proto","X-Forwarded-Host"]}}}`,
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

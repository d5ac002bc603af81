package caddygateway

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	_ "github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy" // http.handlers.reverse_proxy

	"github.com/modelgate/modelgate/providers"
)

// TestProvisionService: a service's Send goes through its own
// reverse_proxy to its base URL, below the base URL's path, with the
// service's Authenticator, and the service's secrets are scrubbed from
// its answers; a service without a base URL, or with one that is not an
// absolute http(s) URL, is refused.
func TestProvisionService(t *testing.T) {
	const secret = "service-secret-4f2a"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery+" "+r.Header.Get("X-Service")+" "+secret)
	}))
	t.Cleanup(srv.Close)
	ctx, err := caddy.ProvisionContext(&caddy.Config{})
	if err != nil {
		t.Fatal(err)
	}
	send, err := ProvisionService(ctx, ProviderType{Name: "acme", BaseURL: srv.URL + "/bucket",
		Auth: HeaderAuth{Header: "X-Service", Value: "signed"}, Secrets: []string{secret}})
	if err != nil {
		t.Fatal(err)
	}
	a, err := send(context.Background(), providers.Request{Method: http.MethodGet, Path: "/o/key.jsonl", Query: "alt=media"})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(a.Body)
	_ = a.Body.Close()
	if a.Status != 200 || string(body) != "GET /bucket/o/key.jsonl?alt=media signed REDACTED" {
		t.Errorf("answer %d %q", a.Status, body)
	}

	for _, bad := range []string{"", "storage.example", "https://storage.example/?x=1", "ftp://storage.example"} {
		if _, err := ProvisionService(ctx, ProviderType{Name: "acme", BaseURL: bad}); err == nil || !strings.Contains(err.Error(), "URL") {
			t.Errorf("base URL %q: %v", bad, err)
		}
	}
}

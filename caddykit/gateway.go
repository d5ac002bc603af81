package caddykit

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"
)

// The addresses of the gateway Start runs: caddytest's, fixed, so that
// the tests of one process that start gateways run one after the other,
// and packages whose tests do run one at a time (go test -p 1).
const (
	// URL is the gateway's unified API.
	URL = "http://localhost:9080/v1"

	// Key is the gateway key the requests of Gateway carry.
	Key = "mg-caddykit-key-4e1b7d20"
)

// Gateway is a gateway Start runs for a test.
type Gateway struct {
	// Client sends its requests; its timeout is 20 seconds.
	Client *http.Client
}

// Start runs a gateway until the test ends, with Caddy's caddytest: its
// Caddyfile's modelgate global option block holds the lines of app (the
// providers, the models, anything the app takes) and a key named kit
// whose secret is Key, and its site, at URL, serves the unified API with
// that key:
//
//	{
//		modelgate {
//			<app>
//			key kit <Key>
//		}
//	}
//	http://localhost:9080 {
//		modelgate_auth
//		modelgate
//	}
//
// A Caddyfile that does not load fails the test.
func Start(t *testing.T, app string) *Gateway {
	t.Helper()
	caddytest.NewTester(t).InitServer(Caddyfile(app), "caddyfile")
	return &Gateway{Client: &http.Client{Timeout: 20 * time.Second}}
}

// Caddyfile is the Caddyfile Start runs for app.
func Caddyfile(app string) string {
	return fmt.Sprintf(`{
	admin localhost:2999
	http_port 9080
	https_port 9443
	grace_period 1ns
	skip_install_trust
	modelgate {
		%s
		key kit %s
	}
}
http://localhost:9080 {
	modelgate_auth
	modelgate
}
`, strings.ReplaceAll(strings.TrimSpace(app), "\n", "\n\t\t"), Key)
}

// Post sends body (JSON) to path under URL ("/chat/completions") with
// the gateway key, and returns the answer and its whole body.
func (g *Gateway) Post(t testing.TB, path, body string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+Key)
	res, err := g.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, b
}

// Chat sends a chat completion request and returns the answer and its
// body.
func (g *Gateway) Chat(t testing.TB, body string) (*http.Response, []byte) {
	t.Helper()
	return g.Post(t, "/chat/completions", body)
}

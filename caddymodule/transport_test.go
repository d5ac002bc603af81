package caddymodule

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/modelgate/modelgate/providers"
)

// countingConn counts the writes on a connection to the provider.
type countingConn struct {
	net.Conn
	writes *atomic.Int32
}

func (c countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// opaqueBody hides its reader's type, as reverse_proxy's body wrappers do.
type opaqueBody struct{ io.Reader }

func (opaqueBody) Close() error { return nil }

// TestAuthTransportBody checks that a provider request goes out with the
// bytes upstreamRequest left in the context, headers and body in one write,
// authenticated; and that a body which is not those bytes is sent as it is.
func TestAuthTransportBody(t *testing.T) {
	var got struct {
		body, auth string
	}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got.body, got.auth = string(b), r.Header.Get("Authorization")
		_, _ = w.Write([]byte("ok"))
	}))
	defer up.Close()

	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	var writes atomic.Int32
	for _, auth := range []Authenticator{HeaderAuth{Header: "Authorization", Value: "Bearer upstream-key"}, nil} {
		tr := &authTransport{auth: auth}
		if err := tr.Provision(ctx); err != nil {
			t.Fatal(err)
		}
		dial := tr.Transport.DialContext
		tr.Transport.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return countingConn{Conn: c, writes: &writes}, nil
		}
		for _, tc := range []struct {
			name, ctxBody, sent, want string
			writes                    int32
		}{
			{name: "the translated bytes", ctxBody: `{"model":"m"}`, sent: `{"model":"m"}`, want: `{"model":"m"}`, writes: 1},
			{name: "a body that is not them", ctxBody: `{"model":"m"}`, sent: `{"other":true}`, want: `{"other":true}`, writes: 2},
		} {
			req, err := http.NewRequestWithContext(&upstreamCtx{Context: context.Background(), body: []byte(tc.ctxBody)}, http.MethodPost, up.URL+"/v1/chat/completions", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Body, req.ContentLength = opaqueBody{strings.NewReader(tc.sent)}, int64(len(tc.sent))
			writes.Store(0)
			res, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if !bytes.Equal(b, []byte("ok")) || got.body != tc.want {
				t.Errorf("%s (auth %v): the provider got %q (answer %q), want %q", tc.name, auth != nil, got.body, b, tc.want)
			}
			if wantAuth := map[bool]string{true: "Bearer upstream-key", false: ""}[auth != nil]; got.auth != wantAuth {
				t.Errorf("%s: Authorization %q, want %q", tc.name, got.auth, wantAuth)
			}
			if n := writes.Load(); n != tc.writes {
				t.Errorf("%s (auth %v): the request took %d writes, want %d", tc.name, auth != nil, n, tc.writes)
			}
		}
		_ = tr.Cleanup()
	}
}

// TestUpstreamRequestContext checks the context upstreamRequest gives a
// provider call: the body for the transport, its own copy of the request
// variables (reverse_proxy writes into them while an earlier call's dial
// may still read them), and everything else from the client's request.
func TestUpstreamRequestContext(t *testing.T) {
	type otherKey struct{}
	vars := map[string]any{"a": 1}
	ctx := context.WithValue(context.Background(), caddyhttp.VarsCtxKey, vars)
	ctx = context.WithValue(ctx, otherKey{}, "other")
	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil).WithContext(ctx)
	b := &ProviderBase{basePath: "/v1"}
	body := []byte(`{"model":"m"}`)
	r2 := b.upstreamRequest(r, providers.Request{Path: "/chat/completions", Body: body}, false)

	if got := requestBody(r2.Context()); !bytes.Equal(got, body) {
		t.Errorf("body %q, want %q", got, body)
	}
	if requestBody(r.Context()) != nil {
		t.Error("the client's request has a provider body")
	}
	v2, _ := r2.Context().Value(caddyhttp.VarsCtxKey).(map[string]any)
	if v2 == nil || v2["a"] != 1 {
		t.Fatalf("the call's variables are %v, want a copy of %v", v2, vars)
	}
	v2["b"] = 2
	if _, ok := vars["b"]; ok {
		t.Error("the call's variables are the request's own map")
	}
	if r2.Context().Value(otherKey{}) != "other" {
		t.Error("another value of the request's context is lost")
	}
	if got, _ := io.ReadAll(r2.Body); !bytes.Equal(got, body) || r2.ContentLength != int64(len(body)) {
		t.Errorf("the request's body reads %q (length %d), want %q", got, r2.ContentLength, body)
	}
	if rc, err := r2.GetBody(); err != nil {
		t.Fatal(err)
	} else if got, _ := io.ReadAll(rc); !bytes.Equal(got, body) {
		t.Errorf("GetBody reads %q, want %q", got, body)
	}
	if r2.URL.Path != "/v1/chat/completions" {
		t.Errorf("path %q", r2.URL.Path)
	}

	// Without variables, none appear.
	r3 := b.upstreamRequest(httptest.NewRequest(http.MethodPost, "/", nil), providers.Request{Path: "/x", Body: body}, false)
	if v, ok := r3.Context().Value(caddyhttp.VarsCtxKey).(map[string]any); ok {
		t.Errorf("variables %v appeared", v)
	}
}

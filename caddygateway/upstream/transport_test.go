package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
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
// bytes request left in the context, headers and body in one write,
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

// TestUpstreamRequestContext checks the context request gives a
// provider call: the body for the transport, the request's variables (the
// first call's) or its own copy of them (a later call's: reverse_proxy
// writes into them while an earlier call's dial may still read them), and
// everything else from the client's request.
func TestUpstreamRequestContext(t *testing.T) {
	type otherKey struct{}
	vars := map[string]any{"a": 1}
	ctx := context.WithValue(context.Background(), caddyhttp.VarsCtxKey, vars)
	ctx = context.WithValue(ctx, otherKey{}, "other")
	ctx = context.WithValue(ctx, caddy.ReplacerCtxKey, caddy.NewReplacer())
	b := &Upstream{basePath: "/v1"}
	body := []byte(`{"model":"m"}`)
	w := httptest.NewRecorder()
	r2 := b.request(ctx, providers.Request{Path: "/chat/completions", Body: body}, false, w)

	if got := requestBody(r2.Context()); !bytes.Equal(got, body) {
		t.Errorf("body %q, want %q", got, body)
	}
	if requestBody(ctx) != nil {
		t.Error("the client's context has a provider body")
	}
	v2, _ := r2.Context().Value(caddyhttp.VarsCtxKey).(map[string]any)
	if v2 == nil || v2["a"] != 1 {
		t.Fatalf("the first call's variables are %v, want %v", v2, vars)
	}
	v2["b"] = 2 // as reverse_proxy writes its own
	if vars["b"] != 2 {
		t.Error("the first call's variables are not the request's own")
	}
	// A second call (a fallback's) gets a copy, with what the first wrote.
	for i := range 2 {
		r3 := b.request(ctx, providers.Request{Path: "/chat/completions", Body: body}, false, w)
		v3, _ := r3.Context().Value(caddyhttp.VarsCtxKey).(map[string]any)
		if v3 == nil || v3["a"] != 1 || v3["b"] != 2 {
			t.Fatalf("call %d's variables are %v, want a copy of %v", i+2, v3, vars)
		}
		v3["c"] = 3
		if _, ok := vars["c"]; ok {
			t.Fatalf("call %d's variables are the request's own map", i+2)
		}
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

	// A context without Caddy's request values (a batch line's) gets them:
	// a replacer, variables of its own, and a client address.
	r3 := b.request(context.Background(), providers.Request{Path: "/x", Body: body}, false, w)
	if r3.Context().Value(caddy.ReplacerCtxKey) == nil {
		t.Error("a request without Caddy's values has no replacer")
	}
	if v, ok := r3.Context().Value(caddyhttp.VarsCtxKey).(map[string]any); !ok || v == nil {
		t.Error("a request without Caddy's values has no variables")
	}
	if r3.RemoteAddr != batchRemoteAddr || r3.URL.Path != "/v1/x" {
		t.Errorf("a batch request has address %q, path %q", r3.RemoteAddr, r3.URL.Path)
	}
}

// headerSigner lists, as a signature would cover them, the headers of the
// request it authenticates.
type headerSigner struct{}

func (headerSigner) Authenticate(req *http.Request, _ []byte) error {
	names := make([]string, 0, len(req.Header))
	for k := range req.Header {
		names = append(names, k)
	}
	slices.Sort(names)
	req.Header.Set("X-Signed-Headers", strings.Join(names, ","))
	return nil
}

// TestProviderRequestHeaders checks the headers a provider gets, over
// http and https, with and without a credential or a proxy block's header
// operations: the base URL's Host; none of the Via and X-Forwarded-*
// headers reverse_proxy adds; and every header an Authenticator saw (and
// would sign) sent.
func TestProviderRequestHeaders(t *testing.T) {
	var got seen
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.record(r)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	})
	plain, tlsUp := httptest.NewServer(handler), httptest.NewTLSServer(handler)
	defer plain.Close()
	defer tlsUp.Close()
	for _, up := range []struct {
		name, url, proxy string
	}{
		{"http", plain.URL, ``},
		{"http, request header operations", plain.URL, `{"headers":{"request":{"set":{"X-Team":["ml"]}}}}`},
		{"https", tlsUp.URL, `{"transport":{"protocol":"http","tls":{"insecure_skip_verify":true}}}`},
		{"https, request header operations", tlsUp.URL, `{"transport":{"protocol":"http","tls":{"insecure_skip_verify":true}},"headers":{"request":{"set":{"X-Team":["ml"]}}}}`},
		{"https, the user's Host", tlsUp.URL, `{"transport":{"protocol":"http","tls":{"insecure_skip_verify":true}},"headers":{"request":{"set":{"Host":["api.example"]}}}}`},
	} {
		for _, auth := range []Authenticator{nil, HeaderAuth{Header: "X-Api-Key", Value: "upstream-key"}, headerSigner{}} {
			t.Run(fmt.Sprintf("%s, auth %T", up.name, auth), func(t *testing.T) {
				ctx, err := caddy.ProvisionContext(&caddy.Config{})
				if err != nil {
					t.Fatal(err)
				}
				base, err := url.Parse(up.url + "/v1")
				if err != nil {
					t.Fatal(err)
				}
				u, err := New(ctx, Config{BaseURL: base, Proxy: json.RawMessage(up.proxy), Auth: auth})
				if err != nil {
					t.Fatal(err)
				}
				r, rec := clientRequest(t)
				r.Header.Set("X-Forwarded-For", "203.0.113.9")
				// A translator's header map, which it may share between
				// requests, is only read.
				shared := http.Header{"Anthropic-Version": {"2023-06-01"}}
				if err := u.Send(r.Context(), providers.Request{Path: "/chat", Body: []byte(`{"q":1}`), Header: shared}, false, rec); err != nil || rec.Code != 200 {
					t.Fatalf("status %d, error %v", rec.Code, err)
				}
				if want := (http.Header{"Anthropic-Version": {"2023-06-01"}}); !reflect.DeepEqual(shared, want) {
					t.Errorf("the translator's header map became %v", shared)
				}
				req, body := got.last()
				if string(body) != `{"q":1}` {
					t.Errorf("body %q", body)
				}
				wantHost := strings.TrimPrefix(strings.TrimPrefix(up.url, "http://"), "https://")
				if strings.Contains(up.proxy, `"Host"`) {
					wantHost = "api.example"
				}
				if req.Host != wantHost {
					t.Errorf("Host %q, want %q", req.Host, wantHost)
				}
				for _, h := range []string{"Via", "X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host", "Authorization"} {
					if v, ok := req.Header[h]; ok {
						t.Errorf("the provider got %s: %q", h, v)
					}
				}
				for h, want := range map[string]string{"Content-Type": "application/json", "Accept": "application/json",
					"User-Agent": "modelgate", "Anthropic-Version": "2023-06-01"} {
					if v := req.Header.Get(h); v != want {
						t.Errorf("%s %q, want %q", h, v, want)
					}
				}
				if strings.Contains(up.proxy, "X-Team") && req.Header.Get("X-Team") != "ml" {
					t.Errorf("X-Team %q: the proxy block's operation was not applied", req.Header.Get("X-Team"))
				}
				switch auth.(type) {
				case HeaderAuth:
					if req.Header.Get("X-Api-Key") != "upstream-key" {
						t.Errorf("X-Api-Key %q", req.Header.Get("X-Api-Key"))
					}
				case headerSigner:
					signed := req.Header.Get("X-Signed-Headers")
					for _, h := range strings.Split(signed, ",") {
						if _, ok := req.Header[h]; !ok {
							t.Errorf("%s was signed (%s) but not sent", h, signed)
						}
					}
				}
			})
		}
	}
}

// TestAuthTransportRateLimitHeaders checks that a successful answer reaches
// reverse_proxy without the provider's rate-limit headers and with every
// other header, and that an error keeps them all for the provider's Error.
func TestAuthTransportRateLimitHeaders(t *testing.T) {
	sent := http.Header{
		"X-Ratelimit-Limit-Requests":           {"10000"},
		"X-Ratelimit-Reset-Tokens":             {"0s"},
		"Anthropic-Ratelimit-Tokens-Remaining": {"3999000"},
		"X-Request-Id":                         {"req_1"},
		"Request-Id":                           {"req_2"},
		"Retry-After":                          {"3"},
		"X-Ratelimited":                        {"no"}, // not a rate-limit header's prefix
	}
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	limits := []string{"X-Ratelimit-Limit-Requests", "X-Ratelimit-Reset-Tokens", "Anthropic-Ratelimit-Tokens-Remaining"}
	for _, tc := range []struct {
		name    string
		status  int
		extra   int // more headers: past eight the answer's map is a table, which is copied
		dropped []string
	}{
		{name: "200, a table", status: http.StatusOK, extra: 4, dropped: limits},
		{name: "204, one group", status: http.StatusNoContent, dropped: limits}, // with Date: eight
		{name: "429", status: http.StatusTooManyRequests, extra: 4},
		{name: "500", status: http.StatusInternalServerError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := maps.Clone(sent)
			for i := range tc.extra {
				want[fmt.Sprintf("X-Extra-%d", i)] = []string{strconv.Itoa(i)}
			}
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				for k, v := range want {
					w.Header()[k] = v
				}
				w.WriteHeader(tc.status)
			}))
			defer up.Close()
			tr := &authTransport{auth: HeaderAuth{Header: "Authorization", Value: "Bearer upstream-key"}}
			if err := tr.Provision(ctx); err != nil {
				t.Fatal(err)
			}
			req, err := http.NewRequest(http.MethodPost, up.URL+"/v1/chat/completions", strings.NewReader("{}"))
			if err != nil {
				t.Fatal(err)
			}
			res, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = res.Body.Close()
			for k, v := range want {
				got := res.Header[k]
				if slices.Contains(tc.dropped, k) {
					if got != nil {
						t.Errorf("%s reached reverse_proxy: %q", k, got)
					}
				} else if !slices.Equal(got, v) {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
		})
	}
}

// clientRequest is a client's request as Caddy's server hands it to a
// handler, with the gateway key that must never reach the provider.
func clientRequest(t *testing.T) (*http.Request, *httptest.ResponseRecorder) {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "http://gateway.example/v1/chat/completions?client=query", strings.NewReader(`{}`))
	r.Header.Set("Authorization", "Bearer mg-gateway-key")
	rec := httptest.NewRecorder()
	return caddyhttp.PrepareRequest(r, caddy.NewReplacer(), rec, &caddyhttp.Server{}), rec
}

// seen is what an upstream received.
type seen struct {
	mu   sync.Mutex
	reqs []*http.Request
	body [][]byte
}

func (s *seen) record(r *http.Request) []byte {
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, r)
	s.body = append(s.body, b)
	return b
}

func (s *seen) last() (*http.Request, []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reqs[len(s.reqs)-1], s.body[len(s.body)-1]
}

// TestUpstreamRequestUpload: a streamed body (a native batch's records) is
// the request's body as it is, with its length, no copy of it in the
// context, and no GetBody: read once, it cannot be sent again.
func TestUpstreamRequestUpload(t *testing.T) {
	b := &Upstream{basePath: "/v1"}
	upload := strings.NewReader("records\n")
	r2 := b.request(context.Background(), providers.Request{Path: "/files", Upload: upload, Length: 8,
		Header: http.Header{"Content-Type": {"multipart/form-data; boundary=x"}}}, false, httptest.NewRecorder())
	if r2.ContentLength != 8 || r2.GetBody != nil || requestBody(r2.Context()) != nil {
		t.Errorf("length %d, GetBody %v, body in the context %q", r2.ContentLength, r2.GetBody != nil, requestBody(r2.Context()))
	}
	if got, _ := io.ReadAll(r2.Body); string(got) != "records\n" || upload.Len() != 0 {
		t.Errorf("the body reads %q", got)
	}
	if ct := r2.Header.Get("Content-Type"); ct != "multipart/form-data; boundary=x" {
		t.Errorf("Content-Type %q", ct)
	}
}

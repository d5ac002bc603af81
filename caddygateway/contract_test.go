package caddygateway

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	_ "github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy" // http.handlers.reverse_proxy
	"golang.org/x/oauth2"

	"github.com/modelgate/modelgate/providers"
)

// These tests show that the provider contract covers what the coming
// provider types need, each with a toy implementation: a query string on the
// upstream request (Gemini's alt=sse, Azure's api-version), an
// Authenticator that signs the final request, body and Host included (AWS
// SigV4), one that sets a token it refreshes (Google, Azure Entra ID), a
// stream framing of the provider's own (AWS's binary event stream), and
// error mapping that reads the provider's headers (Bedrock's error type).

// mapBody maps an error by its body alone, as OpenAI-compatible
// providers' errors are.
func mapBody(status int, _ http.Header, body []byte) *providers.Error {
	return providers.ErrorFromBody(status, body)
}

// toyProvider provisions a ProviderBase against upstream with auth, as a
// provider module's Provision would.
func toyProvider(t *testing.T, upstream string, auth Authenticator) *provider {
	t.Helper()
	ctx, err := caddy.ProvisionContext(&caddy.Config{})
	if err != nil {
		t.Fatal(err)
	}
	b := &ProviderBase{BaseURL: upstream + "/toy/v1"}
	if err := b.ProvisionBase(ctx, ProviderType{Name: "toy", Auth: auth}); err != nil {
		t.Fatal(err)
	}
	return &provider{name: "toy", base: b}
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

// seen is what the toy upstream received.
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

func TestContractQuery(t *testing.T) {
	var got seen
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.record(r)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	defer up.Close()
	p := toyProvider(t, up.URL, nil)
	for _, tc := range []struct{ name, path, query, wantURI string }{
		{"query", "/models/m:generate", "alt=sse", "/toy/v1/models/m:generate?alt=sse"},
		{"encoded query", "/chat", "api-version=2024-10-21&x=a%26b", "/toy/v1/chat?api-version=2024-10-21&x=a%26b"},
		{"no query: the client's is never forwarded", "/chat", "", "/toy/v1/chat"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, rec := clientRequest(t)
			status, f := p.forward(rec, r, providers.Request{Path: tc.path, Query: tc.query, Body: []byte(`{"q":1}`)},
				exchange{translate: func(b []byte) ([]byte, error) { return b, nil }, mapError: mapBody})
			if f != nil || status != 200 {
				t.Fatalf("status %d, failure %+v", status, f)
			}
			req, _ := got.last()
			if req.RequestURI != tc.wantURI {
				t.Errorf("upstream got %s, want %s", req.RequestURI, tc.wantURI)
			}
			if req.Header.Get("Authorization") != "" {
				t.Errorf("the client's key reached the provider")
			}
		})
	}
}

// toySigner signs method, URI, Host, a timestamp and the body with an HMAC,
// as SigV4 signs a canonical request.
type toySigner struct{ secret []byte }

func (s toySigner) sign(method, uri, host, date string, body []byte) string {
	m := hmac.New(sha256.New, s.secret)
	fmt.Fprintf(m, "%s\n%s\n%s\n%s\n", method, uri, host, date)
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

func (s toySigner) Authenticate(req *http.Request, body []byte) error {
	date := time.Now().UTC().Format(time.RFC3339)
	req.Header.Set("X-Toy-Date", date)
	req.Header.Set("X-Toy-Signature", s.sign(req.Method, req.URL.RequestURI(), req.Host, date, body))
	return nil
}

func TestContractSignedRequest(t *testing.T) {
	signer := toySigner{secret: []byte("toy-signing-secret")}
	var got seen
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := got.record(r)
		want := signer.sign(r.Method, r.RequestURI, r.Host, r.Header.Get("X-Toy-Date"), body)
		if r.Header.Get("X-Toy-Signature") != want {
			w.WriteHeader(http.StatusForbidden)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	defer up.Close()
	p := toyProvider(t, up.URL, signer)
	r, rec := clientRequest(t)
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"sign me"}]}`)
	status, f := p.forward(rec, r, providers.Request{Path: "/converse", Query: "a=1", Body: body},
		exchange{translate: func(b []byte) ([]byte, error) { return b, nil }, mapError: mapBody})
	if f != nil || status != 200 {
		t.Fatalf("the upstream refused the signature: status %d, %+v", status, f)
	}
	req, gotBody := got.last()
	if !bytes.Equal(gotBody, body) || req.Host != strings.TrimPrefix(up.URL, "http://") {
		t.Errorf("signed %q for Host %q", gotBody, req.Host)
	}

	// An Authenticator that fails ends the call with a 502 naming the
	// provider, not the error's text.
	failing := toyProvider(t, up.URL, AuthenticatorFunc(func(*http.Request, []byte) error {
		return errors.New("no credentials in the chain: secret-detail")
	}))
	r, rec = clientRequest(t)
	_, f = failing.forward(rec, r, providers.Request{Path: "/converse", Body: body},
		exchange{translate: func(b []byte) ([]byte, error) { return b, nil }, mapError: mapBody})
	if f == nil || f.err.Status != http.StatusBadGateway || f.err.Code != "upstream_auth_failed" || strings.Contains(f.err.Message, "secret-detail") {
		t.Fatalf("failing authenticator: %+v", f)
	}
}

// toyTokens issues numbered tokens that expire after ttl.
type toyTokens struct {
	n   atomic.Int32
	ttl time.Duration
}

func (s *toyTokens) Token() (*oauth2.Token, error) {
	n := s.n.Add(1)
	return &oauth2.Token{AccessToken: fmt.Sprintf("tok-%d", n), Expiry: time.Now().Add(s.ttl)}, nil
}

func TestContractRefreshedToken(t *testing.T) {
	var got seen
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.record(r)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{}`))
	}))
	defer up.Close()
	call := func(p *provider) string {
		r, rec := clientRequest(t)
		if _, f := p.forward(rec, r, providers.Request{Path: "/x", Body: []byte(`{}`)},
			exchange{translate: func(b []byte) ([]byte, error) { return b, nil }, mapError: mapBody}); f != nil {
			t.Fatal(f.err)
		}
		req, _ := got.last()
		return req.Header.Get("Authorization")
	}

	// A token valid for an hour is fetched once and reused.
	long := &toyTokens{ttl: time.Hour}
	p := toyProvider(t, up.URL, NewTokenAuth(long))
	for range 3 {
		if a := call(p); a != "Bearer tok-1" {
			t.Fatalf("Authorization %q, want the first token reused", a)
		}
	}
	// A token that expires within TokenEarlyExpiry is replaced before it
	// goes out: every call gets a fresh one.
	short := &toyTokens{ttl: TokenEarlyExpiry - time.Minute}
	p = toyProvider(t, up.URL, NewTokenAuth(short))
	if a, b := call(p), call(p); a != "Bearer tok-1" || b != "Bearer tok-2" {
		t.Fatalf("Authorization %q then %q, want a refresh before expiry", a, b)
	}
}

// toyFraming is a provider's own stream framing: each event a 4-byte
// big-endian length and that many bytes, with Content-Type
// application/x-toy-frames.
type toyFraming struct{}

func (toyFraming) IsStream(ct string) bool { return ct == "application/x-toy-frames" }

func (toyFraming) Cut(buf []byte) (event, rest []byte, ok bool, err error) {
	if len(buf) < 4 {
		return nil, buf, false, nil
	}
	n := binary.BigEndian.Uint32(buf)
	if n > 1<<20 {
		return nil, nil, false, errors.New("frame too long")
	}
	if len(buf) < 4+int(n) {
		return nil, buf, false, nil
	}
	return buf[4 : 4+n], buf[4+n:], true, nil
}

// toyStream turns each frame's text into a chunk and ends with [DONE].
type toyStream struct{ events int }

func (s *toyStream) Event(dst, ev []byte) ([]byte, error) {
	s.events++
	return append(append(append(dst, `data: {"text":"`...), ev...), "\"}\n\n"...), nil
}

func (s *toyStream) Close(dst []byte) []byte { return append(dst, "data: [DONE]\n\n"...) }

func frame(s string) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(s))), s...)
}

func TestContractFraming(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-toy-frames")
		all := append(append(frame("one"), frame("two")...), frame("three")...)
		// Written in pieces that cut frames and length prefixes apart.
		for _, cut := range [][2]int{{0, 2}, {2, 9}, {9, len(all)}} {
			_, _ = w.Write(all[cut[0]:cut[1]])
			_ = http.NewResponseController(w).Flush()
		}
	}))
	defer up.Close()
	p := toyProvider(t, up.URL, nil)
	r, rec := clientRequest(t)
	tr := &toyStream{}
	status, f := p.forward(rec, r, providers.Request{Path: "/stream", Body: []byte(`{}`), Framing: toyFraming{}},
		exchange{stream: true, tr: tr, mapError: mapBody})
	if f != nil || status != 200 {
		t.Fatalf("status %d, %+v", status, f)
	}
	want := "data: {\"text\":\"one\"}\n\ndata: {\"text\":\"two\"}\n\ndata: {\"text\":\"three\"}\n\ndata: [DONE]\n\n"
	if rec.Body.String() != want || rec.Header().Get("Content-Type") != "text/event-stream" || tr.events != 3 {
		t.Fatalf("client got %q (%s)", rec.Body, rec.Header().Get("Content-Type"))
	}

	// Without a framing of its own, a request's stream is SSE: a toy-framed
	// answer is not a stream then.
	r, rec = clientRequest(t)
	if status, f = p.forward(rec, r, providers.Request{Path: "/stream", Body: []byte(`{}`)},
		exchange{stream: true, tr: &toyStream{}, translate: func([]byte) ([]byte, error) { return nil, errors.New("not JSON") },
			mapError: mapBody}); f == nil || f.err.Code != "bad_upstream_response" {
		t.Fatalf("SSE default: status %d, %+v", status, f)
	}
}

func TestContractErrorMapping(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Toy-Error-Type", "Throttled:https://toy.example/errors")
		w.Header().Set("Retry-After", "7")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest) // the toy signals throttling in a header
		_, _ = w.Write([]byte(`{"detail":"slow down, caller"}`))
	}))
	defer up.Close()
	p := toyProvider(t, up.URL, nil)
	r, rec := clientRequest(t)
	mapError := func(status int, h http.Header, body []byte) *providers.Error {
		if typ, _, _ := strings.Cut(h.Get("X-Toy-Error-Type"), ":"); typ == "Throttled" {
			return &providers.Error{Status: http.StatusTooManyRequests, Type: "rate_limit_error", Code: "rate_limit_exceeded", Message: "throttled"}
		}
		return providers.ErrorFromBody(status, body)
	}
	_, f := p.forward(rec, r, providers.Request{Path: "/x", Body: []byte(`{}`)}, exchange{mapError: mapError})
	if f == nil || f.err.Status != 429 || f.err.Code != "rate_limit_exceeded" || !f.retryable() {
		t.Fatalf("mapped %+v", f)
	}
	f.write(rec, openAIAPI)
	if rec.Code != 429 || rec.Header().Get("Retry-After") != "7" || rec.Header().Get("X-Toy-Error-Type") != "" {
		t.Fatalf("client got %d %v %s", rec.Code, rec.Header(), rec.Body)
	}
}

// TestContractAnswersScrubbed checks that whatever a provider's answer
// quotes of the provider's credentials — the key it was sent, a token the
// Authenticator fetched, another secret of its configuration — reaches
// nothing the gateway passes on: the error of any status (written to the
// client or kept for a fallback), the headers a client gets, a stream
// passed through, the error of a failed authentication.
func TestContractAnswersScrubbed(t *testing.T) {
	const (
		key      = "sk-configured-provider-key"
		token    = "ya29.token-of-the-provider"
		secret   = "aws-secret-key-never-sent"
		received = "the credentials you sent: "
	)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		quote := received + r.Header.Get("X-Api-Key") + r.Header.Get("Authorization") + " and " + secret
		w.Header().Set("X-Request-Id", quote)
		status, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/toy/v1/"))
		if status == http.StatusOK {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "data: {\"a\":1}\n\ndata: {\"error\":{\"message\":%q}}\n\n", quote)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"error":{"message":%q,"type":"invalid_request_error"}}`, quote)
	}))
	defer up.Close()
	ctx, err := caddy.ProvisionContext(&caddy.Config{})
	if err != nil {
		t.Fatal(err)
	}
	newProvider := func(t *testing.T, typ ProviderType, apiKey string) *provider {
		b := &ProviderBase{BaseURL: up.URL + "/toy/v1", APIKey: apiKey}
		typ.Name, typ.Secrets = "toy", []string{secret}
		if err := b.ProvisionBase(ctx, typ); err != nil {
			t.Fatal(err)
		}
		return &provider{name: "toy", base: b}
	}
	leaks := func(t *testing.T, what, s string) {
		t.Helper()
		for _, v := range []string{key, token, secret} {
			if strings.Contains(s, v) {
				t.Errorf("%s holds %q: %s", what, v, s)
			}
		}
	}
	for _, p := range []struct {
		name string
		p    *provider
	}{
		{"api_key in x-api-key", newProvider(t, ProviderType{KeyHeader: "x-api-key"}, key)},
		{"a token", newProvider(t, ProviderType{Auth: NewTokenAuth(oauth2.StaticTokenSource(&oauth2.Token{AccessToken: token}))}, "")},
	} {
		for _, status := range []int{400, 429, 500, 200} {
			t.Run(fmt.Sprintf("%s, %d", p.name, status), func(t *testing.T) {
				r, rec := clientRequest(t)
				got, f := p.p.forward(rec, r, providers.Request{Path: "/" + strconv.Itoa(status), Body: []byte(`{}`)},
					exchange{stream: status == 200, mapError: mapBody, translate: func(b []byte) ([]byte, error) { return b, nil }})
				if f != nil {
					// A failure a fallback may retry: what the client
					// gets if none does, and what the WARN line says.
					if f.cause != nil {
						t.Fatalf("the provider could not be reached: %v", f.cause)
					}
					f.write(rec, nil)
					got = f.err.Status
				}
				if got != status {
					t.Fatalf("status %d, want %d", got, status)
				}
				if !strings.Contains(rec.Body.String(), received) {
					t.Fatalf("the answer does not pass the provider's message on; the check proves nothing: %s", rec.Body)
				}
				leaks(t, "the client's body", rec.Body.String())
				for k, v := range rec.Header() {
					leaks(t, "the client's "+k+" header", strings.Join(v, " "))
				}
				if f != nil {
					leaks(t, "the failure's message", f.err.Message)
				}
			})
		}
	}
	// Authentication that fails with a secret in its error's text.
	p := newProvider(t, ProviderType{Auth: AuthenticatorFunc(func(*http.Request, []byte) error {
		return errors.New("the token endpoint refused the client secret " + secret)
	})}, "")
	r, rec := clientRequest(t)
	_, f := p.forward(rec, r, providers.Request{Path: "/200", Body: []byte(`{}`)}, exchange{mapError: mapBody})
	if f == nil || f.cause == nil || f.err.Code != "upstream_auth_failed" {
		t.Fatalf("failure %+v, want a failed authentication", f)
	}
	leaks(t, "the cause", f.cause.Error())
	if !strings.Contains(f.cause.Error(), "the client secret REDACTED") {
		t.Errorf("cause %q", f.cause)
	}
}

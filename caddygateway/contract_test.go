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
	"go.uber.org/zap"
	zapobserver "go.uber.org/zap/zaptest/observer"
	"golang.org/x/oauth2"

	"github.com/modelgate/modelgate/gateway"
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
func toyProvider(t *testing.T, upstream string, auth Authenticator) *ProviderBase {
	t.Helper()
	ctx, err := caddy.ProvisionContext(&caddy.Config{})
	if err != nil {
		t.Fatal(err)
	}
	b := &ProviderBase{BaseURL: upstream + "/toy/v1"}
	if err := b.ProvisionBase(ctx, ProviderType{Name: "toy", Auth: auth}); err != nil {
		t.Fatal(err)
	}
	return b
}

// toyChat is a provider type's chat translator for these tests: it sends
// req, whatever the call; its answers pass as they are (or translate
// fails), its stream translator is stream (nil: the events are unified
// chunks already), its errors go through mapError (nil: mapBody).
type toyChat struct {
	req       providers.Request
	translate func(body []byte) ([]byte, error)
	stream    func() providers.StreamTranslator
	mapError  func(int, http.Header, []byte) *providers.Error
}

func (c toyChat) ChatRequest([]byte, string) (providers.Request, error) { return c.req, nil }

func (c toyChat) ChatResponse(body []byte) ([]byte, providers.Used, error) {
	if c.translate != nil {
		out, err := c.translate(body)
		return out, providers.Used{}, err
	}
	return body, providers.Used{}, nil
}

func (c toyChat) ChatStream(providers.StreamOptions) providers.StreamTranslator {
	if c.stream == nil {
		return nil
	}
	return c.stream()
}

func (c toyChat) Error(status int, h http.Header, body []byte) *providers.Error {
	if c.mapError != nil {
		return c.mapError(status, h, body)
	}
	return mapBody(status, h, body)
}

// contractCall serves a chat call (streamed or not) of the model toy/m,
// from a client's request as Caddy's server hands it to a handler (with
// the gateway key that must never reach the provider), through a gateway
// whose one provider is b with the translator chat. It returns the
// outcome, what the client got, and the gateway's log.
func contractCall(t *testing.T, b *ProviderBase, chat toyChat, stream bool) (*gateway.Outcome, *httptest.ResponseRecorder, *zapobserver.ObservedLogs) {
	t.Helper()
	core, logs := zapobserver.New(zap.DebugLevel)
	gw, err := gateway.New(gateway.Config{Providers: map[string]*gateway.Provider{
		"toy": gateway.NewProvider("toy", "toy", nil, Endpoints{Chat: chat}, b.upstream)}, Logger: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodPost, "http://gateway.example/v1/chat/completions?client=query", strings.NewReader(`{}`))
	r.Header.Set("Authorization", "Bearer mg-gateway-key")
	rec := httptest.NewRecorder()
	r = caddyhttp.PrepareRequest(r, caddy.NewReplacer(), rec, &caddyhttp.Server{})
	body := `{"model":"toy/m","messages":[{"role":"user","content":"hi"}]}`
	if stream {
		body = `{"model":"toy/m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`
	}
	o := &gateway.Outcome{Header: rec.Header()}
	gw.Serve(r.Context(), &gateway.Call{API: gateway.APIChat, Body: []byte(body), Header: r.Header, Sink: responseSink{rec}, Log: zap.New(core)}, o)
	if !o.Streamed {
		WriteJSON(rec, o.Status, o.Body)
	}
	return o, rec, logs
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
			o, _, _ := contractCall(t, p, toyChat{req: providers.Request{Path: tc.path, Query: tc.query, Body: []byte(`{"q":1}`)}}, false)
			if o.Status != 200 {
				t.Fatalf("status %d, %+v", o.Status, o.Err)
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
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"sign me"}]}`)
	if o, _, _ := contractCall(t, p, toyChat{req: providers.Request{Path: "/converse", Query: "a=1", Body: body}}, false); o.Status != 200 {
		t.Fatalf("the upstream refused the signature: status %d, %+v", o.Status, o.Err)
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
	o, _, _ := contractCall(t, failing, toyChat{req: providers.Request{Path: "/converse", Body: body}}, false)
	if o.Status != http.StatusBadGateway || o.Err.Code != "upstream_auth_failed" || strings.Contains(o.Err.Message, "secret-detail") {
		t.Fatalf("failing authenticator: %+v", o.Err)
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
	call := func(p *ProviderBase) string {
		if o, _, _ := contractCall(t, p, toyChat{req: providers.Request{Path: "/x", Body: []byte(`{}`)}}, false); o.Status != 200 {
			t.Fatal(o.Err)
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

func (s *toyStream) Usage() providers.Used { return providers.Used{} }

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
	tr := &toyStream{}
	o, rec, _ := contractCall(t, p, toyChat{req: providers.Request{Path: "/stream", Body: []byte(`{}`), Framing: toyFraming{}},
		stream: func() providers.StreamTranslator { return tr }}, true)
	if !o.Streamed || o.Status != 200 {
		t.Fatalf("status %d, %+v", o.Status, o.Err)
	}
	want := "data: {\"text\":\"one\"}\n\ndata: {\"text\":\"two\"}\n\ndata: {\"text\":\"three\"}\n\ndata: [DONE]\n\n"
	if rec.Body.String() != want || rec.Header().Get("Content-Type") != "text/event-stream" || tr.events != 3 {
		t.Fatalf("client got %q (%s)", rec.Body, rec.Header().Get("Content-Type"))
	}

	// Without a framing of its own, a request's stream is SSE: a toy-framed
	// answer is not a stream then.
	o, _, _ = contractCall(t, p, toyChat{req: providers.Request{Path: "/stream", Body: []byte(`{}`)},
		stream:    func() providers.StreamTranslator { return &toyStream{} },
		translate: func([]byte) ([]byte, error) { return nil, errors.New("not JSON") }}, true)
	if o.Streamed || o.Err == nil || o.Err.Code != "bad_upstream_response" {
		t.Fatalf("SSE default: status %d, %+v", o.Status, o.Err)
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
	mapError := func(status int, h http.Header, body []byte) *providers.Error {
		if typ, _, _ := strings.Cut(h.Get("X-Toy-Error-Type"), ":"); typ == "Throttled" {
			return &providers.Error{Status: http.StatusTooManyRequests, Type: "rate_limit_error", Code: "rate_limit_exceeded", Message: "throttled"}
		}
		return providers.ErrorFromBody(status, body)
	}
	o, rec, _ := contractCall(t, p, toyChat{req: providers.Request{Path: "/x", Body: []byte(`{}`)}, mapError: mapError}, false)
	if o.Err == nil || o.Status != 429 || o.Err.Code != "rate_limit_exceeded" || !o.Retryable || o.RetryAfter != 7*time.Second {
		t.Fatalf("mapped %d %+v %+v", o.Status, o.Err, o)
	}
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
	newProvider := func(t *testing.T, typ ProviderType, apiKey string) *ProviderBase {
		b := &ProviderBase{BaseURL: up.URL + "/toy/v1", APIKey: apiKey}
		typ.Name, typ.Secrets = "toy", []string{secret}
		if err := b.ProvisionBase(ctx, typ); err != nil {
			t.Fatal(err)
		}
		return b
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
		p    *ProviderBase
	}{
		{"api_key in x-api-key", newProvider(t, ProviderType{KeyHeader: "x-api-key"}, key)},
		{"a token", newProvider(t, ProviderType{Auth: NewTokenAuth(oauth2.StaticTokenSource(&oauth2.Token{AccessToken: token}))}, "")},
	} {
		for _, status := range []int{400, 429, 500, 200} {
			t.Run(fmt.Sprintf("%s, %d", p.name, status), func(t *testing.T) {
				o, rec, logs := contractCall(t, p.p, toyChat{req: providers.Request{Path: "/" + strconv.Itoa(status), Body: []byte(`{}`)}}, status == 200)
				if o.Status != status || o.Err != nil && o.Err.Code == "upstream_unreachable" {
					t.Fatalf("status %d, want %d (%+v)", o.Status, status, o.Err)
				}
				if !strings.Contains(rec.Body.String(), received) {
					t.Fatalf("the answer does not pass the provider's message on; the check proves nothing: %s", rec.Body)
				}
				leaks(t, "the client's body", rec.Body.String())
				for k, v := range rec.Header() {
					leaks(t, "the client's "+k+" header", strings.Join(v, " "))
				}
				// What a failure a fallback may retry says in the WARN line.
				for _, e := range logs.All() {
					leaks(t, "the log line "+e.Message, fmt.Sprint(e.ContextMap()))
				}
			})
		}
	}
	// Authentication that fails with a secret in its error's text.
	p := newProvider(t, ProviderType{Auth: AuthenticatorFunc(func(*http.Request, []byte) error {
		return errors.New("the token endpoint refused the client secret " + secret)
	})}, "")
	o, _, logs := contractCall(t, p, toyChat{req: providers.Request{Path: "/200", Body: []byte(`{}`)}}, false)
	if o.Err == nil || o.Err.Code != "upstream_auth_failed" || logs.Len() == 0 {
		t.Fatalf("failure %+v (log %v), want a failed authentication", o.Err, logs.All())
	}
	cause := fmt.Sprint(logs.All()[0].ContextMap()["cause"])
	leaks(t, "the cause", cause)
	if !strings.Contains(cause, "the client secret REDACTED") {
		t.Errorf("cause %q", cause)
	}
}

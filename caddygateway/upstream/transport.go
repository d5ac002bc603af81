package upstream

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/headers"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"golang.org/x/oauth2"
)

func init() {
	caddy.RegisterModule(authTransport{})
}

// Authenticator authenticates the gateway to a provider. modelgate calls it
// for every request to the provider — chat, rerank, batch lines and health
// checks alike — in the provider's transport: after reverse_proxy has chosen
// the upstream, set the Host header and logged the request, on a copy of the
// request that only the transport sees. So a signature covers the request
// exactly as it is sent (method, URL, Host, headers, body), and a credential
// never reaches a log line, whatever header carries it.
type Authenticator interface {
	// Authenticate adds the gateway's credentials to req, whose body is
	// body (nil when the request has none, as a health check). It must be
	// safe for concurrent use. An error fails the request with a 502
	// naming the provider, never the error's text.
	Authenticate(req *http.Request, body []byte) error
}

// AuthenticatorFunc adapts a function to the Authenticator interface.
type AuthenticatorFunc func(req *http.Request, body []byte) error

// Authenticate calls f.
func (f AuthenticatorFunc) Authenticate(req *http.Request, body []byte) error { return f(req, body) }

// HeaderAuth sends a static credential in one header, such as
// "Authorization: Bearer <key>" or "x-api-key: <key>".
type HeaderAuth struct {
	Header string
	Value  string
}

// Authenticate sets the header.
func (a HeaderAuth) Authenticate(req *http.Request, _ []byte) error {
	req.Header.Set(a.Header, a.Value)
	return nil
}

// TokenAuth sends a short-lived OAuth 2 access token as "Authorization:
// Bearer <token>", for providers that take tokens rather than keys (Google
// Cloud, Azure Entra ID). Use NewTokenAuth, which refreshes the token before
// it expires.
type TokenAuth struct {
	source oauth2.TokenSource
}

// TokenEarlyExpiry is how long before its expiry a token is replaced: a
// request never goes out with a token about to expire on its way.
const TokenEarlyExpiry = 5 * time.Minute

// NewTokenAuth returns a TokenAuth that takes tokens from src and fetches a
// new one TokenEarlyExpiry before the current one expires.
func NewTokenAuth(src oauth2.TokenSource) TokenAuth {
	return TokenAuth{source: oauth2.ReuseTokenSourceWithExpiry(nil, src, TokenEarlyExpiry)}
}

// Authenticate sets the Authorization header from a current token.
func (a TokenAuth) Authenticate(req *http.Request, _ []byte) error {
	tok, err := a.source.Token()
	if err != nil {
		return fmt.Errorf("getting an access token: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
	return nil
}

// authError is a failed Authenticate, told apart from an unreachable
// provider.
type authError struct{ err error }

func (e authError) Error() string { return "authenticating to the provider: " + e.err.Error() }
func (e authError) Unwrap() error { return e.err }

// bodyKey is the context key under which request leaves the request
// body for the transport (reverse_proxy wraps the body it forwards, so the
// bytes are handed down beside it).
type bodyKey struct{}

// upstreamCtx is the context of a request to a provider: the client
// request's, the body for the transport and, where the request has
// variables, the provider call's own copy of them (see request).
// One allocation, where context.WithValue took three: a context for each
// value and the body's slice boxed in an interface.
type upstreamCtx struct {
	context.Context
	body []byte
	vars map[string]any // nil: the parent's
}

// Value serves the body (as the *upstreamCtx: a pointer, which an
// interface holds without an allocation) and the variables; other keys
// are the parent's. It tells keys apart by their type first: reverse_proxy
// asks its context for a value dozens of times per request, and comparing
// the key as an interface compares the values behind it too.
func (c *upstreamCtx) Value(key any) any {
	switch k := key.(type) {
	case bodyKey:
		return c
	case caddy.CtxKey:
		if k == caddyhttp.VarsCtxKey && c.vars != nil {
			return c.vars
		}
	}
	return c.Context.Value(key)
}

// requestBody is the body request left in ctx, nil when none.
func requestBody(ctx context.Context) []byte {
	if c, ok := ctx.Value(bodyKey{}).(*upstreamCtx); ok {
		return c.body
	}
	return nil
}

// upstreamCall is what request allocates for a provider request,
// in one allocation: its context, its URL, its body's reader and the values
// of the headers it sets.
type upstreamCall struct {
	upstreamCtx
	url    url.URL
	reader memBody
	values [4]string
}

// memBody reads a provider request's bytes: a bytes.Reader with a Close.
// net/http does not know it for bytes in memory as it knows
// io.NopCloser(bytes.NewReader(b)), and need not: reverse_proxy wraps the
// body it forwards, and RoundTrip sends the bytes themselves.
type memBody struct{ bytes.Reader }

// Close does nothing: the bytes stay the caller's.
func (*memBody) Close() error { return nil }

// authTransport is Caddy's HTTP transport plus the provider's
// Authenticator. It is modelgate-internal: providers configure it for their
// reverse_proxy; users configure the HTTP transport options (in a provider's
// proxy block), never this module directly.
//
// Why a transport: reverse_proxy logs the upstream request's headers at
// debug level and redacts only Authorization, Cookie and their kin, so a key
// sent as x-api-key would land in the log; and a request signature must be
// computed over the request reverse_proxy finally sends. The transport
// authenticates a copy of each request as it leaves, below the logging.
// On the way back, it takes the provider's rate-limit headers out of a
// successful answer before reverse_proxy copies them (see send), and
// scrubs the answer of the provider's credentials (see scrub.go).
type authTransport struct {
	*reverseproxy.HTTPTransport

	auth Authenticator // set by New; nil: none

	secrets *providerSecrets // set by New; nil: none configured

	// next sends the request in the HTTPTransport's place when set: the
	// benchmarks' provider in memory, under the transport's own work.
	next http.RoundTripper
}

// CaddyModule returns the Caddy module information.
func (authTransport) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.reverse_proxy.transport.modelgate",
		New: func() caddy.Module { return new(authTransport) },
	}
}

// Provision sets up the embedded HTTP transport.
func (t *authTransport) Provision(ctx caddy.Context) error {
	if t.HTTPTransport == nil {
		t.HTTPTransport = new(reverseproxy.HTTPTransport)
	}
	return t.HTTPTransport.Provision(ctx)
}

// RoundTrip sends an authenticated copy of req, its body read from the
// bytes request left in the context.
//
// reverse_proxy wraps the body it forwards (to keep it open across retries
// and to pass trailers on), so net/http no longer sees bytes in memory: it
// flushes the headers in a write of their own before it copies the body,
// and the provider gets every request in two packets. The bytes themselves
// — the translated body, which is also what the Authenticator signs — go
// out in one write with the headers (net/http recognises a bytes.Reader),
// on every attempt. A body that is not those bytes (a proxy block's rewrite
// changed it) is sent as it is.
//
// The copy's header is outgoingHeader's: without the Via header
// reverse_proxy adds, nor the X-Forwarded-* entries request left
// empty, so an Authenticator that signs every header signs what is sent.
//
// The answer, or the error, is scrubbed of the provider's credentials —
// those configured and those the request carried — before reverse_proxy
// reads it (see scrub.go).
func (t *authTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	body := requestBody(req.Context())
	inMemory := len(body) > 0 && req.Body != nil && req.ContentLength == int64(len(body))
	strip := revealing(req.Header)
	if t.auth != nil || inMemory || strip {
		r2 := new(http.Request)
		*r2 = *req
		if inMemory {
			r2.Body = newBytesBody(body)
		}
		if t.auth != nil || strip {
			r2.Header = outgoingHeader(req.Header, t.auth != nil)
		}
		if t.auth != nil {
			if err := t.auth.Authenticate(r2, body); err != nil {
				return nil, t.secrets.configuredScrubber().error(authError{err})
			}
		}
		req = r2
	}
	s := t.secrets.scrubberFor(req.Header)
	res, err := t.send(req)
	if err != nil {
		return nil, s.error(err)
	}
	s.header(res.Header)
	if res.StatusCode != http.StatusSwitchingProtocols {
		res.Body = s.body(res.Body)
	}
	return res, nil
}

// send sends req and drops the provider's rate-limit headers from a
// successful answer. They tell of the gateway's account with the provider,
// which no client sees (the gateway passes on only an allow-list of a
// provider's headers), and nothing reads them from a success: dropped
// here, reverse_proxy neither copies them into the answer's header map nor
// sets a placeholder for each, of the dozen Anthropic sends. An error keeps
// them, for the provider's Error to read.
func (t *authTransport) send(req *http.Request) (*http.Response, error) {
	var res *http.Response
	var err error
	if t.next != nil {
		res, err = t.next.RoundTrip(req)
	} else {
		res, err = t.HTTPTransport.RoundTrip(req)
	}
	if err == nil && res.StatusCode >= 200 && res.StatusCode < 300 {
		res.Header = withoutRateLimitHeaders(res.Header)
	}
	return res, err
}

// withoutRateLimitHeaders returns h without the provider rate-limit
// headers (x-ratelimit-*, anthropic-ratelimit-*, in net/http's canonical
// form). A map of more than eight entries is a hash table, which deleting
// does not shrink: reverse_proxy would walk all its slots and hash its
// keys again, so the rest are copied into a map of one group instead.
func withoutRateLimitHeaders(h http.Header) http.Header {
	if len(h) <= 8 {
		for k := range h {
			if rateLimitHeader(k) {
				delete(h, k)
			}
		}
		return h
	}
	kept := make(http.Header, 8)
	for k, v := range h {
		if !rateLimitHeader(k) {
			kept[k] = v
		}
	}
	return kept
}

// rateLimitHeader reports whether k, a canonical header key, is one of a
// provider's rate-limit headers.
func rateLimitHeader(k string) bool {
	return strings.HasPrefix(k, "X-Ratelimit-") || strings.HasPrefix(k, "Anthropic-Ratelimit-")
}

// RequestHeaderOps overrides the HTTP transport's, which for a TLS
// upstream sets the Host header to the upstream's host and port: the Host
// of a request to a provider is the base URL's, set by request (or
// by a proxy block's header operations, which proxyConfig completes with
// it). Without header operations, reverse_proxy sends the request's own
// header map instead of copying it for every request.
func (t *authTransport) RequestHeaderOps() *headers.HeaderOps { return nil }

// unsent are the headers reverse_proxy adds to a request that a provider
// never gets: they tell of the gateway's clients and of the gateway.
var unsent = [...]string{"Via", "X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host"}

// revealing reports whether h holds a header a provider never gets, or an
// entry without values.
func revealing(h http.Header) bool {
	for _, k := range unsent {
		if _, ok := h[k]; ok {
			return true
		}
	}
	for _, vv := range h {
		if vv == nil {
			return true
		}
	}
	return false
}

// outgoingHeader is a copy of h without the unsent headers and without
// entries that have no values (reverse_proxy's way of saying "do not
// add"), in two allocations as http.Header.Clone makes it, with room for
// one more header (the credential) when auth.
func outgoingHeader(h http.Header, auth bool) http.Header {
	keys, values := 0, 0
	for k, vv := range h {
		if vv != nil && !isUnsent(k) {
			keys++
			values += len(vv)
		}
	}
	if auth {
		keys++
	}
	h2 := make(http.Header, keys)
	all := make([]string, values)
	for k, vv := range h {
		if vv == nil || isUnsent(k) {
			continue
		}
		n := copy(all, vv)
		h2[k] = all[:n:n]
		all = all[n:]
	}
	return h2
}

func isUnsent(k string) bool {
	for _, u := range unsent {
		if k == u {
			return true
		}
	}
	return false
}

// Interface guards
var (
	_ caddy.Provisioner                                = (*authTransport)(nil)
	_ caddy.CleanerUpper                               = (*authTransport)(nil)
	_ http.RoundTripper                                = (*authTransport)(nil)
	_ reverseproxy.TLSTransport                        = (*authTransport)(nil)
	_ reverseproxy.HealthCheckSchemeOverriderTransport = (*authTransport)(nil)
	_ reverseproxy.RequestHeaderOpsTransport           = (*authTransport)(nil)
	_ Authenticator                                    = HeaderAuth{}
	_ Authenticator                                    = TokenAuth{}
	_ Authenticator                                    = AuthenticatorFunc(nil)
)

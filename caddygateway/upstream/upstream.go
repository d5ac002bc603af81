package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"

	"github.com/modelgate/modelgate/gateway"
	"github.com/modelgate/modelgate/providers"
)

// Upstream carries requests to one provider through the provider's own
// reverse_proxy handler, loaded from the provider's configuration: the
// gateway's Upstream (gateway.Upstream), and the one place that knows
// reverse_proxy's ways (docs/design/core.md).
type Upstream struct {
	proxy    *reverseproxy.Handler
	basePath string // the base URL's path, escaped, without a trailing slash
	host     string // the Host header of requests to the provider (upstreamHost)
}

// Config is what New needs to reach a provider.
type Config struct {
	// BaseURL is the provider's API root, an absolute http or https URL
	// without a query or fragment.
	BaseURL *url.URL

	// Proxy is the user's reverse_proxy configuration for the provider,
	// as JSON (see UnmarshalProxy); empty: the defaults.
	Proxy json.RawMessage

	// Auth authenticates the gateway to the provider; nil: nothing does.
	Auth Authenticator

	// Secrets are what the provider's answers are scrubbed of (see
	// scrub.go): its api_key and the other secrets of its configuration.
	Secrets []string
}

// New loads the reverse_proxy that carries requests to the provider of c.
// Caddy cleans it up with the module that ctx belongs to.
func New(ctx caddy.Context, c Config) (*Upstream, error) {
	raw, err := proxyConfig(c.Proxy, c.BaseURL)
	if err != nil {
		return nil, err
	}
	mod, err := ctx.LoadModuleByID("http.handlers.reverse_proxy", raw)
	if err != nil {
		return nil, fmt.Errorf("loading reverse_proxy: %w", err)
	}
	u := &Upstream{proxy: mod.(*reverseproxy.Handler), basePath: strings.TrimSuffix(c.BaseURL.EscapedPath(), "/"), host: upstreamHost(c.BaseURL)}
	// The credential lives in the transport, set here in memory: it never
	// appears in the config (nor in Caddy's autosave of it).
	tr := u.proxy.Transport.(*authTransport)
	tr.auth = c.Auth
	tr.secrets = newProviderSecrets(c.Secrets...)
	return u, nil
}

// SetNext makes the provider's transport send requests through rt in the
// place of Caddy's HTTP transport, under its own work (credentials,
// scrubbing): a provider in memory, for tests and benchmarks.
func (u *Upstream) SetNext(rt http.RoundTripper) { u.proxy.Transport.(*authTransport).next = rt }

var _ gateway.Upstream = (*Upstream)(nil)

// Send sends preq to the provider through its reverse_proxy, which writes
// the provider's answer into w (gateway.Upstream). ctx is the call's: a
// client's request context, as Caddy's server made it, whose replacer and
// variables reverse_proxy uses as plain reverse_proxy would; a context
// without them (a batch goroutine's) gets its own, with what
// reverse_proxy needs. reverse_proxy panics with http.ErrAbortHandler
// when the provider breaks off its answer: that is an error wrapping
// gateway.ErrAborted here, and nowhere else.
func (u *Upstream) Send(ctx context.Context, preq providers.Request, stream bool, w http.ResponseWriter) (err error) {
	defer func() {
		if v := recover(); v != nil {
			if v != http.ErrAbortHandler { //nolint:errorlint // panic values are compared, not wrapped
				panic(v)
			}
			err = gateway.ErrAborted
		}
	}()
	if err = u.proxy.ServeHTTP(w, u.request(ctx, preq, stream, w), noNext); err != nil {
		err = classify(err)
	}
	return err
}

// classify wraps a failure of reverse_proxy in the gateway's error that
// says what it was: gateway.ErrCredentials, gateway.ErrTimeout, or none.
func classify(err error) error {
	var he caddyhttp.HandlerError
	switch {
	case errors.As(err, new(authError)):
		return fmt.Errorf("%w: %w", gateway.ErrCredentials, err)
	case errors.As(err, &he) && he.StatusCode == http.StatusGatewayTimeout:
		return fmt.Errorf("%w: %w", gateway.ErrTimeout, err)
	}
	return err
}

// upstreamCalledVar marks the variables of a request that made a provider
// call with them (see request).
const upstreamCalledVar = "modelgate.upstream_called"

// noNext ends reverse_proxy's handler chain.
var noNext = caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { return nil })

// batchRemoteAddr is the client address of a request without a client
// (a batch line's).
const batchRemoteAddr = "127.0.0.1:0"

// request builds the request reverse_proxy sends to the provider. It is a
// fresh request with a fresh header map, so nothing of the client's
// request (its gateway key above all) reaches the provider except the
// translated body; of the client's request only its address is kept
// (reverse_proxy's load-balancing policies may read it). The Host header is
// the provider's (a proxy block's header operations may still set
// another). The provider's credentials are added by the transport. A ctx
// without Caddy's request values gets them, with w as the response
// writer their placeholders read.
func (u *Upstream) request(ctx context.Context, preq providers.Request, stream bool, w http.ResponseWriter) *http.Request {
	body := preq.Body
	// Every provider call after a request's first gets its own copy of the
	// request variables: reverse_proxy writes into them before it sends,
	// while a connection an earlier call (a fallback's first target) began
	// to dial may still read them in net/http's dial goroutine. The first
	// call uses the request's own, as plain reverse_proxy does, and marks
	// them before reverse_proxy starts anything that reads them; a later
	// call only reads them, to copy them. The body goes down to the
	// transport's Authenticator beside the request.
	call := &upstreamCall{upstreamCtx: upstreamCtx{Context: ctx, body: body}}
	caddyValues := ctx.Value(caddy.ReplacerCtxKey) != nil
	if vars, ok := ctx.Value(caddyhttp.VarsCtxKey).(map[string]any); ok {
		if _, called := vars[upstreamCalledVar]; called {
			call.vars = maps.Clone(vars)
		} else {
			vars[upstreamCalledVar] = true
		}
	}
	var zero http.Request
	r2 := zero.WithContext(&call.upstreamCtx) // a new request, whose fields are set below
	r2.Proto, r2.ProtoMajor, r2.ProtoMinor = "HTTP/1.1", 1, 1
	r2.RemoteAddr = batchRemoteAddr
	if orig, ok := ctx.Value(caddyhttp.OriginalRequestCtxKey).(http.Request); ok {
		r2.RemoteAddr = orig.RemoteAddr
	}

	ru := &call.url
	setPath(ru, u.basePath+preq.Path)
	ru.RawQuery = preq.Query
	r2.URL = ru
	r2.Method = http.MethodPost
	if preq.Method != "" {
		r2.Method = preq.Method
	}
	r2.Host = u.host

	accept := "application/json"
	if stream {
		accept = "text/event-stream"
	}
	// The values share one array, each header its own full slice of it
	// (an append to one cannot write into another).
	v := &call.values
	*v = [4]string{"application/json", accept, "identity", "modelgate"}
	h := make(http.Header, 7+len(preq.Header))
	h["Content-Type"] = v[0:1:1]
	h["Accept"] = v[1:2:2]
	h["Accept-Encoding"] = v[2:3:3] // translators need plain bytes
	h["User-Agent"] = v[3:4:4]
	// A nil value tells reverse_proxy not to add the header: nothing of the
	// gateway's clients reaches the provider. (The transport drops the
	// entries themselves, see outgoingHeader.)
	h["X-Forwarded-For"] = nil
	h["X-Forwarded-Proto"] = nil
	h["X-Forwarded-Host"] = nil
	for k, v := range preq.Header {
		h[k] = v
	}
	r2.Header = h
	r2.Trailer = nil

	if preq.Upload != nil {
		// A body streamed as it goes out (a native batch's records): read
		// once, never held, so nothing may send it again.
		r2.Body, r2.ContentLength = io.NopCloser(preq.Upload), preq.Length
	} else {
		call.reader.Reset(body)
		r2.Body = &call.reader
		r2.ContentLength = int64(len(body))
		r2.GetBody = func() (io.ReadCloser, error) { return newBytesBody(body), nil }
	}
	if !caddyValues {
		// What Caddy's server gives a request, which reverse_proxy needs: a
		// replacer, the variables (the client's address, whether it is a
		// trusted proxy) and a server.
		r2 = caddyhttp.PrepareRequest(r2, caddy.NewReplacer(), w, &caddyhttp.Server{})
	}
	return r2
}

func newBytesBody(b []byte) io.ReadCloser { return io.NopCloser(bytes.NewReader(b)) }

// setPath sets u's path to raw, escaped as the translator wrote it.
func setPath(u *url.URL, raw string) {
	if plainPath(raw) {
		// Nothing to unescape nor to escape (every provider's paths):
		// what the general case below gives, without its two passes.
		u.Path, u.RawPath = raw, raw
		return
	}
	u.RawPath = raw
	if p, err := url.PathUnescape(raw); err == nil {
		u.Path = p
	} else {
		u.Path = raw // not a valid escape: sent as it is
	}
	if u.EscapedPath() != u.RawPath {
		u.RawPath = "" // the path needs no other escaping than Go's own
	}
}

// plainPath reports whether every byte of p stands for itself in a URL
// path: a letter, a digit, or one of -._~$&+,/:;=@ (no escape, and none
// that Go's URL escapes in a path).
func plainPath(p string) bool {
	for i := 0; i < len(p); i++ {
		if !pathByte[p[i]] {
			return false
		}
	}
	return true
}

var pathByte = func() (t [256]bool) {
	for c := 0; c < 256; c++ {
		t[c] = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~$&+,/:;=@", byte(c)) >= 0
	}
	return t
}()

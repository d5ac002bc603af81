package upstream

import (
	"bytes"
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

	"github.com/modelgate/modelgate/providers"
)

// Upstream carries requests to one provider through the provider's own
// reverse_proxy handler, loaded from the provider's configuration.
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
		return nil, fmt.Errorf("loading reverse_proxy: %v", err)
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

// The errors Serve returns wrap these: the provider broke off its answer,
// did not answer in time, or could not be authenticated to.
var (
	ErrAborted     = errors.New("upstream answer aborted")
	ErrTimeout     = errors.New("the provider did not answer in time")
	ErrCredentials = errors.New("the gateway could not authenticate to the provider")
)

// Serve sends preq, a translated request of the client's request r, to the
// provider and writes its answer into w as reverse_proxy writes it. An
// answer the provider broke off (reverse_proxy's abort panic) returns an
// error wrapping ErrAborted.
func (u *Upstream) Serve(w http.ResponseWriter, r *http.Request, preq providers.Request, stream bool) (err error) {
	defer func() {
		if v := recover(); v != nil {
			if v != http.ErrAbortHandler { //nolint:errorlint // panic values are compared, not wrapped
				panic(v)
			}
			err = ErrAborted
		}
	}()
	if err = u.proxy.ServeHTTP(w, u.request(r, preq, stream), noNext); err != nil {
		err = classify(err)
	}
	return err
}

// classify wraps a failure of reverse_proxy in the error that says what it
// was: ErrCredentials, ErrTimeout, or none.
func classify(err error) error {
	var he caddyhttp.HandlerError
	switch {
	case errors.As(err, new(authError)):
		return fmt.Errorf("%w: %w", ErrCredentials, err)
	case errors.As(err, &he) && he.StatusCode == http.StatusGatewayTimeout:
		return fmt.Errorf("%w: %w", ErrTimeout, err)
	}
	return err
}

// upstreamCalledVar marks the variables of a request that made a provider
// call with them (see request).
const upstreamCalledVar = "modelgate.upstream_called"

// noNext ends reverse_proxy's handler chain.
var noNext = caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { return nil })

// request builds the request reverse_proxy sends to the provider. It
// starts from a fresh header map, so nothing of the client's request (its
// gateway key above all) reaches the provider except the translated body.
// The Host header is the provider's (a proxy block's header operations may
// still set another). The provider's credentials are added by the
// transport.
func (u *Upstream) request(r *http.Request, preq providers.Request, stream bool) *http.Request {
	body := preq.Body
	// Every provider call after a request's first gets its own copy of the
	// request variables: reverse_proxy writes into them before it sends,
	// while a connection an earlier call (a fallback's first target) began
	// to dial may still read them in net/http's dial goroutine. The first
	// call uses the request's own, as plain reverse_proxy does, and marks
	// them before reverse_proxy starts anything that reads them; a later
	// call only reads them, to copy them. The body goes down to the
	// transport's Authenticator beside the request.
	call := &upstreamCall{upstreamCtx: upstreamCtx{Context: r.Context(), body: body}}
	if vars, ok := r.Context().Value(caddyhttp.VarsCtxKey).(map[string]any); ok {
		if _, called := vars[upstreamCalledVar]; called {
			call.vars = maps.Clone(vars)
		} else {
			vars[upstreamCalledVar] = true
		}
	}
	r2 := r.WithContext(&call.upstreamCtx) // a shallow copy, whose fields are replaced below

	ru := &call.url
	*ru = *r.URL
	setPath(ru, u.basePath+preq.Path)
	ru.RawQuery = preq.Query
	r2.URL = ru
	r2.Method = http.MethodPost
	if preq.Method != "" {
		r2.Method = preq.Method
	}
	r2.RequestURI = ""
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

	call.reader.Reset(body)
	r2.Body = &call.reader
	r2.ContentLength = int64(len(body))
	r2.GetBody = func() (io.ReadCloser, error) { return newBytesBody(body), nil }
	r2.TransferEncoding = nil
	r2.Close = false
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

package caddygateway

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/modelgate/modelgate/keys"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/modelgate/modelgate/providers"
)

func init() {
	caddy.RegisterModule(Auth{})
}

// Auth authenticates requests by "Authorization: Bearer <key>" (or, for
// Anthropic-style clients, "x-api-key: <key>") against the modelgate app's
// keys. A request without a valid key gets 401 with an
// OpenAI-shaped error body, so SDKs raise their AuthenticationError; one with
// a valid key continues with the key's name in {http.modelgate.key} and the
// key's owner in {http.auth.user.id}.
//
// Keys are compared by their SHA-256 digests; the secret is never logged.
// Static keys come from the config, managed keys (mgk_…) from the app's
// storage; a managed key with a wrong checksum is refused without a lookup.
//
// Once it has read the key, good or not, the handler removes the key
// headers from the request (forgetKey), so nothing after it — a
// placeholder, another proxy, its logs — holds the key; and the access and
// error logs of its server write them as REDACTED (redactServerLogs).
type Auth struct {
	app    *App
	logger *zap.Logger
}

// CaddyModule returns the Caddy module information.
func (Auth) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.modelgate_auth",
		New: func() caddy.Module { return new(Auth) },
	}
}

// Provision finds the modelgate app of this config and makes the logs of
// the server the handler is in keep keys out (redactServerLogs).
func (h *Auth) Provision(ctx caddy.Context) error {
	h.logger = ctx.Logger()
	app, err := ConfiguredApp(ctx)
	if err != nil {
		return fmt.Errorf("modelgate_auth: %w", err)
	}
	h.app = app
	if srv, ok := ctx.Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server); ok && srv != nil {
		if err := redactServerLogs(srv); err != nil {
			return fmt.Errorf("modelgate_auth: %w", err)
		}
	}
	return nil
}

// ctxKeyVar is the request variable holding the authenticated *Key.
const ctxKeyVar = "modelgate.key"

// ServeHTTP checks the bearer key and passes the request on when it is known.
func (h *Auth) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	secret, ok := credential(r)
	forgetKey(r)
	if !ok {
		writeAPIError(w, apiForPath(r.URL.Path), &providers.Error{
			Status: http.StatusUnauthorized, Type: "invalid_request_error", Code: "invalid_api_key",
			Message: "missing API key: send it as 'Authorization: Bearer <key>' (or as 'x-api-key: <key>')",
		})
		return nil
	}
	digest := keys.Digest(secret)
	key := h.app.keys[digest]
	if key == nil {
		var malformed bool
		if key, malformed = h.app.managedKey(secret, digest); malformed {
			writeAPIError(w, apiForPath(r.URL.Path), &providers.Error{
				Status: http.StatusUnauthorized, Type: "invalid_request_error", Code: "invalid_api_key",
				Message: "malformed API key: its checksum does not match (was it cut short or mistyped?)",
			})
			return nil
		}
	}
	if key == nil {
		if c := h.logger.Check(zap.InfoLevel, "unknown API key"); c != nil {
			c.Write(zap.String("remote_ip", r.RemoteAddr))
		}
		writeAPIError(w, apiForPath(r.URL.Path), &providers.Error{
			Status: http.StatusUnauthorized, Type: "invalid_request_error", Code: "invalid_api_key",
			Message: "incorrect API key provided",
		})
		return nil
	}
	if h.app.accountBlocked(key) {
		metrics.suspended.Inc()
		writeAPIError(w, apiForPath(r.URL.Path), accountSuspended())
		return nil
	}
	// The key's placeholders are answered from the key, not set in the
	// replacer's map: reverse_proxy sets about sixteen entries of its own in
	// that map and one per header of the provider's answer, and whatever
	// that count, two more of ours must not be what takes the map past a
	// size where a Go map grows (with OpenAI's documented headers and no
	// access log they did: 64 slots instead of 32, ~2 KiB copied and
	// collected per request, BenchmarkPerRequest). A value another handler
	// puts in the replacer, before or after this one, now wins over the
	// key's (before, a value set earlier was overwritten).
	r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer).Map(keyPlaceholders(key))
	caddyhttp.SetVar(r.Context(), ctxKeyVar, key)
	return next.ServeHTTP(w, r)
}

// keyHeaders are the request headers modelgate_auth takes a key from, in
// canonical form: credential reads them (in its own way: a new one needs
// its place there), forgetKey removes them from the request, and the
// server's logs write them as REDACTED (redactKeyHeaders). The gateway
// takes no key from anywhere else: not from a query parameter, nor from
// x-goog-api-key.
var keyHeaders = [...]string{"Authorization", "X-Api-Key"}

// credential returns the key a request carries: "Authorization: Bearer
// <key>", or, as Anthropic's clients send it, "x-api-key: <key>". An
// Authorization header that is not a bearer token is no key, even with an
// x-api-key beside it.
func credential(r *http.Request) (string, bool) {
	if h := headerValue(r.Header, keyHeaders[0]); h != "" {
		return bearer(h)
	}
	k := strings.TrimSpace(headerValue(r.Header, keyHeaders[1]))
	return k, k != ""
}

// forgetKey removes the key headers from a request whose key has been
// read, whatever it was worth: what runs after modelgate_auth — a
// placeholder such as {http.request.header.X-Api-Key} in a header or
// log_append directive, a reverse_proxy to another backend, its debug
// log — finds no key in the request. (Caddy's access and error logs write
// a copy of the request taken before any handler ran: redactKeyHeaders
// keeps the key out of those.)
func forgetKey(r *http.Request) {
	for _, k := range keyHeaders {
		delete(r.Header, k)
	}
}

// bearer extracts the token of an "Authorization: Bearer <token>" header.
// The scheme is case-insensitive, as RFC 9110 says.
func bearer(header string) (string, bool) {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Auth)(nil)
	_ caddyhttp.MiddlewareHandler = (*Auth)(nil)
)

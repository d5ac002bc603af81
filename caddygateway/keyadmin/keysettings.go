package keyadmin

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"

	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/modelgate/modelgate/caddygateway"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
)

func init() {
	caddy.RegisterModule(KeySettings{})
	// After every authentication directive, forward_auth included: they
	// guard the page.
	httpcaddyfile.RegisterHandlerDirective("modelgate_key_settings", parseKeySettingsCaddyfile)
	httpcaddyfile.RegisterDirectiveOrder("modelgate_key_settings", httpcaddyfile.After, "forward_auth")
}

func parseKeySettingsCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	k := new(KeySettings)
	err := k.UnmarshalCaddyfile(h.Dispenser)
	return k, err
}

// UnmarshalCaddyfile sets up the key settings page. Syntax:
//
//	modelgate_key_settings [<matcher>] {
//	    allow_unauthenticated
//	}
func (h *KeySettings) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		switch d.Val() {
		case "allow_unauthenticated":
			if d.NextArg() {
				return d.ArgErr()
			}
			h.AllowUnauthenticated = true
		default:
			return d.Errf("unrecognized modelgate_key_settings option %q", d.Val())
		}
	}
	return nil
}

// keyPage is the key settings page: plain HTML, CSS and JavaScript, no
// external assets.
//
//go:embed keypage
var keyPage embed.FS

// KeySettings serves the key settings page, where the account holder
// lists, creates and deletes managed keys, sets their limits and budgets
// and sees what each spent, and the JSON API the page uses, under api/
// beside it (api/keys…, api/usage: the admin endpoint's API, see keyAPI).
// Mount it on a route of its own behind an authentication handler:
//
//	handle /account/keys/* {
//		basic_auth { admin <bcrypt hash> }
//		modelgate_key_settings
//	}
//
// The page is then /account/keys/. Whoever reaches this handler manages
// every key of the gateway, so it refuses requests that no Caddy
// authentication handler authenticated ({http.auth.user.id} empty) unless
// allow_unauthenticated says another guard stands before it, and requests
// that modelgate_auth let through (a gateway API key is not the account
// holder's login). Cross-origin browser requests that change keys get 403.
//
// The admin endpoint serves the same page at /modelgate/, but a browser
// gets in there only once the admin origins list "" (see AdminAPI); this
// handler needs no change to the admin endpoint and serves account holders
// who have no access to the machine.
type KeySettings struct {
	// AllowUnauthenticated serves requests that no authentication handler
	// (basic_auth, or a caddyauth provider) authenticated. Set it only
	// when something else guards the route: forward_auth, client
	// certificates, or a remote_ip matcher on a private network.
	AllowUnauthenticated bool `json:"allow_unauthenticated,omitempty"`

	app    *caddygateway.App
	logger *zap.Logger
	csrf   *http.CrossOriginProtection
}

// CaddyModule returns the Caddy module information.
func (KeySettings) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.modelgate_key_settings",
		New: func() caddy.Module { return new(KeySettings) },
	}
}

// Provision finds the modelgate app of this config.
func (h *KeySettings) Provision(ctx caddy.Context) error {
	h.logger = ctx.Logger()
	app, err := caddygateway.ConfiguredApp(ctx)
	if err != nil {
		return fmt.Errorf("modelgate_key_settings: %w", err)
	}
	h.app = app
	h.csrf = http.NewCrossOriginProtection()
	return nil
}

// apiSegment is where the page finds the key API, relative to itself.
const apiSegment = "/api/"

// ServeHTTP serves the page's files and, under api/, the key API. It
// answers every request itself.
func (h *KeySettings) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	// modelgate_auth sets {http.auth.user.id} to a key's owner; a gateway
	// API key must never open the page that manages every key.
	if caddygateway.RequestKey(r) != nil {
		h.logger.Warn("key settings request refused: modelgate_auth ran before modelgate_key_settings",
			zap.String("remote_ip", r.RemoteAddr), zap.String("uri", r.RequestURI))
		return writeAPIError(w, caddy.APIError{HTTPStatus: http.StatusForbidden,
			Err: errors.New("a gateway API key does not open the key settings page: give modelgate_key_settings a route of its own (handle), behind basic_auth, without modelgate_auth")})
	}
	repl, _ := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	var user string
	if repl != nil {
		user, _ = repl.GetString("http.auth.user.id")
	}
	if user == "" && !h.AllowUnauthenticated {
		h.logger.Warn("key settings request refused: no authentication handler authenticated it",
			zap.String("remote_ip", r.RemoteAddr), zap.String("uri", r.RequestURI))
		return writeAPIError(w, caddy.APIError{HTTPStatus: http.StatusForbidden,
			Err: errors.New("the key settings page needs an authentication handler such as basic_auth before modelgate_key_settings (or allow_unauthenticated when another guard stands before it)")})
	}
	if err := h.csrf.Check(r); err != nil {
		return writeAPIError(w, caddy.APIError{HTTPStatus: http.StatusForbidden, Err: errors.New("cross-origin requests may not change keys")})
	}
	if i := strings.LastIndex(r.URL.Path, apiSegment); i >= 0 {
		if p, ok := parseAPIPath(r.URL.Path[i+len(apiSegment):]); ok {
			if user == "" {
				user = "unauthenticated (allow_unauthenticated)"
			}
			return writeAPIError(w, keyAPI{keys: h.app.ManagedKeys(), app: h.app, logger: h.logger, by: user}.serve(w, r, p))
		}
	}
	return writeAPIError(w, servePage(w, r, pageFile(r.URL.Path)))
}

// pageFile is the page's file a path names: its last segment, or
// index.html for a path ending in "/".
func pageFile(p string) string {
	if strings.HasSuffix(p, "/") || p == "" {
		return "index.html"
	}
	return path.Base(p)
}

// servePage serves one of the page's files.
func servePage(w http.ResponseWriter, r *http.Request, name string) error {
	if err := onlyGET(w, r); err != nil {
		return err
	}
	b, err := fs.ReadFile(keyPage, path.Join("keypage", name))
	if err != nil {
		return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: fmt.Errorf("no such page: %s", r.URL.Path)}
	}
	hd := w.Header()
	hd.Set("Content-Type", mime.TypeByExtension(path.Ext(name)))
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
	hd.Set("Referrer-Policy", "same-origin")
	if r.Method == http.MethodHead {
		return nil
	}
	_, err = w.Write(b)
	return err
}

// writeAPIError writes err, if it is a caddy.APIError, as
// {"error": "<message>"} with its status, as Caddy's admin endpoint does.
// Other errors (a failed write) go back to Caddy.
func writeAPIError(w http.ResponseWriter, err error) error {
	var apiErr caddy.APIError
	if !errors.As(err, &apiErr) {
		return err
	}
	if apiErr.Message == "" && apiErr.Err != nil {
		apiErr.Message = apiErr.Err.Error()
	}
	return respond(w, apiErr.HTTPStatus, apiErr)
}

// Interface guards
var (
	_ caddy.Provisioner           = (*KeySettings)(nil)
	_ caddyhttp.MiddlewareHandler = (*KeySettings)(nil)
	_ caddyfile.Unmarshaler       = (*KeySettings)(nil)
)

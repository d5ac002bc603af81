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

	"unicode"

	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/modelgate/modelgate/accounts"
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
//	    identity <placeholder>
//	    email    <placeholder>
//	    groups   <placeholder>
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
		case "identity", "email", "groups":
			dst := map[string]*string{"identity": &h.Identity, "email": &h.Email, "groups": &h.Groups}[d.Val()]
			if !d.AllArgs(dst) {
				return d.ArgErr()
			}
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

// KeySettings serves the key settings page, where an account holder
// lists, creates and deletes its account's managed keys, sets their
// limits and budgets, sees what each spent, the account's batches, files,
// members and audit log, and the JSON API the page uses, under api/
// beside it (api/keys…, api/usage, api/account…: see keyAPI). Mount it on
// a route of its own behind an authentication handler:
//
//	handle /account/keys/* {
//		basic_auth { alice <bcrypt hash>  bob <bcrypt hash> }
//		modelgate_key_settings
//	}
//
// The page is then /account/keys/. The account holder is the identity
// the authentication set ({http.auth.user.id}, or the Identity
// placeholder, such as a header forward_auth copied); the accounts
// engine resolves it to an account and a role (accounts.Service.SignIn),
// and the page and its API show and change only that account's. A
// request without an identity is refused, unless allow_unauthenticated
// says another guard stands before it: it then acts as the operator, on
// every account. Requests that modelgate_auth let through are refused (a
// gateway API key is not the account holder's login). Cross-origin
// browser requests that change anything get 403.
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

	// Identity is the placeholder that names the account holder.
	// Default: {http.auth.user.id}, which basic_auth and the JWT and OIDC
	// plugins set. Behind forward_auth, the header it copied from the
	// single-sign-on proxy's answer, such as
	// {http.request.header.X-Forwarded-User}.
	Identity string `json:"identity,omitempty"`

	// Email is the placeholder of the account holder's e-mail address,
	// such as {http.request.header.X-Forwarded-Email} or
	// {http.auth.user.email}: leak mail about the account's keys goes to
	// its owners' and admins'. Default: none.
	Email string `json:"email,omitempty"`

	// Groups is the placeholder of the identity provider's groups of the
	// account holder, separated by commas or spaces, such as
	// {http.request.header.X-Forwarded-Groups}; the modelgate app's
	// accounts { group … } rules give them a role in an account.
	// Default: none.
	Groups string `json:"groups,omitempty"`

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
	// API key must never open the page where an account is managed.
	if caddygateway.RequestKey(r) != nil {
		h.logger.Warn("key settings request refused: modelgate_auth ran before modelgate_key_settings",
			zap.String("remote_ip", r.RemoteAddr), zap.String("uri", r.RequestURI))
		return writeAPIError(w, caddy.APIError{HTTPStatus: http.StatusForbidden,
			Err: errors.New("a gateway API key does not open the key settings page: give modelgate_key_settings a route of its own (handle), behind basic_auth, without modelgate_auth")})
	}
	p := h.principal(r)
	if p.Identity == "" && !h.AllowUnauthenticated {
		h.logger.Warn("key settings request refused: no authentication handler authenticated it",
			zap.String("remote_ip", r.RemoteAddr), zap.String("uri", r.RequestURI))
		return writeAPIError(w, caddy.APIError{HTTPStatus: http.StatusForbidden,
			Err: errors.New("the key settings page needs an authentication handler such as basic_auth before modelgate_key_settings (or allow_unauthenticated when another guard stands before it)")})
	}
	if err := h.csrf.Check(r); err != nil {
		return writeAPIError(w, caddy.APIError{HTTPStatus: http.StatusForbidden, Err: errors.New("cross-origin requests may not change keys")})
	}
	esc := r.URL.EscapedPath()
	i := strings.LastIndex(esc, apiSegment)
	if i < 0 {
		return writeAPIError(w, servePage(w, r, pageFile(r.URL.Path)))
	}
	ap, ok := parseAPIPath(esc[i+len(apiSegment):])
	if !ok {
		return writeAPIError(w, servePage(w, r, pageFile(r.URL.Path)))
	}
	actor, err := h.signIn(r, p)
	if err != nil {
		return writeAPIError(w, err)
	}
	return writeAPIError(w, keyAPI{svc: h.app.AccountService(), app: h.app, logger: h.logger, actor: actor}.serve(w, r, ap))
}

// principal reads who the authentication in front says is there.
func (h *KeySettings) principal(r *http.Request) accounts.Principal {
	repl, _ := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	if repl == nil {
		return accounts.Principal{}
	}
	identity := h.Identity
	if identity == "" {
		identity = "{http.auth.user.id}"
	}
	from := r.RemoteAddr
	if ip, ok := caddyhttp.GetVar(r.Context(), caddyhttp.ClientIPVarKey).(string); ok && ip != "" {
		from = ip
	}
	p := accounts.Principal{Identity: strings.TrimSpace(repl.ReplaceAll(identity, "")), From: from}
	if h.Email != "" {
		p.Email = strings.TrimSpace(repl.ReplaceAll(h.Email, ""))
	}
	if h.Groups != "" {
		p.Groups = strings.FieldsFunc(repl.ReplaceAll(h.Groups, ""), func(r rune) bool { return r == ',' || unicode.IsSpace(r) })
	}
	return p
}

// signIn resolves the principal to the actor the API acts for: the
// account holder in its account, or the operator when no identity came
// with an allow_unauthenticated page. The sign-in's e-mail is recorded
// for leak mail.
func (h *KeySettings) signIn(r *http.Request, p accounts.Principal) (accounts.Actor, error) {
	svc := h.app.AccountService()
	if p.Identity == "" {
		return accounts.Operator("key settings page (allow_unauthenticated)", p.From), nil
	}
	actor, err := svc.SignIn(p)
	if err != nil {
		h.logger.Warn("key settings request refused", zap.String("identity", p.Identity),
			zap.String("remote_ip", p.From), zap.Error(err))
		return accounts.Actor{}, caddy.APIError{HTTPStatus: http.StatusForbidden, Err: err}
	}
	if err := svc.RecordContact(r.Context(), actor, p.Email); err != nil {
		h.logger.Warn("recording the account holder's e-mail address", zap.String("identity", p.Identity), zap.Error(err))
	}
	return actor, nil
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

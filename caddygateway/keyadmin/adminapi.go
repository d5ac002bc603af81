package keyadmin

import (
	"errors"
	"net"
	"net/http"
	"strings"

	"github.com/modelgate/modelgate/accounts"
	"github.com/modelgate/modelgate/caddygateway"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"
)

func init() {
	caddy.RegisterModule(AdminAPI{})
}

// AdminAPI serves key, account and usage management on Caddy's admin
// endpoint, under /modelgate/, as the operator (see keyAPI and
// accountapi.go): POST and GET /modelgate/keys, GET, PATCH and DELETE
// /modelgate/keys/{id}, GET /modelgate/keys/{id}/usage, GET
// /modelgate/usage, /modelgate/accounts…; GET /modelgate/ready, the
// readiness probe; and GET /modelgate/health, the routing engine's health
// of every target. `caddy modelgate key`, `caddy modelgate account` and
// `caddy modelgate usage` talk to it. It also
// serves the key settings page at /modelgate/, whose script finds the same
// API under /modelgate/api/.
//
// A browser reaches that page only where the admin endpoint lets a
// navigation in: Caddy refuses a request that carries Sec-Fetch-Mode but no
// allowed Origin or Referer, which a typed or bookmarked address never
// carries, unless the admin origins list "" as well. The page is therefore
// also modelgate_key_settings, on a site.
//
// It works on the modelgate app of the running config; Caddy provisions
// admin modules anew with each config it loads.
type AdminAPI struct {
	app    *caddygateway.App
	logger *zap.Logger
}

// CaddyModule returns the Caddy module information.
func (AdminAPI) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "admin.api.modelgate",
		New: func() caddy.Module { return new(AdminAPI) },
	}
}

// Provision finds the config's modelgate app, if it has one.
func (a *AdminAPI) Provision(ctx caddy.Context) error {
	a.logger = ctx.Logger(a)
	app, err := ctx.AppIfConfigured("modelgate")
	if err == nil {
		a.app = app.(*caddygateway.App)
	}
	return nil // without the app the routes say so; the admin endpoint must still start
}

// Routes returns the admin routes.
func (a *AdminAPI) Routes() []caddy.AdminRoute {
	return []caddy.AdminRoute{{Pattern: "/modelgate/", Handler: caddy.AdminHandlerFunc(a.serve)}}
}

func (a *AdminAPI) serve(w http.ResponseWriter, r *http.Request) error {
	rest := strings.TrimPrefix(r.URL.EscapedPath(), "/modelgate/")
	if rest == "ready" {
		return a.ready(w, r)
	}
	if rest == "health" {
		return a.health(w, r)
	}
	if p, ok := parseAPIPath(strings.TrimPrefix(rest, "api/")); ok {
		if a.app == nil {
			return caddy.APIError{HTTPStatus: http.StatusNotFound,
				Err: errors.New("the modelgate app is not configured: add the modelgate global option")}
		}
		return keyAPI{svc: a.app.AccountService(), app: a.app, logger: a.logger,
			actor: accounts.Operator("admin API", remoteHost(r))}.serve(w, r, p)
	}
	if strings.Contains(rest, "/") {
		return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: errors.New("no such modelgate admin route")}
	}
	return servePage(w, r, pageFile(r.URL.Path))
}

// remoteHost is the address a request came from, without its port.
func remoteHost(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}

// ready answers GET /modelgate/ready: 200 when the storage and the shared
// state can be reached, else 503 with what cannot, for orchestrators'
// readiness probes (the gateway serves on while degraded; the body says
// what works less).
func (a *AdminAPI) ready(w http.ResponseWriter, r *http.Request) error {
	if err := onlyGET(w, r); err != nil {
		return err
	}
	if a.app == nil {
		return caddy.APIError{HTTPStatus: http.StatusServiceUnavailable, Err: errors.New("the modelgate app is not configured")}
	}
	rd := a.app.Ready(r.Context())
	status := http.StatusOK
	if !rd.Ready {
		status = http.StatusServiceUnavailable
	}
	return respond(w, status, rd)
}

// health answers GET /modelgate/health: the routing engine's view, on
// this instance, of every target (its circuit breaker, cool-down,
// latency, counts) and alias (policy, retry budget), as docs/routing.md
// shows it.
func (a *AdminAPI) health(w http.ResponseWriter, r *http.Request) error {
	if err := onlyGET(w, r); err != nil {
		return err
	}
	if a.app == nil || a.app.Router() == nil {
		return caddy.APIError{HTTPStatus: http.StatusNotFound,
			Err: errors.New("the modelgate app is not configured: add the modelgate global option")}
	}
	return respond(w, http.StatusOK, a.app.Router().Health())
}

// Interface guards
var (
	_ caddy.AdminRouter = (*AdminAPI)(nil)
	_ caddy.Provisioner = (*AdminAPI)(nil)
)

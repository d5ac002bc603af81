package caddymodule

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/tidwall/sjson"
	"go.uber.org/zap"

	"github.com/modelgate/modelgate/keys"
)

func init() {
	caddy.RegisterModule(AdminAPI{})
}

// keyPage is the key settings page: plain HTML, CSS and JavaScript, no
// external assets.
//
//go:embed keypage
var keyPage embed.FS

// AdminAPI serves key management on Caddy's admin endpoint, under
// /modelgate/:
//
//	POST   /modelgate/keys        create a key; the answer holds its secret, once
//	GET    /modelgate/keys        list keys (never a secret or a digest)
//	GET    /modelgate/keys/{id}   one key
//	DELETE /modelgate/keys/{id}   delete it
//	GET    /modelgate/            the key settings page
//
// It works on the modelgate app of the running config; Caddy provisions
// admin modules anew with each config it loads.
type AdminAPI struct {
	app    *App
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
		a.app = app.(*App)
	}
	return nil // without the app the routes say so; the admin endpoint must still start
}

// Routes returns the admin routes.
func (a *AdminAPI) Routes() []caddy.AdminRoute {
	return []caddy.AdminRoute{{Pattern: "/modelgate/", Handler: caddy.AdminHandlerFunc(a.serve)}}
}

// maxKeyBody bounds a create request.
const maxKeyBody = 64 << 10

func (a *AdminAPI) serve(w http.ResponseWriter, r *http.Request) error {
	rest := strings.TrimPrefix(r.URL.Path, "/modelgate/")
	switch {
	case rest == "keys":
		if a.app == nil {
			return notConfigured()
		}
		switch r.Method {
		case http.MethodGet:
			return a.list(w, r)
		case http.MethodPost:
			return a.create(w, r)
		}
		return methodError(w, "GET, POST")
	case strings.HasPrefix(rest, "keys/"):
		if a.app == nil {
			return notConfigured()
		}
		id := strings.TrimPrefix(rest, "keys/")
		switch r.Method {
		case http.MethodGet:
			k, err := a.app.managed.Get(r.Context(), id)
			if err != nil {
				return keyError(id, err)
			}
			return writeAdminJSON(w, http.StatusOK, k)
		case http.MethodDelete:
			if err := a.app.managed.Delete(r.Context(), id); err != nil {
				return keyError(id, err)
			}
			a.logger.Info("managed key deleted", zap.String("key_id", id))
			w.WriteHeader(http.StatusNoContent)
			return nil
		}
		return methodError(w, "GET, DELETE")
	}
	return a.page(w, r, rest)
}

func (a *AdminAPI) list(w http.ResponseWriter, r *http.Request) error {
	ks, err := a.app.managed.List(r.Context())
	if err != nil {
		a.logger.Error("listing managed keys", zap.Error(err))
		return caddy.APIError{HTTPStatus: http.StatusInternalServerError, Err: errors.New("the keys could not be read from the storage")}
	}
	if ks == nil {
		ks = []keys.Key{}
	}
	return writeAdminJSON(w, http.StatusOK, map[string]any{"object": "list", "data": ks})
}

func (a *AdminAPI) create(w http.ResponseWriter, r *http.Request) error {
	var nk keys.NewKey
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxKeyBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&nk); err != nil {
		return caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: fmt.Errorf("the body is not a key request {\"name\", \"owner\", \"models\", \"expires_at\"}: %v", err)}
	}
	if dec.More() {
		return caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: errors.New("the body holds more than one JSON value")}
	}
	k, secret, err := a.app.managed.Create(r.Context(), nk)
	var inv *keys.InvalidError
	if errors.As(err, &inv) {
		return caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: inv}
	}
	if err != nil {
		a.logger.Error("creating a managed key", zap.Error(err))
		return caddy.APIError{HTTPStatus: http.StatusInternalServerError, Err: errors.New("the key could not be stored")}
	}
	a.logger.Info("managed key created", zap.String("key_id", k.ID), zap.String("name", k.Name), zap.String("owner", k.Owner))
	// The answer is the key with its secret as "key", this once.
	b, err := json.Marshal(k)
	if err == nil {
		b, err = sjson.SetBytes(b, "key", secret)
	}
	if err != nil {
		return caddy.APIError{HTTPStatus: http.StatusInternalServerError, Err: err}
	}
	return writeAdminJSON(w, http.StatusCreated, json.RawMessage(b))
}

// page serves the key settings page and its files.
func (a *AdminAPI) page(w http.ResponseWriter, r *http.Request, name string) error {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return methodError(w, "GET")
	}
	if name == "" {
		name = "index.html"
	}
	b, err := fs.ReadFile(keyPage, path.Join("keypage", path.Clean("/"+name)))
	if err != nil {
		return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: fmt.Errorf("no such page: %s", r.URL.Path)}
	}
	h := w.Header()
	h.Set("Content-Type", mime.TypeByExtension(path.Ext(name)))
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
	h.Set("Referrer-Policy", "no-referrer")
	_, err = w.Write(b)
	return err
}

func writeAdminJSON(w http.ResponseWriter, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return caddy.APIError{HTTPStatus: http.StatusInternalServerError, Err: err}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, err = w.Write(append(b, '\n'))
	return err
}

func keyError(id string, err error) error {
	if errors.Is(err, keys.ErrNotFound) {
		return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: fmt.Errorf("no key with id %q", id)}
	}
	return caddy.APIError{HTTPStatus: http.StatusInternalServerError, Err: errors.New("the key could not be read from the storage")}
}

func methodError(w http.ResponseWriter, allow string) error {
	w.Header().Set("Allow", allow)
	return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: fmt.Errorf("method not allowed; use %s", allow)}
}

func notConfigured() error {
	return caddy.APIError{HTTPStatus: http.StatusNotFound,
		Err: errors.New("the modelgate app is not configured: add the modelgate global option")}
}

// Interface guards
var (
	_ caddy.AdminRouter = (*AdminAPI)(nil)
	_ caddy.Provisioner = (*AdminAPI)(nil)
)

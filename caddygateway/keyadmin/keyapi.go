package keyadmin

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/tidwall/sjson"
	"go.uber.org/zap"

	"github.com/modelgate/modelgate/caddygateway"
	"github.com/modelgate/modelgate/keys"
)

// keyAPI is the JSON API over the managed keys and the usage records. The
// admin endpoint serves it under /modelgate/ (for the CLI and automation)
// and modelgate_key_settings serves it beside the key settings page:
//
//	POST   keys             create a key; the answer holds its secret, once
//	GET    keys             list keys (never a secret or a digest)
//	GET    keys/{id}        one key
//	PATCH  keys/{id}        set its limits and budget
//	DELETE keys/{id}        delete it
//	GET    keys/{id}/usage  its usage per day, policy and standing (usageapi.go)
//	GET    usage            the usage records summed and grouped (usageapi.go)
//	GET    policy           the limits and budget a new key gets (policyapi.go)
//
// Errors are caddy.APIError values; both callers write them as
// {"error": "<message>"}, as Caddy's admin endpoint does.
type keyAPI struct {
	keys   *keys.Manager
	app    usageSource
	logger *zap.Logger
	// by names who acts (the authenticated user of the page), for the log.
	by string
	// now is the clock of usage ranges; nil is time.Now (tests set it).
	now func() time.Time
}

func (a keyAPI) clock() time.Time {
	if a.now != nil {
		return a.now()
	}
	return time.Now()
}

// maxKeyBody bounds a create request.
const maxKeyBody = 64 << 10

// apiPath is a path of the API, relative to its root: what it names.
type apiPath struct {
	kind apiKind
	id   string // the key's id, for keyPath and keyUsagePath
}

type apiKind int

const (
	keysPath     apiKind = iota + 1 // keys
	keyPath                         // keys/{id}
	keyUsagePath                    // keys/{id}/usage
	usagePath                       // usage
	policyPath                      // policy
)

// parseAPIPath reads rest, a path relative to the API; false if it is
// none of the API's.
func parseAPIPath(rest string) (apiPath, bool) {
	switch {
	case rest == "keys":
		return apiPath{kind: keysPath}, true
	case rest == "usage":
		return apiPath{kind: usagePath}, true
	case rest == "policy":
		return apiPath{kind: policyPath}, true
	case strings.HasPrefix(rest, "keys/"):
		id := rest[len("keys/"):]
		if i := strings.IndexByte(id, '/'); i >= 0 {
			if id[i:] != "/usage" {
				return apiPath{}, false
			}
			return apiPath{kind: keyUsagePath, id: id[:i]}, true
		}
		return apiPath{kind: keyPath, id: id}, true
	}
	return apiPath{}, false
}

// serve answers p.
func (a keyAPI) serve(w http.ResponseWriter, r *http.Request, p apiPath) error {
	switch p.kind {
	case keysPath:
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			return a.list(w, r)
		case http.MethodPost:
			return a.create(w, r)
		}
		return methodError(w, "GET, POST")
	case usagePath:
		return a.usage(w, r)
	case policyPath:
		return a.policy(w, r)
	case keyUsagePath:
		return a.keyUsage(w, r, p.id)
	}
	id := p.id
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		k, err := a.keys.Get(r.Context(), id)
		if err != nil {
			return a.keyError(id, err)
		}
		return respond(w, http.StatusOK, k)
	case http.MethodDelete:
		if err := a.keys.Delete(r.Context(), id); err != nil {
			return a.keyError(id, err)
		}
		a.logger.Info("managed key deleted", zap.String("key_id", id), zap.String("by", a.by))
		w.WriteHeader(http.StatusNoContent)
		return nil
	case http.MethodPatch:
		return a.setPolicy(w, r, id)
	}
	return methodError(w, "GET, PATCH, DELETE")
}

// setPolicy answers PATCH keys/{id} {"limits": {…}, "budget": {…}}: the
// key's limits and budget replaced (a field left out or null: the
// gateway's default for keys).
func (a keyAPI) setPolicy(w http.ResponseWriter, r *http.Request, id string) error {
	var p keys.Policy
	if err := decodeOne(w, r, &p); err != nil {
		return caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: fmt.Errorf("the body is not a key policy {\"limits\", \"budget\"}: %v", err)}
	}
	k, err := a.keys.SetPolicy(r.Context(), id, p)
	var inv *keys.InvalidError
	if errors.As(err, &inv) {
		return caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: inv}
	}
	if err != nil {
		return a.keyError(id, err)
	}
	a.logger.Info("managed key limits set", zap.String("key_id", id), zap.String("by", a.by))
	return respond(w, http.StatusOK, k)
}

// decodeOne reads one JSON value of at most maxKeyBody bytes, with no
// unknown fields, into v.
func decodeOne(w http.ResponseWriter, r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxKeyBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("the body holds more than one JSON value")
	}
	return nil
}

func (a keyAPI) list(w http.ResponseWriter, r *http.Request) error {
	ks, err := a.keys.List(r.Context())
	if err != nil {
		a.logger.Error("listing managed keys", zap.Error(err))
		return storageError(err, "the keys could not be read from the storage")
	}
	if ks == nil {
		ks = []keys.Key{}
	}
	return respond(w, http.StatusOK, map[string]any{"object": "list", "data": ks})
}

func (a keyAPI) create(w http.ResponseWriter, r *http.Request) error {
	var nk keys.NewKey
	if err := decodeOne(w, r, &nk); err != nil {
		return caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: fmt.Errorf("the body is not a key request {\"name\", \"owner\", \"models\", \"expires_at\", \"limits\", \"budget\"}: %v", err)}
	}
	k, secret, err := a.keys.Create(r.Context(), nk)
	var inv *keys.InvalidError
	if errors.As(err, &inv) {
		return caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: inv}
	}
	if err != nil {
		a.logger.Error("creating a managed key", zap.Error(err))
		return storageError(err, "the key could not be stored")
	}
	a.logger.Info("managed key created", zap.String("key_id", k.ID), zap.String("name", k.Name),
		zap.String("owner", k.Owner), zap.String("by", a.by))
	// The answer is the key with its secret as "key", this once.
	b, err := json.Marshal(k)
	if err == nil {
		b, err = sjson.SetBytes(b, "key", secret)
	}
	if err != nil {
		return caddy.APIError{HTTPStatus: http.StatusInternalServerError, Err: err}
	}
	return respond(w, http.StatusCreated, json.RawMessage(b))
}

func (a keyAPI) keyError(id string, err error) error {
	if errors.Is(err, keys.ErrNotFound) {
		return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: fmt.Errorf("no key with id %q", id)}
	}
	a.logger.Error("reading a managed key", zap.String("key_id", id), zap.Error(err))
	return storageError(err, "the key could not be read from the storage")
}

// storageError is the error for a failure of the storage the keys live
// in: 503 saying so when it cannot be reached (Redis down), which clears
// by itself; else 500. Neither carries err's text, which may name storage
// paths, and the key settings page shows it to users.
func storageError(err error, what string) error {
	if caddygateway.StorageUnreachable(err) {
		return caddy.APIError{HTTPStatus: http.StatusServiceUnavailable,
			Err: errors.New(what + ": the storage cannot be reached just now; try again when it is back")}
	}
	return caddy.APIError{HTTPStatus: http.StatusInternalServerError, Err: errors.New(what)}
}

// respond writes v as JSON with status: the one writer of the admin shape,
// for answers and (through writeAPIError) errors alike.
func respond(w http.ResponseWriter, status int, v any) error {
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

// onlyGET refuses a request that is not a GET or a HEAD: 405.
func onlyGET(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return methodError(w, "GET")
	}
	return nil
}

func methodError(w http.ResponseWriter, allow string) error {
	w.Header().Set("Allow", allow)
	return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: fmt.Errorf("method not allowed; use %s", allow)}
}

package keyadmin

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/tidwall/sjson"
	"go.uber.org/zap"

	"github.com/modelgate/modelgate/accounts"
	"github.com/modelgate/modelgate/caddygateway"
	"github.com/modelgate/modelgate/keys"
)

// keyAPI is the JSON API over the managed keys, the usage records and the
// accounts, on behalf of an actor: the operator on the admin endpoint
// (for the CLI and automation), an account holder beside the key settings
// page. Paths, relative to the API's root:
//
//	POST   keys             create a key; the answer holds its secret, once
//	GET    keys             list keys (never a secret or a digest)
//	GET    keys/{id}        one key
//	PATCH  keys/{id}        set its limits and budget
//	DELETE keys/{id}        delete it
//	GET    keys/{id}/usage  its usage per day, policy and standing (usageapi.go)
//	GET    usage            the usage records summed and grouped (usageapi.go)
//	GET    policy           the limits and budget a new key gets (policyapi.go)
//	…                       the account's and the accounts' (accountapi.go)
//
// An account holder sees only what its account and role let it
// (accounts.Actor): a key of another account is 404 for every method, as
// if it did not exist. Errors are caddy.APIError values; both callers
// write them as {"error": "<message>"}, as Caddy's admin endpoint does.
type keyAPI struct {
	svc    *accounts.Service
	app    usageSource
	logger *zap.Logger
	// actor is who acts: the operator, or the signed-in account holder.
	actor accounts.Actor
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
	id   string // the key's id, or the account's
	sub  string // an accounts/{id}/… path's rest; a member's identity
}

type apiKind int

const (
	keysPath        apiKind = iota + 1 // keys
	keyPath                            // keys/{id}
	keyUsagePath                       // keys/{id}/usage
	usagePath                          // usage
	accountPath                        // account: the signed-in account
	membersPath                        // members
	memberPath                         // members/{identity}
	auditPath                          // audit
	batchesPath                        // batches
	filesPath                          // files
	accountsPath                       // accounts (the operator's)
	accountByIDPath                    // accounts/{id}[/…] (the operator's)
	policyPath                         // policy
)

// parseAPIPath reads rest, a path relative to the API, as escaped in the
// URL (a segment's %2F is not a separator); false if it is none of the
// API's.
func parseAPIPath(rest string) (apiPath, bool) {
	segs := strings.Split(rest, "/")
	for i, s := range segs {
		u, err := url.PathUnescape(s)
		if err != nil {
			return apiPath{}, false
		}
		segs[i] = u
	}
	switch {
	case len(segs) == 1:
		kind, ok := map[string]apiKind{"keys": keysPath, "usage": usagePath, "account": accountPath, "members": membersPath,
			"audit": auditPath, "batches": batchesPath, "files": filesPath, "accounts": accountsPath, "policy": policyPath}[segs[0]]
		return apiPath{kind: kind}, ok
	case segs[0] == "keys" && len(segs) == 2:
		return apiPath{kind: keyPath, id: segs[1]}, true
	case segs[0] == "keys" && len(segs) == 3 && segs[2] == "usage":
		return apiPath{kind: keyUsagePath, id: segs[1]}, true
	case segs[0] == "members" && len(segs) == 2:
		return apiPath{kind: memberPath, sub: segs[1]}, true
	case segs[0] == "accounts" && segs[1] != "":
		return apiPath{kind: accountByIDPath, id: segs[1], sub: strings.Join(segs[2:], "/")}, true
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
	case keyPath:
		return a.key(w, r, p.id)
	case accountsPath, accountByIDPath:
		return a.operatorAccounts(w, r, p)
	}
	// The signed-in account's own paths.
	if a.actor.Is(accounts.ActorOperator) {
		if p.kind == accountPath && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			return respond(w, http.StatusOK, session{Operator: true, Identity: a.actor.Identity})
		}
		return caddy.APIError{HTTPStatus: http.StatusNotFound,
			Err: errors.New("the operator names the account: use accounts/{id}/… (account, members, audit, batches, files)")}
	}
	return a.accountPaths(w, r, a.actor.Account, p.kind, p.sub)
}

// key answers keys/{id}. A key the actor does not see is 404 whatever
// the method.
func (a keyAPI) key(w http.ResponseWriter, r *http.Request, id string) error {
	k, err := a.svc.GetKey(r.Context(), a.actor, id)
	if err != nil {
		return a.fail(err, "key", id)
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		return respond(w, http.StatusOK, k)
	case http.MethodDelete:
		if err := a.svc.DeleteKey(r.Context(), a.actor, id); err != nil {
			return a.fail(err, "key", id)
		}
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
		return caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: fmt.Errorf("the body is not a key policy {\"limits\", \"budget\"}: %w", err)}
	}
	k, err := a.svc.SetKeyPolicy(r.Context(), a.actor, id, p)
	if err != nil {
		return a.fail(err, "key", id)
	}
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
	owner := ""
	if a.actor.Is(accounts.ActorOperator) {
		if err := singleParams(r.URL.Query(), "account"); err != nil {
			return err
		}
		owner = r.URL.Query().Get("account")
	}
	ks, err := a.svc.ListKeys(r.Context(), a.actor, owner)
	if err != nil {
		a.logger.Error("listing managed keys", zap.Error(err))
		return storageError(err, "the keys could not be read from the storage")
	}
	return respond(w, http.StatusOK, map[string]any{"object": "list", "data": ks})
}

// newKeyRequest is the body of POST keys: a keys.NewKey, whose created_by
// only the service sets.
type newKeyRequest struct {
	Name      string       `json:"name"`
	Owner     string       `json:"owner,omitempty"`
	Models    []string     `json:"models,omitempty"`
	ExpiresAt *int64       `json:"expires_at,omitempty"`
	Limits    *keys.Limits `json:"limits,omitempty"`
	Budget    *keys.Budget `json:"budget,omitempty"`
}

func (a keyAPI) create(w http.ResponseWriter, r *http.Request) error {
	var req newKeyRequest
	if err := decodeOne(w, r, &req); err != nil {
		return caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: fmt.Errorf("the body is not a key request {\"name\", \"owner\", \"models\", \"expires_at\", \"limits\", \"budget\"}: %w", err)}
	}
	nk := keys.NewKey{Name: req.Name, Owner: req.Owner, Models: req.Models, ExpiresAt: req.ExpiresAt, Limits: req.Limits, Budget: req.Budget}
	k, secret, err := a.svc.CreateKey(r.Context(), a.actor, nk)
	if err != nil {
		return a.fail(err, "key", "")
	}
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

// fail turns an error of the service into the API's answer: 404 for what
// the actor does not see (named what, id), 403 for what it may not do,
// 409 for a conflict, 400 for a refused field, 503 or 500 for the
// storage.
func (a keyAPI) fail(err error, what, id string) error {
	var inv *keys.InvalidError
	switch {
	case errors.As(err, &inv):
		return caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: inv}
	case errors.Is(err, accounts.ErrNotFound), errors.Is(err, keys.ErrNotFound):
		if id == "" {
			return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: fmt.Errorf("no such %s", what)}
		}
		return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: fmt.Errorf("no %s with id %q", what, id)}
	case errors.Is(err, accounts.ErrSuspended):
		return caddy.APIError{HTTPStatus: http.StatusForbidden, Err: errors.New("the account is suspended: nothing but deleting keys can be changed; ask the gateway's operator")}
	case errors.Is(err, accounts.ErrForbidden), errors.Is(err, accounts.ErrDeleted):
		return caddy.APIError{HTTPStatus: http.StatusForbidden, Err: err}
	case errors.Is(err, accounts.ErrConflict):
		return caddy.APIError{HTTPStatus: http.StatusConflict, Err: err}
	}
	a.logger.Error("key administration", zap.String(what, id), zap.Error(err))
	return storageError(err, "the "+what+" could not be read or written in the storage")
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

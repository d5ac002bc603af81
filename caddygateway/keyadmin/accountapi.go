package keyadmin

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/modelgate/modelgate/accounts"
	"github.com/modelgate/modelgate/batch"
	"github.com/modelgate/modelgate/keys"
	"github.com/modelgate/modelgate/usage"
)

// The accounts' part of the API (see keyAPI). An account holder's, about
// the account it signed in to:
//
//	GET    account                who is signed in, the account and its ceilings
//	GET    members                its members, from every source
//	POST   members                {"identity", "role"}: add a member, or change its role (owners)
//	DELETE members/{identity}     remove a member (owners)
//	GET    audit                  its audit log, newest first (?limit=&before=)
//	GET    batches, files         its batches and files, newest first (?limit=&after=)
//
// The operator's, on the admin endpoint:
//
//	GET    accounts                    every account, with its spend this month
//	GET    accounts/{id}               one account
//	PATCH  accounts/{id}               {"email", "limits", "budget"}: its address and ceilings
//	DELETE accounts/{id}               delete it: its keys revoked, their batches cancelled
//	POST   accounts/{id}/suspend       {"reason"}: refuse every key of it, on every instance
//	POST   accounts/{id}/resume        let them work again
//	…      accounts/{id}/members…, /audit, /batches, /files   as above, for that account

// session is the answer of GET account.
type session struct {
	Operator bool           `json:"operator"`
	Identity string         `json:"identity"`
	Role     accounts.Role  `json:"role,omitempty"`
	Account  *accounts.View `json:"account,omitempty"`
}

// accountPaths answers the paths about one account, for its holder or
// the operator.
func (a keyAPI) accountPaths(w http.ResponseWriter, r *http.Request, account string, kind apiKind, sub string) error {
	ctx := r.Context()
	switch kind {
	case accountPath:
		if err := onlyGET(w, r); err != nil {
			return err
		}
		v, err := a.svc.GetAccount(ctx, a.actor, account)
		if err != nil {
			return a.fail(err, "account", account)
		}
		if a.actor.Is(accounts.ActorOperator) {
			return respond(w, http.StatusOK, v)
		}
		return respond(w, http.StatusOK, session{Identity: a.actor.Identity, Role: a.actor.Role, Account: &v})
	case membersPath:
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			ms, err := a.svc.Members(ctx, a.actor, account)
			if err != nil {
				return a.fail(err, "account", account)
			}
			return respond(w, http.StatusOK, map[string]any{"object": "list", "data": ms})
		case http.MethodPost:
			var req struct {
				Identity string        `json:"identity"`
				Role     accounts.Role `json:"role"`
			}
			if err := decodeOne(w, r, &req); err != nil {
				return caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: fmt.Errorf("the body is not a member {\"identity\", \"role\"}: %w", err)}
			}
			m, err := a.svc.SetMember(ctx, a.actor, account, req.Identity, req.Role)
			if err != nil {
				return a.fail(err, "account", account)
			}
			return respond(w, http.StatusOK, m)
		}
		return methodError(w, "GET, POST")
	case memberPath:
		if r.Method != http.MethodDelete {
			return methodError(w, "DELETE")
		}
		if err := a.svc.RemoveMember(ctx, a.actor, account, sub); err != nil {
			return a.fail(err, "member", sub)
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	case auditPath:
		return a.auditLog(w, r, account)
	case batchesPath, filesPath:
		return a.owned(w, r, account, kind)
	}
	return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: fmt.Errorf("no such route")}
}

// auditLog answers GET audit?limit=&before=.
func (a keyAPI) auditLog(w http.ResponseWriter, r *http.Request, account string) error {
	if err := onlyGET(w, r); err != nil {
		return err
	}
	q := r.URL.Query()
	if err := singleParams(q, "limit", "before"); err != nil {
		return err
	}
	opt := accounts.ListOptions{Before: q.Get("before")}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 1000 {
			return paramError("limit", "%q is not a number from 1 to 1000", s)
		}
		opt.Limit = n
	}
	page, err := a.svc.AuditEntries(r.Context(), a.actor, account, opt)
	if err != nil && page.Data == nil {
		return a.fail(err, "account", account)
	}
	if err != nil {
		a.logger.Warn("reading the audit log", zap.String("account", account), zap.Error(err))
	}
	return respond(w, http.StatusOK, map[string]any{"object": "list", "data": page.Data, "has_more": page.HasMore})
}

// owned answers GET batches and GET files: what the account owns, newest
// first, 20 at a time (?limit= up to 100, ?after=).
func (a keyAPI) owned(w http.ResponseWriter, r *http.Request, account string, kind apiKind) error {
	if err := onlyGET(w, r); err != nil {
		return err
	}
	if _, err := a.svc.GetAccount(r.Context(), a.actor, account); err != nil {
		return a.fail(err, "account", account)
	}
	q := r.URL.Query()
	if err := singleParams(q, "limit", "after"); err != nil {
		return err
	}
	opt := batch.ListOptions{Limit: 20, After: q.Get("after")}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 100 {
			return paramError("limit", "%q is not a number from 1 to 100", s)
		}
		opt.Limit = n
	}
	var data any
	var more bool
	var err error
	if kind == batchesPath {
		var p batch.Page[batch.Batch]
		p, err = a.app.ListAccountBatches(r.Context(), account, opt)
		data, more = p.Data, p.HasMore
		if p.Data == nil {
			data = []batch.Batch{}
		}
	} else {
		var p batch.Page[batch.File]
		p, err = a.app.ListAccountFiles(r.Context(), account, opt)
		data, more = p.Data, p.HasMore
		if p.Data == nil {
			data = []batch.File{}
		}
	}
	if err != nil {
		a.logger.Error("listing an account's batches or files", zap.String("account", account), zap.Error(err))
		return storageError(err, "the list could not be read from the storage")
	}
	return respond(w, http.StatusOK, map[string]any{"object": "list", "data": data, "has_more": more})
}

// accountSummary is an account in the operator's list, with what it
// spent this month.
type accountSummary struct {
	accounts.Summary
	// SpentUSD is what the account's keys spent this calendar month
	// (UTC), in dollars.
	SpentUSD string `json:"spent_usd"`
}

// operatorAccounts answers accounts and accounts/{id}[/…]: the
// operator's. To an account holder they do not exist.
func (a keyAPI) operatorAccounts(w http.ResponseWriter, r *http.Request, p apiPath) error {
	if !a.actor.Is(accounts.ActorOperator) {
		return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: fmt.Errorf("no such route")}
	}
	if p.kind == accountsPath {
		return a.listAccounts(w, r)
	}
	ctx, id := r.Context(), p.id
	first, rest, _ := strings.Cut(p.sub, "/")
	switch first {
	case "":
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			return a.accountPaths(w, r, id, accountPath, "")
		case http.MethodPatch:
			return a.patchAccount(w, r, id)
		case http.MethodDelete:
			deleted, err := a.svc.DeleteAccount(ctx, a.actor, id)
			if err != nil && deleted == nil {
				return a.fail(err, "account", id)
			}
			if err != nil {
				a.logger.Error("deleting an account's keys", zap.String("account", id), zap.Error(err))
			}
			if deleted == nil {
				deleted = []string{}
			}
			return respond(w, http.StatusOK, map[string]any{"id": id, "deleted": true, "keys_deleted": deleted})
		}
		return methodError(w, "GET, PATCH, DELETE")
	case "suspend", "resume":
		if rest != "" {
			break
		}
		if r.Method != http.MethodPost {
			return methodError(w, "POST")
		}
		var acct accounts.Account
		var err error
		if first == "suspend" {
			var req struct {
				Reason string `json:"reason"`
			}
			if r.ContentLength != 0 {
				if err := decodeOne(w, r, &req); err != nil {
					return caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: fmt.Errorf("the body is not {\"reason\"}: %w", err)}
				}
			}
			acct, err = a.svc.Suspend(ctx, a.actor, id, req.Reason)
		} else {
			acct, err = a.svc.Resume(ctx, a.actor, id)
		}
		if err != nil {
			return a.fail(err, "account", id)
		}
		return respond(w, http.StatusOK, acct)
	case "members":
		if rest == "" {
			return a.accountPaths(w, r, id, membersPath, "")
		}
		if !strings.Contains(rest, "/") {
			return a.accountPaths(w, r, id, memberPath, rest)
		}
	case "audit", "batches", "files":
		if rest == "" {
			return a.accountPaths(w, r, id, map[string]apiKind{"audit": auditPath, "batches": batchesPath, "files": filesPath}[first], "")
		}
	}
	return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: fmt.Errorf("no such route")}
}

// listAccounts answers GET accounts: every account with its spend this
// calendar month (UTC).
func (a keyAPI) listAccounts(w http.ResponseWriter, r *http.Request) error {
	if err := onlyGET(w, r); err != nil {
		return err
	}
	list, err := a.svc.ListAccounts(r.Context(), a.actor)
	if err != nil {
		return a.fail(err, "account", "")
	}
	now := a.clock().UTC()
	from := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	rep, err := a.app.Usage(r.Context(), usage.Query{From: from, To: now.Add(24 * time.Hour), By: []usage.Dimension{usage.ByOwner},
		KeepKey: func(id string) bool { return !strings.HasPrefix(id, "static:") }})
	if err != nil {
		return a.usageError(err)
	}
	spent := make(map[string]usage.Counts, len(rep.Rows))
	for _, row := range rep.Rows {
		spent[row.Owner] = row.Counts
	}
	out := make([]accountSummary, 0, len(list))
	seen := map[string]bool{}
	for _, s := range list {
		seen[s.ID] = true
		out = append(out, accountSummary{Summary: s, SpentUSD: spent[s.ID].Cost.String()})
	}
	// Accounts whose keys are all gone still spent this month.
	for owner, c := range spent {
		if !seen[owner] {
			out = append(out, accountSummary{Summary: accounts.Summary{ID: owner}, SpentUSD: c.Cost.String()})
		}
	}
	slices.SortFunc(out, func(x, y accountSummary) int { return strings.Compare(x.ID, y.ID) })
	return respond(w, http.StatusOK, map[string]any{"object": "list", "data": out, "from": from.Format(time.DateOnly), "to": now.Format(time.DateOnly)})
}

// patchAccount answers PATCH accounts/{id}: "email" sets the address leak
// mail goes to ("" removes it); "limits" and "budget" set the account's
// ceilings, both at once as for a key (one left out or null: the
// configured owner policy). A field left out of the body changes nothing.
func (a keyAPI) patchAccount(w http.ResponseWriter, r *http.Request, id string) error {
	var body map[string]json.RawMessage
	if err := decodeOne(w, r, &body); err != nil || body == nil {
		return caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: fmt.Errorf("the body is not {\"email\", \"limits\", \"budget\"}: %w", err)}
	}
	for k := range body {
		if k != "email" && k != "limits" && k != "budget" {
			return caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: fmt.Errorf("unknown field %q: use email, limits, budget", k)}
		}
	}
	ctx := r.Context()
	var acct accounts.Account
	var err error
	if raw, ok := body["email"]; ok {
		var email string
		if jerr := json.Unmarshal(raw, &email); jerr != nil {
			return caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: fmt.Errorf("email must be a string")}
		}
		if acct, err = a.svc.SetAccountEmail(ctx, a.actor, id, email); err != nil {
			return a.fail(err, "account", id)
		}
	}
	_, hasLimits := body["limits"]
	_, hasBudget := body["budget"]
	if hasLimits || hasBudget {
		var p keys.Policy
		b, _ := json.Marshal(map[string]json.RawMessage{"limits": body["limits"], "budget": body["budget"]})
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.DisallowUnknownFields()
		if jerr := dec.Decode(&p); jerr != nil {
			return caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: fmt.Errorf("limits or budget: %w", jerr)}
		}
		if acct, err = a.svc.SetAccountPolicy(ctx, a.actor, id, p); err != nil {
			return a.fail(err, "account", id)
		}
	}
	if acct.ID == "" {
		v, err := a.svc.GetAccount(ctx, a.actor, id)
		if err != nil {
			return a.fail(err, "account", id)
		}
		return respond(w, http.StatusOK, v.Account)
	}
	return respond(w, http.StatusOK, acct)
}

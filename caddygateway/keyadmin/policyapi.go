package keyadmin

import (
	"fmt"
	"net/http"

	"github.com/caddyserver/caddy/v2"

	"github.com/modelgate/modelgate/accounts"
	"github.com/modelgate/modelgate/keys"
)

// newKeyPolicy is the answer of GET policy: what a new managed key gets
// when it is created without limits or a budget of its own — the
// configured defaults for keys — and, when it names the owner the key
// would have, that owner's limits and budget, which the key shares with
// the owner's other keys.
type newKeyPolicy struct {
	Key   keys.Policy  `json:"key"`
	Owner *keys.Policy `json:"owner,omitempty"`
}

// newKeyID stands for the id of a key not created yet: the policy of a
// managed key (which has an id, unlike a static key) that has none of its
// own.
const newKeyID = "key_new"

// policy answers GET policy?owner=<owner>: the create form of the key
// settings page shows it as the default a new key follows. An account
// holder's owner is its account (another is 404).
func (a keyAPI) policy(w http.ResponseWriter, r *http.Request) error {
	if err := onlyGET(w, r); err != nil {
		return err
	}
	q := r.URL.Query()
	if err := singleParams(q, "owner"); err != nil {
		return err
	}
	who := q.Get("owner")
	if !a.actor.Is(accounts.ActorOperator) {
		// An account holder's keys are its account's: another owner is
		// not there for it.
		if who != "" && who != a.actor.Account {
			return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: fmt.Errorf("no account %q", who)}
		}
		who = a.actor.Account
	}
	key, owner := a.app.EffectivePolicy(keys.Key{ID: newKeyID, Owner: who})
	p := newKeyPolicy{Key: key}
	if who != "" {
		p.Owner = &owner
	}
	return respond(w, http.StatusOK, p)
}

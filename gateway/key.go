package gateway

import (
	"strings"

	"github.com/modelgate/modelgate/keys"
)

// Key is an authenticated caller.
type Key struct {
	Name  string
	Owner string

	// ID is a managed key's id; empty for static keys.
	ID string
	// Models limits a managed key to these models; empty: every model.
	Models []string
	// Limits and Budget are a managed key's own; nil: the configured
	// ones (Policies).
	Limits *keys.Limits
	Budget *keys.Budget
}

// FromManaged is the Key of the managed key k.
func FromManaged(k keys.Key) *Key {
	return &Key{Name: k.Name, Owner: k.Owner, ID: k.ID, Models: k.Models, Limits: k.Limits, Budget: k.Budget}
}

// StaticOwnerPrefix starts the owner a static key's files, batches and
// stored responses are kept under: "\x00static:" and the key's name. A
// managed key's owner can never be that, since owners (and names, the
// default owner) with control characters are refused when a key is
// created; so a managed key given a static key's name as its owner never
// shares what the static key holds, whichever instance's config has which
// static keys. Managed keys' owners, which account holders' accounts will
// be, are kept under their own name.
const StaticOwnerPrefix = "\x00static:"

// StorageOwner is the owner k's files, batches and stored responses are
// kept under, and which other owners cannot reach: a managed key's owner,
// or a static key's own owner, apart from every managed key's.
func (k *Key) StorageOwner() string {
	if k.ID == "" {
		return StaticOwnerPrefix + k.Name
	}
	return k.Owner
}

// OwnerName is the owner a storage owner (StorageOwner) names, for events
// and logs: a static key's name, or a managed key's owner.
func OwnerName(storageOwner string) string {
	return strings.TrimPrefix(storageOwner, StaticOwnerPrefix)
}

// CountedAs is the id k is counted under in the usage records and the
// limits: a managed key's id, or "static:<name>" for a static key (managed
// key ids never hold a colon).
func (k *Key) CountedAs() string {
	if k.ID != "" {
		return k.ID
	}
	return "static:" + k.Name
}

// Allows reports whether the key may use the model as the client named it:
// keys without a models list may use every model; a list holds model
// names as clients send them (an alias, a bare name, "<provider>/<model>")
// and "<provider>/*" for every model of a provider.
func (k *Key) Allows(model string) bool {
	if k == nil || len(k.Models) == 0 {
		return true
	}
	for _, m := range k.Models {
		if m == model {
			return true
		}
		if p, ok := strings.CutSuffix(m, "/*"); ok && strings.HasPrefix(model, p+"/") {
			return true
		}
	}
	return false
}

// sender names who sent a request, for an exposure's source.
func sender(k *Key) string {
	if k == nil {
		return "a client without a key"
	}
	return "key " + k.Name + " (owner " + k.Owner + ")"
}

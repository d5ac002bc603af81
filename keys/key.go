package keys

import (
	"encoding/json"
	"errors"
)

// Key is a managed key as the admin API shows it: never the secret, never
// its digest.
type Key struct {
	ID    string `json:"id"` // "key_" + a sortable unique id
	Name  string `json:"name"`
	Owner string `json:"owner"`
	// CreatedBy is the account holder who created the key on the key
	// settings page (a member manages the keys it created); empty for
	// keys the operator created, and for keys from before accounts.
	CreatedBy  string    `json:"created_by,omitempty"`
	Hint       string    `json:"hint"`
	Models     []string  `json:"models"`     // empty or nil: every model
	CreatedAt  int64     `json:"created_at"` // unix seconds
	LastUsedAt *int64    `json:"last_used_at"`
	ExpiresAt  *int64    `json:"expires_at"`
	ExposedAt  *int64    `json:"exposed_at"`
	Exposure   *Exposure `json:"exposure,omitempty"`
	// Limits and Budget are the key's own; nil: the gateway's defaults.
	Limits *Limits `json:"limits,omitempty"`
	Budget *Budget `json:"budget,omitempty"`
}

// keyFields is Key without its methods, for encoding it plainly.
type keyFields Key

// MarshalJSON encodes the key with "models" as [] rather than null.
func (k Key) MarshalJSON() ([]byte, error) {
	f := keyFields(k)
	if f.Models == nil {
		f.Models = []string{}
	}
	return json.Marshal(f)
}

// clone returns a copy of k that shares no memory with it.
func (k Key) clone() Key {
	if k.Models != nil {
		k.Models = append([]string{}, k.Models...)
	}
	k.LastUsedAt = cloneInt(k.LastUsedAt)
	k.ExpiresAt = cloneInt(k.ExpiresAt)
	k.ExposedAt = cloneInt(k.ExposedAt)
	if k.Exposure != nil {
		e := *k.Exposure
		k.Exposure = &e
	}
	k.Limits, k.Budget = cloneLimits(k.Limits), cloneBudget(k.Budget)
	return k
}

func cloneInt(p *int64) *int64 {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// Exposure is where a leaked key was reported.
type Exposure struct {
	Reporter string `json:"reporter"` // "github", "gitlab"
	Type     string `json:"type"`
	URL      string `json:"url"`
	Source   string `json:"source"`
}

// NewKey is a create request (also the admin API's POST body).
type NewKey struct {
	Name string `json:"name"`
	// Owner defaults to Name: as for static keys, a key without an owner
	// owns what it creates.
	Owner string `json:"owner,omitempty"`
	// CreatedBy names the account holder who creates the key (see
	// Key.CreatedBy).
	CreatedBy string   `json:"created_by,omitempty"`
	Models    []string `json:"models,omitempty"`
	ExpiresAt *int64   `json:"expires_at,omitempty"` // unix seconds, must be in the future
	// Limits and Budget are the key's own (nil: the defaults).
	Limits *Limits `json:"limits,omitempty"`
	Budget *Budget `json:"budget,omitempty"`
}

// ErrNotFound is returned for a key that does not exist.
var ErrNotFound = errors.New("key not found")

// InvalidError is a refused create; Param names the field ("name",
// "owner", "models[1]", "expires_at"). Create returns it as *InvalidError;
// errors.As finds it with a target of either *InvalidError or
// **InvalidError.
type InvalidError struct{ Param, Message string }

func (e InvalidError) Error() string { return "invalid " + e.Param + ": " + e.Message }

// As lets errors.As fill a plain InvalidError from an *InvalidError.
func (e *InvalidError) As(target any) bool {
	if t, ok := target.(*InvalidError); ok && e != nil {
		*t = *e
		return true
	}
	return false
}

package caddygateway

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/caddyserver/caddy/v2"

	"github.com/modelgate/modelgate/gateway"
	"github.com/modelgate/modelgate/keys"
)

// StaticKey is an API key defined in the config. Give either Secret, usually
// a placeholder such as {env.MODELGATE_KEY} resolved at provision time, or
// SHA256, the hex SHA-256 digest of the secret. The Caddyfile adapter turns a
// literal secret into its digest, so adapted JSON (and Caddy's autosave)
// never holds a literal key.
type StaticKey struct {
	// Name identifies the key in logs and placeholders; it is also the
	// owner of what the key creates.
	Name string `json:"name"`

	// Secret is the key itself, or a placeholder that yields it.
	Secret string `json:"secret,omitempty"`

	// SHA256 is the hex-encoded SHA-256 digest of the key.
	SHA256 string `json:"sha256,omitempty"`
}

// Key is an authenticated caller, as the handlers see it: the gateway's.
type Key = gateway.Key

// keyPlaceholders answers the placeholders of a request the key k
// authenticated: {http.modelgate.key}, the key's name (never its secret),
// and {http.auth.user.id}, its owner.
func keyPlaceholders(k *Key) caddy.ReplacerFunc {
	return func(name string) (any, bool) {
		switch name {
		case "http.modelgate.key":
			return k.Name, true
		case "http.auth.user.id":
			return k.Owner, true
		}
		return nil, false
	}
}

// hasPlaceholder reports whether s holds a {placeholder} to resolve later.
func hasPlaceholder(s string) bool {
	i := strings.IndexByte(s, '{')
	return i >= 0 && strings.IndexByte(s[i:], '}') > 0
}

func provisionStaticKeys(static []StaticKey) (map[[32]byte]*Key, error) {
	repl := caddy.NewReplacer()
	out := make(map[[32]byte]*Key, len(static))
	names := make(map[string]bool, len(static))
	for i, k := range static {
		if k.Name == "" {
			return nil, fmt.Errorf("keys[%d]: a key needs a name", i)
		}
		if names[k.Name] {
			return nil, fmt.Errorf("key %q is defined twice", k.Name)
		}
		names[k.Name] = true

		var digest [32]byte
		switch {
		case k.Secret != "" && k.SHA256 != "":
			return nil, fmt.Errorf("key %q: give secret or sha256, not both", k.Name)
		case k.Secret != "":
			secret := repl.ReplaceKnown(k.Secret, "")
			if secret == "" {
				return nil, fmt.Errorf("key %q: secret %s is empty (is the environment variable set?)", k.Name, k.Secret)
			}
			digest = keys.Digest(secret)
		case k.SHA256 != "":
			b, err := hex.DecodeString(k.SHA256)
			if err != nil || len(b) != sha256.Size {
				return nil, fmt.Errorf("key %q: sha256 must be 64 hex digits", k.Name)
			}
			copy(digest[:], b)
		default:
			return nil, fmt.Errorf("key %q needs a secret or a sha256", k.Name)
		}
		if prev, dup := out[digest]; dup {
			return nil, fmt.Errorf("keys %q and %q have the same secret", prev.Name, k.Name)
		}
		out[digest] = &Key{Name: k.Name, Owner: k.Name}
	}
	return out, nil
}

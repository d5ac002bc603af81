package caddygateway

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelgate/modelgate/keys"
)

func TestBearer(t *testing.T) {
	for _, tc := range []struct {
		header, token string
		ok            bool
	}{
		{"Bearer abc", "abc", true},
		{"bearer abc", "abc", true},
		{"BEARER  abc ", "abc", true},
		{"Bearer", "", false},
		{"Bearer ", "", false},
		{"Basic abc", "", false},
		{"", "", false},
		{"abc", "", false},
	} {
		token, ok := bearer(tc.header)
		if token != tc.token || ok != tc.ok {
			t.Errorf("bearer(%q) = %q, %v", tc.header, token, ok)
		}
	}
}

func TestCredential(t *testing.T) {
	for _, tc := range []struct {
		auth, xAPIKey, want string
		ok                  bool
	}{
		{"Bearer abc", "", "abc", true},
		{"", "sk-ant-like", "sk-ant-like", true},
		{"", "  spaced  ", "spaced", true},
		{"Bearer abc", "other", "abc", true}, // Authorization wins
		{"Basic dXNlcjpwYXNz", "other", "", false},
		{"", "", "", false},
	} {
		r := httptest.NewRequest(http.MethodPost, "/v1/messages", nil)
		if tc.auth != "" {
			r.Header.Set("Authorization", tc.auth)
		}
		if tc.xAPIKey != "" {
			r.Header.Set("X-Api-Key", tc.xAPIKey)
		}
		if got, ok := credential(r); got != tc.want || ok != tc.ok {
			t.Errorf("Authorization %q, x-api-key %q: %q %v", tc.auth, tc.xAPIKey, got, ok)
		}
	}
}

func TestStaticKeys(t *testing.T) {
	t.Setenv("MG_UNIT_KEY", "from-env")
	sum := sha256.Sum256([]byte("hashed"))
	got, err := provisionStaticKeys([]StaticKey{
		{Name: "env", Secret: "{env.MG_UNIT_KEY}"},
		{Name: "hashed", SHA256: hex.EncodeToString(sum[:])},
	})
	if err != nil {
		t.Fatal(err)
	}
	if k := got[keys.Digest("from-env")]; k == nil || k.Name != "env" || k.Owner != "env" {
		t.Errorf("env key: %+v", k)
	}
	if k := got[keys.Digest("hashed")]; k == nil || k.Name != "hashed" {
		t.Errorf("hashed key: %+v", k)
	}
	if got[keys.Digest("{env.MG_UNIT_KEY}")] != nil {
		t.Error("the placeholder itself must not be a key")
	}

	for _, tc := range []struct {
		name string
		keys []StaticKey
		err  string
	}{
		{"no name", []StaticKey{{Secret: "s"}}, "needs a name"},
		{"twice", []StaticKey{{Name: "a", Secret: "s"}, {Name: "a", Secret: "t"}}, `key "a" is defined twice`},
		{"same secret", []StaticKey{{Name: "a", Secret: "s"}, {Name: "b", Secret: "s"}}, "have the same secret"},
		{"empty env", []StaticKey{{Name: "a", Secret: "{env.MG_UNIT_UNSET}"}}, "is empty"},
		{"both", []StaticKey{{Name: "a", Secret: "s", SHA256: hex.EncodeToString(sum[:])}}, "not both"},
		{"neither", []StaticKey{{Name: "a"}}, "needs a secret or a sha256"},
		{"bad hex", []StaticKey{{Name: "a", SHA256: "xyz"}}, "64 hex digits"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := provisionStaticKeys(tc.keys)
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("error %v, want %q", err, tc.err)
			}
		})
	}
}

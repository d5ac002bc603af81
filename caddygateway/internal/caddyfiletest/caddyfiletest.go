// Package caddyfiletest holds what the tests of the provider modules share
// in checking how a provider's Caddyfile block unmarshals. Only tests
// import it.
package caddyfiletest

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// Unmarshal unmarshals the Caddyfile block in into p, a new provider
// module, and checks the result against want: the JSON of the provider,
// or "error: " and a substring of the error it must give.
func Unmarshal(t testing.TB, p caddyfile.Unmarshaler, in, want string) {
	t.Helper()
	err := p.UnmarshalCaddyfile(caddyfile.NewTestDispenser(in))
	if want, ok := strings.CutPrefix(want, "error: "); ok {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("error %v, want %q", err, want)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// Run runs Unmarshal for each case in a subtest of its name, each with a
// provider module newProvider returns.
func Run(t *testing.T, newProvider func() caddyfile.Unmarshaler, cases []struct{ Name, In, Want string }) {
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			Unmarshal(t, newProvider(), tc.In, tc.Want)
		})
	}
}

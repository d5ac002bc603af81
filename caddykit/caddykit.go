// Package caddykit is the Caddy side of modelgate's conformance kit: what
// the tests of a provider type's Caddy module use, whether the module
// lives in this repository or in a Go module of its own. With it a test
// checks how the module's Caddyfile block unmarshals (Unmarshal, Run),
// that a whole Caddyfile naming the provider adapts (Adapt, Provider),
// and serves requests through a gateway running that Caddyfile (Start),
// whose provider is the fake of package providertest, to which the
// module's wire format is registered. The translator's own checks are in
// package providerkit.
//
// caddykit registers no module itself: a test that adapts or runs a whole
// gateway imports the modules it needs, as a caddy binary built with them
// has them — modelgate's (`_ "github.com/modelgate/modelgate"`) and the
// provider type under test.
//
// Only tests import it.
package caddykit

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/tidwall/gjson"
)

// Unmarshal unmarshals the Caddyfile block in into p, a new provider
// module, and checks the result against want: the JSON of the provider,
// or "error: " and a substring of the error it must give. The block
// starts at the provider type, as the modelgate app hands it to the
// module: `openai { api_key k }`.
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

// Adapt adapts a whole Caddyfile to Caddy's JSON, as `caddy adapt` does,
// and returns it indented. It fails on an error and on a warning.
func Adapt(t testing.TB, caddyfileText string) []byte {
	t.Helper()
	out, warnings, err := adapt(caddyfileText)
	if err != nil {
		t.Fatalf("adapting the Caddyfile: %v", err)
	}
	for _, w := range warnings {
		t.Errorf("adapting the Caddyfile: warning: %s", w.String())
	}
	return out
}

// AdaptError checks that adapting the Caddyfile fails with an error that
// contains want.
func AdaptError(t testing.TB, caddyfileText, want string) {
	t.Helper()
	if _, _, err := adapt(caddyfileText); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("adapt error %v, want one containing %q", err, want)
	}
}

// Provider adapts the Caddyfile (see Adapt) and returns the JSON of its
// provider name, as the modelgate app loads it (with its "type"). It
// fails when the Caddyfile has no such provider.
func Provider(t testing.TB, caddyfileText, name string) []byte {
	t.Helper()
	out := Adapt(t, caddyfileText)
	p := gjson.GetBytes(out, "apps.modelgate.providers."+gjsonEscape(name))
	if !p.IsObject() {
		t.Fatalf("no provider %q in the adapted config:\n%s", name, out)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(p.Raw)); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func adapt(caddyfileText string) ([]byte, []caddyconfig.Warning, error) {
	out, warnings, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfileText), map[string]any{"filename": "Caddyfile"})
	if err != nil {
		return nil, warnings, err
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, out, "", "\t"); err != nil {
		return nil, warnings, err
	}
	return buf.Bytes(), warnings, nil
}

// gjsonEscape escapes a key for a gjson path.
func gjsonEscape(k string) string {
	var b strings.Builder
	for _, r := range k {
		if strings.ContainsRune(`.*?|#@\!=<>%`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

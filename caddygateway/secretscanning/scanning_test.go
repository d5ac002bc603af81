package secretscanning

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
)

func TestSecretScanningValidate(t *testing.T) {
	smtp := &SMTPConfig{Address: "mail.example.com:587", From: "modelgate@example.com"}
	for _, tc := range []struct {
		name string
		h    SecretScanning
		want string // "": valid
	}{
		{"nothing to notify", SecretScanning{}, ""},
		{"smtp and notify", SecretScanning{SMTP: smtp, Notify: map[string]string{"a": "a@example.com"}, NotifyDefault: "s@example.com"}, ""},
		{"notify without smtp", SecretScanning{Notify: map[string]string{"a": "a@example.com"}}, "needs an smtp server"},
		{"smtp without from", SecretScanning{SMTP: &SMTPConfig{Address: "m:25"}}, "from address"},
		{"smtp from not an address", SecretScanning{SMTP: &SMTPConfig{Address: "m:25", From: "modelgate"}}, "not an e-mail address"},
		{"unknown tls mode", SecretScanning{SMTP: &SMTPConfig{Address: "m:25", From: "m@e.x", TLS: "ssl"}}, "tls"},
		{"notify address", SecretScanning{SMTP: smtp, Notify: map[string]string{"a": "not an address"}}, "notify a"},
		{"notify_default address", SecretScanning{SMTP: smtp, NotifyDefault: "nope"}, "notify_default"},
	} {
		err := tc.h.Validate()
		if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestNewReporter(t *testing.T) {
	pemFile := "../../testdata/secret-scanning/test-p256.pub.pem"
	bad := filepath.Join(t.TempDir(), "bad.pem")
	if err := os.WriteFile(bad, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	repl := caddy.NewReplacer()
	for _, tc := range []struct {
		name    string
		c       ReporterConfig
		keysURL string
		want    string
	}{
		{"github defaults to its key list", ReporterConfig{Name: "github"}, "https://api.github.com/meta/public_keys/secret_scanning", ""},
		{"github with keys fetches nothing", ReporterConfig{Name: "github", PublicKeys: []PublicKeyConfig{{ID: "k", File: pemFile}}}, "", ""},
		{"github with keys and a list", ReporterConfig{Name: "github", PublicKeys: []PublicKeyConfig{{ID: "k", File: pemFile}}, KeysURL: "https://keys.example/"}, "https://keys.example/", ""},
		{"gitlab needs keys", ReporterConfig{Name: "gitlab"}, "", "public_key lines or a keys_url"},
		{"keys_url off and no keys", ReporterConfig{Name: "github", KeysURL: "off"}, "", "public_key lines or a keys_url"},
		{"unknown reporter", ReporterConfig{Name: "bitbucket"}, "", "github and gitlab"},
		{"missing file", ReporterConfig{Name: "gitlab", PublicKeys: []PublicKeyConfig{{ID: "k", File: "/nonexistent.pem"}}}, "", "nonexistent"},
		{"not a key", ReporterConfig{Name: "gitlab", PublicKeys: []PublicKeyConfig{{ID: "k", File: bad}}}, "", "PEM"},
		{"no identifier", ReporterConfig{Name: "gitlab", PublicKeys: []PublicKeyConfig{{File: pemFile}}}, "", "key identifier"},
	} {
		r, err := newReporter(tc.c, repl)
		if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
			continue
		}
		if err == nil && r.KeysURL != tc.keysURL {
			t.Errorf("%s: keys_url %q, want %q", tc.name, r.KeysURL, tc.keysURL)
		}
	}
}

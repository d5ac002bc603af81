package modelgate_test

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/caddyserver/xcaddy"
)

// buildLine derives the xcaddy command line from xcaddy.json, the one source
// of the build. It accepts exactly xcaddy.Builder's JSON shape.
func buildLine(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("xcaddy.json")
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var b xcaddy.Builder
	if err := dec.Decode(&b); err != nil {
		t.Fatalf("xcaddy.json is not in xcaddy.Builder's shape: %v", err)
	}
	if b.CaddyVersion == "" || len(b.Plugins) == 0 {
		t.Fatal("xcaddy.json needs caddy_version and plugins")
	}
	replaced := map[string]string{}
	for _, r := range b.Replacements {
		replaced[string(r.Old)] = string(r.New)
	}
	args := []string{"go tool xcaddy build", b.CaddyVersion}
	for _, p := range b.Plugins {
		with := p.PackagePath
		if p.Version != "" {
			with += "@" + p.Version
		}
		if repl, ok := replaced[with]; ok {
			with += "=" + repl
		}
		args = append(args, "--with", with)
	}
	return strings.Join(append(args, "--output ./caddy"), " ")
}

// TestBuildLineInStep keeps the README's build line and the test script's,
// which CI runs, equal to the line xcaddy.json describes.
func TestBuildLineInStep(t *testing.T) {
	line := buildLine(t)
	if want := "go tool xcaddy build v2.11.9 --with github.com/modelgate/modelgate@v0.0.0=. --output ./caddy"; line != want {
		t.Errorf("xcaddy.json gives %q, want %q", line, want)
	}
	for _, f := range []string{"README.md", "scripts/test.sh"} {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), line) {
			t.Errorf("%s does not contain the build line from xcaddy.json:\n\t%s", f, line)
		}
	}
}

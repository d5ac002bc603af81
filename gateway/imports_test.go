package gateway

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// engines are the packages under the core, which must not depend on
// Caddy either. (state/redisstore implements certmagic's storage
// interface, a library of its own: it is not Caddy.)
var engines = []string{
	"./accounts/...", "./batch/...", "./guardrails/...", "./keys/...", "./pricing/...", "./providers/...",
	"./quota/...", "./retention/...", "./routing/...", "./state/...", "./usage/...",
}

// TestNoCaddyImport checks, with go list -deps, the direction of the
// dependencies (the Caddy host → the core → the engines): the core
// depends on no github.com/caddyserver package at all, and no engine on
// Caddy.
func TestNoCaddyImport(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	var present []string
	for _, p := range engines {
		if _, err := os.Stat(filepath.Join(root, strings.TrimSuffix(p, "/..."))); err == nil {
			present = append(present, p)
		}
	}
	checkDeps(t, root, []string{"./gateway"}, "github.com/caddyserver/")
	checkDeps(t, root, present, "github.com/caddyserver/caddy/")
}

// checkDeps fails t for every package that pkgs depend on (themselves
// included) and that imports a package whose path begins with banned.
func checkDeps(t *testing.T, root string, pkgs []string, banned string) {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-deps", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`}, pkgs...)...)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %v: %v", pkgs, err)
	}
	var listed int
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		listed++
		for _, imp := range fields[1:] {
			if strings.HasPrefix(imp, banned) {
				t.Errorf("%s imports %s", fields[0], imp)
			}
		}
	}
	if listed < len(pkgs) {
		t.Fatalf("go list %v listed %d packages", pkgs, listed)
	}
}

package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
)

// TestIntegrationStaysInItsDirectories checks that the Caddy this package
// runs in-process keeps its storage and its autosaved config under the
// package's temporary directory, never in the user's own Caddy
// directories: a file uploaded to a gateway on the default storage lands
// there, and so does the config caddytest loaded.
func TestIntegrationStaysInItsDirectories(t *testing.T) {
	inRoot := func(what, p string) {
		t.Helper()
		if rel, err := filepath.Rel(testRoot, p); err != nil || strings.HasPrefix(rel, "..") {
			t.Errorf("%s %s is outside the test's directory %s", what, p, testRoot)
		}
	}
	fs := caddy.DefaultStorage
	inRoot("the default storage", fs.Path)
	inRoot("the autosaved config", caddy.ConfigAutosavePath)

	startGateway(t) // on Caddy's default storage
	f := uploadLines(t, sdk(aliceKey), []string{chatLine("isolated-1", "gpt-4o-mini")})
	keys, err := fs.List(context.Background(), "", true)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, k := range keys {
		found = found || strings.Contains(k, f.ID)
	}
	if !found {
		t.Errorf("file %s is not in the default storage %s: %d keys there", f.ID, fs.Path, len(keys))
	}
	if _, err := os.Stat(caddy.ConfigAutosavePath); err != nil {
		t.Errorf("the config caddytest loaded was not autosaved in the test's directory: %v", err)
	}
}

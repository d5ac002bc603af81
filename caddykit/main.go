package caddykit

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/certmagic"
)

// AdminURL is the admin endpoint of the Caddy that caddytest runs.
const AdminURL = "http://localhost:2999"

// Main runs the tests of a package that starts gateways (Start), from its
// TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(caddykit.Main(m)) }
//
// Caddy then keeps its files (the default storage, the autosaved config)
// in a temporary directory, removed at the end, rather than in the user's
// (see Isolate), and the tests wait, up to two minutes, for another
// process's Caddy to leave caddytest's admin address (see
// AwaitFreeAdmin). It returns m.Run's exit code, or 1 when the address
// stays taken.
func Main(m *testing.M) int {
	dir, err := os.MkdirTemp("", "modelgate-caddykit-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }() // a temporary directory: what is left is only litter
	Isolate(dir)
	if err := AwaitFreeAdmin(2 * time.Minute); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// Isolate points the Caddy that caddytest runs in this process at
// directories under dir: its data directory (the default storage, which
// the gateway's files, batches, keys and usage go to, and instance.uuid)
// and its config directory (the autosaved config). Setting XDG_DATA_HOME
// and XDG_CONFIG_HOME is not enough: Caddy fixes its default storage and
// autosave paths when its package is initialised, before TestMain runs,
// so they are set again from the new environment, as Caddy's own command
// does after loading an environment file.
func Isolate(dir string) {
	// Valid names: Setenv cannot fail.
	_ = os.Setenv("XDG_DATA_HOME", filepath.Join(dir, "data"))
	_ = os.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "config"))
	caddy.ConfigAutosavePath = filepath.Join(caddy.AppConfigDir(), "autosave.json")
	caddy.DefaultStorage = &certmagic.FileStorage{Path: caddy.AppDataDir()}
}

// AwaitFreeAdmin waits until nothing answers on caddytest's admin address
// (AdminURL), for at most wait. caddytest loads each test's config into
// whatever Caddy answers there, and another process's Caddy would
// provision it without the environment the tests set in this one. What
// answers is reported with its config, which tells whose it is.
func AwaitFreeAdmin(wait time.Duration) error {
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(wait)
	for reported := false; ; {
		res, err := client.Get(AdminURL + "/config/")
		if err != nil {
			return nil //nolint:nilerr // nothing answers: caddytest starts Caddy in this process
		}
		cfg, _ := io.ReadAll(io.LimitReader(res.Body, 2048))
		_ = res.Body.Close()
		if !reported {
			fmt.Fprintf(os.Stderr, "caddykit: another process's Caddy answers on %s before any test started one; waiting up to %v for it to go. Its config: %s\n", AdminURL, wait, cfg)
			reported = true
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("caddykit: %s is still held by another process's Caddy after %v", AdminURL, wait)
		}
		time.Sleep(time.Second)
	}
}

// Command quickstart is a newcomer's first command: from a clone of the
// repository,
//
//	go run ./cmd/quickstart
//
// builds ./caddy with xcaddy as xcaddy.json describes it (again only when a
// Go source is newer than the binary), starts the fake model provider the
// tests use, and runs the gateway on the root Caddyfile in front of it.
//
// Everything it runs stays on this machine and in this clone:
//
//   - the gateway listens on 127.0.0.1:8080 only (localhost:8080 and
//     127.0.0.1:8080 both answer), Caddy's admin endpoint on
//     localhost:2019, the fake provider on 127.0.0.1:9999;
//   - Caddy's storage (managed keys, usage, files, batches) and its
//     autosaved config live in .quickstart/ in the clone (gitignored), never
//     in Caddy's default directories, which a gateway run with ./caddy run
//     uses: nothing made in the demo answers there.
//
// It gives the gateway demo values for what the Caddyfile reads from the
// environment and is unset: the client key mg-demo-key, the key settings
// page's user holder with password demo-password, and for each provider
// whose API key is unset a fake key and the fake provider's address. A
// provider whose key you set (OPENAI_API_KEY=… go run ./cmd/quickstart)
// goes to its real endpoint, or to its *_BASE_URL if you set that.
//
// Ctrl-C stops the gateway gracefully (its usage is written to the
// storage), then the fake provider, which lives in this process; a second
// Ctrl-C makes Caddy quit at once. SIGTERM and SIGHUP stop it the same way.
// On Linux the gateway also stops when this process is killed, and this
// process stops when the one that started it (go run) ends.
//
// Flags: -port, -admin and -fake move the three addresses; -state the
// directory of Caddy's data; -caddy names the binary (default ./caddy),
// -no-build uses it as it is; -config names the Caddyfile.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/modelgate/modelgate/providers/providertest"
)

func main() {
	stopWithParent()
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			os.Exit(max(exit.ExitCode(), 1))
		}
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

// options are the quick start's flags.
type options struct {
	caddy, config, state string
	noBuild              bool
	port                 int
	admin, fake          string
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fl := flag.NewFlagSet("quickstart", flag.ContinueOnError)
	fl.SetOutput(stderr)
	fl.StringVar(&o.caddy, "caddy", "./caddy", "the caddy binary to build and run")
	fl.BoolVar(&o.noBuild, "no-build", false, "run -caddy as it is, without building it")
	fl.StringVar(&o.config, "config", "Caddyfile", "the Caddyfile to run")
	fl.StringVar(&o.state, "state", ".quickstart", "the directory of Caddy's storage and autosaved config")
	fl.IntVar(&o.port, "port", 8080, "the gateway's port, on 127.0.0.1 (the Caddyfile's MODELGATE_PORT)")
	admin := os.Getenv("CADDY_ADMIN")
	if admin == "" {
		admin = "localhost:2019"
	}
	fl.StringVar(&o.admin, "admin", admin, "Caddy's admin endpoint (CADDY_ADMIN)")
	fl.StringVar(&o.fake, "fake", "127.0.0.1:9999", "where the fake provider listens")
	if err := fl.Parse(args); err != nil {
		return o, err
	}
	if fl.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fl.Args())
	}
	if o.port < 1 || o.port > 65535 {
		return o, fmt.Errorf("-port %d: give a port from 1 to 65535", o.port)
	}
	var err error
	if o.state, err = filepath.Abs(o.state); err != nil {
		return o, err
	}
	if o.config, err = filepath.Abs(o.config); err != nil {
		return o, err
	}
	return o, nil
}

func run(args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	// Signals are caught from here on: one that comes while the binary is
	// built or the gateway starts still stops everything in order.
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sig)

	if !o.noBuild {
		if err := build(o.caddy, stdout, stderr); err != nil {
			return err
		}
	}

	ln, err := net.Listen("tcp", o.fake)
	if err != nil {
		return fmt.Errorf("the fake provider cannot listen on %s (is another quick start running? -fake moves it): %w", o.fake, err)
	}
	fake := &http.Server{Handler: providertest.New(providertest.Options{}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = fake.Serve(ln) }()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = fake.Shutdown(ctx)
	}()
	fakeURL := "http://" + ln.Addr().String()

	env, notes, err := gatewayEnv(o, fakeURL)
	if err != nil {
		return err
	}
	for _, dir := range []string{"data", "config"} {
		if err := os.MkdirAll(filepath.Join(o.state, dir), 0o700); err != nil {
			return err
		}
	}
	cmd := exec.Command(o.caddy, "run", "--config", o.config, "--adapter", "caddyfile")
	cmd.Env, cmd.Stdout, cmd.Stderr = env, stdout, stderr
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	ready := make(chan struct{})
	go func() {
		if awaitListening(fmt.Sprintf("127.0.0.1:%d", o.port), done) {
			fmt.Fprint(stdout, banner(o, fakeURL, notes))
			close(ready)
		}
	}()

	// The gateway is in a process group of its own (childAttr), so a
	// terminal's Ctrl-C reaches this process only, which passes it on as
	// one SIGINT: the first signal stops Caddy gracefully, a second
	// Ctrl-C makes it quit at once, as it does for ./caddy run. A second
	// SIGTERM or SIGHUP changes nothing: the parent-death signal comes
	// once for each thread of the parent that ends.
	stopping := false
	for {
		select {
		case s := <-sig:
			if stopping && s != os.Interrupt {
				continue
			}
			if !stopping {
				fmt.Fprintln(stdout, "quickstart: stopping the gateway (Ctrl-C again to force it)")
			}
			stopping = true
			_ = cmd.Process.Signal(os.Interrupt)
		case err := <-done:
			if stopping {
				fmt.Fprintln(stdout, "quickstart: stopped")
				return nil
			}
			if err == nil {
				err = errors.New("the gateway stopped")
			}
			select {
			case <-ready:
			default:
				return fmt.Errorf("the gateway did not start (is port %d or the admin endpoint %s taken? -port and -admin move them): %w", o.port, o.admin, err)
			}
			return err
		}
	}
}

// awaitListening waits until something accepts connections on addr, or
// the gateway ends (done yields, and is given its value back).
func awaitListening(addr string, done chan error) bool {
	for range 600 {
		select {
		case err := <-done:
			done <- err
			return false
		case <-time.After(100 * time.Millisecond):
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			_ = c.Close() // a probe: nothing was written
			return true
		}
	}
	return false
}

// providerEnv are the providers of the root Caddyfile: the variables of
// their key and base URL, and the fake provider's path for each.
var providerEnv = []struct{ key, baseURL, fakePath string }{
	{"OPENAI_API_KEY", "OPENAI_BASE_URL", "/v1"},
	{"ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", ""},
	{"COHERE_API_KEY", "COHERE_BASE_URL", "/cohere"},
}

// gatewayEnv is this process's environment plus what the gateway needs:
// the quick start's storage and admin address, its port, and demo values
// for what the root Caddyfile reads and is unset. notes tell which
// providers are real.
func gatewayEnv(o options, fakeURL string) (env, notes []string, err error) {
	env = os.Environ()
	set := func(k, v string) { env = append(env, k+"="+v) }
	// An empty variable counts as unset, as it does for the Caddyfile.
	setDefault := func(k, v string) {
		if os.Getenv(k) == "" {
			set(k, v)
		}
	}
	set("XDG_DATA_HOME", filepath.Join(o.state, "data"))
	set("XDG_CONFIG_HOME", filepath.Join(o.state, "config"))
	set("CADDY_ADMIN", o.admin)
	set("MODELGATE_PORT", strconv.Itoa(o.port))
	for _, p := range providerEnv {
		if os.Getenv(p.key) != "" {
			where := os.Getenv(p.baseURL)
			if where == "" {
				where = "its public endpoint"
			}
			notes = append(notes, fmt.Sprintf("%s is set: that provider is real (%s)", p.key, where))
			continue
		}
		set(p.key, "fake")
		setDefault(p.baseURL, fakeURL+p.fakePath)
	}
	setDefault("MODELGATE_KEY", "mg-demo-key")
	if os.Getenv("MODELGATE_SETTINGS_HASH") == "" {
		out, err := exec.Command(o.caddy, "hash-password", "--plaintext", "demo-password").Output()
		if err != nil {
			return nil, nil, fmt.Errorf("hashing the demo password: %w", err)
		}
		set("MODELGATE_SETTINGS_HASH", strings.TrimSpace(string(out)))
	}
	return env, notes, nil
}

// banner tells where everything is, once the gateway listens.
func banner(o options, fakeURL string, notes []string) string {
	site := fmt.Sprintf("http://localhost:%d", o.port)
	key := "mg-demo-key"
	if os.Getenv("MODELGATE_KEY") != "" {
		key = "the value of MODELGATE_KEY"
	}
	password := "user holder, password demo-password"
	if os.Getenv("MODELGATE_SETTINGS_HASH") != "" {
		password = "user holder, the password of MODELGATE_SETTINGS_HASH"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nmodelgate quick start: ready\n")
	fmt.Fprintf(&b, "  gateway        %s/v1 (also http://127.0.0.1:%d/v1), this machine only; key %s\n", site, o.port, key)
	fmt.Fprintf(&b, "  key settings   %s/account/keys/ (%s)\n", site, password)
	fmt.Fprintf(&b, "  admin          %s (./caddy modelgate key …, ./caddy modelgate usage)\n", o.admin)
	fmt.Fprintf(&b, "  fake provider  %s\n", fakeURL)
	fmt.Fprintf(&b, "  state          %s (delete it to start afresh)\n", o.state)
	for _, n := range notes {
		fmt.Fprintf(&b, "  note           %s\n", n)
	}
	if o.port != 8080 || o.admin != "localhost:2019" {
		// The port is read when the Caddyfile is adapted, which a
		// reload does again in its own shell.
		fmt.Fprintf(&b, "  reload         MODELGATE_PORT=%d CADDY_ADMIN=%s ./caddy reload (without MODELGATE_PORT a reload moves the gateway to port 8080)\n", o.port, o.admin)
	}
	fmt.Fprintf(&b, "Try:\n  curl %s/v1/chat/completions -H 'Authorization: Bearer %s' \\\n", site, key)
	fmt.Fprintf(&b, "    -H 'Content-Type: application/json' -d '{\"model\":\"smart\",\"messages\":[{\"role\":\"user\",\"content\":\"hello\"}]}'\n")
	fmt.Fprintf(&b, "Ctrl-C stops the gateway and the fake provider.\n\n")
	return b.String()
}

// build runs the xcaddy build xcaddy.json describes, unless bin is newer
// than every Go source and module file of the repository.
func build(bin string, stdout, stderr io.Writer) error {
	if fresh, err := upToDate(bin); err != nil || fresh {
		return err
	}
	args, err := xcaddyArgs(bin)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, "quickstart: building", bin, "(about 6 minutes on a cold Go cache, seconds after that):")
	fmt.Fprintln(stdout, "  go", strings.Join(args, " "))
	cmd := exec.Command("go", args...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	return cmd.Run()
}

// xcaddyArgs derives `go tool xcaddy build …` from xcaddy.json, the one
// description of the build.
func xcaddyArgs(bin string) ([]string, error) {
	data, err := os.ReadFile("xcaddy.json")
	if err != nil {
		return nil, fmt.Errorf("run the quick start from the repository root: %w", err)
	}
	var b struct {
		CaddyVersion string `json:"caddy_version"`
		Plugins      []struct {
			ModulePath string `json:"module_path"`
			Version    string `json:"version"`
		} `json:"plugins"`
		Replacements []struct{ Old, New string } `json:"replacements"`
	}
	if err := json.Unmarshal(data, &b); err != nil {
		return nil, fmt.Errorf("xcaddy.json: %w", err)
	}
	args := []string{"tool", "xcaddy", "build", b.CaddyVersion}
	for _, p := range b.Plugins {
		with := p.ModulePath
		if p.Version != "" {
			with += "@" + p.Version
		}
		for _, r := range b.Replacements {
			if r.Old == with {
				with += "=" + r.New
			}
		}
		args = append(args, "--with", with)
	}
	return append(args, "--output", bin), nil
}

// upToDate reports whether bin exists and is newer than every .go, go.mod
// and go.sum file under the current directory.
func upToDate(bin string) (bool, error) {
	st, err := os.Stat(bin)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	built := st.ModTime()
	stale := errors.New("stale")
	err = filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if n := d.Name(); !d.IsDir() && (strings.HasSuffix(n, ".go") || n == "go.mod" || n == "go.sum") {
			if info, err := d.Info(); err == nil && info.ModTime().After(built) {
				return stale
			}
		}
		return nil
	})
	if errors.Is(err, stale) {
		return false, nil
	}
	return err == nil, err
}

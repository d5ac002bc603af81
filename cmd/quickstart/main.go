// Command quickstart is a newcomer's first command: from a clone of the
// repository,
//
//	go run ./cmd/quickstart
//
// builds ./caddy with xcaddy as xcaddy.json describes it (again only when a
// Go source is newer than the binary), starts the fake model provider the
// tests use on 127.0.0.1:9999, and runs the gateway on the root Caddyfile
// in front of it, with demo values for the keys the Caddyfile reads from the
// environment (the client key mg-demo-key; the key settings page's user
// holder, password demo-password). Ctrl-C stops the gateway, and the fake
// provider with it: it lives in this process. If this process is killed, the
// gateway is killed with it (Linux: parent-death signal).
//
// Flags: -caddy names the binary (default ./caddy), -no-build uses it as it
// is, -fake sets the fake provider's address, -config the Caddyfile. Any
// environment variable the Caddyfile reads that is already set is kept, so
// OPENAI_BASE_URL=… OPENAI_API_KEY=… go run ./cmd/quickstart points the
// gateway at a real provider.
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
	"strings"
	"syscall"
	"time"

	"github.com/modelgate/modelgate/providers/providertest"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			os.Exit(exit.ExitCode())
		}
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	fl := flag.NewFlagSet("quickstart", flag.ContinueOnError)
	fl.SetOutput(stderr)
	caddyBin := fl.String("caddy", "./caddy", "the caddy binary to build and run")
	noBuild := fl.Bool("no-build", false, "run -caddy as it is, without building it")
	fakeAddr := fl.String("fake", "127.0.0.1:9999", "where the fake provider listens (the Caddyfile's default base URLs point here)")
	config := fl.String("config", "Caddyfile", "the Caddyfile to run")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if !*noBuild {
		if err := build(*caddyBin, stdout, stderr); err != nil {
			return err
		}
	}

	ln, err := net.Listen("tcp", *fakeAddr)
	if err != nil {
		return fmt.Errorf("the fake provider cannot listen on %s (is another quick start running?): %w", *fakeAddr, err)
	}
	fake := &http.Server{Handler: providertest.New(providertest.Options{}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = fake.Serve(ln) }()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = fake.Shutdown(ctx)
	}()
	fmt.Fprintf(stdout, "fake provider on http://%s\n", ln.Addr())

	env, err := demoEnv(*caddyBin)
	if err != nil {
		return err
	}
	cmd := exec.Command(*caddyBin, "run", "--config", *config, "--adapter", "caddyfile")
	cmd.Env, cmd.Stdout, cmd.Stderr = env, stdout, stderr
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		return err
	}
	fmt.Fprintln(stdout, `gateway starting: try
  curl http://localhost:8080/v1/chat/completions -H 'Authorization: Bearer mg-demo-key' \
    -H 'Content-Type: application/json' -d '{"model":"smart","messages":[{"role":"user","content":"hello"}]}'
Ctrl-C stops the gateway and the fake provider.`)

	// Ctrl-C reaches the gateway too (same process group); forward
	// SIGTERM, and wait for the gateway to stop either way.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case s := <-sig:
			_ = cmd.Process.Signal(s)
		case err := <-done:
			var exit *exec.ExitError
			if errors.As(err, &exit) && exit.ExitCode() < 0 {
				return nil // stopped by the signal we passed on
			}
			return err
		}
	}
}

// demoEnv is this process's environment plus demo values for what the root
// Caddyfile reads and is not set.
func demoEnv(caddyBin string) ([]string, error) {
	env := os.Environ()
	set := func(k, v string) {
		if _, ok := os.LookupEnv(k); !ok {
			env = append(env, k+"="+v)
		}
	}
	for _, k := range []string{"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "COHERE_API_KEY"} {
		set(k, "fake")
	}
	set("MODELGATE_KEY", "mg-demo-key")
	if _, ok := os.LookupEnv("MODELGATE_SETTINGS_HASH"); !ok {
		out, err := exec.Command(caddyBin, "hash-password", "--plaintext", "demo-password").Output()
		if err != nil {
			return nil, fmt.Errorf("hashing the demo password: %w", err)
		}
		set("MODELGATE_SETTINGS_HASH", strings.TrimSpace(string(out)))
	}
	return env, nil
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
	fmt.Fprintln(stdout, "building:", "go", strings.Join(args, " "))
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

package integration

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers/providertest"
	"github.com/modelgate/modelgate/usage"
)

const teamExample = "../examples/team"

// TestTeamExampleEnvironment checks that env.example names every variable
// the team Caddyfile reads, and nothing it does not read.
func TestTeamExampleEnvironment(t *testing.T) {
	cfg, err := os.ReadFile(filepath.Join(teamExample, "Caddyfile"))
	if err != nil {
		t.Fatal(err)
	}
	var read []string
	uncommented := regexp.MustCompile(`(?m)^\s*#.*$`).ReplaceAllString(string(cfg), "")
	for _, m := range regexp.MustCompile(`\{(?:env\.|\$)([A-Z_][A-Z0-9_]*)`).FindAllStringSubmatch(uncommented, -1) {
		if !slices.Contains(read, m[1]) {
			read = append(read, m[1])
		}
	}
	documented := exampleEnv(t, true)
	for _, name := range read {
		if _, ok := documented[name]; !ok {
			t.Errorf("the Caddyfile reads %s, which env.example does not name", name)
		}
	}
	for name := range documented {
		if !slices.Contains(read, name) {
			t.Errorf("env.example names %s, which the Caddyfile does not read", name)
		}
	}
}

// exampleEnv reads env.example's variables; commented ones too with all.
func exampleEnv(t *testing.T, all bool) map[string]string {
	t.Helper()
	f, err := os.Open(filepath.Join(teamExample, "env.example"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	vars := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if all {
			line = strings.TrimPrefix(line, "#")
		}
		k, v, ok := strings.Cut(line, "=")
		if ok && regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`).MatchString(k) {
			vars[k] = v
		}
	}
	return vars
}

// unitCommand is a command line of modelgate.service (ExecStart,
// ExecReload) with the test's caddy and the example's Caddyfile in place
// of the installed ones.
func unitCommand(t *testing.T, key, caddy string) []string {
	t.Helper()
	unit, err := os.ReadFile(filepath.Join(teamExample, "modelgate.service"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := filepath.Abs(filepath.Join(teamExample, "Caddyfile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(unit), "\n") {
		if v, ok := strings.CutPrefix(line, key+"="); ok {
			args := strings.Fields(v)
			if len(args) < 2 || args[0] != "/usr/local/bin/caddy" {
				t.Fatalf("%s runs %q", key, v)
			}
			args[0] = caddy
			for i, a := range args {
				if a == "/etc/modelgate/Caddyfile" {
					args[i] = cfg
				}
			}
			return args
		}
	}
	t.Fatalf("modelgate.service has no %s", key)
	return nil
}

// unitEnvironment is the Environment= of modelgate.service, with its state
// directory moved to state.
func unitEnvironment(t *testing.T, state string) []string {
	t.Helper()
	unit, err := os.ReadFile(filepath.Join(teamExample, "modelgate.service"))
	if err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, line := range strings.Split(string(unit), "\n") {
		if v, ok := strings.CutPrefix(line, "Environment="); ok {
			for _, kv := range strings.Fields(v) {
				env = append(env, strings.ReplaceAll(kv, "/var/lib/modelgate", state))
			}
		}
	}
	return env
}

// TestProcessTeamExample runs the team deployment as docs/deploying.md sets
// it up: examples/team/Caddyfile, started and reloaded with the commands
// of modelgate.service, with env.example's variables (filled in with the
// fake provider's address and keys, and ports on the loopback interface),
// once for each TLS mode: auto (with a name Caddy certifies itself, as no
// public CA is reachable here), internal (Caddy's CA) and files (a
// certificate of the test's). Each time: a per-person key made with
// `caddy modelgate key create`, requests over HTTPS through both
// providers, the team's budget and the key defaults as the Caddyfile sets
// them, the key settings page behind its password, a reload, and a stop
// that writes the usage.
func TestProcessTeamExample(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	caddy := caddyBinary(t)
	start, reload := unitCommand(t, "ExecStart", caddy), unitCommand(t, "ExecReload", caddy)
	hash, err := exec.Command(caddy, "hash-password", "--plaintext", "team-password").Output()
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct{ mode, site string }{
		{"auto", "localhost"}, {"internal", "gateway.internal"}, {"files", "gateway.example.test"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			fake := providertest.Start(t, providertest.Options{OpenAIKey: openAIKey, AnthropicKey: anthropicKey})
			dir := t.TempDir()
			state := filepath.Join(dir, "state")
			httpsPort, httpPort := freePort(t), freePort(t)
			admin := fmt.Sprintf("localhost:%d", freePort(t))
			vars := exampleEnv(t, false)
			for k, v := range map[string]string{
				"MODELGATE_SITE": tc.site, "MODELGATE_TLS": tc.mode,
				"OPENAI_API_KEY": openAIKey, "ANTHROPIC_API_KEY": anthropicKey,
				"OPENAI_BASE_URL": fake.URL + "/v1", "ANTHROPIC_BASE_URL": fake.URL,
				"MODELGATE_SETTINGS_HASH": strings.TrimSpace(string(hash)),
				"MODELGATE_STORAGE":       state, "MODELGATE_ADMIN": admin,
				"MODELGATE_HTTP_PORT": fmt.Sprint(httpPort), "MODELGATE_HTTPS_PORT": fmt.Sprint(httpsPort),
				"MODELGATE_BIND": "127.0.0.1",
			} {
				vars[k] = v
			}
			roots := x509.NewCertPool()
			if tc.mode == "files" {
				cert, key := selfSigned(t, dir, tc.site)
				vars["MODELGATE_TLS_CERT"], vars["MODELGATE_TLS_KEY"] = cert, key
				pemData, _ := os.ReadFile(cert)
				roots.AppendCertsFromPEM(pemData)
			}
			env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
			env = append(env, unitEnvironment(t, state)...)
			for k, v := range vars {
				env = append(env, k+"="+v)
			}

			cmd := exec.Command(start[0], start[1:]...)
			cmd.Env = env
			var out lockedBuffer
			cmd.Stdout, cmd.Stderr = &out, &out
			dieWithTest(cmd)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			t.Cleanup(func() {
				if cmd.ProcessState == nil {
					_ = cmd.Process.Kill()
					<-done //nolint:errcheck // the killed process's exit status
				}
				if t.Failed() {
					t.Logf("caddy's output:\n%s", out.String())
				}
			})
			adminURL := "http://" + admin
			deadline := time.Now().Add(30 * time.Second)
			for {
				if status, _, _ := adminRequest(http.MethodGet, adminURL+"/modelgate/ready", ""); status == 200 {
					break
				}
				select {
				case err := <-done:
					t.Fatalf("caddy ended: %v", err)
				case <-time.After(100 * time.Millisecond):
				}
				if time.Now().After(deadline) {
					t.Fatal("the gateway was not ready within 30 s")
				}
			}
			if tc.mode != "files" {
				// Caddy's CA: its root is in the storage for the clients.
				root, err := (&certmagic.FileStorage{Path: state}).Load(context.Background(), "pki/authorities/local/root.crt")
				if err != nil {
					t.Fatal(err)
				}
				roots.AppendCertsFromPEM(root)
			}
			client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{
				TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: tc.site},
				DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
					return (&net.Dialer{}).DialContext(ctx, network, fmt.Sprintf("127.0.0.1:%d", httpsPort))
				},
			}}
			site := "https://" + tc.site

			// A key for a person of the team, as the docs make it.
			create := exec.Command(caddy, "modelgate", "key", "create", "--name", "alice", "--owner", "team", "--budget", "20", "--address", admin)
			create.Env = env
			created, err := create.CombinedOutput()
			secret := regexp.MustCompile(`mgk_[0-9A-Za-z]{36}`).FindString(string(created))
			if err != nil || secret == "" {
				t.Fatalf("caddy modelgate key create: %v\n%s", err, created)
			}
			id := regexp.MustCompile(`key_[0-9a-z]+`).FindString(string(created))

			send := func(path, body string, header ...string) (int, string) {
				t.Helper()
				req, _ := http.NewRequest(http.MethodPost, site+path, strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				for i := 0; i+1 < len(header); i += 2 {
					req.Header.Set(header[i], header[i+1])
				}
				res, err := client.Do(req)
				if err != nil {
					t.Fatalf("%s: %v", path, err)
				}
				defer res.Body.Close()
				var b strings.Builder
				_, _ = bufio.NewReader(res.Body).WriteTo(&b)
				return res.StatusCode, b.String()
			}
			chat := func() {
				t.Helper()
				status, body := send("/v1/chat/completions", `{"model":"smart","messages":[{"role":"user","content":"hello team"}]}`, "Authorization", "Bearer "+secret)
				if status != 200 || gjson.Get(body, "choices.0.message.content").Str != "echo: hello team" {
					t.Fatalf("chat over HTTPS: %d %s", status, body)
				}
			}
			chat()
			status, body := send("/v1/messages", `{"model":"fast","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`,
				"x-api-key", secret, "anthropic-version", "2023-06-01")
			if status != 200 || gjson.Get(body, "content.0.text").Str != "echo: hi" {
				t.Errorf("messages over HTTPS: %d %s", status, body)
			}
			if status, body := send("/v1/chat/completions", `{"model":"smart","messages":[]}`, "Authorization", "Bearer mgk_unknown"); status != 401 {
				t.Errorf("an unknown key: %d %s", status, body)
			}

			// The limits the Caddyfile gives every key, alice's own budget,
			// and the team's.
			status, body, _ = adminRequest(http.MethodGet, adminURL+"/modelgate/keys/"+id+"/usage?days=1", "")
			if status != 200 || gjson.Get(body, "policy.key.limits.requests_per_minute").Int() != 60 ||
				gjson.Get(body, "policy.key.budget.usd").Str != "20" || gjson.Get(body, "policy.owner.budget.usd").Str != "500" ||
				gjson.Get(body, "policy.owner.budget.period").Str != "month" {
				t.Errorf("the key's usage and policy: %d %s", status, body)
			}

			// What a new key of the team gets, as the key settings page's
			// create form shows it.
			status, body, _ = adminRequest(http.MethodGet, adminURL+"/modelgate/policy?owner=team", "")
			if status != 200 || gjson.Get(body, "key.limits").Raw != `{"requests_per_minute":60,"tokens_per_minute":400000,"concurrent_requests":8}` ||
				gjson.Get(body, "key.budget").Raw != `{"usd":"50","period":"month"}` || gjson.Get(body, "owner.budget").Raw != `{"usd":"500","period":"month"}` {
				t.Errorf("the policy of a new key of the team: %d %s", status, body)
			}

			// The key settings page, behind its password.
			for _, tc := range []struct {
				password string
				want     int
			}{{"", 401}, {"wrong", 401}, {"team-password", 200}} {
				req, _ := http.NewRequest(http.MethodGet, site+"/account/keys/", nil)
				if tc.password != "" {
					req.SetBasicAuth("admin", tc.password)
				}
				res, err := client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				res.Body.Close()
				if res.StatusCode != tc.want {
					t.Errorf("the key settings page with password %q: %d, want %d", tc.password, res.StatusCode, tc.want)
				}
			}

			// systemctl reload: the same environment, the same gateway.
			rl := exec.Command(reload[0], reload[1:]...)
			rl.Env = env
			if b, err := rl.CombinedOutput(); err != nil {
				t.Fatalf("reload: %v\n%s", err, b)
			}
			chat()

			// systemctl stop: SIGTERM; the usage is in the storage after it.
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("caddy exited with %v after SIGTERM", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("caddy did not stop within 30 s of SIGTERM")
			}
			if got := storedRequests(t, state, "claude-sonnet-4-6"); got != 2 {
				t.Errorf("the usage records count %d chat requests, want 2", got)
			}
		})
	}
}

// storedRequests sums the requests to model in the usage records of the
// file storage at dir.
func storedRequests(t *testing.T, dir, model string) int64 {
	t.Helper()
	rec, err := usage.New(&certmagic.FileStorage{Path: dir}, usage.Options{Instance: "reader"})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := rec.Query(context.Background(), usage.Query{By: []usage.Dimension{usage.ByModel}})
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, r := range rep.Rows {
		if r.Model == model {
			n += r.Requests
		}
	}
	return n
}

// selfSigned writes a certificate for name and its key into dir.
func selfSigned(t *testing.T, dir, name string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

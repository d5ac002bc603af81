package integration

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers/providertest"
)

// The single-sign-on process test runs the key settings page behind
// forward_auth to oauth2-proxy, which signs account holders in at a test
// OpenID Connect provider (sso.Caddyfile). Neither is in the gateway's
// go.mod: oauth2-proxy is a large module the gateway does not use, so it
// is installed here with `go install module@version` into a temporary
// directory (from the module proxy, then the build cache); the provider is
// mockoidc in a small module of its own, integration/oidcprovider, built
// with go build.

// oauth2ProxyVersion is the oauth2-proxy the test signs in through.
const oauth2ProxyVersion = "github.com/oauth2-proxy/oauth2-proxy/v7@v7.15.6"

var ssoBins struct {
	once            sync.Once
	proxy, provider string
	err             error
}

// ssoBinaries builds oauth2-proxy and the test provider once per run.
func ssoBinaries(t *testing.T) (proxy, provider string) {
	t.Helper()
	ssoBins.once.Do(func() {
		dir, err := os.MkdirTemp("", "modelgate-sso-bin")
		if err != nil {
			ssoBins.err = err
			return
		}
		install := exec.Command("go", "install", oauth2ProxyVersion)
		install.Dir = dir // outside this module: @version ignores it anyway
		install.Env = append(os.Environ(), "GOBIN="+dir, "GOFLAGS=-mod=mod")
		if out, err := install.CombinedOutput(); err != nil {
			ssoBins.err = fmt.Errorf("go install %s: %w\n%s", oauth2ProxyVersion, err, out)
			return
		}
		build := exec.Command("go", "build", "-o", filepath.Join(dir, "oidcprovider"), ".")
		build.Dir = "oidcprovider"
		if out, err := build.CombinedOutput(); err != nil {
			ssoBins.err = fmt.Errorf("building integration/oidcprovider: %w\n%s", err, out)
			return
		}
		ssoBins.proxy, ssoBins.provider = filepath.Join(dir, "oauth2-proxy"), filepath.Join(dir, "oidcprovider")
	})
	if ssoBins.err != nil {
		t.Fatal(ssoBins.err)
	}
	return ssoBins.proxy, ssoBins.provider
}

// oidcProvider is the running test provider.
type oidcProvider struct {
	Issuer       string `json:"issuer"`
	ClientID     string `json:"client_id"`
	ClientSecret string `json:"client_secret"`

	in  io.WriteCloser
	out *bufio.Reader
}

// ssoUser is who the provider signs in next.
type ssoUser struct {
	Sub      string   `json:"sub"`
	Email    string   `json:"email"`
	Username string   `json:"username"`
	Groups   []string `json:"groups"`
}

func startOIDCProvider(t *testing.T, exe string) *oidcProvider {
	t.Helper()
	cmd := exec.Command(exe)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	dieWithTest(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); _ = cmd.Process.Kill(); _ = cmd.Wait() })
	p := &oidcProvider{in: in, out: bufio.NewReader(stdout)}
	line, err := p.out.ReadString('\n')
	if err != nil || json.Unmarshal([]byte(line), p) != nil || p.Issuer == "" {
		t.Fatalf("the test provider's first line: %q %v", line, err)
	}
	return p
}

// queue makes u the next user the provider signs in.
func (p *oidcProvider) queue(t *testing.T, u ssoUser) {
	t.Helper()
	b, _ := json.Marshal(u)
	if _, err := p.in.Write(append(b, '\n')); err != nil {
		t.Fatal(err)
	}
	if line, err := p.out.ReadString('\n'); err != nil || !strings.HasPrefix(line, "queued") {
		t.Fatalf("queueing %s: %q %v", u.Sub, line, err)
	}
}

// startOAuth2Proxy runs oauth2-proxy on port, for the gateway at base,
// against the provider p.
func startOAuth2Proxy(t *testing.T, exe string, port int, base string, p *oidcProvider) {
	t.Helper()
	cmd := exec.Command(exe,
		"--provider=oidc", "--oidc-issuer-url="+p.Issuer, "--client-id="+p.ClientID, "--client-secret="+p.ClientSecret,
		"--scope=openid email profile groups", "--email-domain=*",
		fmt.Sprintf("--http-address=127.0.0.1:%d", port), "--redirect-url="+base+"/oauth2/callback",
		"--upstream=static://202", "--reverse-proxy", "--set-xauthrequest", "--skip-provider-button",
		"--cookie-secure=false", "--cookie-secret=0123456789abcdef0123456789abcdef", "--cookie-name=_sso_test",
		"--code-challenge-method=S256")
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	dieWithTest(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("oauth2-proxy's output:\n%s", lastN(out.String(), 40))
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		res, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/ping", port))
		if err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("oauth2-proxy did not start:\n%s", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ssoHolder is an account holder's browser, as far as cookies and
// redirects go.
type ssoHolder struct {
	t      *testing.T
	base   string
	client *http.Client
}

// signIn signs u in through the whole flow: the page's API redirects to
// oauth2-proxy, which sends the browser to the provider and back, sets its
// session cookie and returns it to the page's API, which answers as u.
func signIn(t *testing.T, base string, p *oidcProvider, u ssoUser) ssoHolder {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	h := ssoHolder{t: t, base: base, client: &http.Client{Jar: jar, Timeout: 20 * time.Second}}
	p.queue(t, u)
	var hops []string
	h.client.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		hops = append(hops, req.URL.Host+req.URL.Path)
		if len(via) > 10 {
			return fmt.Errorf("too many redirects: %q", hops)
		}
		return nil
	}
	status, body := h.do(http.MethodGet, "account", "")
	if status != 200 || gjson.Get(body, "identity").Str != u.Email {
		t.Fatalf("%s signing in: %d %s, through %q", u.Email, status, body, hops)
	}
	// The provider's authorization and oauth2-proxy's callback were on
	// the way.
	if !strings.Contains(strings.Join(hops, " "), "/oauth2/callback") || !strings.Contains(strings.Join(hops, " "), "/authorize") {
		t.Errorf("%s signed in without the provider: %q", u.Email, hops)
	}
	h.client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return h
}

// do sends one request to the page's API, from the page's origin; header
// holds extra headers.
func (h ssoHolder) do(method, path, body string, header ...string) (int, string) {
	h.t.Helper()
	req, err := http.NewRequest(method, h.base+"/account/keys/api/"+path, strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Origin", h.base)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := h.client.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// TestProcessSSO: the key settings page behind forward_auth to oauth2-proxy
// and a test OpenID Connect provider, a full login for each account holder.
// Ann, in no group, owns her own account; Ben and Cy, in the provider's
// group eng, are admins of team-eng and manage its keys together. Nobody
// gets in without signing in; a header a client sets itself does not make
// it someone else; each account's keys are its own (404 for the others',
// whatever the method); the e-mail address the sign-in carried is recorded
// for leak mail.
func TestProcessSSO(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs caddy and oauth2-proxy")
	}
	proxyExe, providerExe := ssoBinaries(t)
	fake := providertest.Start(t, providertest.Options{OpenAIKey: openAIKey})
	in := newInstance(t, "sso", t.TempDir(), fake)
	in.config = "sso.Caddyfile"
	oauthPort := freePort(t)
	in.set(fmt.Sprintf("MG_OAUTH2_PORT=%d", oauthPort))
	provider := startOIDCProvider(t, providerExe)
	// oauth2-proxy needs the gateway's address for its callback: the
	// instance's ports are picked already, and kept if free.
	startOAuth2Proxy(t, proxyExe, oauthPort, in.httpURL, provider)
	in.start()
	base := in.httpURL

	// No session: the page's API sends the browser to sign in.
	res, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Get(base + "/account/keys/api/keys")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusFound || !strings.HasPrefix(res.Header.Get("Location"), "/oauth2/start") {
		t.Fatalf("without a session: %d to %q", res.StatusCode, res.Header.Get("Location"))
	}
	// Nor does a client's own identity header let it in.
	req, _ := http.NewRequest(http.MethodGet, base+"/account/keys/api/keys", nil)
	req.Header.Set("X-Auth-Request-Email", "ann@example.com")
	res, err = (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatalf("a forged identity header without a session: %v", err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusFound {
		t.Fatalf("a forged identity header without a session: %d to %q", res.StatusCode, res.Header.Get("Location"))
	}

	ann := signIn(t, base, provider, ssoUser{Sub: "u-ann", Email: "ann@example.com", Username: "ann"})
	ben := signIn(t, base, provider, ssoUser{Sub: "u-ben", Email: "ben@example.com", Username: "ben", Groups: []string{"eng", "all"}})
	cy := signIn(t, base, provider, ssoUser{Sub: "u-cy", Email: "cy@example.com", Username: "cy", Groups: []string{"eng"}})

	for _, c := range []struct {
		h             ssoHolder
		account, role string
	}{{ann, "ann@example.com", "owner"}, {ben, "team-eng", "admin"}, {cy, "team-eng", "admin"}} {
		status, body := c.h.do(http.MethodGet, "account", "")
		if status != 200 || gjson.Get(body, "account.id").Str != c.account || gjson.Get(body, "role").Str != c.role {
			t.Errorf("account: %d %s, want %s as %s", status, body, c.account, c.role)
		}
	}
	create := func(h ssoHolder, name string) string {
		t.Helper()
		status, body := h.do(http.MethodPost, "keys", `{"name":"`+name+`"}`)
		if status != http.StatusCreated {
			t.Fatalf("creating %s: %d %s", name, status, body)
		}
		return gjson.Get(body, "id").Str
	}
	annKey, benKey := create(ann, "ann-laptop"), create(ben, "eng-ci")
	// Ben and Cy share team-eng's keys; Ann sees only hers.
	if status, body := cy.do(http.MethodGet, "keys", ""); status != 200 || gjson.Get(body, "data.#").Int() != 1 || gjson.Get(body, "data.0.id").Str != benKey {
		t.Errorf("cy's list: %d %s", status, body)
	}
	if status, body := cy.do(http.MethodDelete, "keys/"+benKey, ""); status != http.StatusNoContent {
		t.Errorf("an admin deletes a key of its account: %d %s", status, body)
	}
	benKey = create(ben, "eng-ci-2")
	for _, c := range []struct{ method, path, body string }{
		{"GET", "keys/" + benKey, ""}, {"PATCH", "keys/" + benKey, `{"limits":{"requests_per_minute":1}}`},
		{"DELETE", "keys/" + benKey, ""}, {"GET", "keys/" + benKey + "/usage", ""}, {"GET", "usage?key_id=" + benKey, ""},
		{"GET", "usage?owner=team-eng", ""}, {"GET", "accounts/team-eng", ""},
	} {
		if status, body := ann.do(c.method, c.path, c.body); status != http.StatusNotFound {
			t.Errorf("ann %s %s: %d %s, want 404", c.method, c.path, status, body)
		}
	}
	if status, body := ann.do(http.MethodGet, "keys", ""); status != 200 || gjson.Get(body, "data.#").Int() != 1 || gjson.Get(body, "data.0.id").Str != annKey {
		t.Errorf("ann's list: %d %s", status, body)
	}
	// Ann's session with Ben's address in the header oauth2-proxy sets:
	// Caddy drops the client's, so she is still Ann.
	if status, body := ann.do(http.MethodGet, "account", "", "X-Auth-Request-Email", "ben@example.com", "X-Auth-Request-Groups", "eng"); status != 200 ||
		gjson.Get(body, "identity").Str != "ann@example.com" || gjson.Get(body, "account.id").Str != "ann@example.com" {
		t.Errorf("ann with forged headers: %d %s", status, body)
	}
	// Her sign-in's address is on her account, for leak mail.
	if _, body := ann.do(http.MethodGet, "account", ""); gjson.Get(body, "account.contacts.0.email").Str != "ann@example.com" {
		t.Errorf("ann's contacts: %s", body)
	}
	if status, body, _ := adminRequest(http.MethodGet, in.adminURL+"/modelgate/accounts/team-eng/audit", ""); status != 200 ||
		!strings.Contains(body, `"identity":"cy@example.com"`) || !strings.Contains(body, `"key.deleted"`) {
		t.Errorf("team-eng's audit log: %d %s", status, body)
	}
}

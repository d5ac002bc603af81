package integration

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddytest"
	"github.com/caddyserver/certmagic"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/modelgate/modelgate/keys"
	"github.com/modelgate/modelgate/keys/notify/smtptest"
	"github.com/modelgate/modelgate/providers/providertest"
)

const scanningCaddyfile = "../testdata/caddyfiles/scanning.Caddyfile"

// keyRefresh is scanning.Caddyfile's key_refresh.
const keyRefresh = 200 * time.Millisecond

// reporterKey is a test reporter's signing key, its public half written to
// a PEM file the Caddyfile names.
type reporterKey struct {
	id   string
	priv *ecdsa.PrivateKey
}

func newReporterKey(t *testing.T, id, envID, envFile string) reporterKey {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&priv.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), id+".pem")
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(envID, id)
	t.Setenv(envFile, file)
	return reporterKey{id: id, priv: priv}
}

// sign returns the headers a reporter sends with body.
func (k reporterKey) sign(t *testing.T, prefix string, body []byte) http.Header {
	t.Helper()
	digest := sha256.Sum256(body)
	sig, err := ecdsa.SignASN1(rand.Reader, k.priv, digest[:])
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set(prefix+"-Public-Key-Identifier", k.id)
	h.Set(prefix+"-Public-Key-Signature", base64.StdEncoding.EncodeToString(sig))
	return h
}

// scanningGateway is a gateway on scanning.Caddyfile, with a key manager of
// its own on the same storage (as another instance would have), an SMTP
// sink and the key_exposed events.
type scanningGateway struct {
	*gateway
	keys   *keys.Manager
	smtp   *smtptest.Server
	github reporterKey
	gitlab reporterKey
}

func startScanningGateway(t *testing.T) *scanningGateway {
	t.Helper()
	fake := providertest.Start(t, providertest.Options{OpenAIKey: openAIKey, AnthropicKey: anthropicKey})
	sink, err := smtptest.Start(smtptest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sink.Close() })
	storage := storageDir(t)
	g := &scanningGateway{
		gateway: &gateway{fake: fake, logDir: t.TempDir()},
		keys:    keys.NewManager(&certmagic.FileStorage{Path: storage}, "modelgate"),
		smtp:    sink,
		github:  newReporterKey(t, "github-test-"+hex.EncodeToString(randomBytes(t, 8)), "MG_GITHUB_KEY_ID", "MG_GITHUB_KEY_FILE"),
		gitlab:  newReporterKey(t, "gitlab-test-"+hex.EncodeToString(randomBytes(t, 8)), "MG_GITLAB_KEY_ID", "MG_GITLAB_KEY_FILE"),
	}
	t.Setenv("MG_FAKE", fake.URL)
	t.Setenv("MG_LOG_DIR", g.logDir)
	t.Setenv("MG_STORAGE", storage)
	t.Setenv("MG_SMTP", sink.Addr)
	t.Setenv("MG_OPENAI_KEY", openAIKey)
	t.Setenv("MG_ALICE_KEY", aliceKey)
	cfg, err := os.ReadFile(scanningCaddyfile)
	if err != nil {
		t.Fatal(err)
	}
	// The Caddyfile stays what the built caddy can load; the test adds a
	// subscription of its own event recorder to the adapted JSON.
	adapted, _, err := caddyconfig.GetAdapter("caddyfile").Adapt(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	adapted, err = sjson.SetRawBytes(adapted, "apps.events", []byte(`{"subscriptions":[{"events":["key_exposed","audit","batch_submitted","batch_completed","batch_failed","batch_cancelled","batch_expired"],"handlers":[{"handler":"modelgate_test_recorder"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	recorded.mu.Lock()
	recorded.events = nil
	recorded.mu.Unlock()
	caddytest.NewTester(t).InitServer(string(adapted), "json")
	return g
}

func init() { caddy.RegisterModule(eventRecorder{}) }

// eventRecorder is an events handler for the tests: it keeps the events.
type eventRecorder struct{}

func (eventRecorder) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "events.handlers.modelgate_test_recorder", New: func() caddy.Module { return new(eventRecorder) }}
}

func (eventRecorder) Handle(_ context.Context, e caddy.Event) error {
	recorded.mu.Lock()
	recorded.events = append(recorded.events, e)
	recorded.mu.Unlock()
	return nil
}

var recorded struct {
	mu     sync.Mutex
	events []caddy.Event
}

func randomBytes(t *testing.T, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// create makes a managed key through the test's own manager, as another
// instance would, and waits until the gateway accepts it: at most
// key_refresh later.
func (g *scanningGateway) create(t *testing.T, nk keys.NewKey) (keys.Key, string) {
	t.Helper()
	k, secret, err := g.keys.Create(context.Background(), nk)
	if err != nil {
		t.Fatalf("Create(%+v): %v", nk, err)
	}
	waitStatus(t, secret, http.StatusOK, "a key created elsewhere to work")
	return k, secret
}

// waitStatus polls GET /v1/models with the key until it gets want, for at
// most ten refresh intervals, and returns how long that took.
func waitStatus(t *testing.T, secret string, want int, what string) time.Duration {
	t.Helper()
	return waitStatusWith(t, gatewayBase+"/v1/models", secret, want, 10*keyRefresh+2*time.Second, what)
}

func getWith(t *testing.T, path, secret string) int {
	t.Helper()
	return statusWith(t, gatewayBase+path, secret)
}

// alert posts a signed alert to path and returns the response's status and
// labels.
func (g *scanningGateway) alert(t *testing.T, path string, hdr http.Header, body []byte) (int, gjson.Result) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://localhost:9080"+path, strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header[k] = v
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var raw json.RawMessage
	_ = json.NewDecoder(res.Body).Decode(&raw)
	return res.StatusCode, gjson.ParseBytes(raw)
}

func alertBody(t *testing.T, tokens ...string) []byte {
	t.Helper()
	var as []map[string]string
	for i, tok := range tokens {
		as = append(as, map[string]string{"token": tok, "type": "modelgate_api_key",
			"url": "https://github.com/octo/repo/blob/abc/config" + string(rune('0'+i)) + ".env", "source": "content"})
	}
	b, err := json.Marshal(as)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func tokenHash(s string) string {
	d := sha256.Sum256([]byte(s))
	return hex.EncodeToString(d[:])
}

// TestIntegrationManagedKeys: managed keys created and deleted on another
// instance (a manager of the same storage) work, and stop working, here
// within key_refresh; a key limited to some models gets 403 for others, in
// live requests and in batches; a wrong checksum is refused as malformed;
// an expired key is refused; static keys keep working.
func TestIntegrationManagedKeys(t *testing.T) {
	g := startScanningGateway(t)
	ctx := context.Background()

	k, secret := g.create(t, keys.NewKey{Name: "ci", Owner: "team-a"})
	if res := post(t, "/v1/chat/completions", secret, `{"model":"oa/gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`); res.StatusCode != 200 {
		wantErrorShape(t, res, 200, "")
	}

	// A wrong checksum: its last character changed.
	bad := secret[:len(secret)-1] + "0"
	if strings.HasSuffix(secret, "0") {
		bad = secret[:len(secret)-1] + "1"
	}
	e := wantErrorShape(t, post(t, "/v1/chat/completions", bad, `{"model":"oa/gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`), 401, "invalid_api_key")
	if !strings.Contains(e.Get("message").Str, "checksum") {
		t.Errorf("a wrong checksum: %s", e.Raw)
	}
	// Well formed but unknown.
	other, err := keys.Generate()
	if err != nil {
		t.Fatal(err)
	}
	e = wantErrorShape(t, post(t, "/v1/chat/completions", other, `{"model":"oa/gpt-4o-mini","messages":[]}`), 401, "invalid_api_key")
	if strings.Contains(e.Get("message").Str, "checksum") {
		t.Errorf("an unknown key: %s", e.Raw)
	}

	// Limited to some models.
	_, limited := g.create(t, keys.NewKey{Name: "mini-only", Models: []string{"oa/gpt-4o-mini", "smartish"}})
	for _, tc := range []struct {
		path, body string
		status     int
	}{
		{"/v1/chat/completions", `{"model":"oa/gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`, 200},
		{"/v1/chat/completions", `{"model":"oa/gpt-4o","messages":[{"role":"user","content":"hi"}]}`, 403},
		{"/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`, 403},
		{"/v1/rerank", `{"model":"oa/rerank","query":"q","documents":["a"]}`, 403},
	} {
		res := post(t, tc.path, limited, tc.body)
		if tc.status == 200 {
			if res.StatusCode != 200 {
				wantErrorShape(t, res, 200, "")
			}
			res.Body.Close()
			continue
		}
		wantErrorShape(t, res, tc.status, "model_not_allowed")
	}
	// A batch of the limited key refuses lines for other models.
	c := sdk(limited)
	f := uploadLines(t, c, []string{chatLine("a", "oa/gpt-4o-mini"), chatLine("b", "oa/gpt-4o")})
	b := newBatch(t, c, f.ID, "/v1/chat/completions")
	b = waitBatch(t, c, b.ID, 10*time.Second, "failed", "completed")
	if b.Status != "failed" || len(b.Errors.Data) != 1 || b.Errors.Data[0].Line != 2 || !strings.Contains(b.Errors.Data[0].Message, "may not use") {
		t.Errorf("limited key's batch: %s", b.RawJSON())
	}

	// Static keys keep working.
	if s := getWith(t, "/v1/models", aliceKey); s != 200 {
		t.Errorf("static key: %d", s)
	}

	// Expired: refused as soon as its time passes.
	soon := time.Now().Add(1500*time.Millisecond).Unix() + 1
	_, expiring := g.create(t, keys.NewKey{Name: "short-lived", ExpiresAt: &soon})
	waitStatus(t, expiring, http.StatusUnauthorized, "an expired key to be refused")

	// Deleted elsewhere: refused within key_refresh.
	if err := g.keys.Delete(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	took := waitStatus(t, secret, http.StatusUnauthorized, "a key deleted elsewhere to be refused")
	t.Logf("a key deleted on another instance was refused here after %v (key_refresh %v)", took, keyRefresh)

	g.assertNoSecretInLogs(t, secret, limited, expiring, bad)
}

// assertNoSecretInLogs reads every log file and fails if one holds a secret.
func (g *scanningGateway) assertNoSecretInLogs(t *testing.T, secrets ...string) {
	t.Helper()
	entries, err := os.ReadDir(g.logDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(g.logDir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range secrets {
			for _, line := range strings.Split(string(b), "\n") {
				if strings.Contains(line, s) || strings.Contains(line, s[4:34]) {
					// The line, with the secret itself cut out.
					t.Errorf("%s holds a secret: %s", e.Name(), strings.ReplaceAll(strings.ReplaceAll(line, s, "<secret>"), s[4:34], "<secret>"))
					break
				}
			}
		}
	}
}

// TestIntegrationSecretScanning: signed alerts mark the reported keys
// exposed, label each token, e-mail the owners once, emit key_exposed, and
// with auto_revoke revoke the key; unsigned or badly signed alerts get 400
// and change nothing.
func TestIntegrationSecretScanning(t *testing.T) {
	g := startScanningGateway(t)
	ctx := context.Background()
	const hook = "/hooks/secret-scanning"

	teamKey, teamSecret := g.create(t, keys.NewKey{Name: "deploy", Owner: "team-a"})
	bobKey, bobSecret := g.create(t, keys.NewKey{Name: "laptop", Owner: "bob@example.com"})
	carolKey, carolSecret := g.create(t, keys.NewKey{Name: "notebook", Owner: "carol"})
	unknown, _ := keys.Generate()
	malformed := unknown[:len(unknown)-6] + "000000"
	if keys.WellFormed(malformed) {
		t.Fatal("the malformed key is well formed")
	}

	// Refused alerts change nothing.
	body := alertBody(t, teamSecret)
	otherKey := newReporterKey(t, g.github.id, "MG_UNUSED_ID", "MG_UNUSED_FILE") // same id, other key
	changed := append(slices.Clone(body), '\n')
	for _, tc := range []struct {
		name string
		hdr  http.Header
		body []byte
	}{
		{"unsigned", http.Header{}, body},
		{"signed by another key", otherKey.sign(t, "Github", body), body},
		{"body changed after signing", g.github.sign(t, "Github", body), changed},
		{"unknown key identifier", reporterKey{id: "nope", priv: g.github.priv}.sign(t, "Github", body), body},
		{"GitLab's signature with GitHub's headers", g.gitlab.sign(t, "Github", body), body},
		{"signature only", http.Header{"Github-Public-Key-Signature": {"MEQCIA=="}}, body},
	} {
		status, res := g.alert(t, hook, tc.hdr, tc.body)
		if status != 400 || res.Get("error.message").Str == "" {
			t.Errorf("%s: %d %s", tc.name, status, res.Raw)
		}
	}
	if k, _ := g.keys.Get(ctx, teamKey.ID); k.ExposedAt != nil {
		t.Fatalf("a refused alert marked the key exposed: %+v", k)
	}

	// A real alert: two keys, an unknown one, a malformed one.
	body = alertBody(t, teamSecret, unknown, malformed, bobSecret)
	status, res := g.alert(t, hook, g.github.sign(t, "GitHub", body), body)
	if status != 200 {
		t.Fatalf("alert: %d %s", status, res.Raw)
	}
	want := []struct{ token, label string }{
		{teamSecret, "true_positive"}, {unknown, "false_positive"}, {malformed, "false_positive"}, {bobSecret, "true_positive"},
	}
	if n := len(res.Array()); n != len(want) {
		t.Fatalf("labels: %s", res.Raw)
	}
	for i, w := range want {
		l := res.Array()[i]
		if l.Get("token_hash").Str != tokenHash(w.token) || l.Get("label").Str != w.label || l.Get("token_type").Str != "modelgate_api_key" {
			t.Errorf("label %d = %s, want %s", i, l.Raw, w.label)
		}
	}
	if strings.Contains(res.Raw, teamSecret) {
		t.Error("the answer holds a secret")
	}
	for _, id := range []string{teamKey.ID, bobKey.ID} {
		k, err := g.keys.Get(ctx, id)
		if err != nil || k.ExposedAt == nil || k.Exposure == nil || k.Exposure.Reporter != "github" || !strings.HasPrefix(k.Exposure.URL, "https://github.com/octo/repo/") {
			t.Errorf("key %s after the alert: %+v, %v", id, k, err)
		}
	}
	// Not revoked: the key still works.
	if s := getWith(t, "/v1/models", teamSecret); s != 200 {
		t.Errorf("an exposed key without auto_revoke: %d", s)
	}

	// The owners are told: team-a through its notify address, bob at his
	// own address.
	mails, err := g.smtp.Wait(ctxTimeout(t, 10*time.Second), 2)
	if err != nil {
		t.Fatal(err)
	}
	byTo := map[string]string{}
	for _, m := range mails {
		byTo[strings.Join(m.To, ",")] = string(m.Data)
	}
	for to, k := range map[string]keys.Key{"a-owner@example.com": teamKey, "bob@example.com": bobKey} {
		m, ok := byTo[to]
		if !ok {
			t.Errorf("no mail to %s; mails to %v", to, mapKeys(byTo))
			continue
		}
		for _, s := range []string{k.Name, k.Hint, "https://gateway.example/account/keys/", "GitHub", "https://github.com/octo/repo/"} {
			if !strings.Contains(unfold(m), s) {
				t.Errorf("mail to %s lacks %q:\n%s", to, s, m)
			}
		}
	}

	// GitLab's alert for carol's key: signed with GitLab's key and headers;
	// carol is not an address, so notify_default is told. The team key is
	// reported again and not mailed again.
	body = alertBody(t, carolSecret, teamSecret)
	status, res = g.alert(t, hook, g.gitlab.sign(t, "Gitlab", body), body)
	if status != 200 || res.Get("0.label").Str != "true_positive" || res.Get("1.label").Str != "true_positive" {
		t.Fatalf("GitLab alert: %d %s", status, res.Raw)
	}
	mails, err = g.smtp.Wait(ctxTimeout(t, 10*time.Second), 3)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(mails[2].To, ","); got != "security@example.com" || !strings.Contains(unfold(string(mails[2].Data)), "GitLab") {
		t.Errorf("third mail to %s:\n%s", got, mails[2].Data)
	}
	if k, _ := g.keys.Get(ctx, carolKey.ID); k.ExposedAt == nil || k.Exposure.Reporter != "gitlab" {
		t.Errorf("carol's key: %+v", k)
	}

	// auto_revoke: the key is revoked at once on this instance.
	revKey, revSecret := g.create(t, keys.NewKey{Name: "leaky", Owner: "dave"})
	body = alertBody(t, revSecret)
	status, res = g.alert(t, hook+"/revoke", g.github.sign(t, "Github", body), body)
	if status != 200 || res.Get("0.label").Str != "true_positive" {
		t.Fatalf("auto_revoke alert: %d %s", status, res.Raw)
	}
	if s := getWith(t, "/v1/models", revSecret); s != 401 {
		t.Errorf("a revoked key: %d", s)
	}
	if _, err := g.keys.Get(ctx, revKey.ID); err == nil {
		t.Error("the revoked key is still in storage")
	}
	mails, err = g.smtp.Wait(ctxTimeout(t, 10*time.Second), 4)
	if err != nil {
		t.Fatal(err)
	}
	if m := unfold(string(mails[3].Data)); !strings.Contains(m, "leaky") || !strings.Contains(strings.ToLower(m), "revoked") {
		t.Errorf("auto_revoke mail:\n%s", m)
	}
	if len(g.smtp.Messages()) != 4 {
		t.Errorf("%d mails, want 4 (a key reported twice is told once)", len(g.smtp.Messages()))
	}

	// Events: one key_exposed per newly exposed key.
	recorded.mu.Lock()
	var ids []string
	for _, e := range recorded.events {
		if e.Name() == "key_exposed" {
			ids = append(ids, e.Data["key_id"].(string))
		}
	}
	recorded.mu.Unlock()
	slices.Sort(ids)
	wantIDs := []string{teamKey.ID, bobKey.ID, carolKey.ID, revKey.ID}
	slices.Sort(wantIDs)
	if !slices.Equal(ids, wantIDs) {
		t.Errorf("key_exposed events for %v, want %v", ids, wantIDs)
	}

	// No secret in any mail or log.
	for _, m := range g.smtp.Messages() {
		for _, s := range []string{teamSecret, bobSecret, carolSecret, revSecret} {
			if strings.Contains(string(m.Data), s) || strings.Contains(string(m.Data), s[4:34]) {
				t.Errorf("a mail holds a secret:\n%s", m.Data)
			}
		}
	}
	g.assertNoSecretInLogs(t, teamSecret, bobSecret, carolSecret, revSecret, unknown)
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// unfold undoes quoted-printable soft line breaks, enough to search a mail.
func unfold(s string) string {
	s = strings.ReplaceAll(s, "=\r\n", "")
	return strings.ReplaceAll(s, "=3D", "=")
}

func mapKeys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestIntegrationExposedInRequests: a managed key that shows up where it
// must never be — in a prompt, in a batch line, in a URL's query — is marked
// exposed with where it was seen, key_exposed is emitted and its owner
// mailed as for a partner alert; a key with a broken checksum, or one that
// is no managed key, changes nothing; the request itself is served.
func TestIntegrationExposedInRequests(t *testing.T) {
	g := startScanningGateway(t)
	c := sdk(aliceKey)
	ctx := context.Background()
	pasted, pastedSecret := g.create(t, keys.NewKey{Name: "pasted", Owner: "team-a"})
	inBatch, inBatchSecret := g.create(t, keys.NewKey{Name: "batched", Owner: "team-a"})
	inURL, inURLSecret := g.create(t, keys.NewKey{Name: "queried", Owner: "team-a"})
	stranger, _ := keys.Generate()

	res, err := c.Chat.Completions.New(ctx, userChat("oa/gpt-4o-mini", "debug this: OPENAI_API_KEY="+pastedSecret+" and "+stranger))
	if err != nil || res.Choices[0].Message.Content == "" {
		t.Fatalf("the request with a key in it was not served: %v", err)
	}
	f := uploadLines(t, c, []string{chatLine("x", "oa/gpt-4o-mini"),
		`{"custom_id":"y","method":"POST","url":"/v1/chat/completions","body":{"model":"oa/gpt-4o-mini","messages":[{"role":"user","content":"use ` + inBatchSecret + `"}]}}`})
	waitBatch(t, c, newBatch(t, c, f.ID, "/v1/chat/completions").ID, 20*time.Second, "completed")
	if status := getWith(t, "/v1/models?api_key="+inURLSecret, aliceKey); status != 200 {
		t.Fatalf("GET with a key in the query: %d", status)
	}

	for _, tc := range []struct {
		k      keys.Key
		source string
	}{
		{pasted, "the request content of POST /v1/chat/completions, sent by key alice"},
		{inBatch, "the request content of batch "},
		{inURL, "the URL query of GET /v1/models, sent by key alice"},
	} {
		var got keys.Key
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if got, err = g.keys.Get(ctx, tc.k.ID); err == nil && got.ExposedAt != nil {
				break
			}
		}
		if got.ExposedAt == nil || got.Exposure == nil || got.Exposure.Reporter != "modelgate" || !strings.Contains(got.Exposure.Source, tc.source) {
			t.Errorf("%s: exposure %+v, want reporter modelgate and source %q", tc.k.Name, got.Exposure, tc.source)
		}
	}
	mails, err := g.smtp.Wait(ctxTimeout(t, 10*time.Second), 3)
	if err != nil {
		t.Fatalf("mails: %v (%d)", err, len(g.smtp.Messages()))
	}
	for _, m := range mails {
		if strings.Join(m.To, ",") != "a-owner@example.com" || !strings.Contains(unfold(string(m.Data)), "found in a request to the gateway") {
			t.Errorf("mail to %v:\n%s", m.To, m.Data)
		}
	}
	recorded.mu.Lock()
	n := 0
	for _, e := range recorded.events {
		if e.Name() == "key_exposed" && e.Data["reporter"] == "modelgate" {
			n++
		}
	}
	recorded.mu.Unlock()
	if n != 3 {
		t.Errorf("%d key_exposed events from the gateway, want 3", n)
	}
	g.assertNoSecretInLogs(t, pastedSecret, inBatchSecret, inURLSecret)
}

// TestIntegrationFakeKeysInRequest: a prompt full of well-formed managed
// keys that exist nowhere (anyone can write them: the checksum is public)
// is served, and the real keys among them are still marked exposed and
// their owner told: one the gateway knows, after all the fakes, and one
// another instance created just now, first in the prompt. The gateway
// looks up at most 16 of the keys it does not know in storage; the rest
// are counted in caddy_modelgate_exposure_checks_skipped_total.
func TestIntegrationFakeKeysInRequest(t *testing.T) {
	g := startScanningGateway(t)
	ctx := context.Background()
	known, knownSecret := g.create(t, keys.NewKey{Name: "known", Owner: "team-a"})
	elsewhere, elsewhereSecret, err := g.keys.Create(ctx, keys.NewKey{Name: "elsewhere", Owner: "team-a"})
	if err != nil {
		t.Fatal(err)
	}
	const fakes = 5000
	var prompt strings.Builder
	prompt.WriteString(elsewhereSecret + " ")
	for range fakes {
		k, err := keys.Generate()
		if err != nil {
			t.Fatal(err)
		}
		prompt.WriteString(k + " ")
	}
	prompt.WriteString(knownSecret)

	const capped = `caddy_modelgate_exposure_checks_skipped_total{reason="request_cap"}`
	before := metricValue(scrapeMetrics(t), capped)
	c := sdk(aliceKey)
	res, err := c.Chat.Completions.New(ctx, userChat("oa/gpt-4o-mini", prompt.String()))
	if err != nil || res.Choices[0].Message.Content == "" {
		t.Fatalf("the request with fake keys in it was not served: %v", err)
	}
	for _, k := range []keys.Key{known, elsewhere} {
		var got keys.Key
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if got, err = g.keys.Get(ctx, k.ID); err == nil && got.ExposedAt != nil {
				break
			}
		}
		if got.ExposedAt == nil || !strings.Contains(got.Exposure.Source, "the request content of POST /v1/chat/completions, sent by key alice") {
			t.Errorf("%s: exposure %+v, want it marked exposed", k.Name, got.Exposure)
		}
	}
	if _, err := g.smtp.Wait(ctxTimeout(t, 10*time.Second), 2); err != nil {
		t.Fatalf("mails: %v (%d)", err, len(g.smtp.Messages()))
	}
	// 16 lookups: the key from elsewhere and 15 fakes; or 16 fakes, if
	// the gateway's refresh (every 200ms here) loaded that key first.
	if got := metricValue(scrapeMetrics(t), capped) - before; got != fakes-15 && got != fakes-16 {
		t.Errorf("%s grew by %v, want %d (or %d)", capped, got, fakes-15, fakes-16)
	}
	g.assertNoSecretInLogs(t, knownSecret, elsewhereSecret)
}

// TestIntegrationForgedAlertsKeyListDown: while the reporter's key list
// cannot be fetched, forged alerts (signed with a key the reporter does
// not list) get 503 and do not each cause a fetch: one fetch for a burst
// of concurrent ones and the sequential ones after it (the next waits
// a second, doubling at each failure). Once the list is back, the next
// fetch due gets it and a real alert is answered.
func TestIntegrationForgedAlertsKeyListDown(t *testing.T) {
	real := newReporterKey(t, "github-list-"+hex.EncodeToString(randomBytes(t, 8)), "MG_LIST_KEY_ID", "MG_LIST_KEY_FILE")
	forger := newReporterKey(t, "github-forged-"+hex.EncodeToString(randomBytes(t, 8)), "MG_FORGED_KEY_ID", "MG_FORGED_KEY_FILE")
	der, err := x509.MarshalPKIXPublicKey(&real.priv.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	var fetches atomic.Int64
	var up atomic.Bool
	list := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		if !up.Load() {
			http.Error(w, "unavailable", http.StatusServiceUnavailable)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"public_keys": []map[string]any{{
			"key_identifier": real.id, "key": string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})), "is_current": true,
		}}})
	}))
	defer list.Close()
	caddytest.NewTester(t).InitServer(fmt.Sprintf(`{
	admin localhost:2999
	http_port 9080
	https_port 9443
	grace_period 1ns
	skip_install_trust
	modelgate {
		storage file_system %s
	}
}
http://localhost:9080 {
	modelgate_secret_scanning /hooks/secret-scanning {
		github {
			keys_url %s/keys
		}
	}
}`, storageDir(t), list.URL), "caddyfile")

	unknown, _ := keys.Generate()
	body := alertBody(t, unknown)
	post := func(k reporterKey) (int, gjson.Result) {
		req, _ := http.NewRequest(http.MethodPost, gatewayBase+"/hooks/secret-scanning", strings.NewReader(string(body)))
		for name, v := range k.sign(t, "Github", body) {
			req.Header[name] = v
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return 0, gjson.Result{}
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, gjson.ParseBytes(b)
	}

	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if status, b := post(forger); status != http.StatusServiceUnavailable || b.Get("error.type").Str != "server_error" {
				t.Errorf("a forged alert while the key list is down: %d %s", status, b.Raw)
			}
		})
	}
	wg.Wait()
	for range 50 {
		if status, _ := post(forger); status != http.StatusServiceUnavailable {
			t.Fatalf("a forged alert after the burst: %d", status)
		}
	}
	if n := fetches.Load(); n != 1 {
		t.Errorf("%d fetches of the key list for 100 forged alerts, want 1", n)
	}

	up.Store(true)
	time.Sleep(1100 * time.Millisecond) // the wait after one failure
	status, labels := post(real)
	if status != http.StatusOK || labels.Get("0.label").Str != "false_positive" {
		t.Fatalf("a real alert once the list is back: %d %s", status, labels.Raw)
	}
	if status, _ := post(forger); status != http.StatusBadRequest {
		t.Errorf("a forged alert with the list fetched: %d, want 400", status)
	}
	if n := fetches.Load(); n != 2 {
		t.Errorf("%d fetches, want 2", n)
	}
}

package integration

import (
	"context"
	"encoding/base64"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/keys"
)

// chromium finds the browser for the page test: MODELGATE_CHROMIUM, else
// Debian's chromium on the PATH. Without one the test skips, unless
// MODELGATE_REQUIRE_BROWSER=1 (the test script sets it) makes it fail.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("MODELGATE_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("MODELGATE_REQUIRE_BROWSER") == "1" {
		t.Fatal("no chromium on the PATH (apt-get install chromium), and MODELGATE_REQUIRE_BROWSER=1")
	}
	t.Skip("no chromium on the PATH: apt-get install chromium to run the key settings page test")
	return ""
}

// artifactDir is where the page test saves its screenshot:
// MODELGATE_ARTIFACTS, else .artifacts/ at the repository's root.
func artifactDir(t *testing.T) string {
	dir := os.Getenv("MODELGATE_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", ".artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestUIKeySettingsPage drives the key settings page in headless Chromium
// as the account holder would, where it is served: on a site behind
// basic_auth (modelgate_key_settings) and on the admin endpoint (whose
// origins let a navigation in, see scanning.Caddyfile). It saves a
// screenshot of the first.
func TestUIKeySettingsPage(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a browser")
	}
	exe := chromium(t)
	g := startScanningGateway(t)

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.NoSandbox, // CI runs as root
		chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
	)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	ctx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	browserCtx, cancelBrowser := chromedp.NewContext(ctx, chromedp.WithLogf(t.Logf))
	defer cancelBrowser()
	if err := chromedp.Do(browserCtx); err != nil { // start the browser
		t.Fatal(err)
	}

	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte(settingsUser+":"+settingsPassword))
	t.Run("site", func(t *testing.T) {
		drivePage(t, browserCtx, g.keys, settingsURL, gatewayBase, basic, "laptop", "key-settings.png")
	})
	t.Run("admin endpoint", func(t *testing.T) {
		drivePage(t, browserCtx, g.keys, adminURL+"/modelgate/", adminURL, "", "deploy-bot", "")
	})
}

// drivePage opens the key settings page at pageURL (of origin) in a new tab
// of the browser and: the list shows a key there is, flagged with where it
// leaked once km marked it exposed; it creates the key name
// and shows its secret once with a working copy button; lists the new key,
// which works on the gateway at once; forgets the secret on "Done"; deletes
// the key only after the confirmation (cancel keeps it). Every request the
// page makes stays under pageURL, and no script error or CSP violation
// happens. authorization, if set, is sent with every request, as a browser
// does once its user typed the basic_auth credential into its prompt; shot,
// if set, names the screenshot to save.
func drivePage(t *testing.T, browserCtx context.Context, km *keys.Manager, pageURL, origin, authorization, name, shot string) {
	status, body, _ := admin(t, http.MethodPost, "/modelgate/keys", `{"name":"batch-worker","owner":"data-team","models":["smart","oa/*"]}`)
	if status != http.StatusCreated {
		t.Fatalf("creating the first key: %d %s", status, body)
	}
	firstID := gjson.Get(body, "id").Str
	// Secret scanning found it in public (marked as another instance would).
	leak := keys.Exposure{Reporter: "github", Type: "modelgate_api_key", URL: "https://github.com/octo/app/blob/main/.env", Source: "commit"}
	if _, _, err := km.MarkExposed(context.Background(), firstID, leak); err != nil {
		t.Fatal(err)
	}
	ctx, cancelTab := chromedp.NewContext(browserCtx)
	defer cancelTab()

	// What the page requests, and what it reports as errors.
	var (
		mu       sync.Mutex
		requests []string
		problems []string
	)
	if err := chromedp.Listen(ctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch ev := ev.(type) {
		case *network.EventRequestWillBeSent:
			requests = append(requests, ev.Request.URL)
		case *runtime.EventExceptionThrown:
			problems = append(problems, "exception: "+ev.ExceptionDetails.Text)
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeWarning {
				problems = append(problems, "console."+string(ev.Type))
			}
		case *cdplog.EventEntryAdded: // CSP violations, failed loads
			if ev.Entry.Level == cdplog.EntryLevelError || ev.Entry.Level == cdplog.EntryLevelWarning {
				problems = append(problems, string(ev.Entry.Source)+": "+ev.Entry.Text)
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"clipboard-read", "clipboard-write"} {
		if _, err := chromedp.CallBrowser(ctx, browser.SetPermission, browser.SetPermissionParams{
			Permission: &browser.PermissionDescriptor{Name: name},
			Setting:    browser.PermissionSettingGranted,
			Origin:     origin,
		}); err != nil {
			t.Fatalf("granting %s: %v", name, err)
		}
	}
	if authorization != "" {
		if _, err := chromedp.Call(ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{
			Headers: network.Headers{"Authorization": authorization},
		}); err != nil {
			t.Fatal(err)
		}
	}
	run := func(step string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			mu.Lock()
			defer mu.Unlock()
			t.Fatalf("%s: %v\nrequests: %q\npage problems: %q", step, err, requests, problems)
		}
	}
	row := func(id string) string { return `tr[data-id="` + id + `"]` }

	// The list shows the key there is.
	run("open the page",
		chromedp.Navigate(pageURL),
		chromedp.WaitVisible(chromedp.CSS(row(firstID))),
	)
	if text, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(row(firstID)))); err != nil ||
		!strings.Contains(text, "batch-worker") || !strings.Contains(text, "data-team") || !strings.Contains(text, "smart, oa/*") ||
		!strings.Contains(text, "Exposed") || !strings.Contains(text, leak.URL) {
		t.Fatalf("the first key's row: %q %v", text, err)
	}

	// Create a named key: the secret is shown once, with a copy button.
	run("create a key",
		chromedp.SendKeys(chromedp.ID("name"), name),
		chromedp.SendKeys(chromedp.ID("owner"), "alice"),
		chromedp.SendKeys(chromedp.ID("models"), "oa/*"),
		chromedp.Click(chromedp.ID("create")),
		chromedp.WaitVisible(chromedp.ID("secret-box")),
		chromedp.WaitVisible(chromedp.ID("copy")),
	)
	secret, err := chromedp.Run(ctx, chromedp.Value(chromedp.ID("secret")))
	if err != nil || !regexp.MustCompile(`^`+keys.Pattern+`$`).MatchString(secret) {
		t.Fatalf("the shown secret: %q %v", secret, err)
	}
	run("copy it", chromedp.Click(chromedp.ID("copy")), chromedp.WaitVisible(chromedp.ID("copied")))
	clip, err := chromedp.Run(ctx, chromedp.Evaluate[string](`navigator.clipboard.readText()`, chromedp.EvalAwaitPromise))
	if err != nil || clip != secret {
		t.Errorf("the clipboard holds %q (%v), not the secret", clip, err)
	}

	// The new key is listed, exists on the admin API and works at once.
	status, body, _ = admin(t, http.MethodGet, "/modelgate/keys", "")
	created := gjson.Get(body, `data.#(name=="`+name+`")`)
	if status != 200 || created.Get("owner").Str != "alice" || created.Get("models.0").Str != "oa/*" {
		t.Fatalf("the admin API's list: %d %s", status, body)
	}
	id := created.Get("id").Str
	run("see it listed", chromedp.WaitVisible(chromedp.CSS(row(id))))
	if text, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(row(id)))); err != nil ||
		!strings.Contains(text, name) || !strings.Contains(text, "mgk_..."+secret[36:]) || strings.Contains(text, secret) {
		t.Fatalf("the new key's row: %q %v", text, err)
	}
	if s := getWith(t, "/v1/models", secret); s != 200 {
		t.Fatalf("the key made on the page: %d", s)
	}
	if shot != "" {
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(artifactDir(t), shot)
		if err := os.WriteFile(file, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s", file)
	}

	// "Done" forgets the secret: it is on the page no more.
	run("dismiss the secret", chromedp.Click(chromedp.ID("done")), chromedp.WaitNotVisible(chromedp.ID("secret-box")))
	if html, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.documentElement.outerHTML + document.getElementById("secret").value`)); err != nil || strings.Contains(html, secret) {
		t.Errorf("the page still holds the secret (%v)", err)
	}

	// Delete asks first; cancel keeps the key.
	run("delete, then cancel",
		chromedp.Click(chromedp.CSS(row(id)+" button.delete")),
		chromedp.WaitVisible(chromedp.ID("confirm")),
		chromedp.Click(chromedp.ID("confirm-cancel")),
		chromedp.WaitNotVisible(chromedp.ID("confirm")),
	)
	if status, _, _ = admin(t, http.MethodGet, "/modelgate/keys/"+id, ""); status != 200 {
		t.Fatalf("cancel deleted the key: %d", status)
	}
	run("delete, then confirm",
		chromedp.Click(chromedp.CSS(row(id)+" button.delete")),
		chromedp.WaitVisible(chromedp.ID("confirm")),
		chromedp.Click(chromedp.ID("confirm-delete")),
		chromedp.WaitNotPresent(chromedp.CSS(row(id))),
	)
	if status, _, _ = admin(t, http.MethodGet, "/modelgate/keys/"+id, ""); status != 404 {
		t.Errorf("the deleted key on the admin API: %d", status)
	}
	if s := getWith(t, "/v1/models", secret); s != 401 {
		t.Errorf("the deleted key: %d", s)
	}
	run("the other key stays", chromedp.WaitVisible(chromedp.CSS(row(firstID))))

	mu.Lock()
	defer mu.Unlock()
	if len(problems) > 0 {
		t.Errorf("the page reported: %q", problems)
	}
	for _, u := range requests {
		if !strings.HasPrefix(u, pageURL) && !strings.HasPrefix(u, "data:") {
			t.Errorf("the page requested %s, outside its own route", u)
		}
	}
	if len(requests) < 4 {
		t.Errorf("requests seen: %q", requests)
	}
}

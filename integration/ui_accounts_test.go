package integration

import (
	"context"
	"encoding/base64"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/tidwall/gjson"
)

// startBrowser starts headless Chromium for a page test.
func startBrowser(t *testing.T) context.Context {
	t.Helper()
	exe := chromium(t)
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
	t.Cleanup(cancel)
	ctx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(cancelAlloc)
	browserCtx, cancelBrowser := chromedp.NewContext(ctx, chromedp.WithLogf(t.Logf))
	t.Cleanup(cancelBrowser)
	if err := chromedp.Do(browserCtx); err != nil { // start the browser
		t.Fatal(err)
	}
	return browserCtx
}

// holderTab is a tab of the browser signed in to the key settings page as
// an account holder, as a browser is once its user typed the basic_auth
// credential into its prompt.
func holderTab(t *testing.T, browserCtx context.Context, user string) (context.Context, func(string, ...chromedp.Action[chromedp.Void])) {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browserCtx)
	t.Cleanup(cancel)
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+user+"-test-password"))
	if _, err := chromedp.Call(ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{
		Headers: network.Headers{"Authorization": basic},
	}); err != nil {
		t.Fatal(err)
	}
	run := func(step string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s, %s: %v", user, step, err)
		}
	}
	return ctx, run
}

// TestUIAccounts: two account holders, each in a tab of real Chromium on
// the key settings page of one site. Each page says whose account it is
// and shows only that account's keys, files and audit log; a key one
// creates on the page never appears on the other's, and the other's
// page script gets 404 for it; a viewer of the first account sees its
// keys without a create form or delete buttons.
func TestUIAccounts(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a browser")
	}
	startScanningGateway(t)
	browserCtx := startBrowser(t)

	// Each account has a key the operator made, and a file.
	var hSecret, hFirst string
	for _, acct := range []string{"holder", "rival"} {
		status, body, _ := admin(t, http.MethodPost, "/modelgate/keys", `{"name":"`+acct+`-first","owner":"`+acct+`"}`)
		if status != http.StatusCreated {
			t.Fatalf("%d %s", status, body)
		}
		uploadFile(t, gjson.Get(body, "key").Str, acct+"-input.jsonl")
		if acct == "holder" {
			hSecret, hFirst = gjson.Get(body, "key").Str, gjson.Get(body, "id").Str
		}
	}
	row := func(id string) string { return `#keys tr[data-id="` + id + `"]` }
	text := func(ctx context.Context, sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("%s: %v", sel, err)
		}
		return s
	}

	hCtx, hRun := holderTab(t, browserCtx, "holder")
	hRun("open the page",
		chromedp.Navigate(settingsURL),
		chromedp.WaitVisible(chromedp.CSS(row(hFirst))),
		chromedp.WaitVisible(chromedp.CSS(`#files tr[data-id]`)),
	)
	if who := text(hCtx, "#whoami"); who != "Account holder · signed in as holder (owner)" {
		t.Errorf("holder's page says %q", who)
	}
	hRun("create a key",
		chromedp.SendKeys(chromedp.ID("name"), "holder-laptop"),
		chromedp.Click(chromedp.ID("create")),
		chromedp.WaitVisible(chromedp.ID("secret-box")),
		chromedp.WaitVisible(chromedp.CSS(`#audit tr[data-action="key.created"]`)),
	)
	_, body, _ := admin(t, http.MethodGet, "/modelgate/keys?account=holder", "")
	laptop := gjson.Get(body, `data.#(name=="holder-laptop")`)
	if laptop.Get("owner").Str != "holder" || laptop.Get("created_by").Str != "holder" {
		t.Fatalf("the key made on holder's page: %s", body)
	}
	hRun("see it listed", chromedp.WaitVisible(chromedp.CSS(row(laptop.Get("id").Str))))
	if files := text(hCtx, "#files"); !strings.Contains(files, "holder-input.jsonl") || strings.Contains(files, "rival") {
		t.Errorf("holder's files: %q", files)
	}

	rCtx, rRun := holderTab(t, browserCtx, "rival")
	rRun("open the page",
		chromedp.Navigate(settingsURL),
		chromedp.WaitVisible(chromedp.CSS(`#keys tr[data-id]`)),
		chromedp.WaitVisible(chromedp.CSS(`#audit tr[data-action]`)),
		chromedp.WaitVisible(chromedp.CSS(`#files tr[data-id]`)),
	)
	if who := text(rCtx, "#whoami"); who != "Account rival · signed in as rival (owner)" {
		t.Errorf("rival's page says %q", who)
	}
	for sel, never := range map[string][]string{
		"#keys": {"holder", laptop.Get("id").Str, hFirst}, "#files": {"holder-input"}, "#audit": {"holder"},
	} {
		got := text(rCtx, sel)
		for _, s := range never {
			if strings.Contains(got, s) {
				t.Errorf("rival's %s shows %q: %q", sel, s, got)
			}
		}
	}
	if n, err := chromedp.Run(rCtx, chromedp.Evaluate[int](`document.querySelectorAll("#keys tr.key").length`)); err != nil || n != 1 {
		t.Errorf("rival's page lists %d keys (%v), want its one", n, err)
	}
	// The page's own script, asking for holder's key: 404.
	for _, method := range []string{"GET", "DELETE", "PATCH"} {
		status, err := chromedp.Run(rCtx, chromedp.Evaluate[int](`fetch("api/keys/`+laptop.Get("id").Str+`", {method: "`+method+`", headers: {"Content-Type": "application/json"}, body: "`+method+`" === "GET" ? undefined : "{}"}).then(r => r.status)`, chromedp.EvalAwaitPromise))
		if err != nil || status != 404 {
			t.Errorf("rival's page %s holder's key: %d %v", method, status, err)
		}
	}
	if s := getWith(t, "/v1/models", hSecret); s != 200 {
		t.Errorf("holder's key after rival's page tried: %d", s)
	}
	png, err := chromedp.Run(rCtx, chromedp.FullScreenshot(100))
	if err == nil {
		file := filepath.Join(artifactDir(t), "accounts-rival.png")
		if err := os.WriteFile(file, png, 0o644); err == nil {
			t.Logf("screenshot: %s", file)
		}
	}

	// A viewer of holder's account: its keys, nothing to change them with.
	vCtx, vRun := holderTab(t, browserCtx, "teammate")
	vRun("open the page", chromedp.Navigate(settingsURL), chromedp.WaitVisible(chromedp.CSS(row(hFirst))))
	if who := text(vCtx, "#whoami"); who != "Account holder · signed in as teammate (viewer)" {
		t.Errorf("teammate's page says %q", who)
	}
	hidden, err := chromedp.Run(vCtx, chromedp.Evaluate[bool](`document.getElementById("create-card").hidden && document.querySelectorAll("#keys button.delete").length === 0`))
	if err != nil || !hidden {
		t.Errorf("a viewer is offered to create or delete keys (%v)", err)
	}
}

package integration

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
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
	"github.com/modelgate/modelgate/pricing"
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
		drivePage(t, browserCtx, g.keys, settingsURL, gatewayBase, basic, settingsUser, "laptop", "key-settings.png")
	})
	t.Run("admin endpoint", func(t *testing.T) {
		drivePage(t, browserCtx, g.keys, adminURL+"/modelgate/", adminURL, "", "", "deploy-bot", "")
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
// does once its user typed the basic_auth credential into its prompt, and
// account is then the account holder's account (the keys are its); empty,
// the page is the operator's. shot, if set, names the screenshot to save.
func drivePage(t *testing.T, browserCtx context.Context, km *keys.Manager, pageURL, origin, authorization, account, name, shot string) {
	firstOwner, owner := "data-team", "alice"
	if account != "" {
		firstOwner, owner = account, account
	}
	status, body, _ := admin(t, http.MethodPost, "/modelgate/keys", `{"name":"batch-worker","owner":"`+firstOwner+`","models":["smart","oa/*"]}`)
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

	// field reads what the details row of a key shows in one field.
	field := func(id, name string) string {
		t.Helper()
		sel := `tr[data-details-for="` + id + `"] [data-field="` + name + `"]`
		run("see "+name, chromedp.WaitVisible(chromedp.CSS(sel)))
		text, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("%s: %v", sel, err)
		}
		return text
	}

	// The list shows the key there is, with the default limit it follows.
	run("open the page",
		chromedp.Navigate(pageURL),
		chromedp.WaitVisible(chromedp.CSS(row(firstID))),
	)
	if text, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(row(firstID)))); err != nil ||
		!strings.Contains(text, "batch-worker") || !strings.Contains(text, firstOwner) || !strings.Contains(text, "smart, oa/*") ||
		!strings.Contains(text, "Exposed") || !strings.Contains(text, leak.URL) {
		t.Fatalf("the first key's row: %q %v", text, err)
	}
	if rpm, budget := field(firstID, "rpm"), field(firstID, "budget"); rpm != "default: 1000 · 1000 left now" || budget != "none" {
		t.Errorf("the first key's limits: %q, budget %q", rpm, budget)
	}

	// The create form tells what a new key follows by default: the
	// configured limits for keys, and no budget.
	for sel, want := range map[string]string{"limits": "(1000 requests/min)", "budget": "(no budget)"} {
		css := chromedp.CSS(`#new-policy [data-default="` + sel + `"]`)
		run("see the default "+sel, chromedp.WaitVisible(css))
		deadline := time.Now().Add(10 * time.Second)
		for {
			text, err := chromedp.Run(ctx, chromedp.Text(css))
			if err == nil && text == want {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the create form's default %s: %q (%v), want %q", sel, text, err, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	// Create a named key with limits and a budget: the secret is shown
	// once, with a copy button.
	policy := func(sel string) chromedp.CSS { return chromedp.CSS(`#new-policy ` + sel) }
	if account == "" {
		run("name the owner", chromedp.SendKeys(chromedp.ID("owner"), owner))
	} else if visible, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`!document.getElementById("owner-field").hidden`)); err != nil || visible {
		t.Errorf("an account holder is offered an owner field (%v)", err)
	}
	run("create a key",
		chromedp.SendKeys(chromedp.ID("name"), name),
		chromedp.SendKeys(chromedp.ID("models"), "oa/*"),
		chromedp.Click(policy(`input[data-group="limits"][value="own"]`)),
		chromedp.SendKeys(policy(`[data-f="rpm"]`), "120"),
		chromedp.SendKeys(policy(`[data-f="tpm"]`), "60000"),
		chromedp.Click(policy(`input[data-group="budget"][value="own"]`)),
		chromedp.SendKeys(policy(`[data-f="usd"]`), "1.5"),
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
	if status != 200 || created.Get("owner").Str != owner || created.Get("models.0").Str != "oa/*" ||
		created.Get("limits").Raw != `{"requests_per_minute":120,"tokens_per_minute":60000}` || created.Get("budget").Raw != `{"usd":"1.5","period":"month"}` {
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
	refused := checkKeyUsage(t, ctx, run, field, id, secret)
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
	// The requests the API refused on purpose are logged by the browser.
	problems = slices.DeleteFunc(problems, func(p string) bool {
		if refused > 0 && strings.Contains(p, "status of 400") {
			refused--
			return true
		}
		return false
	})
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

// checkKeyUsage follows the key id (secret), just created on the page
// with limits of 120 requests and 60000 tokens a minute and $1.5 a month:
// the page shows them and the whole budget left; once the key made a
// request, an edit of its budget to $2 a day shows the new budget, what
// is left of it after that request, and the request's cost in the 30-day
// chart's bar for today. It returns how many requests of the page the
// API refused on purpose (400).
func checkKeyUsage(t *testing.T, ctx context.Context, run func(string, ...chromedp.Action[chromedp.Void]), field func(id, name string) string, id, secret string) int {
	t.Helper()
	now := time.Now().UTC()
	nextMonth := time.Date(now.Year(), now.Month()+1, 1, 0, 0, 0, 0, time.UTC)
	for name, want := range map[string]string{
		"rpm": "120 · 120 left now", "tpm": "60000 · 60000 left now", "concurrent": "none",
		"budget": "$1.5 per month", "budget-spent": "$0", "budget-left": "$1.5", "spend-total": "$0 · 0 requests",
	} {
		if got := field(id, name); got != want {
			t.Errorf("a new key's %s: %q, want %q", name, got, want)
		}
	}
	_, u, _ := admin(t, http.MethodGet, "/modelgate/keys/"+id+"/usage", "")
	if at := gjson.Get(u, "status.key.budget.resets_at").Int(); at != nextMonth.Unix() {
		t.Errorf("a monthly budget resets at %d, want the first of next month (%s): %s", at, nextMonth, u)
	}
	if got := field(id, "budget-resets"); !strings.Contains(got, nextMonth.Format("2006")) || !strings.HasSuffix(got, "UTC") {
		t.Errorf("a monthly budget resets %q, want the first of next month (%s) in UTC", got, nextMonth)
	}

	// One request, priced at gpt-4o-mini's $0.15 and $0.60 a million.
	status, body, _ := chat(t, secret, chatBody("oa/gpt-4o-mini", "what does this cost", 0))
	if status != 200 {
		t.Fatalf("a request with the page's key: %d %s", status, body)
	}
	in, out := gjson.Get(body, "usage.prompt_tokens").Int(), gjson.Get(body, "usage.completion_tokens").Int()
	cost := pricing.Money(in*150 + out*600)
	today := time.Now().UTC().Format(time.DateOnly)
	// The admin endpoint's view of it, once the request settled.
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, u, _ := admin(t, http.MethodGet, "/modelgate/keys/"+id+"/usage?days=30", "")
		if gjson.Get(u, "status.key.budget.spent_usd").Str == cost.String() && gjson.Get(u, "days.29.requests").Int() == 1 &&
			gjson.Get(u, "days.29.day").Str == today && gjson.Get(u, "days.29.cost_usd").Str == cost.String() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the admin API never showed the request's $%s: %s", cost, u)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// Edit the budget: the dialog shows the key's own settings, refuses
	// an amount that is not one, and saves $2 a day.
	edit := func(sel string) chromedp.CSS { return chromedp.CSS(`#edit-policy ` + sel) }
	run("open the edit dialog",
		chromedp.Click(chromedp.CSS(`tr[data-id="`+id+`"] button.edit`)),
		chromedp.WaitVisible(chromedp.ID("edit")),
	)
	for sel, want := range map[string]string{`[data-f="rpm"]`: "120", `[data-f="tpm"]`: "60000", `[data-f="concurrent"]`: "", `[data-f="usd"]`: "1.5", `[data-f="period"]`: "month"} {
		if v, err := chromedp.Run(ctx, chromedp.Value(edit(sel))); err != nil || v != want {
			t.Errorf("the edit dialog's %s: %q %v, want %q", sel, v, err, want)
		}
	}
	// retype empties a field (chromedp.Clear resets only its value
	// attribute) and types text into it.
	retype := func(sel chromedp.CSS, text string) chromedp.Action[chromedp.Void] {
		return chromedp.Steps(
			func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
				_, err := chromedp.Evaluate[bool](`(document.querySelector(`+strconv.Quote(string(sel))+`).value = "") === ""`)(ctx, tg)
				return chromedp.Void{}, err
			},
			chromedp.SendKeys(sel, text),
		)
	}
	run("a budget that is no amount",
		retype(edit(`[data-f="usd"]`), "lots"),
		chromedp.Click(chromedp.ID("edit-save")),
		chromedp.WaitVisible(chromedp.ID("edit-error")),
		chromedp.WaitVisible(chromedp.ID("edit")),
	)
	// One the API refuses: its message is shown, the dialog stays.
	run("a budget of $0",
		retype(edit(`[data-f="usd"]`), "0"),
		chromedp.Click(chromedp.ID("edit-save")),
	)
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById("edit-error").textContent.includes("budget.usd must be more than 0")`,
		chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Fatalf("the API's refusal of a $0 budget is not shown: %v", err)
	}
	run("save $2 a day",
		retype(edit(`[data-f="usd"]`), "2"),
		chromedp.SetValue(edit(`[data-f="period"]`), "day"),
		chromedp.Click(chromedp.ID("edit-save")),
		chromedp.WaitNotVisible(chromedp.ID("edit")),
	)
	_, k, _ := admin(t, http.MethodGet, "/modelgate/keys/"+id, "")
	if gjson.Get(k, "budget").Raw != `{"usd":"2","period":"day"}` || gjson.Get(k, "limits").Raw != `{"requests_per_minute":120,"tokens_per_minute":60000}` {
		t.Fatalf("after the edit the key is %s", k)
	}
	// The page reloaded its list: the new budget, what today's request
	// left of it, and the request in the chart.
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelector('tr[data-details-for="`+id+`"] [data-field="budget"]')?.textContent === "$2 per day"`,
		chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Fatalf("the page never showed the new budget: %v", err)
	}
	for name, want := range map[string]string{
		"budget-spent": "$" + cost.String(), "budget-left": "$" + (2*pricing.Dollar - cost).String(),
		"spend-total": "$" + cost.String() + " · 1 request",
	} {
		if got := field(id, name); got != want {
			t.Errorf("after the edit, %s: %q, want %q", name, got, want)
		}
	}
	if got := field(id, "rpm"); !strings.HasPrefix(got, "120 · ") {
		t.Errorf("after the edit, rpm: %q", got)
	}
	type bar struct {
		Days   int    `json:"days"`
		Title  string `json:"title"`
		Class  string `json:"class"`
		Height string `json:"height"`
		Label  string `json:"label"`
		Zeros  int    `json:"zeros"`
	}
	js := `(() => {
		const chart = document.querySelector('tr[data-details-for="` + id + `"] svg.chart');
		const g = chart.querySelector('g[data-day="` + today + `"]');
		const rect = g.querySelector("rect.bar");
		return {days: chart.querySelectorAll("g[data-day]").length, title: g.querySelector("title").textContent,
			class: rect.getAttribute("class"), height: rect.getAttribute("height"), label: chart.getAttribute("aria-label"),
			zeros: chart.querySelectorAll("rect.bar.zero").length};
	})()`
	got, err := chromedp.Run(ctx, chromedp.Evaluate[bar](js))
	want := bar{Days: 30, Title: fmt.Sprintf("%s: $%s · 1 request · %d input, %d output tokens", today, cost, in, out),
		Class: "bar", Height: "48", Zeros: 29}
	if err != nil || got.Days != want.Days || got.Title != want.Title || got.Class != want.Class || got.Height != want.Height ||
		got.Zeros != want.Zeros || !strings.Contains(got.Label, "$"+cost.String()+", 1 request") {
		t.Errorf("the chart: %+v %v\nwant %+v", got, err, want)
	}
	return 1
}

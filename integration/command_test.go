package integration

import (
	"bytes"
	"errors"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/keys"
)

// runCaddy runs the built caddy binary with args and returns its stdout,
// its stderr and whether it exited 0.
func runCaddy(t *testing.T, args ...string) (string, string, bool) {
	t.Helper()
	cmd := exec.Command(caddyBinary(t), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		if _, exited := errors.AsType[*exec.ExitError](err); !exited {
			t.Fatalf("caddy %s: %v", strings.Join(args, " "), err)
		}
	}
	return stdout.String(), stderr.String(), err == nil
}

// TestCommandKeys drives `caddy modelgate key create|list|delete` of the
// built binary against a running gateway's admin API: the created key
// works at once, the list shows it without its secret, a deleted key is
// refused, and mistakes exit non-zero with a message.
func TestCommandKeys(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the caddy binary")
	}
	startScanningGateway(t)
	addr := []string{"--address", strings.TrimPrefix(adminURL, "http://")}
	cmd := func(args ...string) []string { return append(append([]string{"modelgate", "key"}, args...), addr...) }

	out, errOut, ok := runCaddy(t, cmd("create", "--name", "cli", "--owner", "team-cli", "--models", "oa/*, smart", "--expires", "720h")...)
	if !ok {
		t.Fatalf("create: %s %s", out, errOut)
	}
	secret := regexp.MustCompile(keys.Pattern).FindString(out)
	id := regexp.MustCompile(`\(key_[0-9A-Za-z]+\)`).FindString(out)
	if secret == "" || id == "" || !strings.Contains(out, "only time") {
		t.Fatalf("create printed: %q", out)
	}
	id = strings.Trim(id, "()")
	if s := getWith(t, "/v1/models", secret); s != 200 {
		t.Fatalf("the created key: %d", s)
	}

	// The table: one row with what the key is, never the secret.
	out, errOut, ok = runCaddy(t, cmd("list")...)
	if !ok || strings.Contains(out, secret) {
		t.Fatalf("list: %q %s", out, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "ID") {
		t.Fatalf("list: %q", out)
	}
	row := strings.Fields(lines[1])
	expires := time.Now().Add(720 * time.Hour).UTC().Format("2006-01-02")
	if row[0] != id || row[1] != "cli" || row[2] != "team-cli" || row[3] != "mgk_..."+secret[36:] ||
		row[4] != "oa/*,smart" || !strings.Contains(lines[1], expires) {
		t.Errorf("list row: %q", lines[1])
	}

	// --json is the admin API's list.
	out, _, ok = runCaddy(t, cmd("list", "--json")...)
	if l := gjson.Parse(out); !ok || l.Get("data.#").Int() != 1 || l.Get("data.0.id").Str != id ||
		l.Get("data.0.models.1").Str != "smart" || strings.Contains(out, secret) {
		t.Errorf("list --json: %q", out)
	}

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no name", []string{"create"}, "--name is required"},
		{"bad expiry", []string{"create", "--name", "x", "--expires", "soon"}, "RFC 3339"},
		{"unknown id", []string{"delete", "key_doesnotexist"}, "404"},
		{"no id", []string{"delete"}, "accepts 1 arg"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, ok := runCaddy(t, cmd(tc.args...)...)
			if ok || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit 0 = %v, stdout %q, stderr %q; want a failure saying %q", ok, out, errOut, tc.want)
			}
		})
	}

	// No admin endpoint there.
	if out, errOut, ok := runCaddy(t, "modelgate", "key", "list", "--address", "127.0.0.1:1"); ok || !strings.Contains(errOut, "connection refused") {
		t.Errorf("without an admin endpoint: exit 0 = %v, stdout %q, stderr %q", ok, out, errOut)
	}

	out, errOut, ok = runCaddy(t, cmd("delete", id)...)
	if !ok || !strings.Contains(out, id) {
		t.Fatalf("delete: %q %s", out, errOut)
	}
	if s := getWith(t, "/v1/models", secret); s != 401 {
		t.Errorf("a deleted key: %d", s)
	}
	if out, _, _ = runCaddy(t, cmd("list")...); strings.Contains(out, id) {
		t.Errorf("the deleted key is listed: %q", out)
	}
}

// TestCommandKeyLimits drives the limits and budget flags of `caddy
// modelgate key create` and `update` of the built binary: a key created
// with limits of its own is held to them at once, an update changes what
// it names and keeps the rest, --default-limits and --default-budget
// return the key to the defaults, and mistakes exit non-zero saying which
// flag.
func TestCommandKeyLimits(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the caddy binary")
	}
	startScanningGateway(t)
	addr := []string{"--address", strings.TrimPrefix(adminURL, "http://")}
	cmd := func(args ...string) []string { return append(append([]string{"modelgate", "key"}, args...), addr...) }
	policy := func(id string) gjson.Result {
		t.Helper()
		status, body, _ := admin(t, http.MethodGet, "/modelgate/keys/"+id, "")
		if status != 200 {
			t.Fatalf("GET key: %d %s", status, body)
		}
		return gjson.Parse(body)
	}

	out, errOut, ok := runCaddy(t, cmd("create", "--name", "limited", "--rpm", "2", "--concurrent", "3", "--budget", "7.5", "--period", "day")...)
	if !ok || !strings.Contains(out, "Limits: its own: rpm 2, tpm none, concurrent 3. Budget: its own: $7.5 per day (UTC).") {
		t.Fatalf("create: %q %s", out, errOut)
	}
	secret := regexp.MustCompile(keys.Pattern).FindString(out)
	id := strings.Trim(regexp.MustCompile(`\(key_[0-9A-Za-z]+\)`).FindString(out), "()")
	if p := policy(id); p.Get("limits").Raw != `{"requests_per_minute":2,"concurrent_requests":3}` || p.Get("budget").Raw != `{"usd":"7.5","period":"day"}` {
		t.Errorf("the created key's policy: %s", p.Raw)
	}
	for i, want := range []int{200, 200, 429} {
		res := post(t, "/v1/chat/completions", secret, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`)
		res.Body.Close()
		if res.StatusCode != want {
			t.Errorf("request %d of a key allowed 2 a minute: %d, want %d", i+1, res.StatusCode, want)
		}
	}

	out, errOut, ok = runCaddy(t, cmd("update", id, "--tpm", "5000", "--period", "month")...)
	if !ok || !strings.Contains(out, "Updated key limited ("+id+")") {
		t.Fatalf("update: %q %s", out, errOut)
	}
	if p := policy(id); p.Get("limits").Raw != `{"requests_per_minute":2,"tokens_per_minute":5000,"concurrent_requests":3}` ||
		p.Get("budget").Raw != `{"usd":"7.5","period":"month"}` {
		t.Errorf("after update --tpm 5000 --period month: %s", p.Raw)
	}
	out, errOut, ok = runCaddy(t, cmd("update", id, "--default-limits", "--default-budget")...)
	if p := policy(id); !ok || p.Get("limits").Exists() || p.Get("budget").Exists() ||
		!strings.Contains(out, "Limits: the defaults for keys. Budget: the default for keys.") {
		t.Errorf("back to the defaults: %q %s; %s", out, errOut, p.Raw)
	}

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no amount", []string{"create", "--name", "x", "--budget", "much"}, "--budget"},
		{"a negative limit", []string{"create", "--name", "x", "--rpm", "-5"}, "--rpm must not be negative"},
		{"nothing to update", []string{"update", id}, "nothing to change"},
		{"an unknown key", []string{"update", "key_doesnotexist", "--rpm", "5"}, "404"},
		{"no id", []string{"update", "--rpm", "5"}, "accepts 1 arg"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, ok := runCaddy(t, cmd(tc.args...)...)
			if ok || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit 0 = %v, stdout %q, stderr %q; want a failure saying %q", ok, out, errOut, tc.want)
			}
		})
	}
}

// TestCommandAccounts drives `caddy modelgate account …` of the built
// binary against a running gateway's admin API, as the operator: the list
// shows an account of a key's owner; set gives it ceilings; suspend stops
// its key and resume lets it work; members are added and removed; the
// audit log shows each change; delete revokes the key; mistakes exit
// non-zero with the admin API's message.
func TestCommandAccounts(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the caddy binary")
	}
	startScanningGateway(t)
	addr := []string{"--address", strings.TrimPrefix(adminURL, "http://")}
	acct := func(args ...string) []string {
		return append(append([]string{"modelgate", "account"}, args...), addr...)
	}
	run := func(args ...string) string {
		t.Helper()
		out, errOut, ok := runCaddy(t, acct(args...)...)
		if !ok {
			t.Fatalf("account %s: %s %s", strings.Join(args, " "), out, errOut)
		}
		return out
	}
	status, body, _ := admin(t, "POST", "/modelgate/keys", `{"name":"cli-key","owner":"team-cli"}`)
	if status != 201 {
		t.Fatalf("%d %s", status, body)
	}
	secret := gjson.Get(body, "key").Str

	if out := run("list"); !regexp.MustCompile(`(?m)^team-cli\s+1\s+0\s+0\s+-\s+active$`).MatchString(out) {
		t.Errorf("list:\n%s", out)
	}
	if out := run("set", "team-cli", "--rpm", "600", "--budget", "100", "--period", "month", "--email", "billing@team-cli.example"); !strings.Contains(out, "rpm 600 budget 100 month") {
		t.Errorf("set: %s", out)
	}
	run("suspend", "team-cli", "--reason", "invoice overdue")
	if s := getWith(t, "/v1/models", secret); s != 403 {
		t.Errorf("the suspended account's key: %d", s)
	}
	if out := run("show", "team-cli"); !strings.Contains(out, "suspended") || !strings.Contains(out, "invoice overdue") ||
		!strings.Contains(out, "billing@team-cli.example") || !strings.Contains(out, "Ceilings:  rpm 600 budget 100 month") {
		t.Errorf("show:\n%s", out)
	}
	run("resume", "team-cli")
	if s := getWith(t, "/v1/models", secret); s != 200 {
		t.Errorf("the resumed account's key: %d", s)
	}
	run("member", "add", "team-cli", "dana@example.com", "admin")
	if out := run("show", "team-cli"); !regexp.MustCompile(`dana@example.com\s+admin\s+api`).MatchString(out) {
		t.Errorf("show after member add:\n%s", out)
	}
	run("member", "remove", "team-cli", "dana@example.com")
	out := run("audit", "team-cli")
	for _, action := range []string{"member.removed", "member.added", "account.resumed", "account.suspended", "account.updated", "key.created"} {
		if !strings.Contains(out, action) {
			t.Errorf("the audit log lacks %s:\n%s", action, out)
		}
	}
	if out := run("delete", "team-cli"); !strings.Contains(out, "1 key revoked") {
		t.Errorf("delete: %s", out)
	}
	if s := getWith(t, "/v1/models", secret); s != 401 {
		t.Errorf("the deleted account's key: %d", s)
	}
	for _, bad := range [][]string{{"member", "add", "team-x", "erin", "boss"}, {"set", "team-x", "--budget", "25", "--period", "week"}, {"resume", "team-cli"}} {
		if out, errOut, ok := runCaddy(t, acct(bad...)...); ok || errOut == "" {
			t.Errorf("account %s: exit 0 (%s %s)", strings.Join(bad, " "), out, errOut)
		}
	}
}

package integration

import (
	"bytes"
	"encoding/base64"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// holderSession is an account holder of scanning.Caddyfile's key settings
// page, signed in with basic_auth.
type holderSession struct {
	t    *testing.T
	user string
}

// do sends one request to the page's API as the holder, from the page's
// own origin.
func (h holderSession) do(method, path, body string) (int, string) {
	h.t.Helper()
	basic := base64.StdEncoding.EncodeToString([]byte(h.user + ":" + h.user + "-test-password"))
	status, resp, _ := request(h.t, method, settingsURL+"api/"+path, body, "Authorization", "Basic "+basic,
		"Origin", gatewayBase, "Sec-Fetch-Site", "same-origin")
	return status, resp
}

// createKey creates a key on the page and returns its secret and id.
func (h holderSession) createKey(name string) (string, string) {
	h.t.Helper()
	status, body := h.do(http.MethodPost, "keys", `{"name":"`+name+`"}`)
	if status != http.StatusCreated {
		h.t.Fatalf("%s creates %s: %d %s", h.user, name, status, body)
	}
	return gjson.Get(body, "key").Str, gjson.Get(body, "id").Str
}

// TestIntegrationAccounts: two account holders behind one basic_auth,
// each on the key settings page's API. Each lists, uses and sees the usage,
// files and audit log of its own account only; every path and method of
// the API tried with the other's key id answers 404 and changes nothing;
// a viewer of an account reads it and changes nothing; the operator sees
// both, suspends one (its keys refused with 403 at once, the other's
// working) and resumes it; every change is an audit entry, emitted as an
// event.
func TestIntegrationAccounts(t *testing.T) {
	startScanningGateway(t)
	holder, rival, teammate := holderSession{t, "holder"}, holderSession{t, "rival"}, holderSession{t, "teammate"}

	hSecret, hID := holder.createKey("holder-ci")
	rSecret, rID := rival.createKey("rival-ci")

	// Who is signed in.
	if status, body := holder.do(http.MethodGet, "account", ""); status != 200 || gjson.Get(body, "identity").Str != "holder" ||
		gjson.Get(body, "role").Str != "owner" || gjson.Get(body, "account.id").Str != "holder" {
		t.Fatalf("holder's account: %d %s", status, body)
	}
	if status, body := teammate.do(http.MethodGet, "account", ""); status != 200 || gjson.Get(body, "role").Str != "viewer" ||
		gjson.Get(body, "account.id").Str != "holder" {
		t.Fatalf("teammate's account: %d %s", status, body)
	}

	// Each lists its own.
	for _, c := range []struct {
		h  holderSession
		id string
	}{{holder, hID}, {rival, rID}, {teammate, hID}} {
		status, body := c.h.do(http.MethodGet, "keys", "")
		if status != 200 || gjson.Get(body, "data.#").Int() != 1 || gjson.Get(body, "data.0.id").Str != c.id {
			t.Errorf("%s's list: %d %s", c.h.user, status, body)
		}
	}

	// Every path and method, tried by rival on holder's key: 404, and
	// the key as it was, still working.
	_, before, _ := admin(t, http.MethodGet, "/modelgate/keys/"+hID, "")
	for _, c := range []struct{ method, path, body string }{
		{"GET", "keys/" + hID, ""},
		{"HEAD", "keys/" + hID, ""},
		{"PATCH", "keys/" + hID, `{"limits":{"requests_per_minute":1}}`},
		{"DELETE", "keys/" + hID, ""},
		{"POST", "keys/" + hID, `{"name":"x"}`},
		{"PUT", "keys/" + hID, `{"name":"x"}`},
		{"GET", "keys/" + hID + "/usage", ""},
		{"GET", "keys/" + hID + "/usage?days=7", ""},
		{"POST", "keys/" + hID + "/usage", ""},
		{"DELETE", "keys/" + hID + "/usage", ""},
		{"GET", "usage?key_id=" + hID, ""},
		{"GET", "usage?owner=holder", ""},
		{"GET", "accounts", ""},
		{"GET", "accounts/holder", ""},
		{"PATCH", "accounts/holder", `{"budget":{"usd":"1","period":"day"}}`},
		{"DELETE", "accounts/holder", ""},
		{"POST", "accounts/holder/suspend", ""},
		{"GET", "accounts/holder/members", ""},
		{"POST", "accounts/holder/members", `{"identity":"rival","role":"owner"}`},
		{"GET", "accounts/holder/audit", ""},
		{"GET", "accounts/holder/batches", ""},
		{"GET", "accounts/holder/files", ""},
		{"DELETE", "members/holder", ""},
	} {
		status, body := rival.do(c.method, c.path, c.body)
		if status != http.StatusNotFound {
			t.Errorf("rival %s %s: %d %s, want 404", c.method, c.path, status, body)
		}
		if strings.Contains(body, "holder-ci") {
			t.Errorf("rival %s %s shows holder's key: %s", c.method, c.path, body)
		}
	}
	if _, after, _ := admin(t, http.MethodGet, "/modelgate/keys/"+hID, ""); after != before {
		t.Errorf("holder's key changed:\n%s\n%s", before, after)
	}
	if _, body, _ := admin(t, http.MethodGet, "/modelgate/accounts/holder", ""); gjson.Get(body, "suspended_at").Exists() && gjson.Get(body, "suspended_at").Type != gjson.Null ||
		gjson.Get(body, "members.#").Int() != 0 || gjson.Get(body, "budget").Exists() {
		t.Errorf("holder's account changed: %s", body)
	}
	if s := getWith(t, "/v1/models", hSecret); s != 200 {
		t.Errorf("holder's key after rival's tries: %d", s)
	}

	// The viewer reads holder's account and changes nothing.
	for _, c := range []struct {
		method, path, body string
		status             int
	}{
		{"GET", "keys/" + hID, "", 200},
		{"GET", "keys/" + hID + "/usage", "", 200},
		{"GET", "audit", "", 200},
		{"GET", "members", "", 200},
		{"PATCH", "keys/" + hID, `{"limits":{"requests_per_minute":1}}`, 403},
		{"DELETE", "keys/" + hID, "", 403},
		{"POST", "keys", `{"name":"viewer's"}`, 403},
		{"POST", "members", `{"identity":"x","role":"owner"}`, 403},
	} {
		if status, body := teammate.do(c.method, c.path, c.body); status != c.status {
			t.Errorf("teammate %s %s: %d %s, want %d", c.method, c.path, status, body, c.status)
		}
	}

	// Usage and files: each sees its own.
	for range 2 {
		if s := getWith(t, "/v1/models", rSecret); s != 200 {
			t.Fatalf("rival's key: %d", s)
		}
	}
	chatAs(t, hSecret)
	uploadFile(t, hSecret, "holder-input.jsonl")
	time.Sleep(50 * time.Millisecond)
	if status, body := holder.do(http.MethodGet, "usage", ""); status != 200 || gjson.Get(body, "total.requests").Int() != 1 {
		t.Errorf("holder's usage: %d %s", status, body)
	}
	if status, body := rival.do(http.MethodGet, "usage?group_by=owner", ""); status != 200 || gjson.Get(body, "total.requests").Int() != 0 ||
		strings.Contains(body, `"holder"`) {
		t.Errorf("rival's usage: %d %s", status, body)
	}
	if status, body := holder.do(http.MethodGet, "files", ""); status != 200 || gjson.Get(body, "data.#").Int() != 1 ||
		gjson.Get(body, "data.0.filename").Str != "holder-input.jsonl" {
		t.Errorf("holder's files: %d %s", status, body)
	}
	if status, body := rival.do(http.MethodGet, "files", ""); status != 200 || gjson.Get(body, "data.#").Int() != 0 {
		t.Errorf("rival's files: %d %s", status, body)
	}

	// The audit log: holder's own entries, with who and from where.
	status, body := holder.do(http.MethodGet, "audit", "")
	if status != 200 || gjson.Get(body, "data.#").Int() != 1 || gjson.Get(body, "data.0.action").Str != "key.created" ||
		gjson.Get(body, "data.0.actor.identity").Str != "holder" || gjson.Get(body, "data.0.actor.from").Str == "" ||
		gjson.Get(body, "data.0.after.id").Str != hID || strings.Contains(body, hSecret) {
		t.Errorf("holder's audit log: %d %s", status, body)
	}

	// The operator sees both, and suspends rival: its key is refused at
	// once, holder's works; rival's page reads but creates nothing.
	status, body, _ = admin(t, http.MethodGet, "/modelgate/accounts", "")
	if status != 200 || !strings.Contains(body, `"id":"holder"`) || !strings.Contains(body, `"id":"rival"`) {
		t.Fatalf("the operator's accounts: %d %s", status, body)
	}
	if status, body, _ = admin(t, http.MethodPost, "/modelgate/accounts/rival/suspend", `{"reason":"test"}`); status != 200 {
		t.Fatalf("suspend: %d %s", status, body)
	}
	status, body, _ = request(t, http.MethodGet, gatewayBase+"/v1/models", "", "Authorization", "Bearer "+rSecret)
	if status != http.StatusForbidden || gjson.Get(body, "error.code").Str != "account_suspended" {
		t.Errorf("the suspended account's key: %d %s", status, body)
	}
	if s := getWith(t, "/v1/models", hSecret); s != 200 {
		t.Errorf("the other account's key: %d", s)
	}
	if status, body := rival.do(http.MethodPost, "keys", `{"name":"while-suspended"}`); status != http.StatusForbidden {
		t.Errorf("creating a key while suspended: %d %s", status, body)
	}
	if status, _, _ = admin(t, http.MethodPost, "/modelgate/accounts/rival/resume", ""); status != 200 {
		t.Fatalf("resume: %d", status)
	}
	if s := getWith(t, "/v1/models", rSecret); s != 200 {
		t.Errorf("the resumed account's key: %d", s)
	}
	if status, body, _ = admin(t, http.MethodGet, "/modelgate/accounts/rival/audit", ""); status != 200 ||
		gjson.Get(body, "data.0.action").Str != "account.resumed" || gjson.Get(body, "data.1.action").Str != "account.suspended" ||
		gjson.Get(body, "data.1.actor.type").Str != "operator" {
		t.Errorf("rival's audit log: %d %s", status, body)
	}
	if n := countEvents("audit"); n < 4 {
		t.Errorf("%d audit events emitted, want at least 4", n)
	}
}

// chatAs sends one chat completion with secret.
func chatAs(t *testing.T, secret string) {
	t.Helper()
	status, body, _ := request(t, http.MethodPost, gatewayBase+"/v1/chat/completions",
		`{"model":"oa/gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`, "Authorization", "Bearer "+secret, "Content-Type", "application/json")
	if status != 200 {
		t.Fatalf("chat: %d %s", status, body)
	}
}

// uploadFile uploads a one-line batch input file with secret.
func uploadFile(t *testing.T, secret, name string) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	_ = mw.WriteField("purpose", "batch")
	fw, _ := mw.CreateFormFile("file", name)
	_, _ = fw.Write([]byte(`{"custom_id":"1","method":"POST","url":"/v1/chat/completions","body":{"model":"oa/gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}}` + "\n"))
	_ = mw.Close()
	status, body, _ := request(t, http.MethodPost, gatewayBase+"/v1/files", buf.String(), "Authorization", "Bearer "+secret, "Content-Type", mw.FormDataContentType())
	if status != 200 {
		t.Fatalf("upload: %d %s", status, body)
	}
}

// countEvents counts the recorded events named name.
func countEvents(name string) int {
	recorded.mu.Lock()
	defer recorded.mu.Unlock()
	n := 0
	for _, e := range recorded.events {
		if e.Name() == name {
			n++
		}
	}
	return n
}

// TestIntegrationAccountLeakMail: leak mail about an account's key goes to
// the account's e-mail (set by the operator) and to the addresses its
// owners and admins signed in with, not to its viewers'; each is told
// once, in one mail.
func TestIntegrationAccountLeakMail(t *testing.T) {
	g := startScanningGateway(t)
	holder, teammate := holderSession{t, "holder"}, holderSession{t, "teammate"}
	signIn := func(h holderSession, email string) {
		t.Helper()
		basic := base64.StdEncoding.EncodeToString([]byte(h.user + ":" + h.user + "-test-password"))
		if status, body, _ := request(t, http.MethodGet, settingsURL+"api/account", "", "Authorization", "Basic "+basic, "X-Test-Email", email); status != 200 {
			t.Fatalf("%s signs in: %d %s", h.user, status, body)
		}
	}
	signIn(holder, "holder@example.com")
	signIn(teammate, "teammate@example.com") // a viewer: not told
	if status, body, _ := admin(t, http.MethodPatch, "/modelgate/accounts/holder", `{"email":"billing@holder.example"}`); status != 200 {
		t.Fatalf("setting the account's e-mail: %d %s", status, body)
	}
	secret, id := holder.createKey("leaky")

	body := alertBody(t, secret)
	if status, res := g.alert(t, "/hooks/secret-scanning", g.github.sign(t, "GitHub", body), body); status != 200 {
		t.Fatalf("alert: %d %s", status, res.Raw)
	}
	mails, err := g.smtp.Wait(ctxTimeout(t, 10*time.Second), 1)
	if err != nil {
		t.Fatal(err)
	}
	if to := strings.Join(mails[0].To, ","); to != "billing@holder.example,holder@example.com" {
		t.Errorf("the leak mail went to %s", to)
	}
	time.Sleep(200 * time.Millisecond)
	if n := len(g.smtp.Messages()); n != 1 {
		t.Errorf("%d mails, want 1", n)
	}
	// The scanner's change is in the account's audit log.
	status, res := holder.do(http.MethodGet, "audit?limit=1", "")
	if status != 200 || gjson.Get(res, "data.0.action").Str != "key.exposed" || gjson.Get(res, "data.0.actor.type").Str != "secret_scanner" ||
		gjson.Get(res, "data.0.target.id").Str != id {
		t.Errorf("the audit log after the alert: %d %s", status, res)
	}
}

// TestIntegrationAccountDeleted: the operator deletes an account with a
// batch running: its keys stop working, its batch is cancelled for them
// (lines key_revoked), the operator reads the batch through the account's
// route, nobody signs in to the account again, and no key is made for it.
func TestIntegrationAccountDeleted(t *testing.T) {
	startRevokeGateway(t)
	secret, _ := adminKey(t, `{"name":"doomed","owner":"team-d"}`)
	reader, _ := adminKey(t, `{"name":"reader","owner":"team-d"}`)
	b := doomedBatch(t, secret, reader, 300)

	status, body, _ := admin(t, http.MethodDelete, "/modelgate/accounts/team-d", "")
	if status != 200 || gjson.Get(body, "keys_deleted.#").Int() != 2 {
		t.Fatalf("DELETE the account: %d %s", status, body)
	}
	for _, s := range []string{secret, reader} {
		if got := getWith(t, "/v1/models", s); got != 401 {
			t.Errorf("a key of the deleted account: %d", got)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, body, _ = admin(t, http.MethodGet, "/modelgate/accounts/team-d/batches", "")
		got := gjson.Get(body, `data.#(id=="`+b.ID+`")`)
		if got.Get("status").Str == "cancelled" && got.Get("errors.data.0.code").Str == "key_revoked" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the deleted account's batch: %s", body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if status, body, _ = admin(t, http.MethodPost, "/modelgate/keys", `{"name":"again","owner":"team-d"}`); status != http.StatusConflict {
		t.Errorf("a key for the deleted account: %d %s", status, body)
	}
	if status, body, _ = admin(t, http.MethodGet, "/modelgate/accounts/team-d", ""); status != 200 || gjson.Get(body, "deleted_at").Int() == 0 {
		t.Errorf("the deleted account: %d %s", status, body)
	}
	if status, body, _ = admin(t, http.MethodDelete, "/modelgate/accounts/team-d", ""); status != http.StatusNotFound {
		t.Errorf("deleting it again: %d %s", status, body)
	}
}

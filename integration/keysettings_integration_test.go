package integration

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// The key settings page of scanning.Caddyfile and its test credential.
const (
	settingsURL      = gatewayBase + "/account/keys/"
	settingsUser     = "holder"
	settingsPassword = "holder-test-password"
)

// settings sends one request to the key settings handler; header holds
// extra headers, and auth says whether to send the basic_auth credential.
func settings(t *testing.T, method, url, body string, auth bool, header ...string) (int, string, http.Header) {
	t.Helper()
	if auth {
		basic := base64.StdEncoding.EncodeToString([]byte(settingsUser + ":" + settingsPassword))
		header = append([]string{"Authorization", "Basic " + basic}, header...)
	}
	return request(t, method, url, body, header...)
}

// TestIntegrationKeySettings checks modelgate_key_settings over HTTP: the
// page's files with their security headers, its key API (the admin
// endpoint's, on the same storage), basic_auth in front, the refusal
// without an authentication handler, and cross-origin protection.
func TestIntegrationKeySettings(t *testing.T) {
	startScanningGateway(t)

	for _, tc := range []struct{ path, ctype, has string }{
		{"", "text/html", "API keys"},
		{"index.html", "text/html", "API keys"},
		{"app.js", "javascript", "confirmDelete"},
		{"style.css", "text/css", "dialog"},
	} {
		status, body, hdr := settings(t, http.MethodGet, settingsURL+tc.path, "", true)
		if status != 200 || !strings.Contains(hdr.Get("Content-Type"), tc.ctype) || !strings.Contains(body, tc.has) {
			t.Errorf("%q: %d %s", tc.path, status, hdr.Get("Content-Type"))
		}
		if csp := hdr.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("%q: CSP %q", tc.path, csp)
		}
		if hdr.Get("Cache-Control") != "no-store" || hdr.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%q: headers %v", tc.path, hdr)
		}
		if strings.Contains(body, "http://") || strings.Contains(body, "https://") {
			t.Errorf("%q loads something from elsewhere", tc.path)
		}
	}

	// The page's API creates a key the admin endpoint lists and the
	// gateway accepts at once, and deletes it.
	status, body, _ := settings(t, http.MethodPost, settingsURL+"api/keys", `{"name":"from-page"}`, true,
		"Origin", gatewayBase, "Sec-Fetch-Site", "same-origin")
	secret, id := gjson.Get(body, "key").Str, gjson.Get(body, "id").Str
	if status != http.StatusCreated || !strings.HasPrefix(secret, "mgk_") || gjson.Get(body, "owner").Str != settingsUser ||
		gjson.Get(body, "created_by").Str != settingsUser {
		t.Fatalf("create on the page: %d %s", status, body)
	}
	if s := getWith(t, "/v1/models", secret); s != 200 {
		t.Fatalf("the page's key: %d", s)
	}
	if _, body, _ = admin(t, http.MethodGet, "/modelgate/keys/"+id, ""); gjson.Get(body, "name").Str != "from-page" {
		t.Errorf("the admin endpoint's view: %s", body)
	}
	status, body, _ = settings(t, http.MethodGet, settingsURL+"api/keys", "", true)
	if status != 200 || gjson.Get(body, "data.#").Int() != 1 || strings.Contains(body, secret) {
		t.Errorf("list on the page: %d %s", status, body)
	}

	for _, tc := range []struct {
		name, method, url, body string
		auth                    bool
		header                  []string
		status                  int
	}{
		{"no credential", "GET", settingsURL, "", false, nil, 401},
		{"no credential, API", "GET", settingsURL + "api/keys", "", false, nil, 401},
		{"no authentication handler", "GET", gatewayBase + "/unguarded/keys/", "", false, nil, 403},
		{"no authentication handler, API", "POST", gatewayBase + "/unguarded/keys/api/keys", `{"name":"x"}`, false, nil, 403},
		{"a gateway API key", "GET", gatewayBase + "/keyed/keys/api/keys", "", false,
			[]string{"Authorization", "Bearer " + aliceKey}, 403},
		{"cross-origin create", "POST", settingsURL + "api/keys", `{"name":"csrf"}`, true,
			[]string{"Origin", "https://attacker.example", "Sec-Fetch-Site", "cross-site"}, 403},
		{"cross-origin delete", "DELETE", settingsURL + "api/keys/" + id, "", true,
			[]string{"Origin", "https://attacker.example"}, 403},
		{"bad body", "POST", settingsURL + "api/keys", `{"nam":"x"}`, true, nil, 400},
		{"another account's key", "POST", settingsURL + "api/keys", `{"name":"x","owner":"team-p"}`, true, nil, 400},
		{"unknown key", "GET", settingsURL + "api/keys/key_nope", "", true, nil, 404},
		{"no such file", "GET", settingsURL + "nope.html", "", true, nil, 404},
		{"post to the page", "POST", settingsURL, `{}`, true, nil, 405},
		{"cross-origin limits", "PATCH", settingsURL + "api/keys/" + id, `{"budget":{"usd":"1000","period":"day"}}`, true,
			[]string{"Origin", "https://attacker.example", "Sec-Fetch-Site", "cross-site"}, 403},
		{"no credential, usage", "GET", settingsURL + "api/usage", "", false, nil, 401},
		{"no credential, a key's usage", "GET", settingsURL + "api/keys/" + id + "/usage", "", false, nil, 401},
		{"usage", "GET", settingsURL + "api/usage?group_by=key", "", true, nil, 200},
		{"a key's usage", "GET", settingsURL + "api/keys/" + id + "/usage?days=7", "", true, nil, 200},
		{"usage, a bad parameter", "GET", settingsURL + "api/usage?from=soon", "", true, nil, 400},
		{"usage, not a GET", "POST", settingsURL + "api/usage", "", true, []string{"Sec-Fetch-Site", "same-origin"}, 405},
	} {
		status, body, hdr := settings(t, tc.method, tc.url, tc.body, tc.auth, tc.header...)
		if status != tc.status {
			t.Errorf("%s: %d %s, want %d", tc.name, status, body, tc.status)
		}
		if status >= 403 && !gjson.Get(body, "error").Exists() {
			t.Errorf("%s: no error message: %s", tc.name, body)
		}
		if status == 405 && hdr.Get("Allow") == "" {
			t.Errorf("%s: no Allow header", tc.name)
		}
	}
	if _, body, _ = admin(t, http.MethodGet, "/modelgate/keys", ""); gjson.Get(body, "data.#").Int() != 1 || gjson.Get(body, "data.0.budget").Exists() {
		t.Errorf("refused requests changed the keys: %s", body)
	}

	// The page's API sets a key's limits and budget, as the admin
	// endpoint's does.
	status, body, _ = settings(t, http.MethodPatch, settingsURL+"api/keys/"+id, `{"limits":{"concurrent_requests":2},"budget":{"usd":"5","period":"month"}}`, true,
		"Origin", gatewayBase, "Sec-Fetch-Site", "same-origin")
	if status != 200 || gjson.Get(body, "limits").Raw != `{"concurrent_requests":2}` || gjson.Get(body, "budget.usd").Str != "5" {
		t.Fatalf("limits on the page: %d %s", status, body)
	}
	if status, body, _ = settings(t, http.MethodGet, settingsURL+"api/keys/"+id+"/usage?days=1", "", true); status != 200 ||
		gjson.Get(body, "policy.key.limits.concurrent_requests").Int() != 2 || gjson.Get(body, "status.key.budget.left_usd").Str != "5" {
		t.Errorf("the key's standing on the page: %d %s", status, body)
	}

	if status, body, _ = settings(t, http.MethodDelete, settingsURL+"api/keys/"+id, "", true, "Sec-Fetch-Site", "same-origin"); status != http.StatusNoContent {
		t.Fatalf("delete on the page: %d %s", status, body)
	}
	if s := getWith(t, "/v1/models", secret); s != 401 {
		t.Errorf("the deleted key: %d", s)
	}
}

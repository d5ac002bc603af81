package integration

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

const adminURL = "http://localhost:2999"

// admin sends one request to the admin endpoint of the test gateway.
func admin(t *testing.T, method, path, body string) (int, string, http.Header) {
	t.Helper()
	return request(t, method, adminURL+path, body)
}

// TestIntegrationAdminKeys drives the admin API: a created key works at
// once and is listed without its secret; a deleted key is refused at once;
// bad requests get 400, unknown ids 404, wrong methods 405; the storage
// never holds a secret.
func TestIntegrationAdminKeys(t *testing.T) {
	startScanningGateway(t)

	status, body, _ := admin(t, http.MethodPost, "/modelgate/keys", `{"name":"ci","owner":"team-a","models":["oa/*"]}`)
	if status != http.StatusCreated {
		t.Fatalf("create: %d %s", status, body)
	}
	k := gjson.Parse(body)
	secret, id := k.Get("key").Str, k.Get("id").Str
	if !strings.HasPrefix(secret, "mgk_") || len(secret) != 40 || !strings.HasPrefix(id, "key_") ||
		k.Get("name").Str != "ci" || k.Get("owner").Str != "team-a" || k.Get("hint").Str != "mgk_..."+secret[36:] ||
		k.Get("models.0").Str != "oa/*" || k.Get("created_at").Int() == 0 || k.Get("sha256").Exists() {
		t.Fatalf("created key: %s", body)
	}
	// It works at once, here.
	if s := getWith(t, "/v1/models", secret); s != 200 {
		t.Fatalf("the new key: %d", s)
	}
	_, second, _ := admin(t, http.MethodPost, "/modelgate/keys", `{"name":"laptop"}`)
	secret2 := gjson.Get(second, "key").Str
	if gjson.Get(second, "owner").Str != "laptop" {
		t.Errorf("default owner: %s", second)
	}

	status, body, _ = admin(t, http.MethodGet, "/modelgate/keys", "")
	list := gjson.Parse(body)
	if status != 200 || list.Get("object").Str != "list" || len(list.Get("data").Array()) != 2 ||
		list.Get("data.0.id").Str != id || list.Get("data.0.last_used_at").Int() == 0 {
		t.Fatalf("list: %d %s", status, body)
	}
	for _, s := range []string{secret, secret2, `"key":`, "sha256"} {
		if strings.Contains(body, s) {
			t.Errorf("the list holds %q: %s", s, body)
		}
	}
	if status, body, _ = admin(t, http.MethodGet, "/modelgate/keys/"+id, ""); status != 200 || gjson.Get(body, "name").Str != "ci" || strings.Contains(body, secret) {
		t.Errorf("get: %d %s", status, body)
	}

	for _, tc := range []struct {
		name, method, path, body string
		status                   int
	}{
		{"no name", "POST", "/modelgate/keys", `{}`, 400},
		{"empty name", "POST", "/modelgate/keys", `{"name":""}`, 400},
		{"unknown field", "POST", "/modelgate/keys", `{"name":"x","scopes":["all"]}`, 400},
		{"not JSON", "POST", "/modelgate/keys", `name=x`, 400},
		{"two values", "POST", "/modelgate/keys", `{"name":"x"}{"name":"y"}`, 400},
		{"expired already", "POST", "/modelgate/keys", `{"name":"x","expires_at":1000}`, 400},
		{"empty model", "POST", "/modelgate/keys", `{"name":"x","models":[""]}`, 400},
		{"name with a newline", "POST", "/modelgate/keys", `{"name":"a\nb"}`, 400},
		{"unknown id", "GET", "/modelgate/keys/key_nope", ``, 404},
		{"path in id", "DELETE", "/modelgate/keys/..%2F..%2Fetc", ``, 404},
		{"wrong method on the list", "PUT", "/modelgate/keys", `{}`, 405},
		{"wrong method on a key", "POST", "/modelgate/keys/" + id, `{}`, 405},
		{"wrong method on the page", "POST", "/modelgate/", `{}`, 405},
		{"no such page", "GET", "/modelgate/nope.html", ``, 404},
		{"no such route", "GET", "/modelgate/x/y", ``, 404},
		{"key path too deep", "GET", "/modelgate/keys/" + id + "/x", ``, 404},
	} {
		status, body, hdr := admin(t, tc.method, tc.path, tc.body)
		if status != tc.status || !gjson.Get(body, "error").Exists() {
			t.Errorf("%s: %d %s, want %d", tc.name, status, body, tc.status)
		}
		if tc.status == 405 && hdr.Get("Allow") == "" {
			t.Errorf("%s: no Allow header", tc.name)
		}
	}
	if _, body, _ = admin(t, http.MethodGet, "/modelgate/keys", ""); len(gjson.Get(body, "data").Array()) != 2 {
		t.Errorf("refused requests created keys: %s", body)
	}

	// The storage holds digests, never a secret or its random part.
	var files int
	err := filepath.WalkDir(os.Getenv("MG_STORAGE"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files++
		for _, s := range []string{secret, secret2} {
			if strings.Contains(string(b), s[4:34]) {
				t.Errorf("%s holds a secret", p)
			}
		}
		return nil
	})
	if err != nil || files == 0 {
		t.Fatalf("walking the storage: %d files, %v", files, err)
	}

	// Deleted: refused at once; deleting again is 404.
	if status, body, _ = admin(t, http.MethodDelete, "/modelgate/keys/"+id, ""); status != http.StatusNoContent || body != "" {
		t.Fatalf("delete: %d %s", status, body)
	}
	if s := getWith(t, "/v1/models", secret); s != 401 {
		t.Errorf("a deleted key: %d", s)
	}
	if status, _, _ = admin(t, http.MethodDelete, "/modelgate/keys/"+id, ""); status != 404 {
		t.Errorf("deleting again: %d", status)
	}
	if s := getWith(t, "/v1/models", secret2); s != 200 {
		t.Errorf("the other key after a delete: %d", s)
	}

	// The key settings page, and the same API where its script looks.
	for _, tc := range []struct{ path, ctype, has string }{
		{"/modelgate/", "text/html", "API keys"},
		{"/modelgate/app.js", "javascript", "confirmDelete"},
		{"/modelgate/style.css", "text/css", "dialog"},
		{"/modelgate/api/keys", "application/json", secret2[len(secret2)-4:]},
	} {
		status, body, hdr := admin(t, http.MethodGet, tc.path, "")
		if status != 200 || !strings.Contains(hdr.Get("Content-Type"), tc.ctype) || !strings.Contains(body, tc.has) {
			t.Errorf("%s: %d %s", tc.path, status, hdr.Get("Content-Type"))
		}
	}
}

// TestIntegrationAdminRefusesNavigation shows why the key settings page is
// also a handler of a site: with its default origins, Caddy's admin
// endpoint refuses a browser's navigation (Sec-Fetch-Mode, neither Origin
// nor Referer), to the page as to any admin route, before modelgate sees it.
func TestIntegrationAdminRefusesNavigation(t *testing.T) {
	startGateway(t) // gateway.Caddyfile: admin localhost:2999, default origins
	for _, path := range []string{"/modelgate/", "/config/"} {
		req, _ := http.NewRequest(http.MethodGet, adminURL+path, nil)
		req.Header.Set("Sec-Fetch-Mode", "navigate")
		req.Header.Set("Sec-Fetch-Site", "none")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusForbidden || !strings.Contains(string(b), "origin") {
			t.Errorf("%s: %d %s", path, res.StatusCode, b)
		}
	}
}

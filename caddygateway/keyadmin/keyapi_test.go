package keyadmin

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/modelgate/modelgate/accounts"
	"github.com/modelgate/modelgate/internal/storagetest"
	"github.com/modelgate/modelgate/keys"
)

// TestKeyAPIStorageDown: with the storage unreachable (Redis down),
// creating, listing, reading and deleting keys answer 503 saying that the
// storage cannot be reached; any other storage failure is a 500. Neither
// shows the storage's error text.
func TestKeyAPIStorageDown(t *testing.T) {
	refused := fmt.Errorf("redis storage: storing modelgate/keys/x: %w",
		&net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}})
	for _, tc := range []struct {
		name   string
		fail   error
		status int
	}{
		{"unreachable", refused, http.StatusServiceUnavailable},
		{"failing", errors.New("modelgate/keys/x: disk full"), http.StatusInternalServerError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := storagetest.NewMemory()
			api := keyAPI{svc: testService(mem, keys.NewManager(mem, "modelgate")), logger: zap.NewNop(), actor: accounts.Operator("test", "")}
			mem.Fail(tc.fail)
			for _, r := range []struct{ method, rest, body string }{
				{http.MethodPost, "keys", `{"name":"n","owner":"o"}`},
				{http.MethodGet, "keys", ""},
				{http.MethodGet, "keys/key_06h0f3dmbnbda28kaqnrfi69", ""},
				{http.MethodDelete, "keys/key_06h0f3dmbnbda28kaqnrfi69", ""},
			} {
				req := httptest.NewRequest(r.method, "/modelgate/"+r.rest, strings.NewReader(r.body))
				p, ok := parseAPIPath(r.rest)
				if !ok {
					t.Fatalf("%s is not a path of the API", r.rest)
				}
				err := api.serve(httptest.NewRecorder(), req, p)
				var apiErr caddy.APIError
				if !errors.As(err, &apiErr) || apiErr.HTTPStatus != tc.status {
					t.Errorf("%s %s: %v, want status %d", r.method, r.rest, err, tc.status)
					continue
				}
				msg := apiErr.Err.Error()
				if tc.status == http.StatusServiceUnavailable && !strings.Contains(msg, "storage cannot be reached") {
					t.Errorf("%s %s: %q does not say the storage cannot be reached", r.method, r.rest, msg)
				}
				if strings.Contains(msg, "modelgate/keys") || strings.Contains(msg, "disk full") {
					t.Errorf("%s %s: %q shows the storage's error", r.method, r.rest, msg)
				}
			}
		})
	}
}

// testService is an accounts service on st with the key manager km.
func testService(st accounts.Storage, km *keys.Manager) *accounts.Service {
	return &accounts.Service{Keys: km, Accounts: accounts.NewManager(st, "modelgate"), Audit: accounts.NewAuditLog(st, "modelgate")}
}

// FuzzParseAPIPath: any path relative to the API either is none of its
// paths or names one whose key id or member identity holds no separator
// it was not sent escaped with, and nothing panics.
func FuzzParseAPIPath(f *testing.F) {
	for _, s := range []string{"keys", "keys/key_06h0f3dmbnbda28kaqnrfi69", "keys/key_x/usage", "usage", "account",
		"members/bob%40example.com", "members/a%2Fb", "accounts/team%20a/members/x", "accounts/a/audit", "keys/%zz", "", "/", "keys//usage"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, rest string) {
		p, ok := parseAPIPath(rest)
		if !ok {
			return
		}
		if p.kind == 0 {
			t.Fatalf("%q: a path of no kind", rest)
		}
		if (p.kind == keyPath || p.kind == keyUsagePath) && strings.Contains(p.id, "/") && !strings.Contains(rest, "%2F") && !strings.Contains(rest, "%2f") {
			t.Fatalf("%q: key id %q", rest, p.id)
		}
	})
}

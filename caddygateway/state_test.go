package caddygateway

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/tidwall/gjson"
	"go.uber.org/zap"

	"github.com/modelgate/modelgate/state"
)

func TestStorageUnreachable(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}
	timeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("redis storage: storing modelgate/keys/x: %w", refused), true},
		{fmt.Errorf("redis storage: loading x: %w", timeout), true},
		{fmt.Errorf("ping: %w: %w", state.ErrUnavailable, refused), true},
		{state.ErrUnavailable, true},
		{fmt.Errorf("x: %w", fs.ErrNotExist), false},
		{errors.New("ERR a parent is a file"), false},
		{fmt.Errorf("lookup: %w", &net.DNSError{Err: "no such host", Name: "redis"}), true},
		{&fs.PathError{Op: "open", Path: "/data/x", Err: syscall.EACCES}, false},
		{&fs.PathError{Op: "read", Path: "/nfs/x", Err: syscall.ETIMEDOUT}, false},
	} {
		if got := StorageUnreachable(tc.err); got != tc.want {
			t.Errorf("StorageUnreachable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// TestInternalError: a storage that cannot be reached is a 503 with
// retry-after; any other failure a 500; neither shows the error's text.
func TestInternalError(t *testing.T) {
	h := &Handler{logger: zap.NewNop()}
	refused := fmt.Errorf("redis storage: loading modelgate/o/abc/batch.json: %w",
		&net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}})
	for _, tc := range []struct {
		err        error
		status     int
		retryAfter string
	}{
		{refused, http.StatusServiceUnavailable, "1"},
		{errors.New("modelgate/o/abc/batch.json: disk full"), http.StatusInternalServerError, ""},
	} {
		rec := httptest.NewRecorder()
		h.internalError(rec, "serving batch b", tc.err)
		body := rec.Body.String()
		if rec.Code != tc.status || rec.Header().Get("Retry-After") != tc.retryAfter {
			t.Errorf("%v: %d retry-after %q, want %d %q", tc.err, rec.Code, rec.Header().Get("Retry-After"), tc.status, tc.retryAfter)
		}
		if gjson.Get(body, "error.type").Str != "server_error" || gjson.Get(body, "error.message").Str == "" {
			t.Errorf("%v: body %s", tc.err, body)
		}
		if strings.Contains(body, "modelgate/o") || strings.Contains(body, "127.0.0.1") {
			t.Errorf("%v: the answer shows the error's text: %s", tc.err, body)
		}
	}
}

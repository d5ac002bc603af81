package caddygateway

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"
)

// TestReadBody checks the request body as readBody returns it: whole
// whether its declared length is right, short, long or unknown, and
// refused above the limit or when it cannot be read.
func TestReadBody(t *testing.T) {
	const limit = 64
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}]}` // 57 bytes
	for _, tc := range []struct {
		name     string
		body     io.Reader
		declared int64
		want     string
		status   int
	}{
		{name: "declared", body: strings.NewReader(body), declared: int64(len(body)), want: body},
		{name: "unknown length", body: strings.NewReader(body), declared: -1, want: body},
		{name: "one byte at a time", body: iotest.OneByteReader(strings.NewReader(body)), declared: int64(len(body)), want: body},
		{name: "longer than declared", body: strings.NewReader(body), declared: 10, want: body},
		{name: "shorter than declared", body: strings.NewReader(body), declared: 60, want: body},
		{name: "empty", body: strings.NewReader(""), declared: 0, want: ""},
		{name: "at the limit", body: strings.NewReader(strings.Repeat("x", limit)), declared: limit, want: strings.Repeat("x", limit)},
		{name: "declared above the limit", body: strings.NewReader(body), declared: limit + 1, status: http.StatusRequestEntityTooLarge},
		{name: "above the limit, undeclared", body: strings.NewReader(strings.Repeat("x", limit+1)), declared: -1, status: http.StatusRequestEntityTooLarge},
		{name: "above the limit, declared short", body: strings.NewReader(strings.Repeat("x", 3*limit)), declared: 8, status: http.StatusRequestEntityTooLarge},
		{name: "read error", body: io.MultiReader(strings.NewReader(body[:20]), iotest.ErrReader(errors.New("reset"))), declared: int64(len(body)), status: http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
			r.Body, r.ContentLength = io.NopCloser(tc.body), tc.declared
			got, perr := readBody(r, limit)
			switch {
			case tc.status != 0:
				if perr == nil || perr.Status != tc.status {
					t.Fatalf("error %v, want status %d", perr, tc.status)
				}
			case perr != nil:
				t.Fatalf("error %v", perr)
			case !bytes.Equal(got, []byte(tc.want)):
				t.Fatalf("body %q, want %q", got, tc.want)
			}
		})
	}
}

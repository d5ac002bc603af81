package caddygateway

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/modelgate/modelgate/internal/storagetest"
	"github.com/modelgate/modelgate/keys"
)

// TestAuthForgetsKey checks that modelgate_auth removes the key headers
// from the request once it has read them, whether the key was good or
// not: the next handler, and the placeholders read after modelgate_auth,
// see no key.
func TestAuthForgetsKey(t *testing.T) {
	const static = "sk-static-key-of-the-test"
	a := &App{logger: zap.NewNop(), keys: map[[32]byte]*Key{keys.Digest(static): {Name: "k", Owner: "o"}},
		managed: keys.NewManager(storagetest.NewMemory(), "modelgate")}
	_, managed, err := a.managed.Create(context.Background(), keys.NewKey{Name: "m"})
	if err != nil {
		t.Fatal(err)
	}
	h := &Auth{app: a, logger: zap.NewNop()}
	for _, tc := range []struct {
		name   string
		header [][2]string
		status int
	}{
		{"static key as x-api-key", [][2]string{{"X-Api-Key", static}}, 200},
		{"managed key as bearer", [][2]string{{"Authorization", "Bearer " + managed}}, 200},
		{"both headers", [][2]string{{"Authorization", "Bearer " + managed}, {"X-Api-Key", static}}, 200},
		{"unknown key", [][2]string{{"X-Api-Key", "sk-unknown-key-of-the-test"}}, 401},
		{"malformed managed key", [][2]string{{"Authorization", "Bearer " + otherLast(managed)}}, 401},
		{"not a bearer token", [][2]string{{"Authorization", "Basic " + static}, {"X-Api-Key", static}}, 401},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			r := httptest.NewRequest(http.MethodGet, "/v1/models", nil)
			for _, kv := range tc.header {
				r.Header.Add(kv[0], kv[1])
			}
			repl := caddy.NewReplacer()
			r = caddyhttp.PrepareRequest(r, repl, w, nil)
			called := false
			err := h.ServeHTTP(w, r, caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
				called = true
				for _, k := range keyHeaders {
					if v, ok := r.Header[k]; ok {
						t.Errorf("the next handler got %s: %q", k, v)
					}
				}
				return nil
			}))
			if err != nil {
				t.Fatal(err)
			}
			if status := map[bool]int{true: 200, false: w.Code}[called]; status != tc.status {
				t.Fatalf("status %d, want %d", status, tc.status)
			}
			for _, k := range keyHeaders {
				if v := repl.ReplaceAll("{http.request.header."+k+"}", ""); v != "" {
					t.Errorf("{http.request.header.%s} is %q after modelgate_auth", k, v)
				}
			}
		})
	}
}

// countingStorage counts the reads of a storage.
type countingStorage struct {
	keys.Storage
	loads, lists atomic.Int64
}

func (c *countingStorage) Load(ctx context.Context, key string) ([]byte, error) {
	c.loads.Add(1)
	return c.Storage.Load(ctx, key)
}

func (c *countingStorage) List(ctx context.Context, dir string, recursive bool) ([]string, error) {
	c.lists.Add(1)
	return c.Storage.List(ctx, dir, recursive)
}

// TestAuthUnknownManagedKeyReadsNoStorage: a well-formed managed key that
// exists nowhere gets 401 from the in-memory index alone.
func TestAuthUnknownManagedKeyReadsNoStorage(t *testing.T) {
	cs := &countingStorage{Storage: storagetest.NewMemory()}
	a := &App{logger: zap.NewNop(), managed: keys.NewManager(cs, "modelgate")}
	for i := range 16 {
		if _, _, err := a.managed.Create(context.Background(), keys.NewKey{Name: fmt.Sprint("k", i)}); err != nil {
			t.Fatal(err)
		}
	}
	h := &Auth{app: a, logger: zap.NewNop()}
	cs.loads.Store(0)
	for range 100 {
		fake, _ := keys.Generate()
		r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
		r.Header.Set("Authorization", "Bearer "+fake)
		w := httptest.NewRecorder()
		r = caddyhttp.PrepareRequest(r, caddy.NewReplacer(), w, &caddyhttp.Server{})
		if err := h.ServeHTTP(w, r, noNext); err != nil || w.Code != http.StatusUnauthorized {
			t.Fatalf("a fake key: %d, %v", w.Code, err)
		}
	}
	if loads, lists := cs.loads.Load(), cs.lists.Load(); loads != 0 || lists != 0 {
		t.Errorf("100 fake bearer keys read storage: %d loads, %d lists", loads, lists)
	}
}

// otherLast returns key with its last character replaced by another one,
// whatever that character was.
func otherLast(key string) string {
	if strings.HasSuffix(key, "x") {
		return key[:len(key)-1] + "y"
	}
	return key[:len(key)-1] + "x"
}

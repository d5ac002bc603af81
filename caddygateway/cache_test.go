package caddygateway

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/modelgate/modelgate/respcache"
)

// A cache configured in JSON, not through the Caddyfile, is checked when
// its engine configuration is taken.
func TestCacheConfigEngine(t *testing.T) {
	c := CacheConfig{TTL: caddy.Duration(10 * time.Minute), MaxEntries: 5, MaxSize: 1 << 20, MaxEntrySize: 1 << 10, Storage: cacheShared}
	got, err := c.Engine()
	if err != nil {
		t.Fatal(err)
	}
	if want := (respcache.Config{TTL: 10 * time.Minute, MaxEntries: 5, MaxBytes: 1 << 20, MaxEntrySize: 1 << 10}); got != want {
		t.Fatalf("Engine() = %+v, want %+v", got, want)
	}
	if _, err := (&CacheConfig{}).Engine(); err != nil {
		t.Fatalf("the defaults: %v", err)
	}
	for _, bad := range []CacheConfig{
		{Storage: "disk"},
		{TTL: caddy.Duration(time.Millisecond)},
		{MaxEntries: -1},
		{MaxSize: 1 << 10, MaxEntrySize: 1 << 20},
	} {
		if _, err := bad.Engine(); err == nil || !strings.HasPrefix(err.Error(), "cache") {
			t.Errorf("%+v: %v", bad, err)
		}
	}
}

// TestProvisionCacheKeepsMemory: the answers kept in memory outlive a
// reload that keeps the storage and the cache's options (the new config's
// cache reads what the old one stored), and not one that changes them;
// on a state that is not shared, storage shared keeps them in memory.
func TestProvisionCacheKeepsMemory(t *testing.T) {
	provision := func(storageID string, c CacheConfig) *App {
		t.Helper()
		a := &App{Cache: &c, storageID: storageID, logger: zap.NewNop()}
		if err := a.provisionCache(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = a.Cleanup() })
		return a
	}
	ctx := context.Background()
	key, err := respcache.KeyOf(respcache.Request{Account: "team", API: respcache.Chat, Model: "oa/gpt-4o", Body: []byte(`{"model":"gpt-4o"}`)})
	if err != nil {
		t.Fatal(err)
	}
	storage := "TestProvisionCacheKeepsMemory"
	old := provision(storage, CacheConfig{TTL: caddy.Duration(time.Minute)})
	answer := []byte(`{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"kept"}}]}`)
	if err := old.cache.Store(ctx, key, respcache.Chat, respcache.Entry{Body: answer, Provider: "oa", Model: "gpt-4o"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		storage string
		c       CacheConfig
		hit     bool
	}{
		{"the same options", storage, CacheConfig{TTL: caddy.Duration(time.Minute)}, true},
		{"storage shared on a local state", storage, CacheConfig{TTL: caddy.Duration(time.Minute), Storage: cacheShared}, true},
		{"another ttl", storage, CacheConfig{TTL: caddy.Duration(2 * time.Minute)}, false},
		{"another storage", storage + "-other", CacheConfig{TTL: caddy.Duration(time.Minute)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := provision(tc.storage, tc.c)
			if _, hit, err := a.cache.Lookup(ctx, key); err != nil || hit != tc.hit {
				t.Errorf("hit %v (%v), want %v", hit, err, tc.hit)
			}
		})
	}
}

package caddygateway

import (
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

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

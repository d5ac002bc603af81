package integration

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelgate/modelgate/providers/providertest"
)

// cacheCall sends a chat request to in with secret, and returns the
// status, the body and x-modelgate-cache.
func cacheCall(t *testing.T, in *instance, secret, body string) (int, string, string) {
	t.Helper()
	status, b, h := request(t, http.MethodPost, in.httpURL+"/v1/chat/completions", body, "Authorization", "Bearer "+secret)
	return status, b, h.Get("X-Modelgate-Cache")
}

// TestProcessRedisCache: two caddy processes on one redis-server, the
// response cache on (instance.Caddyfile's cache-on, storage modelgate_redis):
// an answer instance A stored is a hit on instance B, whose provider is
// never called, plain and streamed; another account's identical request
// misses on B; the entry is on Redis. On the file system (no shared
// state) each instance keeps its own answers in memory: B misses.
func TestProcessRedisCache(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the caddy binary and redis-server")
	}
	body := `{"model":"oa/gpt-4o","max_tokens":16,"messages":[{"role":"user","content":"shared between instances"}]}`

	t.Run("redis", func(t *testing.T) {
		c := startRedisCluster(t, 2, "MG_STORAGE_KIND=redis", "MG_CACHE=on")
		a, b := c.ins[0], c.ins[1]
		status, first, cache := cacheCall(t, a, aliceKey, body)
		if status != 200 || cache != "miss" {
			t.Fatalf("on A: %d %q %s", status, cache, first)
		}
		status, second, cache := cacheCall(t, b, aliceKey, body)
		if status != 200 || cache != "hit" || second != first {
			t.Fatalf("on B: %d %q\n%s\nwant A's answer\n%s", status, cache, second, first)
		}
		stream := `{"stream":true,` + body[1:]
		if status, events, cache := cacheCall(t, b, aliceKey, stream); status != 200 || cache != "hit" ||
			!containsAll(events, `"echo: shared between instances"`, "data: [DONE]") {
			t.Errorf("streamed on B: %d %q\n%s", status, cache, events)
		}
		if n := len(c.fakes[1].Requests()); n != 0 {
			t.Errorf("B's provider was called %d times", n)
		}

		secret, _ := createKey(t, a, "another-account")
		if _, err := untilStatus(b.httpURL+"/v1/models", secret, 200, time.Now(), 5*time.Second); err != nil {
			t.Fatal(err)
		}
		if status, res, cache := cacheCall(t, b, secret, body); status != 200 || cache != "miss" {
			t.Errorf("another account on B: %d %q %s", status, cache, res)
		}
		keys, err := redisClient(t, c.redis.Addr).Keys(t.Context(), "*respcache:*").Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) != 2 {
			t.Errorf("the entries on Redis: %q, want one per account", keys)
		}
	})

	t.Run("memory", func(t *testing.T) {
		storage := t.TempDir()
		var ins []*instance
		var fakes []*providertest.Server
		for _, name := range []string{"a", "b"} {
			fake := providertest.Start(t, providertest.Options{OpenAIKey: openAIKey})
			in := newInstance(t, name, storage, fake).set("MG_CACHE=on")
			in.start()
			ins, fakes = append(ins, in), append(fakes, fake)
		}
		for i, want := range []string{"miss", "hit"} {
			if status, res, cache := cacheCall(t, ins[0], aliceKey, body); status != 200 || cache != want {
				t.Fatalf("request %d on A: %d %q %s", i+1, status, cache, res)
			}
		}
		if status, res, cache := cacheCall(t, ins[1], aliceKey, body); status != 200 || cache != "miss" {
			t.Errorf("on B: %d %q %s, want its own miss", status, cache, res)
		}
		if n := len(fakes[1].Requests()); n != 1 {
			t.Errorf("B's provider was called %d times, want 1", n)
		}
	})
}

// containsAll reports whether s contains every one of subs.
func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

package integration

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelgate/modelgate/internal/redistest"
	"github.com/modelgate/modelgate/providers/providertest"
	"github.com/modelgate/modelgate/routing"
)

// TestProcessRedisRouting runs two instances on one Redis: a breaker
// opened on one instance, and a cool-down a provider asked of it, keep
// the target out on the other, which sends it nothing.
func TestProcessRedisRouting(t *testing.T) {
	rd := redistest.Start(t)
	dead := providertest.StartChaos(t, providertest.ServerErrors())
	limited := providertest.StartChaos(t, providertest.RateLimited(providertest.RateLimit{RetryAfter: 30 * time.Second}))
	fake := providertest.Start(t, providertest.Options{OpenAIKey: openAIKey})
	var ins []*instance
	for _, name := range []string{"a", "b"} {
		in := newInstance(t, name, t.TempDir(), fake).set("MG_REDIS="+rd.Addr, "MG_DEAD="+dead.URL, "MG_LIMITED="+limited.URL)
		in.config = "routing.Caddyfile"
		in.start()
		ins = append(ins, in)
	}
	a, b := ins[0], ins[1]
	chat := func(in *instance, model string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, in.httpURL+"/v1/chat/completions",
			strings.NewReader(fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"hi"}]}`, model)))
		req.Header.Set("Authorization", "Bearer "+aliceKey)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Fatalf("%s on %s: %d %s", model, in.name, res.StatusCode, body)
		}
	}
	for range 3 {
		chat(a, "smart")
	}
	chat(a, "rated")
	if d, l := dead.Stats().Requests, limited.Stats().Requests; d != 3 || l != 1 {
		t.Fatalf("instance a sent the dead provider %d requests, the limited one %d; want 3 and 1", d, l)
	}
	// Instance b learns of both (a message on the shared state): its
	// health says so, and it sends neither target anything.
	deadline := time.Now().Add(5 * time.Second)
	for {
		h := routingHealth(t, b.adminURL)
		dh, lh := targetHealth(t, h, "dead/gpt-4o-mini"), targetHealth(t, h, "limited/gpt-4o-mini")
		if dh.State == routing.Open && !lh.CooldownUntil.IsZero() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("instance b did not learn of a's changes: %+v %+v", dh, lh)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for range 5 {
		chat(b, "smart")
		chat(b, "rated")
	}
	if d, l := dead.Stats().Requests, limited.Stats().Requests; d != 3 || l != 1 {
		t.Fatalf("instance b sent the dead provider %d requests, the limited one %d; want none", d-3, l-1)
	}
	if h := targetHealth(t, routingHealth(t, a.adminURL), "dead/gpt-4o-mini"); h.State != routing.Open || h.Opens != 1 {
		t.Fatalf("a's view: %+v", h)
	}
	if h := targetHealth(t, routingHealth(t, b.adminURL), "dead/gpt-4o-mini"); h.Requests != 0 {
		t.Fatalf("b's view: %+v", h)
	}
	// Each says so in its log: a that it opened, b that another did.
	waitLog(t, a, `"msg":"circuit breaker opened","target":"dead/gpt-4o-mini","reason":"consecutive_failures"`, 5*time.Second)
	waitLog(t, a, `"msg":"provider cool-down","target":"limited/gpt-4o-mini","reason":"rate_limited"`, 5*time.Second)
	waitLog(t, b, `"msg":"circuit breaker opened","target":"dead/gpt-4o-mini","reason":"another_instance"`, 5*time.Second)
	if !strings.Contains(b.caddyLog(), `"remote":true`) {
		t.Errorf("b's log does not say another instance made the change:\n%s", b.problems(20))
	}
}

package integration

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/modelgate/modelgate/providers/providertest"
)

// TestProcessNativeBatchCrash kills the caddy binary while the provider
// is creating the batch of a native part: the fake has the batch, the
// gateway never had its answer (nor its id). Restarted, the gateway finds
// the provider batch by the part's marker instead of submitting again:
// the fake created exactly one batch, and every line has exactly one
// result, none of them sent as a live request.
func TestProcessNativeBatchCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the caddy binary")
	}
	fake := providertest.Start(t, providertest.Options{OpenAIKey: openAIKey})
	// In front of the fake: the first POST /v1/batches reaches it, and
	// its answer is held back until the gateway is killed.
	var once sync.Once
	created, stop := make(chan struct{}), make(chan struct{})
	defer close(stop)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/batches" {
			first := false
			once.Do(func() { first = true })
			if first {
				fake.ServeHTTP(httptest.NewRecorder(), r)
				close(created)
				select {
				case <-r.Context().Done():
				case <-stop:
				}
				return
			}
		}
		fake.ServeHTTP(w, r)
	}))
	defer front.Close()

	in := newInstanceURL(t, "a", t.TempDir(), front.URL).set("MG_OA_BATCH=native")
	in.start()
	c := in.client()
	const n = 300
	lines := make([]string, n)
	for i := range lines {
		lines[i] = chatLine(fmt.Sprintf("n%d", i), "oa/gpt-4o-mini")
	}
	b := newBatch(t, c, uploadLines(t, c, lines).ID, openai.BatchNewParamsEndpointV1ChatCompletions)
	select {
	case <-created:
	case <-time.After(30 * time.Second):
		t.Fatalf("the native part was not submitted:\n%s", in.problems(20))
	}
	in.kill()
	if got := fake.BatchesCreated(); got != 1 {
		t.Fatalf("%d provider batches before the restart", got)
	}

	in.start()
	b = waitBatch(t, c, b.ID, 60*time.Second, "completed", "failed", "cancelled", "expired")
	if b.Status != "completed" || b.RequestCounts.Completed != n {
		t.Fatalf("after restart: %s\n%s", b.RawJSON(), in.problems(20))
	}
	checkOnce(t, c, b, n)
	if got := fake.BatchesCreated(); got != 1 {
		t.Errorf("the provider created %d batches for one part, want 1", got)
	}
	if live := sentTimes(fake); len(live) != 0 {
		t.Errorf("%d lines were sent as live requests", len(live))
	}
}

// TestProcessRedisNativeBatch runs two instances on Redis, each in front
// of a fake of its own, with a native batch whose provider batch the fake
// holds for a while: one instance submits the part and only it polls and
// collects it (the other's fake sees no request of its batch API), the
// provider has one batch, and every line one result.
func TestProcessRedisNativeBatch(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the caddy binary")
	}
	c := startRedisCluster(t, 2, "MG_OA_BATCH=native")
	for _, f := range c.fakes {
		f.HoldBatches(true)
	}
	ca := c.ins[0].client()
	const n = 100
	lines := make([]string, n)
	for i := range lines {
		lines[i] = chatLine(fmt.Sprintf("r%d", i), "oa/gpt-4o-mini")
	}
	b := newBatch(t, ca, uploadLines(t, ca, lines).ID, openai.BatchNewParamsEndpointV1ChatCompletions)
	deadline := time.Now().Add(30 * time.Second)
	for c.fakes[0].BatchesCreated()+c.fakes[1].BatchesCreated() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the native part was not submitted")
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(7 * time.Second) // polls at about 2 and 6 s after the submission
	for _, f := range c.fakes {
		f.HoldBatches(false)
	}
	b = waitBatch(t, ca, b.ID, 90*time.Second, "completed", "failed", "cancelled", "expired")
	if b.Status != "completed" || b.RequestCounts.Completed != n {
		t.Fatalf("batch: %s", b.RawJSON())
	}
	checkOnce(t, ca, b, n)
	calls := make([]int, 2)
	for i, f := range c.fakes {
		for _, r := range f.Requests() {
			if r.Format == "openai_batch" {
				calls[i]++
			}
		}
	}
	created := c.fakes[0].BatchesCreated() + c.fakes[1].BatchesCreated()
	if created != 1 || (calls[0] == 0) == (calls[1] == 0) {
		t.Errorf("%d provider batches; batch API requests by instance %v: want one batch, driven by one instance", created, calls)
	}
	t.Logf("batch API requests by instance: %v", calls)
}

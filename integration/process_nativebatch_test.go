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

package integration

import (
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
)

// batchEvents returns the recorded events of batch id, in order.
func batchEvents(id string) []caddy.Event {
	recorded.mu.Lock()
	defer recorded.mu.Unlock()
	var es []caddy.Event
	for _, e := range recorded.events {
		if e.Data["batch_id"] == id {
			es = append(es, e)
		}
	}
	return es
}

// TestIntegrationBatchEvents: a batch emits batch_submitted when it is
// created and one event for its final status, from the modelgate app,
// with its owner, counts and result files.
func TestIntegrationBatchEvents(t *testing.T) {
	startScanningGateway(t)
	c := sdk(aliceKey)

	for _, tc := range []struct {
		name   string
		lines  []string
		final  string
		counts [3]int // total, completed, failed
	}{
		{"completed", []string{chatLine("a", "oa/gpt-4o-mini"), chatLine("b", "oa/gpt-4o-mini")}, "completed", [3]int{2, 2, 0}},
		{"failed", []string{chatLine("a", "oa/gpt-4o-mini"), chatLine("b", "nosuch/model")}, "failed", [3]int{2, 0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := uploadLines(t, c, tc.lines)
			b := newBatch(t, c, f.ID, "/v1/chat/completions")
			b = waitBatch(t, c, b.ID, 10*time.Second, "completed", "failed")
			var es []caddy.Event
			for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				if es = batchEvents(b.ID); len(es) >= 2 {
					break
				}
			}
			if len(es) != 2 || es[0].Name() != "batch_submitted" || es[1].Name() != "batch_"+tc.final {
				t.Fatalf("events of the batch: %v", names(es))
			}
			for _, e := range es {
				if e.Origin() == nil || e.Origin().CaddyModule().ID != "modelgate" || e.Data["owner"] != "alice" ||
					e.Data["endpoint"] != "/v1/chat/completions" || e.Data["input_file_id"] != f.ID {
					t.Errorf("%s: origin %v, data %v", e.Name(), e.Origin(), e.Data)
				}
			}
			end := es[1].Data
			if end["status"] != tc.final || end["total"] != tc.counts[0] || end["completed"] != tc.counts[1] || end["failed"] != tc.counts[2] {
				t.Errorf("%s data %v", es[1].Name(), end)
			}
			if tc.final == "completed" && end["output_file_id"] != b.OutputFileID {
				t.Errorf("output_file_id %v, batch has %s", end["output_file_id"], b.OutputFileID)
			}
			if tc.final == "failed" && end["errors"] != 1 {
				t.Errorf("errors %v", end["errors"])
			}
		})
	}
}

func names(es []caddy.Event) []string {
	var ns []string
	for _, e := range es {
		ns = append(ns, e.Name())
	}
	return ns
}

package integration

import (
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/modelgate/modelgate/pricing"
	"github.com/modelgate/modelgate/providers/providertest"
)

// BenchmarkNativeBatch50k runs a 50,000-line chat batch through a caddy
// binary to a provider whose batches are native (the fake's OpenAI Batch
// API, in this process), then the same batch through a second binary
// whose provider has batch gateway. It reports, for the native run, the
// time from POST /v1/batches to the provider batch created (validation,
// the part written, the input file streamed up) and to completion (polled,
// the results streamed down, mapped back and settled); for both, the time
// to completion and the binary's peak RSS; and what the batch's usage
// costs at the batch price and at the live price, from the price table.
//
//	go test -run '^$' -bench NativeBatch50k -benchtime 1x ./integration/
func BenchmarkNativeBatch50k(b *testing.B) {
	fake := providertest.New(providertest.Options{OpenAIKey: openAIKey, NoRecord: true})
	srv := httptest.NewServer(fake)
	b.Cleanup(srv.Close)
	start := func(mode string) *instance {
		in := newInstanceURL(b, mode, b.TempDir(), srv.URL).
			set("MG_WORKERS=64", "MG_PART_LINES=1000", "MG_LEASE=30s", "MG_OA_BATCH="+mode)
		in.start()
		return in
	}
	native, gw := start("native"), start("gateway")

	n := batchBenchLines()
	var content bytes.Buffer
	for i := range n {
		content.WriteString(chatLine(fmt.Sprintf("req-%d", i), "oa/gpt-4o-mini"))
		content.WriteByte('\n')
	}
	var submit, total, gwTotal time.Duration
	var usage pricing.Usage
	for i := 0; i < b.N; i++ {
		c := native.client()
		f := uploadContent(b, c, content.Bytes())
		created := fake.BatchesCreated()
		begin := time.Now()
		bt := newBatch(b, c, f.ID, openai.BatchNewParamsEndpointV1ChatCompletions)
		for fake.BatchesCreated() == created {
			time.Sleep(5 * time.Millisecond)
		}
		submit += time.Since(begin)
		got := waitBench(b, c, bt.ID, n)
		total += time.Since(begin)
		usage = pricing.Usage{PromptTokens: got.Usage.InputTokens, CompletionTokens: got.Usage.OutputTokens}

		took, _ := runBatch(b, gw, content.Bytes(), n)
		gwTotal += took
	}
	if fake.BatchesCreated() != b.N {
		b.Fatalf("%d provider batches for %d runs", fake.BatchesCreated(), b.N)
	}
	b.ReportMetric(submit.Seconds()/float64(b.N), "native-s-to-submit")
	b.ReportMetric(total.Seconds()/float64(b.N), "native-s-to-complete")
	b.ReportMetric(native.peakRSS(), "native-peak-RSS-MiB")
	b.ReportMetric(gwTotal.Seconds()/float64(b.N), "gateway-s-to-complete")
	b.ReportMetric(gw.peakRSS(), "gateway-peak-RSS-MiB")
	nativeCost, _ := pricing.Default().BatchCost("openai", "gpt-4o-mini", usage)
	liveCost, _ := pricing.Default().Cost("openai", "gpt-4o-mini", usage)
	b.ReportMetric(nativeCost.Dollars(), "native-USD")
	b.ReportMetric(liveCost.Dollars(), "gateway-USD")
}

// waitBench polls batch id until it has completed with n lines.
func waitBench(b *testing.B, c openai.Client, id string, n int) *openai.Batch {
	for {
		got, err := c.Batches.Get(context.Background(), id)
		if err != nil {
			b.Fatal(err)
		}
		switch got.Status {
		case "completed":
			if got.RequestCounts.Completed != int64(n) {
				b.Fatalf("batch: %s", got.RawJSON())
			}
			return got
		case "failed", "expired", "cancelled":
			b.Fatalf("batch: %s", got.RawJSON())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

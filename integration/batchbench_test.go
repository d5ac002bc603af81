package integration

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/batch"
	"github.com/modelgate/modelgate/caddygateway"
	"github.com/modelgate/modelgate/providers/providertest"
)

// startBenchGateway loads, in this process, a modelgate in front of a fast
// fake provider, with batch options batchOpts and a fresh storage, and
// returns its base URL.
func startBenchGateway(b *testing.B, batchOpts string) string {
	b.Helper()
	fake := httptest.NewServer(providertest.New(providertest.Options{OpenAIKey: openAIKey, NoRecord: true}))
	b.Cleanup(fake.Close)
	port := freePort(b)
	cfg := fmt.Sprintf(`{
	admin off
	persist_config off
	http_port %[1]d
	modelgate {
		provider oa openai {
			batch gateway
			base_url %[2]s/v1
			api_key %[3]s
		}
		key bench %[4]s
		batch {
			%[5]s
		}
		storage file_system %[6]s
	}
}
http://127.0.0.1:%[1]d {
	modelgate_auth
	modelgate
}`, port, fake.URL, openAIKey, aliceKey, batchOpts, b.TempDir())
	adapted, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(cfg), nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := caddy.Load(adapted, true); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = caddy.Stop() })
	return fmt.Sprintf("http://127.0.0.1:%d", port)
}

// resetPeakRSS starts a new peak resident set size measurement (Linux:
// writing 5 to clear_refs resets VmHWM).
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// peakRSS returns this process's VmHWM in MiB, or -1 where /proc is not
// there.
func peakRSS() float64 { return statusHWM("/proc/self/status") }

// statusHWM reads VmHWM, in MiB, from a /proc/<pid>/status file; -1 when
// it cannot.
func statusHWM(path string) float64 {
	f, err := os.Open(path)
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			if err == nil {
				return float64(kb) / 1024
			}
		}
	}
	return -1
}

// uploadStream uploads size bytes of JSONL lines, generated as they are
// sent, with purpose batch, and returns the file id.
func uploadStream(b *testing.B, base string, size int64) string {
	b.Helper()
	pr, pw := io.Pipe()
	// Buffered as a client sending a file would be: unbuffered, each
	// 100-byte line would be one chunk and one syscall of its own.
	bw := bufio.NewWriterSize(pw, 64<<10)
	mw := multipart.NewWriter(bw)
	go func() {
		_ = mw.WriteField("purpose", "batch")
		fw, err := mw.CreateFormFile("file", "big.jsonl")
		if err == nil {
			line := []byte(chatLine("x", "oa/gpt-4o-mini") + "\n")
			for left := size; left > 0 && err == nil; left -= int64(len(line)) {
				_, err = fw.Write(line[:min(int64(len(line)), left)])
			}
		}
		if err == nil {
			err = mw.Close()
		}
		if err == nil {
			err = bw.Flush()
		}
		pw.CloseWithError(err)
	}()
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/files", pr)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+aliceKey)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 || gjson.GetBytes(body, "bytes").Int() != size {
		b.Fatalf("upload: %d %s", res.StatusCode, body)
	}
	return gjson.GetBytes(body, "id").Str
}

// BenchmarkFiles200MiB uploads a 200 MiB file (the default max_file_size)
// through POST /v1/files and downloads it from /v1/files/{id}/content, and
// reports the throughput and the process's peak RSS during each: both are
// streamed, so the peak stays far below the file's size.
//
//	go test -run '^$' -bench Files200MiB -benchtime 3x ./integration/
func BenchmarkFiles200MiB(b *testing.B) {
	base := startBenchGateway(b, "max_file_size 200MiB")
	const size = 200 << 20
	var upPeak, downPeak float64
	var up, down time.Duration
	for i := 0; i < b.N; i++ {
		resetPeakRSS()
		start := time.Now()
		id := uploadStream(b, base, size)
		up += time.Since(start)
		upPeak = max(upPeak, peakRSS())

		resetPeakRSS()
		start = time.Now()
		res := getWithKeyB(b, base+"/v1/files/"+id+"/content")
		n, err := io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if err != nil || n != size {
			b.Fatalf("download: %d bytes, %v", n, err)
		}
		down += time.Since(start)
		downPeak = max(downPeak, peakRSS())
	}
	mb := float64(size) / (1 << 20) * float64(b.N)
	b.ReportMetric(mb/up.Seconds(), "upload-MiB/s")
	b.ReportMetric(mb/down.Seconds(), "download-MiB/s")
	b.ReportMetric(upPeak, "upload-peak-RSS-MiB")
	b.ReportMetric(downPeak, "download-peak-RSS-MiB")
}

func getWithKeyB(b *testing.B, url string) *http.Response {
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+aliceKey)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	if res.StatusCode != 200 {
		b.Fatalf("GET %s: %d", url, res.StatusCode)
	}
	return res
}

// batchBenchLines is the size of the batch BenchmarkBatch50k runs; set
// MODELGATE_BENCH_LINES to run a smaller one.
func batchBenchLines() int {
	if n, err := strconv.Atoi(os.Getenv("MODELGATE_BENCH_LINES")); err == nil && n > 0 {
		return n
	}
	return 50000
}

// BenchmarkBatch50k runs a 50,000-line chat batch against a fast fake
// provider, 64 workers, and reports lines/s from creation to completion
// (validation, execution, checkpoints, result files) and the process's
// peak RSS. For comparison it then sends the same number of requests
// through the batch executor alone (the gateway's path, 64 at a time,
// without any bookkeeping) and reports the ratio: near 1 means the gateway,
// not the bookkeeping, is the limit.
//
//	go test -run '^$' -bench Batch50k -benchtime 1x ./integration/
func BenchmarkBatch50k(b *testing.B) {
	base := startBenchGateway(b, "workers 64\n\t\t\tper_provider 64\n\t\t\tpoll_interval 100ms")
	n := batchBenchLines()
	var content bytes.Buffer
	for i := range n {
		content.WriteString(chatLine(fmt.Sprintf("req-%d", i), "oa/gpt-4o-mini"))
		content.WriteByte('\n')
	}
	c := openai.NewClient(option.WithBaseURL(base+"/v1/"), option.WithAPIKey(aliceKey), option.WithMaxRetries(0))

	var batchTime, execTime time.Duration
	var peak float64
	for i := 0; i < b.N; i++ {
		f := uploadContent(b, c, content.Bytes())
		resetPeakRSS()
		start := time.Now()
		bt := newBatch(b, c, f.ID, openai.BatchNewParamsEndpointV1ChatCompletions)
		for {
			got, err := c.Batches.Get(context.Background(), bt.ID)
			if err != nil {
				b.Fatal(err)
			}
			if got.Status == "completed" {
				if got.RequestCounts.Completed != int64(n) {
					b.Fatalf("batch: %s", got.RawJSON())
				}
				break
			}
			if got.Status == "failed" || got.Status == "expired" || got.Status == "cancelled" {
				b.Fatalf("batch: %s", got.RawJSON())
			}
			time.Sleep(20 * time.Millisecond)
		}
		batchTime += time.Since(start)
		peak = max(peak, peakRSS())

		start = time.Now()
		runExecutor(b, n, 64)
		execTime += time.Since(start)
	}
	lps := float64(n*b.N) / batchTime.Seconds()
	elps := float64(n*b.N) / execTime.Seconds()
	b.ReportMetric(lps, "lines/s")
	b.ReportMetric(elps, "executor-only-lines/s")
	b.ReportMetric(lps/elps, "ratio")
	b.ReportMetric(peak, "peak-RSS-MiB")
}

// runExecutor sends n chat requests through the live config's batch
// executor, conc at a time.
func runExecutor(b *testing.B, n, conc int) {
	v, err := caddy.ActiveContext().AppIfConfigured("modelgate")
	if err != nil {
		b.Fatal(err)
	}
	ex := v.(*caddygateway.App).BatchExecutor()
	body := []byte(`{"model":"oa/gpt-4o-mini","max_tokens":50,"messages":[{"role":"user","content":"x says hi"}]}`)
	var wg sync.WaitGroup
	next := make(chan int)
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				resp := ex.Do(context.Background(), batch.Request{Endpoint: batch.EndpointChat, Body: body, CustomID: strconv.Itoa(i),
					// A line runs only under its key: the config's
					// static key, its owner as a batch created before
					// static keys' owners were kept apart records it.
					Owner: "bench", KeyName: "bench"})
				if resp.Status != 200 {
					b.Errorf("executor: %d %s", resp.Status, resp.Body)
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

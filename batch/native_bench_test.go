package batch

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/tidwall/gjson"
	"go.uber.org/zap"
)

// streamNative is a provider batch API that keeps nothing of a batch but
// its keys' count: Submit reads the records through, Results answers each
// key, so that a benchmark measures the engine.
type streamNative struct {
	n         atomic.Int64
	submitted atomic.Int64 // UnixNano of the end of Submit
	bytes     atomic.Int64
}

func (s *streamNative) Limits(string) NativeLimits {
	return NativeLimits{MaxRequests: 50_000, MaxBytes: 200_000_000}
}

func (s *streamNative) Encode(_, key string, body []byte, model string) ([]byte, error) {
	return fmt.Appendf(nil, `{"custom_id":%q,"method":"POST","url":"/v1/chat/completions","body":%s}`, key, body), nil
}

func (s *streamNative) Submit(_ context.Context, sub *NativeSubmission) (NativeRef, error) {
	rc := sub.Records()
	defer rc.Close()
	br := bufio.NewReaderSize(rc, 64<<10)
	var lines, size int64
	for {
		line, err := br.ReadSlice('\n')
		size += int64(len(line))
		if err == io.EOF {
			break
		}
		if err != nil {
			return NativeRef{}, err
		}
		if !gjson.ValidBytes(line) {
			return NativeRef{}, fmt.Errorf("record %d is not JSON", lines)
		}
		lines++
	}
	s.n.Store(lines)
	s.bytes.Store(size)
	s.submitted.Store(time.Now().UnixNano())
	return NativeRef{ID: "b1"}, nil
}

func (s *streamNative) Find(context.Context, *NativeSubmission) (NativeRef, bool, error) {
	return NativeRef{}, false, nil
}

func (s *streamNative) Poll(context.Context, NativeRef) (NativeStatus, error) {
	return NativeStatus{State: NativeCompleted}, nil
}

func (s *streamNative) Results(_ context.Context, _ NativeRef, _ NativeStatus, each func(NativeResult) error) error {
	body := []byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}}`)
	for j := s.n.Load() - 1; j >= 0; j-- {
		if err := each(NativeResult{Key: strconv.FormatInt(j, 10), Status: 200, Body: body}); err != nil {
			return err
		}
	}
	return nil
}

func (s *streamNative) Cancel(context.Context, NativeRef) error { return nil }

// BenchmarkNative50k runs a batch of 50,000 chat lines through a native
// provider on a file system storage: validation, the submission of the
// records (streamed), and the collection of 50,000 results into the
// output file. It reports the time to the end of the submission, and the
// peak heap in use while the batch ran.
func BenchmarkNative50k(b *testing.B) {
	const n = 50_000
	var input strings.Builder
	for i := range n {
		fmt.Fprintf(&input, `{"custom_id":"req-%d","method":"POST","url":"/v1/chat/completions","body":{"model":"nat/gpt-4o-mini","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Summarise item %d of the catalogue in one line."}],"max_tokens":64}}`+"\n", i, i)
	}
	content := input.String()
	set := testSettings()
	set.MaxRequests, set.PartLines, set.NativePoll = n, 1000, 10*time.Millisecond
	for b.Loop() {
		b.StopTimer()
		fs := &certmagic.FileStorage{Path: b.TempDir()}
		st := NewStore(fs, "mg")
		api := &streamNative{}
		f, err := st.PutFile(context.Background(), testOwner, "in.jsonl", PurposeBatch, strings.NewReader(content), 1<<30)
		if err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		var base runtime.MemStats
		runtime.ReadMemStats(&base)
		var peak atomic.Uint64
		stop := make(chan struct{})
		go func() {
			var ms runtime.MemStats
			for {
				select {
				case <-stop:
					return
				case <-time.After(2 * time.Millisecond):
				}
				runtime.ReadMemStats(&ms)
				if ms.HeapInuse > peak.Load() {
					peak.Store(ms.HeapInuse)
				}
			}
		}()
		b.StartTimer()
		start := time.Now()
		batch, err := st.CreateBatch(context.Background(), testOwner, CreateParams{InputFileID: f.ID, Endpoint: EndpointChat, CompletionWindow: "24h", Window: time.Hour})
		if err != nil {
			b.Fatal(err)
		}
		r := NewRunner(st, "inst", 5*time.Millisecond, func() (Live, bool) {
			return Live{Settings: set, Executor: newFakeExecutor(), Logger: zap.NewNop(), Native: func(string) NativeAPI { return api }}, true
		})
		for {
			got, err := st.GetBatch(context.Background(), testOwner, batch.ID)
			if err != nil {
				b.Fatal(err)
			}
			if got.Status == StatusCompleted {
				if got.RequestCounts.Completed != n {
					b.Fatalf("counts %+v", got.RequestCounts)
				}
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		total := time.Since(start)
		b.StopTimer()
		_ = r.Destruct()
		close(stop)
		if api.n.Load() != n {
			b.Fatalf("submitted %d records", api.n.Load())
		}
		b.ReportMetric(float64(time.Unix(0, api.submitted.Load()).Sub(start).Milliseconds()), "ms-to-submitted")
		b.ReportMetric(float64(total.Milliseconds()), "ms-to-completed")
		b.ReportMetric(float64(peak.Load()-min(peak.Load(), base.HeapInuse))/(1<<20), "MiB-peak-heap-over-idle")
		b.ReportMetric(float64(api.bytes.Load())/(1<<20), "MiB-records")
		b.StartTimer()
	}
}

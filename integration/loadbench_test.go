package integration

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"

	"github.com/modelgate/modelgate/providers/providertest"
)

// loadRequests and loadConcurrency size one benchmark iteration: every
// scenario sends loadRequests chat requests from loadConcurrency clients.
const (
	loadRequests    = 3000
	loadConcurrency = 32
)

// BenchmarkEndToEnd runs, in one process on loopback, the same fake
// provider behind (a) Caddy's plain reverse_proxy and (b) modelgate, for
// OpenAI passthrough and for OpenAI→Anthropic translation, and reports
// requests/s, p50 and p99 latency of each, and the ratio of modelgate's
// throughput to plain reverse_proxy's. Run it with
//
//	go test -run '^$' -bench EndToEnd -benchtime 5x ./integration/
func BenchmarkEndToEnd(b *testing.B) {
	fake := httptest.NewServer(providertest.New(providertest.Options{OpenAIKey: openAIKey, AnthropicKey: anthropicKey, NoRecord: true}))
	defer fake.Close()
	plainPort, gatewayPort := freePort(b), freePort(b)

	cfg := fmt.Sprintf(`{
	admin off
	persist_config off
	http_port %[1]d
	modelgate {
		provider oa openai {
			batch gateway
			base_url %[3]s/v1
			api_key %[4]s
		}
		provider claude anthropic {
			batch gateway
			base_url %[3]s
			api_key %[5]s
		}
		key bench %[6]s
	}
}
http://127.0.0.1:%[1]d {
	reverse_proxy %[3]s
}
http://127.0.0.1:%[2]d {
	modelgate_auth
	modelgate
}`, plainPort, gatewayPort, fake.URL, openAIKey, anthropicKey, aliceKey)
	adapted, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(cfg), nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := caddy.Load(adapted, true); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = caddy.Stop() }()

	body := func(model string) []byte {
		return []byte(`{"model":"` + model + `","max_tokens":64,"temperature":0.2,"messages":[` +
			`{"role":"system","content":"You are a terse assistant."},` +
			`{"role":"user","content":"Summarise the plot of Hamlet in one sentence please"}]}`)
	}
	scenarios := []struct {
		name, url, key string
		body           []byte
	}{
		{"reverse_proxy", fmt.Sprintf("http://127.0.0.1:%d/v1/chat/completions", plainPort), openAIKey, body("gpt-4o-mini")},
		{"modelgate_openai", fmt.Sprintf("http://127.0.0.1:%d/v1/chat/completions", gatewayPort), aliceKey, body("oa/gpt-4o-mini")},
		{"modelgate_anthropic", fmt.Sprintf("http://127.0.0.1:%d/v1/chat/completions", gatewayPort), aliceKey, body("claude/claude-sonnet-4-5")},
	}

	client := &http.Client{Transport: &http.Transport{
		MaxIdleConns: loadConcurrency * 2, MaxIdleConnsPerHost: loadConcurrency * 2, IdleConnTimeout: time.Minute,
	}}
	for _, s := range scenarios { // warm up connections, pools and caches, untimed
		runLoad(b, client, s.url, s.key, s.body, loadRequests/10)
	}
	results := make([]loadResult, len(scenarios))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j, s := range scenarios {
			r := runLoad(b, client, s.url, s.key, s.body, loadRequests)
			results[j].add(r)
		}
	}
	b.StopTimer()

	base := results[0].rps()
	var report strings.Builder
	fmt.Fprintf(&report, "end to end, %d x %d requests per scenario, %d clients:\n", b.N, loadRequests, loadConcurrency)
	fmt.Fprintf(&report, "%-22s %10s %9s %9s %8s\n", "scenario", "req/s", "p50", "p99", "ratio")
	for j, s := range scenarios {
		r := &results[j]
		p50, p99 := r.percentile(0.50), r.percentile(0.99)
		fmt.Fprintf(&report, "%-22s %10.0f %9s %9s %8.2f\n", s.name, r.rps(), p50.Round(time.Microsecond), p99.Round(time.Microsecond), r.rps()/base)
		b.ReportMetric(r.rps(), s.name+"_req/s")
		b.ReportMetric(float64(p99.Microseconds()), s.name+"_p99_us")
		if j > 0 {
			b.ReportMetric(r.rps()/base, s.name+"/reverse_proxy")
		}
	}
	// Printed, not logged: the testing package trims benchmark logs.
	fmt.Print(report.String())
}

type loadResult struct {
	latencies []time.Duration
	elapsed   time.Duration
}

func (r *loadResult) add(o loadResult) {
	r.latencies = append(r.latencies, o.latencies...)
	r.elapsed += o.elapsed
}

func (r *loadResult) rps() float64 { return float64(len(r.latencies)) / r.elapsed.Seconds() }

func (r *loadResult) percentile(p float64) time.Duration {
	sort.Slice(r.latencies, func(i, j int) bool { return r.latencies[i] < r.latencies[j] })
	return r.latencies[int(p*float64(len(r.latencies)-1))]
}

// runLoad sends n POSTs from loadConcurrency goroutines and fails the
// benchmark on any answer but 200.
func runLoad(b *testing.B, client *http.Client, url, key string, body []byte, n int64) loadResult {
	var next atomic.Int64
	var failed atomic.Value
	lat := make([][]time.Duration, loadConcurrency)
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < loadConcurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= n {
				req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+key)
				t0 := time.Now()
				res, err := client.Do(req)
				if err != nil {
					failed.Store(err.Error())
					return
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != http.StatusOK {
					failed.Store(fmt.Sprintf("%s: status %d", url, res.StatusCode))
					return
				}
				lat[w] = append(lat[w], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	r := loadResult{elapsed: time.Since(start)}
	if msg := failed.Load(); msg != nil {
		b.Fatal(msg)
	}
	for _, l := range lat {
		r.latencies = append(r.latencies, l...)
	}
	return r
}

func freePort(tb testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

//go:build linux

package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	_ "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/modelgate/modelgate"
	"github.com/modelgate/modelgate/providers/providertest"

	"github.com/modelgate/modelgate/internal/procstat"
)

// TestEventCounting: both event counters count blocks ended by a blank
// line, whatever the chunks and line endings.
func TestEventCounting(t *testing.T) {
	stream := "data: {\"a\":1}\n\nevent: x\ndata: {}\n\n: comment\r\n\r\ndata: [DONE]\n\n"
	for _, chunk := range []int{1, 3, 7, len(stream)} {
		c := &eventCounter{}
		for i := 0; i < len(stream); i += chunk {
			_, _ = c.Write([]byte(stream[i:min(i+chunk, len(stream))]))
		}
		if c.n != 4 {
			t.Errorf("eventCounter, chunks of %d: %d events, want 4", chunk, c.n)
		}
	}
	n, ttft, all, err := readEvents(strings.NewReader(stream), time.Now(), true)
	if err != nil || n != 4 || ttft <= 0 || string(all) != stream {
		t.Errorf("readEvents: %d events, ttft %v, %q, %v", n, ttft, all, err)
	}
}

// TestCannedAnswers: the canned upstream holds the fake provider's answer
// to every scenario's upstream request, serves it for the gateway's and the
// plain request alike, and the streams have the lengths the report says.
func TestCannedAnswers(t *testing.T) {
	c, err := record(providertest.New(providertest.Options{
		OpenAIKey: upstreamOpenAIKey, AnthropicKey: upstreamAnthropicKey, NoRecord: true,
		Keys: map[string]string{"cohere": upstreamCohereKey},
	}), true)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range append(scenarios(), pacedScenario()) {
		rec := httptest.NewRecorder()
		c.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, s.plain.path, bytes.NewReader(s.plain.body)))
		if rec.Code != 200 || !strings.Contains(rec.Body.String(), s.expect) {
			t.Errorf("%s: %d %.300s", s.name, rec.Code, rec.Body.String())
		}
		// The provider's own headers come with every answer.
		want := map[string]string{"chat": "X-Ratelimit-Remaining-Tokens", "stream": "X-Ratelimit-Reset-Requests",
			"messages": "Anthropic-Ratelimit-Output-Tokens-Reset", "stream_anthropic": "Request-Id"}[s.name]
		if want != "" && rec.Header().Get(want) == "" {
			t.Errorf("%s: no %s among %v", s.name, want, rec.Header())
		}
		if s.stream {
			n := bytes.Count(rec.Body.Bytes(), []byte("\n\n"))
			want := map[string]int{"stream": 50, "paced_stream": pacedWords + 5}[s.name]
			if want > 0 && n != want {
				t.Errorf("%s: %d events, want %d", s.name, n, want)
			}
		}
	}
	rec := httptest.NewRecorder()
	c.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(`{"model":"unknown"}`)))
	if rec.Code != http.StatusNotFound {
		t.Errorf("a request without a recorded answer: %d", rec.Code)
	}
}

// TestVariantConfigs: every variant's Caddyfile adapts.
func TestVariantConfigs(t *testing.T) {
	for name, v := range variants {
		cfg := v.caddyfile(ports{admin: 2999, http: 9080, upstream: "127.0.0.1:9081", storage: t.TempDir(), redis: "127.0.0.1:9082"})
		if _, warn, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(cfg), nil); err != nil || len(warn) > 0 {
			t.Errorf("%s: %v %v\n%s", name, err, warn, cfg)
		}
	}
}

// TestProc: CPU time and memory of this process, read from /proc.
func TestProc(t *testing.T) {
	pid := os.Getpid()
	end := time.Now().Add(50 * time.Millisecond)
	for x := 0; time.Now().Before(end); x++ {
		_ = x * x
	}
	cpu, err := procstat.CPU(pid)
	if err != nil || cpu <= 0 {
		t.Errorf("procstat.CPU: %v, %v", cpu, err)
	}
	rss, hwm, err := memory(pid)
	if err != nil || rss <= 0 || hwm < rss {
		t.Errorf("memory: rss %d hwm %d, %v", rss, hwm, err)
	}
	if cpus := allowedCPUs(); len(cpus) == 0 {
		t.Error("allowedCPUs: none")
	}
}

// TestFeaturesTable: the features table pairs each feature variant with
// modelgate's run of the same round, so that a round's drift (here every
// variant twice as fast in round 2) cancels out of each pair.
func TestFeaturesTable(t *testing.T) {
	r := newReport()
	add := func(v string, round int, requests int64, cpuPerReq time.Duration) {
		r.runs = append(r.runs, &run{Suite: "live", Case: "chat", Scenario: "chat", Variant: v, Round: round,
			Load: loadResult{Requests: requests, Seconds: 1}, PeakRSSKiB: 1000,
			GatewayCPU: cpuPerReq * time.Duration(requests)})
	}
	for round, scale := range map[int]int64{1: 1, 2: 2} {
		add("tuned", round, 1000*scale, 100*time.Microsecond)
		add("modelgate", round, 900*scale, 110*time.Microsecond)
		add("modelgate_full", round, 882*scale, 114*time.Microsecond)
	}
	var b strings.Builder
	r.writeSummary(&b)
	// tuned's rate: 1000 and 2000 req/s, median 1500.
	if want := "| chat | 67 % | 0.90 [0.90–0.90] | 1.00 | 0.88 [0.88–0.88] | 1.00 |"; !strings.Contains(b.String(), want) {
		t.Errorf("summary lacks %q:\n%s", want, b.String())
	}
	b.Reset()
	r.writeFeatures(&b)
	got := b.String()
	for _, want := range []string{
		"| case | modelgate_full rate | modelgate_full CPU |",
		"| chat | 0.980 [0.98–0.98] | +4.0 µs [+4–+4] |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("features table lacks %q:\n%s", want, got)
		}
	}
	// A variant on Redis: redis-server's CPU per request beside the
	// gateway's, and in how busy core 0 was (its CPU with the gateway's);
	// the gateway's system calls, writes and bytes written per request.
	r.runs = append(r.runs, &run{Suite: "live", Case: "chat", Scenario: "chat", Variant: "modelgate_redis", Round: 1,
		Load: loadResult{Requests: 500, Seconds: 1}, PeakRSSKiB: 1000,
		GatewayCPU: 500 * 200 * time.Microsecond, UpstreamCPU: 500 * 100 * time.Microsecond, RedisCPU: 500 * 60 * time.Microsecond,
		GatewaySyscalls: 500 * 14, GatewayWrites: 500 * 6, GatewayWritten: 500 * 12800})
	b.Reset()
	r.writeRuns(&b, "live", "Live")
	if want := "| 200/100 µs + Redis 60 µs | 14.0 (6.0 w, 12.8 KB) | 18% |"; !strings.Contains(b.String(), want) {
		t.Errorf("runs table lacks %q:\n%s", want, b.String())
	}
	// Without modelgate in the run there is nothing to pair with.
	r.runs = slices.DeleteFunc(r.runs, func(x *run) bool { return x.Variant == "modelgate" })
	b.Reset()
	r.writeFeatures(&b)
	if b.Len() != 0 {
		t.Errorf("a features table without modelgate:\n%s", b.String())
	}
}

package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/redis/go-redis/v9"

	"github.com/modelgate/modelgate/internal/redistest"
	"github.com/modelgate/modelgate/providers/providertest"
)

// The benchmarks of a cluster on Redis: caddy binaries, as the
// process tests run them, on a redis-server with production-like
// persistence (appendfsync everysec). Each reports numbers; none asserts a
// time. One iteration (the CI's -benchtime 1x) is kept short; environment
// variables give the full sizes:
//
//	MODELGATE_BENCH_CLUSTER_LINES  lines of BenchmarkClusterBatch (default 5000; the 50000)
//	MODELGATE_BENCH_UPSTREAM_MS    the fake provider's latency per request (default 0)
//	MODELGATE_BENCH_DELETES        keys revoked by BenchmarkClusterKeyRevocation (default 50)
//
//	MODELGATE_BENCH_CLUSTER_LINES=50000 go test -run '^$' -bench Cluster -benchtime 1x ./integration/

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n >= 0 {
		return n
	}
	return def
}

// benchFake is a fake provider in this process that records nothing.
func benchFake(b *testing.B) string {
	fake := httptest.NewServer(providertest.New(providertest.Options{OpenAIKey: openAIKey, NoRecord: true}))
	b.Cleanup(fake.Close)
	return fake.URL
}

// benchInstances starts n instances in front of fakeURL with the
// instance.Caddyfile variables vars and the batch settings of
// BenchmarkBatch50k (64 workers, 1000-line parts, the default lease).
func benchInstances(b *testing.B, n int, storage, fakeURL string, vars ...string) []*instance {
	b.Helper()
	var ins []*instance
	for i := range n {
		in := newInstanceURL(b, string(rune('a'+i)), storage, fakeURL).
			set("MG_WORKERS=64", "MG_PART_LINES=1000", "MG_LEASE=30s").set(vars...)
		in.start()
		ins = append(ins, in)
	}
	return ins
}

// peakRSS returns the instance's peak resident set size so far, in MiB.
func (in *instance) peakRSS() float64 {
	return statusHWM(fmt.Sprintf("/proc/%d/status", in.cmd.Process.Pid))
}

// runBatch uploads content through in, runs it as a chat batch and
// returns how long the batch took from its creation to completed, and the
// batch.
func runBatch(b *testing.B, in *instance, content []byte, n int) (time.Duration, *openai.Batch) {
	b.Helper()
	c := in.client()
	f := uploadContent(b, c, content)
	start := time.Now()
	bt := newBatch(b, c, f.ID, openai.BatchNewParamsEndpointV1ChatCompletions)
	for {
		got, err := c.Batches.Get(context.Background(), bt.ID)
		if err != nil {
			b.Fatal(err)
		}
		switch got.Status {
		case "completed":
			if got.RequestCounts.Completed != int64(n) {
				b.Fatalf("batch: %s", got.RawJSON())
			}
			return time.Since(start), got
		case "failed", "expired", "cancelled":
			b.Fatalf("batch: %s", got.RawJSON())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// BenchmarkClusterBatch runs one chat batch on one instance on the file
// system, then the same batch on three instances sharing one Redis, and
// reports lines/s of each (creation to completion), their ratio, and the
// peak RSS of an instance in each. Every process (the instances, Redis,
// the fake provider) shares this machine's cores: with an instant
// upstream (the default) their CPU and the storage's writes and locks are
// the limit, not the workers; with MODELGATE_BENCH_UPSTREAM_MS set, the
// upstream's latency is, and the cluster's three times the workers show.
func BenchmarkClusterBatch(b *testing.B) {
	n := envInt("MODELGATE_BENCH_CLUSTER_LINES", 5000)
	model := "oa/gpt-4o-mini"
	if ms := envInt("MODELGATE_BENCH_UPSTREAM_MS", 0); ms > 0 {
		model = fmt.Sprintf("oa/slow-%dms", ms)
	}
	var content bytes.Buffer
	for i := range n {
		content.WriteString(chatLine(fmt.Sprintf("req-%d", i), model))
		content.WriteByte('\n')
	}
	fakeURL := benchFake(b)
	file := benchInstances(b, 1, b.TempDir(), fakeURL)
	srv := redistest.Start(b, redistest.Options{AppendFsync: "everysec"})
	cluster := benchInstances(b, 3, b.TempDir(), fakeURL, "MG_STORAGE_KIND=redis", "MG_REDIS="+srv.Addr)
	b.ResetTimer()

	var fileTime, redisTime time.Duration
	for i := 0; i < b.N; i++ {
		took, _ := runBatch(b, file[0], content.Bytes(), n)
		fileTime += took
		took, _ = runBatch(b, cluster[i%3], content.Bytes(), n)
		redisTime += took
	}
	b.StopTimer()
	fileLPS := float64(n*b.N) / fileTime.Seconds()
	redisLPS := float64(n*b.N) / redisTime.Seconds()
	var redisPeak float64
	for _, in := range cluster {
		redisPeak = max(redisPeak, in.peakRSS())
	}
	b.ReportMetric(fileLPS, "file1-lines/s")
	b.ReportMetric(redisLPS, "redis3-lines/s")
	b.ReportMetric(redisLPS/fileLPS, "ratio")
	b.ReportMetric(file[0].peakRSS(), "file1-peak-RSS-MiB")
	b.ReportMetric(redisPeak, "redis3-peak-RSS-MiB/instance")
	b.ReportMetric(float64(n), "lines")
}

// BenchmarkClusterKeyRevocation: three instances on one Redis, key_refresh
// 10m. A key is created on the first, and once the others accept it,
// deleted there; it reports how long after each answer the other two
// instances accepted, then refused, the key (p50 and p99 over every
// instance and key; polled every 2 ms).
func BenchmarkClusterKeyRevocation(b *testing.B) {
	deletes := max(1, envInt("MODELGATE_BENCH_DELETES", 50))
	srv := redistest.Start(b, redistest.Options{AppendFsync: "everysec"})
	ins := benchInstances(b, 3, b.TempDir(), benchFake(b), "MG_STORAGE_KIND=redis", "MG_REDIS="+srv.Addr, "MG_KEY_REFRESH=10m")
	a, others := ins[0], ins[1:]
	b.ResetTimer()

	var created, revoked latencies
	for i := 0; i < b.N; i++ {
		for d := range deletes {
			secret, id := createKey(b, a, fmt.Sprintf("bench-%d-%d", i, d))
			took, err := propagation(others, secret, 200, time.Now(), 10*time.Second)
			if err != nil {
				b.Fatal(err)
			}
			created = append(created, took...)
			deleteKey(b, a, id)
			if took, err = propagation(others, secret, 401, time.Now(), 10*time.Second); err != nil {
				b.Fatal(err)
			}
			revoked = append(revoked, took...)
		}
	}
	b.StopTimer()
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(revoked.percentile(0.5)), "revoke-p50-ms")
	b.ReportMetric(ms(revoked.percentile(0.99)), "revoke-p99-ms")
	b.ReportMetric(ms(created.percentile(0.5)), "create-p50-ms")
	b.ReportMetric(ms(created.percentile(0.99)), "create-p99-ms")
	b.ReportMetric(float64(len(revoked)), "revocations")
}

// BenchmarkRedisFootprint sizes Redis for a cluster: one instance on a
// fresh Redis; it reports the memory Redis uses per managed key, per MiB
// of an uploaded file, and per line of a finished batch (what it keeps:
// its input file and its result files, until they are deleted, and its
// records), beside the sizes of an input line and of an output line; and
// the connections one instance holds idle and after a batch. Run with
// everything in Redis, and with the bytes of files, batch parts and
// checkpoints on a file system (file_storage), where Redis keeps only
// records.
func BenchmarkRedisFootprint(b *testing.B) {
	for _, kind := range []string{"redis", "redis-files"} {
		b.Run(kind, func(b *testing.B) { benchFootprint(b, kind) })
	}
}

func benchFootprint(b *testing.B, kind string) {
	const keyCount, fileMiB, lines = 200, 8, 2000
	srv := redistest.Start(b, redistest.Options{AppendFsync: "everysec"})
	rdb := redisClient(b, srv.Addr)
	ctx := context.Background()
	// What the gateway's keys hold: the sum of MEMORY USAGE over them
	// (used_memory would count client buffers, such as a 4 MiB chunk's
	// command, too).
	used := func() float64 {
		total := 0.0
		iter := rdb.Scan(ctx, 0, redisPrefix+":*", 1000).Iterator()
		for iter.Next(ctx) {
			n, err := rdb.MemoryUsage(ctx, iter.Val(), 0).Result()
			if errors.Is(err, redis.Nil) {
				continue // gone since the scan (a lock released, a lease ended)
			}
			if err != nil {
				b.Fatal(err)
			}
			total += float64(n)
		}
		if err := iter.Err(); err != nil {
			b.Fatal(err)
		}
		return total
	}
	clients := func() float64 {
		v, err := rdb.InfoMap(ctx, "clients").Result()
		if err != nil {
			b.Fatal(err)
		}
		n, _ := strconv.ParseFloat(v["Clients"]["connected_clients"], 64)
		return n - 1 // this benchmark's own
	}
	before := clients()
	in := benchInstances(b, 1, b.TempDir(), benchFake(b), "MG_STORAGE_KIND="+kind, "MG_REDIS="+srv.Addr)[0]
	time.Sleep(500 * time.Millisecond) // the subscription and the first ping
	idle := clients() - before
	b.ResetTimer()

	var perKey, perMiB, perLine, outPerLine float64
	for i := 0; i < b.N; i++ {
		m0 := used()
		for k := range keyCount {
			createKey(b, in, fmt.Sprintf("size-%d-%d", i, k))
		}
		m1 := used()
		perKey = (m1 - m0) / keyCount

		c := in.client()
		line := []byte(chatLine("x", "oa/gpt-4o-mini") + "\n")
		big := bytes.Repeat(line, fileMiB<<20/len(line))
		uploadContent(b, c, big)
		m2 := used()
		perMiB = (m2 - m1) / (float64(len(big)) / (1 << 20))

		var content bytes.Buffer
		for j := range lines {
			content.WriteString(chatLine(fmt.Sprintf("req-%d", j), "oa/gpt-4o-mini"))
			content.WriteByte('\n')
		}
		_, bt := runBatch(b, in, content.Bytes(), lines)
		perLine = (used() - m2) / lines
		out, err := c.Files.Get(ctx, bt.OutputFileID)
		if err != nil {
			b.Fatal(err)
		}
		outPerLine = float64(out.Bytes) / lines
	}
	b.StopTimer()
	b.ReportMetric(perKey, "bytes/key")
	b.ReportMetric(perMiB/(1<<20), "MiB/file-MiB")
	b.ReportMetric(perLine, "bytes/batch-line")
	b.ReportMetric(float64(len(chatLine("req-1000", "oa/gpt-4o-mini"))+1), "input-bytes/line")
	b.ReportMetric(outPerLine, "output-bytes/line")
	b.ReportMetric(idle, "conns-idle/instance")
	b.ReportMetric(clients()-before, "conns-after-batch/instance")
}

package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/redis/go-redis/v9"
	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/internal/redistest"
	"github.com/modelgate/modelgate/providers/providertest"
)

// The process tests of a cluster on Redis: caddy binaries on one
// real redis-server (internal/redistest), with instance.Caddyfile's
// storage-redis snippet (storage modelgate_redis, so the shared state is on Redis
// too) or storage-redis-files (file bytes on a shared directory).

// redisPrefix is the key prefix of instance.Caddyfile's storage modelgate_redis.
const redisPrefix = "{modelgate-test}"

// redisCluster is instances sharing one redis-server, each in front of a
// fake provider of its own, so that the fakes tell which instance sent
// what.
type redisCluster struct {
	redis *redistest.Server
	ins   []*instance
	fakes []*providertest.Server
}

// startRedisCluster starts a redis-server and n instances on it, with the
// instance.Caddyfile variables vars (NAME=value) on top of storage modelgate_redis.
func startRedisCluster(t *testing.T, n int, vars ...string) *redisCluster {
	t.Helper()
	c := &redisCluster{redis: redistest.Start(t)}
	for i := range n {
		fake := providertest.Start(t, providertest.Options{OpenAIKey: openAIKey, PromptTokens: processPromptTokens})
		in := newInstance(t, string(rune('a'+i)), t.TempDir(), fake).
			set("MG_STORAGE_KIND=redis", "MG_REDIS="+c.redis.Addr).set(vars...)
		c.ins, c.fakes = append(c.ins, in), append(c.fakes, fake)
	}
	for _, in := range c.ins {
		in.start()
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("redis-server's log:\n%s", lastN(c.redis.Log(), 30))
		}
	})
	return c
}

func lastN(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// redisClient is a client of the test's redis-server, to look at what the
// gateway keeps there.
func redisClient(t testing.TB, addr string) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// latencies is a set of measured durations.
type latencies []time.Duration

func (l latencies) percentile(p float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	s := slices.Clone(l)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

func (l latencies) String() string {
	return fmt.Sprintf("n=%d p50=%v p99=%v max=%v", len(l), l.percentile(0.5).Round(time.Millisecond),
		l.percentile(0.99).Round(time.Millisecond), l.percentile(1).Round(time.Millisecond))
}

// untilStatus polls GET url with secret as the bearer key until it answers
// want, for at most limit, and returns how long that took from since; it
// may run on any goroutine.
func untilStatus(url, secret string, want int, since time.Time, limit time.Duration) (time.Duration, error) {
	client := &http.Client{Timeout: 5 * time.Second}
	last := 0
	for {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("Authorization", "Bearer "+secret)
		if res, err := client.Do(req); err == nil {
			res.Body.Close()
			last = res.StatusCode
			if last == want {
				return time.Since(since), nil
			}
		}
		if time.Since(since) > limit {
			return 0, fmt.Errorf("status %d after %v, want %d", last, limit, want)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// propagation measures, on each of others, how long after since a GET of
// /v1/models with secret answers want.
func propagation(others []*instance, secret string, want int, since time.Time, limit time.Duration) ([]time.Duration, error) {
	took := make([]time.Duration, len(others))
	errs := make([]error, len(others))
	var wg sync.WaitGroup
	for i, in := range others {
		wg.Go(func() {
			took[i], errs[i] = untilStatus(in.httpURL+"/v1/models", secret, want, since, limit)
			if errs[i] != nil {
				errs[i] = fmt.Errorf("instance %s: %w", in.name, errs[i])
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return took, err
		}
	}
	return took, nil
}

// createKey creates a managed key through in's admin API and returns its
// secret and id.
func createKey(t testing.TB, in *instance, name string) (secret, id string) {
	t.Helper()
	status, body, err := adminRequest(http.MethodPost, in.adminURL+"/modelgate/keys", `{"name":"`+name+`","owner":"team"}`)
	if err != nil || status != http.StatusCreated {
		t.Fatalf("creating a key on %s: %d %s %v", in.name, status, body, err)
	}
	return gjson.Get(body, "key").Str, gjson.Get(body, "id").Str
}

func deleteKey(t testing.TB, in *instance, id string) {
	t.Helper()
	if status, body, err := adminRequest(http.MethodDelete, in.adminURL+"/modelgate/keys/"+id, ""); err != nil || status != http.StatusNoContent {
		t.Fatalf("deleting key %s on %s: %d %s %v", id, in.name, status, body, err)
	}
}

// adminRequest is request for any goroutine: it returns the error instead
// of failing the test.
func adminRequest(method, url, body string) (int, string, error) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, string(b), err
}

// TestProcessRedisKeys: three instances on one redis-server, key_refresh
// 10m, so that only publish/subscribe can explain a key's arrival on the
// other instances within the second the issue asks for. A key created on
// a is accepted on b and c, and once deleted on a refused there, each
// within one second of a's answer; the latencies are logged. A key
// deleted just after the subscriptions' connections were cut is refused
// within the second too: the subscriptions come back and reload the keys.
// Run with
// Redis as the app's storage (modelgate { storage modelgate_redis }) and as Caddy's
// (the global storage modelgate_redis, which the app then uses).
func TestProcessRedisKeys(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the caddy binary and redis-server")
	}
	for _, kind := range []string{"redis", "redis-global"} {
		t.Run(kind, func(t *testing.T) {
			c := startRedisCluster(t, 3, "MG_STORAGE_KIND="+kind, "MG_KEY_REFRESH=10m")
			a, others := c.ins[0], c.ins[1:]

			const rounds, bound = 10, time.Second
			var created, deleted latencies
			for r := range rounds {
				secret, id := createKey(t, a, fmt.Sprintf("round-%d", r))
				at := time.Now()
				if s := statusWith(t, a.httpURL+"/v1/models", secret); s != 200 {
					t.Fatalf("the new key on the instance that made it: %d", s)
				}
				took, err := propagation(others, secret, 200, at, 5*time.Second)
				if err != nil {
					t.Fatalf("round %d, the new key: %v", r, err)
				}
				created = append(created, took...)

				deleteKey(t, a, id)
				at = time.Now()
				if s := statusWith(t, a.httpURL+"/v1/models", secret); s != 401 {
					t.Fatalf("the deleted key on the instance that deleted it: %d", s)
				}
				if took, err = propagation(others, secret, 401, at, 5*time.Second); err != nil {
					t.Fatalf("round %d, the deleted key: %v", r, err)
				}
				deleted = append(deleted, took...)
			}
			t.Logf("a key created on a was accepted on b and c after: %v", created)
			t.Logf("a key deleted on a was refused on b and c after: %v", deleted)
			if m := created.percentile(1); m > bound {
				t.Errorf("a new key took up to %v to work on the other instances; the bound is %v", m, bound)
			}
			if m := deleted.percentile(1); m > bound {
				t.Errorf("a deleted key took up to %v to be refused on the other instances; the bound is %v", m, bound)
			}
			// The records are in Redis: the deleted ones gone, a new one there.
			secret, id := createKey(t, a, "last")
			if n := countKeys(t, c.redis.Addr, redisPrefix+":f:modelgate/keys/*"); n != 1 {
				t.Errorf("%d key records in Redis, want the one left", n)
			}
			if _, err := propagation(others, secret, 200, time.Now(), 5*time.Second); err != nil {
				t.Fatal(err)
			}

			// The subscriptions' connections cut (a network blip, a
			// failover) and the key deleted at once: b and c miss the
			// message, and refuse the key all the same once their
			// subscriptions are back and reload the keys.
			rdb := redisClient(t, c.redis.Addr)
			killed, err := rdb.ClientKillByFilter(context.Background(), "TYPE", "pubsub").Result()
			if err != nil || killed < 3 {
				t.Fatalf("CLIENT KILL TYPE pubsub: %d %v", killed, err)
			}
			deleteKey(t, a, id)
			took, err := propagation(others, secret, 401, time.Now(), 5*time.Second)
			if err != nil {
				t.Fatalf("the key deleted while the subscriptions were down: %v", err)
			}
			t.Logf("a key deleted while the subscriptions were cut was refused on b and c after %v", took)
			for _, d := range took {
				if d > bound {
					t.Errorf("a key deleted while the subscriptions were cut took %v to be refused; the bound is %v", d, bound)
				}
			}
		})
	}
}

// sentTimes merges the fakes' request counts per batch line.
func (c *redisCluster) sentTimes() map[string]int {
	out := make(map[string]int)
	for _, f := range c.fakes {
		for id, k := range sentTimes(f) {
			out[id] += k
		}
	}
	return out
}

// sentTwice counts the lines the fakes received twice, failing t for any
// received more often.
func (c *redisCluster) sentTwice(t *testing.T) int {
	t.Helper()
	twice := 0
	for id, k := range c.sentTimes() {
		if k > 2 {
			t.Errorf("%s sent %d times", id, k)
		}
		if k == 2 {
			twice++
		}
	}
	return twice
}

// waitAllWork waits until every fake has received at least n requests.
func (c *redisCluster) waitAllWork(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		all := true
		for _, f := range c.fakes {
			all = all && len(f.Requests()) >= n
		}
		if all {
			return
		}
		if time.Now().After(deadline) {
			var got []int
			for _, f := range c.fakes {
				got = append(got, len(f.Requests()))
			}
			t.Fatalf("the instances did not all get work: sent %v", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestProcessRedisBatchKill: three instances on Redis share a batch of
// slow lines; one is killed with SIGKILL mid-batch; the others finish it
// and every input line has exactly one result line. Run twice: with
// everything in Redis, and with the bytes of files on a shared directory
// (file_storage), where Redis then holds none of them.
func TestProcessRedisBatchKill(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the caddy binary and redis-server")
	}
	for _, kind := range []string{"redis", "redis-files"} {
		t.Run(kind, func(t *testing.T) {
			files := t.TempDir()
			c := startRedisCluster(t, 3, "MG_STORAGE_KIND="+kind, "MG_STORAGE="+files)
			a, b := c.ins[0], c.ins[1]
			ca := a.client()

			const n = 3000
			f := uploadLines(t, ca, slowLines("k", n))
			bt := newBatch(t, ca, f.ID, openai.BatchNewParamsEndpointV1ChatCompletions)
			c.waitAllWork(t, 150)
			b.kill()
			killedAt := time.Now()
			sentByB := len(c.fakes[1].Requests())

			got := waitBatch(t, ca, bt.ID, 60*time.Second, "completed", "failed", "cancelled", "expired")
			took := time.Since(killedAt)
			if got.Status != "completed" {
				t.Fatalf("after b died: %s", got.RawJSON())
			}
			checkOnce(t, ca, got, n)

			// Sent twice: at most what b received in the last checkpoint
			// interval (500 ms) before it died, with 250 ms to spare for
			// the kill and the answers under way; its parts were taken
			// over when their lease (3 s) ran out.
			window := 0
			for _, r := range c.fakes[1].Requests() {
				if r.At.After(killedAt.Add(-750 * time.Millisecond)) {
					window++
				}
			}
			twice := c.sentTwice(t)
			t.Logf("%s: a sent %d, b %d before it was killed, c %d; the batch completed %v after the kill; sent twice %d (b received %d in its last interval)",
				kind, len(c.fakes[0].Requests()), sentByB, len(c.fakes[2].Requests()), took.Round(time.Millisecond), twice, window)
			if twice > window {
				t.Errorf("%d requests were sent twice, more than the %d of b's last checkpoint interval", twice, window)
			}

			// Where the file bytes are: in Redis, or only in the shared
			// directory.
			chunks := countKeys(t, c.redis.Addr, redisPrefix+":f:modelgate/o/*/files/*/[0-9]*")
			onDisk := 0
			_ = filepath.WalkDir(files, func(p string, d os.DirEntry, err error) error {
				if err == nil && !d.IsDir() && strings.Contains(p, "/files/") {
					onDisk++
				}
				return nil
			})
			t.Logf("%s: file chunks in Redis %d, on the shared directory %d", kind, chunks, onDisk)
			switch {
			case kind == "redis" && (chunks == 0 || onDisk != 0):
				t.Errorf("storage modelgate_redis: %d file chunks in Redis, %d files on disk; want them all in Redis", chunks, onDisk)
			case kind == "redis-files" && (chunks != 0 || onDisk == 0):
				t.Errorf("file_storage file_system: %d file chunks in Redis, %d files on disk; want none in Redis", chunks, onDisk)
			}
		})
	}
}

// countKeys counts the keys matching pattern.
func countKeys(t testing.TB, addr, pattern string) int {
	t.Helper()
	rdb := redisClient(t, addr)
	n := 0
	iter := rdb.Scan(context.Background(), 0, pattern, 1000).Iterator()
	for iter.Next(context.Background()) {
		n++
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestProcessRedisBatchCancel: a batch cancelled on one instance stops on
// every instance at once. The runners poll every 3 s here, so only the
// message on the "batches" channel can stop them within the second the
// test allows; it measures, per instance, how long after the cancel the
// last request reached that instance's fake provider.
func TestProcessRedisBatchCancel(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the caddy binary and redis-server")
	}
	const poll = 3 * time.Second
	// The lease is renewed at polls, every third of it: it must outlast
	// three polls.
	c := startRedisCluster(t, 3, "MG_POLL=3s", "MG_LEASE=10s")
	a, b := c.ins[0], c.ins[1]
	ca, cb := a.client(), b.client()

	const n = 3000
	f := uploadLines(t, ca, slowLines("x", n))
	bt := newBatch(t, ca, f.ID, openai.BatchNewParamsEndpointV1ChatCompletions)
	c.waitAllWork(t, 50)

	cancelAt := time.Now()
	if _, err := cb.Batches.Cancel(context.Background(), bt.ID); err != nil {
		t.Fatalf("cancel on b: %v", err)
	}
	answered := time.Since(cancelAt)
	got := waitBatch(t, ca, bt.ID, 30*time.Second, "cancelled", "completed", "failed", "expired")
	cancelled := time.Since(cancelAt)
	if got.Status != "cancelled" {
		t.Fatalf("after the cancel: %s", got.RawJSON())
	}
	// Anything still to come would come within a poll.
	time.Sleep(poll + 500*time.Millisecond)

	var stops []string
	for i, fk := range c.fakes {
		reqs := fk.Requests()
		last := reqs[len(reqs)-1].At
		after := 0
		for _, r := range reqs {
			if r.At.After(cancelAt) {
				after++
			}
		}
		stop := last.Sub(cancelAt)
		if after == 0 {
			stops = append(stops, fmt.Sprintf("%s: none after the cancel (the last %v before it)", c.ins[i].name, -stop.Round(time.Millisecond)))
		} else {
			stops = append(stops, fmt.Sprintf("%s: %d after the cancel, the last %v after it", c.ins[i].name, after, stop.Round(time.Millisecond)))
		}
		if stop > time.Second {
			t.Errorf("instance %s sent its last request %v after the cancel; polling (every %v) would explain that, the message should not take a second",
				c.ins[i].name, stop, poll)
		}
	}
	t.Logf("the cancel answered after %v, the batch was cancelled after %v; requests upstream per instance: %s", answered.Round(time.Millisecond),
		cancelled.Round(time.Millisecond), strings.Join(stops, "; "))
	checkOnce(t, ca, got, n)
	if got.RequestCounts.Completed == 0 || got.RequestCounts.Completed == n {
		t.Errorf("counts %+v: the cancel came mid-batch", got.RequestCounts)
	}
}

// TestProcessRedisRestart: redis-server itself is killed with SIGKILL and
// restarted on the same port and data mid-batch, once briefly and once for
// longer than the batch lease (3 s), so that parts are taken over; the
// batch finishes with exactly one result line per input line, and no line
// went upstream more than twice.
//
// The bound: Redis acknowledges a write only once it is in the
// append-only file (appendfsync always), so the restart loses nothing
// acknowledged, and results whose checkpoint failed while Redis was down
// stay in memory and are written once it is back. What is sent twice is
// what a part's holder had not yet checkpointed when another instance
// took the part over, which happens only when the holder's lease ran out
// while Redis was down: the lines it answered in its last checkpoint
// interval before the kill and during the outage (a part that finishes
// meanwhile keeps its results until it can write them, but another
// instance may take the part first), and, until the holder's next
// renewal tells it the part is gone (a third of the lease), those both
// send. The test allows every line that went upstream from one checkpoint
// interval before the kill until a lease renewal after Redis was back.
func TestProcessRedisRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the caddy binary and redis-server")
	}
	for _, down := range []time.Duration{500 * time.Millisecond, 4 * time.Second} {
		t.Run(down.String(), func(t *testing.T) { testRedisRestart(t, down) })
	}
}

func testRedisRestart(t *testing.T, down time.Duration) {
	c := startRedisCluster(t, 3)
	ca := c.ins[0].client()

	const n = 3000
	f := uploadLines(t, ca, slowLines("r", n))
	bt := newBatch(t, ca, f.ID, openai.BatchNewParamsEndpointV1ChatCompletions)
	c.waitAllWork(t, 100)

	c.redis.Kill()
	killedAt := time.Now()
	time.Sleep(down)
	c.redis.Restart()
	downFor := time.Since(killedAt)

	// Reading the batch fails while the instance cannot reach Redis.
	var got *openai.Batch
	failures := 0
	deadline := time.Now().Add(60 * time.Second)
	for {
		b, err := ca.Batches.Get(context.Background(), bt.ID)
		if err != nil {
			failures++
		} else if b.Status != "in_progress" && b.Status != "finalizing" {
			got = b
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the batch did not finish after the restart: %v %v", b, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	took := time.Since(killedAt)
	if got.Status != "completed" {
		t.Fatalf("after the restart: %s", got.RawJSON())
	}
	checkOnce(t, ca, got, n)

	window, before := 0, 0
	for _, fk := range c.fakes {
		for _, r := range fk.Requests() {
			if r.At.Before(killedAt) {
				before++
			}
			if r.At.After(killedAt.Add(-750*time.Millisecond)) && r.At.Before(killedAt.Add(downFor+1500*time.Millisecond)) {
				window++
			}
		}
	}
	twice := c.sentTwice(t)
	t.Logf("redis-server down %v; %d requests before the kill; the batch completed %v after it (reading it failed %d times meanwhile); sent twice %d (bound %d)",
		downFor.Round(time.Millisecond), before, took.Round(time.Millisecond), failures, twice, window)
	if twice > window {
		t.Errorf("%d requests were sent twice, more than the %d of the bound", twice, window)
	}
}

// TestProcessRedisUnreachable: redis-server stopped for a while and
// started again. Live chat requests with the static key, and with a
// managed key made before, are served by every instance throughout; each
// instance logs that the shared state is unreachable and then reachable
// again; GET /modelgate/ready answers 503 naming the state and the
// storage while Redis is down and 200 after. Creating or deleting a
// managed key, listing batches, or continuing or reading a stored response
// while it is down fails with a 503 saying the storage cannot be reached
// (the managed key keeps working; a new response is answered, unstored);
// after, a stored response continues, and a new key reaches the other
// instances at once: their subscriptions are back.
func TestProcessRedisUnreachable(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the caddy binary and redis-server")
	}
	c := startRedisCluster(t, 3, "MG_KEY_REFRESH=10m")
	a, b := c.ins[0], c.ins[1]
	managed, managedID := createKey(t, a, "before")
	if _, err := propagation(c.ins, managed, 200, time.Now(), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	for _, in := range c.ins {
		if status, body, _ := request(t, http.MethodGet, in.adminURL+"/modelgate/ready", ""); status != 200 || !gjson.Get(body, "ready").Bool() || gjson.Get(body, "state").Str != "shared" {
			t.Fatalf("ready on %s before: %d %s", in.name, status, body)
		}
	}

	// A stored response (passed through to the fake OpenAI, which keeps
	// it; the gateway keeps a pointer in the storage).
	status, body, _ := request(t, http.MethodPost, a.httpURL+"/v1/responses", `{"model":"oa/gpt-4o-mini","input":"hi"}`,
		"Authorization", "Bearer "+aliceKey)
	respID := gjson.Get(body, "id").Str
	if status != 200 || respID == "" {
		t.Fatalf("POST /v1/responses: %d %s", status, body)
	}
	continueResp := func(in *instance) (int, string, http.Header) {
		return request(t, http.MethodPost, in.httpURL+"/v1/responses",
			`{"model":"oa/gpt-4o-mini","input":"more","previous_response_id":"`+respID+`"}`, "Authorization", "Bearer "+aliceKey)
	}

	// Live traffic on every instance, with both keys, until the end.
	var sent, failed atomic.Int64
	var failures sync.Map
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, in := range c.ins {
		for _, key := range []string{aliceKey, managed} {
			wg.Go(func() {
				client := &http.Client{Timeout: 5 * time.Second}
				for {
					select {
					case <-stop:
						return
					default:
					}
					req, _ := http.NewRequest(http.MethodPost, in.httpURL+"/v1/chat/completions",
						strings.NewReader(`{"model":"oa/gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`))
					req.Header.Set("Authorization", "Bearer "+key)
					req.Header.Set("Content-Type", "application/json")
					res, err := client.Do(req)
					sent.Add(1)
					if err != nil || res.StatusCode != 200 {
						failed.Add(1)
						msg := fmt.Sprint(err)
						if res != nil {
							b, _ := io.ReadAll(res.Body)
							msg = fmt.Sprintf("%d %s", res.StatusCode, b)
						}
						failures.Store(in.name+" "+msg, true)
					}
					if res != nil {
						res.Body.Close()
					}
					time.Sleep(20 * time.Millisecond)
				}
			})
		}
	}
	defer func() { close(stop); wg.Wait() }()

	c.redis.Stop()
	stoppedAt := time.Now()
	for _, in := range c.ins {
		waitLog(t, in, "shared state unreachable", 10*time.Second)
		status, body, _ := request(t, http.MethodGet, in.adminURL+"/modelgate/ready", "")
		if status != http.StatusServiceUnavailable || gjson.Get(body, "ready").Bool() ||
			!strings.Contains(gjson.Get(body, "problems.state").Str, "unreachable") ||
			!strings.Contains(gjson.Get(body, "problems.storage").Str, "unreachable") {
			t.Errorf("ready on %s while Redis is down: %d %s", in.name, status, body)
		}
	}
	noticed := time.Since(stoppedAt)
	_, readyBody, _ := request(t, http.MethodGet, a.adminURL+"/modelgate/ready", "")
	t.Logf("GET /modelgate/ready while Redis is down: %s", strings.TrimSpace(readyBody))

	// What needs the storage fails, saying why: creating or deleting a
	// managed key (which keeps working), reading batches, continuing or
	// reading a stored response. A new response is answered, but not
	// stored.
	status, body, _ = request(t, http.MethodPost, b.adminURL+"/modelgate/keys", `{"name":"during","owner":"team"}`)
	t.Logf("creating a managed key while Redis is down: %d %s", status, strings.TrimSpace(body))
	if status != http.StatusServiceUnavailable || !strings.Contains(gjson.Get(body, "error").Str, "storage cannot be reached") {
		t.Errorf("creating a key while Redis is down: %d %s; want 503 saying the storage cannot be reached", status, body)
	}
	status, body, _ = request(t, http.MethodDelete, b.adminURL+"/modelgate/keys/"+managedID, "")
	if status != http.StatusServiceUnavailable || !strings.Contains(gjson.Get(body, "error").Str, "storage cannot be reached") {
		t.Errorf("deleting a key while Redis is down: %d %s; want 503 saying the storage cannot be reached", status, body)
	}
	status, body, hdr := request(t, http.MethodGet, c.ins[2].httpURL+"/v1/batches", "", "Authorization", "Bearer "+aliceKey)
	t.Logf("listing batches while Redis is down: %d retry-after %q %s", status, hdr.Get("Retry-After"), strings.TrimSpace(body))
	if status != http.StatusServiceUnavailable || hdr.Get("Retry-After") == "" || gjson.Get(body, "error.type").Str != "server_error" {
		t.Errorf("listing batches while Redis is down: %d %s; want 503 with retry-after", status, body)
	}

	status, body, hdr = continueResp(c.ins[2])
	if status != http.StatusServiceUnavailable || hdr.Get("Retry-After") == "" {
		t.Errorf("continuing a stored response while Redis is down: %d %s; want 503 with retry-after, not a 404", status, body)
	}
	status, body, _ = request(t, http.MethodGet, b.httpURL+"/v1/responses/"+respID, "", "Authorization", "Bearer "+aliceKey)
	if status != http.StatusServiceUnavailable {
		t.Errorf("reading a stored response while Redis is down: %d %s; want 503", status, body)
	}
	if status, body, _ = request(t, http.MethodPost, a.httpURL+"/v1/responses", `{"model":"oa/gpt-4o-mini","input":"hi"}`,
		"Authorization", "Bearer "+aliceKey); status != 200 {
		t.Errorf("a new response while Redis is down: %d %s", status, body)
	}

	// Down for a while: live requests go on meanwhile.
	time.Sleep(3 * time.Second)
	sentDown := sent.Load()
	c.redis.Restart()
	downFor := time.Since(stoppedAt)
	backAt := time.Now()
	for _, in := range c.ins {
		waitLog(t, in, "shared state reachable again", 10*time.Second)
	}
	for _, in := range c.ins {
		deadline := time.Now().Add(10 * time.Second)
		for {
			status, body, _ := request(t, http.MethodGet, in.adminURL+"/modelgate/ready", "")
			if status == 200 && gjson.Get(body, "ready").Bool() {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("ready on %s after Redis came back: %d %s", in.name, status, body)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	recovered := time.Since(backAt)

	if status, body, _ := continueResp(b); status != 200 {
		t.Errorf("continuing a stored response after Redis came back: %d %s", status, body)
	}
	secret, _ := createKey(t, b, "after")
	took, err := propagation([]*instance{a, c.ins[2]}, secret, 200, time.Now(), 5*time.Second)
	if err != nil {
		t.Errorf("a key made after Redis came back: %v", err)
	}
	t.Logf("Redis down %v: noticed by all within %v, ready again within %v of its return; %d live requests sent, %d while it was down, %d failed; a key made after it came back worked elsewhere after %v",
		downFor.Round(time.Millisecond), noticed.Round(time.Millisecond), recovered.Round(time.Millisecond), sent.Load(), sentDown, failed.Load(), took)
	if failed.Load() > 0 {
		failures.Range(func(k, _ any) bool { t.Errorf("a live request failed: %s", k); return true })
	}
	if sentDown < 50 {
		t.Errorf("only %d live requests were sent while Redis was down", sentDown)
	}
}

// waitLog waits until in's log holds text.
func waitLog(t *testing.T, in *instance, text string, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !strings.Contains(in.logs(), text) {
		if time.Now().After(deadline) {
			t.Fatalf("instance %s did not log %q within %v", in.name, text, limit)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestProcessRedisHung: redis-server paused (SIGSTOP) for a while, as a
// hung server or a network partition looks: connections open, no answer,
// every command waits for its timeout (2 s). Requests with a static key
// and no limits never wait for it. A managed key with limits and a budget
// waits one command timeout on its first request, which tells the
// instance the state is unreachable; after that (and on the instances
// whose pings found out) its requests are admitted by the in-process
// standby at once, served without the budget, whose usage records are
// unreachable too. GET /modelgate/ready answers 503 within one timeout.
func TestProcessRedisHung(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the caddy binary and redis-server")
	}
	c := startRedisCluster(t, 3, "MG_KEY_REFRESH=10m")
	a := c.ins[0]
	status, body, _ := request(t, http.MethodPost, a.adminURL+"/modelgate/keys",
		`{"name":"limited","owner":"team","limits":{"requests_per_minute":1000000},"budget":{"usd":"1000","period":"month"}}`)
	if status != http.StatusCreated {
		t.Fatalf("creating a key with limits: %d %s", status, body)
	}
	limited := gjson.Get(body, "key").Str
	if _, err := propagation(c.ins, limited, 200, time.Now(), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	chat := func(in *instance, key string) (int, time.Duration) {
		start := time.Now()
		req, _ := http.NewRequest(http.MethodPost, in.httpURL+"/v1/chat/completions",
			strings.NewReader(`{"model":"oa/gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		res, err := (&http.Client{Timeout: 20 * time.Second}).Do(req)
		if err != nil {
			return 0, time.Since(start)
		}
		res.Body.Close()
		return res.StatusCode, time.Since(start)
	}

	if err := c.redis.Pause(); err != nil {
		t.Skip(err)
	}
	pausedAt := time.Now()
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			if err := c.redis.Resume(); err != nil {
				t.Error(err)
			}
		}
	}
	defer resume()

	// Until an instance has seen it, a limited request waits for Redis.
	_, firstLimited := chat(a, limited)
	for _, in := range c.ins {
		waitLog(t, in, "shared state unreachable", 15*time.Second)
	}
	noticed := time.Since(pausedAt)
	readyStart := time.Now()
	status, body, _ = request(t, http.MethodGet, a.adminURL+"/modelgate/ready", "")
	readyTook := time.Since(readyStart)
	if status != http.StatusServiceUnavailable || !strings.Contains(body, `"state":"unreachable`) {
		t.Errorf("ready while Redis hangs: %d %s", status, body)
	}
	if readyTook > 3*time.Second {
		t.Errorf("ready took %v to answer while Redis hangs; one command timeout is 2s", readyTook)
	}

	var slowStatic, slowLimited time.Duration
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); {
		for _, in := range c.ins {
			for _, key := range []string{aliceKey, limited} {
				s, d := chat(in, key)
				if s != 200 {
					t.Errorf("a live request to %s while Redis hangs: %d after %v", in.name, s, d)
				}
				if key == aliceKey {
					slowStatic = max(slowStatic, d)
				} else {
					slowLimited = max(slowLimited, d)
				}
			}
		}
	}
	resume()
	for _, in := range c.ins {
		waitLog(t, in, "shared state reachable again", 15*time.Second)
	}
	for _, in := range c.ins {
		if s, d := chat(in, limited); s != 200 {
			t.Errorf("a limited request to %s after Redis came back: %d after %v", in.name, s, d)
		}
	}
	t.Logf("Redis hung %v; noticed by all after %v; a limited request before that took %v; ready answered 503 in %v; then the slowest live request took %v with the static key, %v with the limited one",
		time.Since(pausedAt).Round(time.Millisecond), noticed.Round(time.Millisecond), firstLimited.Round(time.Millisecond),
		readyTook.Round(time.Millisecond), slowStatic.Round(time.Millisecond), slowLimited.Round(time.Millisecond))
	if firstLimited > 3500*time.Millisecond {
		t.Errorf("the first limited request took %v; one command timeout is 2s", firstLimited)
	}
	if slowStatic > time.Second || slowLimited > time.Second {
		t.Errorf("once the state was known unreachable, live requests took up to %v (static key) and %v (limited key); the command timeout (2s) should not show",
			slowStatic, slowLimited)
	}
}

// TestProcessRedisRevokedKeyBatch: a managed key is deleted on instance a
// while its batch runs on every instance, created on b: the batch is
// cancelled on every instance at once, its unfinished lines end as
// key_revoked errors naming the key, and no line goes upstream after the
// cancel settled. As in TestProcessRedisBatchCancel, the runners poll
// every 3 s, so only the shared state's messages can stop them within the
// second allowed.
func TestProcessRedisRevokedKeyBatch(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the caddy binary and redis-server")
	}
	const poll = 3 * time.Second
	c := startRedisCluster(t, 3, "MG_POLL=3s", "MG_LEASE=10s", "MG_KEY_REFRESH=10m")
	a, b := c.ins[0], c.ins[1]
	secret, id := createKey(t, a, "doomed")
	reader, _ := createKey(t, a, "reader") // the same owner: it reads the batch after
	if _, err := propagation(c.ins[1:], secret, 200, time.Now(), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	keyClient := func(in *instance, key string) openai.Client {
		return openai.NewClient(option.WithBaseURL(in.httpURL+"/v1/"), option.WithAPIKey(key),
			option.WithMaxRetries(0), option.WithRequestTimeout(20*time.Second))
	}
	cb := keyClient(b, secret)

	const n = 3000
	f := uploadLines(t, cb, slowLines("r", n))
	bt := newBatch(t, cb, f.ID, openai.BatchNewParamsEndpointV1ChatCompletions)
	c.waitAllWork(t, 50)

	deletedAt := time.Now()
	deleteKey(t, a, id)
	answered := time.Since(deletedAt)
	cr := keyClient(c.ins[2], reader)
	got := waitBatch(t, cr, bt.ID, 30*time.Second, "cancelled", "completed", "failed", "expired")
	cancelled := time.Since(deletedAt)
	if got.Status != "cancelled" {
		t.Fatalf("after the key was deleted: %s", got.RawJSON())
	}
	settled := make([]int, len(c.fakes))
	for i, fk := range c.fakes {
		settled[i] = len(fk.Requests())
	}
	// Anything still to come would come within a poll.
	time.Sleep(poll + 500*time.Millisecond)

	var stops []string
	for i, fk := range c.fakes {
		reqs := fk.Requests()
		if len(reqs) != settled[i] {
			t.Errorf("instance %s sent %d requests after the batch of the deleted key was cancelled", c.ins[i].name, len(reqs)-settled[i])
		}
		stop := reqs[len(reqs)-1].At.Sub(deletedAt)
		stops = append(stops, fmt.Sprintf("%s: the last %v after the delete", c.ins[i].name, stop.Round(time.Millisecond)))
		if stop > time.Second {
			t.Errorf("instance %s sent its last request %v after the key was deleted; polling (every %v) would explain that, the message should not take a second",
				c.ins[i].name, stop, poll)
		}
	}
	t.Logf("the delete answered after %v, the batch was cancelled after %v; requests upstream per instance: %s",
		answered.Round(time.Millisecond), cancelled.Round(time.Millisecond), strings.Join(stops, "; "))
	checkOnce(t, cr, got, n)
	if got.RequestCounts.Completed == 0 || got.RequestCounts.Completed == n {
		t.Errorf("counts %+v: the key was deleted mid-batch", got.RequestCounts)
	}
	if len(got.Errors.Data) != 1 || got.Errors.Data[0].Code != "key_revoked" {
		t.Errorf("the batch does not say its key was revoked: %s", got.RawJSON())
	}
	for cid, l := range fileLines(t, cr, got.ErrorFileID) {
		if l.Get("error.code").Str != "key_revoked" || !strings.Contains(l.Get("error.message").Str, id) ||
			!strings.Contains(l.Get("error.message").Str, `"doomed"`) {
			t.Errorf("error line %s: %s", cid, l.Raw)
			break
		}
	}
}

// TestProcessRedisAccountSuspended: three instances on one redis-server,
// key_refresh 10m, so that only publish/subscribe can explain the change
// arriving elsewhere. An account suspended on a's admin API has its keys
// refused (403 account_suspended) on a at once and on b and c within one
// second of a's answer, in every round; resumed, they work again
// everywhere within the second; another account's key works throughout.
// Deleting the account on b revokes its keys on every instance too.
func TestProcessRedisAccountSuspended(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the caddy binary and redis-server")
	}
	c := startRedisCluster(t, 3, "MG_KEY_REFRESH=10m")
	a, others := c.ins[0], c.ins[1:]
	secret, _ := createKey(t, a, "team-key") // owner "team"
	status, body, err := adminRequest(http.MethodPost, a.adminURL+"/modelgate/keys", `{"name":"other","owner":"other-team"}`)
	if err != nil || status != http.StatusCreated {
		t.Fatalf("the other account's key: %d %s %v", status, body, err)
	}
	other := gjson.Get(body, "key").Str
	if _, err := propagation(c.ins, secret, 200, time.Now(), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := propagation(c.ins, other, 200, time.Now(), 5*time.Second); err != nil {
		t.Fatal(err)
	}

	const rounds, bound = 5, time.Second
	var suspended, resumed latencies
	for r := range rounds {
		if status, body, err := adminRequest(http.MethodPost, a.adminURL+"/modelgate/accounts/team/suspend", `{"reason":"round"}`); err != nil || status != 200 {
			t.Fatalf("suspending: %d %s %v", status, body, err)
		}
		at := time.Now()
		if s := statusWith(t, a.httpURL+"/v1/models", secret); s != http.StatusForbidden {
			t.Fatalf("round %d: the suspended account's key on the instance that suspended it: %d", r, s)
		}
		took, err := propagation(others, secret, http.StatusForbidden, at, 5*time.Second)
		if err != nil {
			t.Fatalf("round %d, suspended: %v", r, err)
		}
		suspended = append(suspended, took...)
		for _, in := range c.ins {
			if s := statusWith(t, in.httpURL+"/v1/models", other); s != 200 {
				t.Fatalf("round %d: another account's key on %s: %d", r, in.name, s)
			}
		}
		if status, body, err := adminRequest(http.MethodPost, a.adminURL+"/modelgate/accounts/team/resume", ""); err != nil || status != 200 {
			t.Fatalf("resuming: %d %s %v", status, body, err)
		}
		at = time.Now()
		if took, err = propagation(others, secret, 200, at, 5*time.Second); err != nil {
			t.Fatalf("round %d, resumed: %v", r, err)
		}
		resumed = append(resumed, took...)
	}
	t.Logf("an account suspended on a was refused on b and c after: %v", suspended)
	t.Logf("an account resumed on a worked again on b and c after: %v", resumed)
	if m := suspended.percentile(1); m > bound {
		t.Errorf("a suspended account's key took up to %v to be refused on the other instances; the bound is %v", m, bound)
	}
	if m := resumed.percentile(1); m > bound {
		t.Errorf("a resumed account's key took up to %v to work again on the other instances; the bound is %v", m, bound)
	}
	// The refusal is OpenAI's shape.
	status, body, err = func() (int, string, error) {
		req, _ := http.NewRequest(http.MethodGet, others[1].httpURL+"/v1/models", nil)
		req.Header.Set("Authorization", "Bearer "+secret)
		if _, _, err := adminRequest(http.MethodPost, a.adminURL+"/modelgate/accounts/team/suspend", ""); err != nil {
			return 0, "", err
		}
		if _, err := propagation(others, secret, http.StatusForbidden, time.Now(), 5*time.Second); err != nil {
			return 0, "", err
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		return res.StatusCode, string(b), err
	}()
	if err != nil || status != http.StatusForbidden || gjson.Get(body, "error.code").Str != "account_suspended" {
		t.Errorf("the refusal on c: %d %s %v", status, body, err)
	}

	// Deleted on b: its keys are revoked everywhere.
	if status, body, err := adminRequest(http.MethodDelete, others[0].adminURL+"/modelgate/accounts/team", ""); err != nil || status != 200 ||
		gjson.Get(body, "keys_deleted.#").Int() != 1 {
		t.Fatalf("deleting the account: %d %s %v", status, body, err)
	}
	if _, err := propagation(c.ins, secret, http.StatusUnauthorized, time.Now(), 5*time.Second); err != nil {
		t.Errorf("the deleted account's key: %v", err)
	}
	if status, body, _ := adminRequest(http.MethodGet, a.adminURL+"/modelgate/accounts/team/audit", ""); !strings.Contains(body, `"account.deleted"`) {
		t.Errorf("the audit log after the deletion: %d %s", status, body)
	}
}

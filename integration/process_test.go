package integration

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers/providertest"
)

// The process tests run the caddy binary: MODELGATE_CADDY when set (the
// test script sets it to its xcaddy build), else one built here from
// cmd/caddy with go build.

var (
	caddyBinOnce sync.Once
	caddyBin     string
	caddyBinErr  error
)

func caddyBinary(t testing.TB) string {
	t.Helper()
	caddyBinOnce.Do(func() {
		if p := os.Getenv("MODELGATE_CADDY"); p != "" {
			caddyBin, caddyBinErr = filepath.Abs(p)
			if caddyBinErr == nil {
				_, caddyBinErr = os.Stat(caddyBin)
			}
			return
		}
		// Under the tests' root, which TestMain removes: a 100 MB binary
		// per run would otherwise pile up in the temporary directory.
		dir, err := os.MkdirTemp(testRoot, "caddy-bin")
		if err != nil {
			caddyBinErr = err
			return
		}
		caddyBin = filepath.Join(dir, "caddy")
		out, err := exec.Command("go", "build", "-o", caddyBin, "../cmd/caddy").CombinedOutput()
		if err != nil {
			caddyBinErr = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if caddyBinErr != nil {
		t.Fatalf("caddy binary: %v", caddyBinErr)
	}
	return caddyBin
}

// instance is one caddy process of testdata/caddyfiles/instance.Caddyfile.
type instance struct {
	t        testing.TB
	name     string
	env      []string // set's values come after the defaults: the last one wins
	httpURL  string
	adminURL string
	logDir   string
	config   string // its Caddyfile, in testdata/caddyfiles; default instance.Caddyfile
	started  bool   // once: its ports are then its own for the test
	cmd      *exec.Cmd
	out      lockedBuffer // standard output and error
}

// lockedBuffer is a bytes.Buffer that the goroutine copying a process's
// output writes while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *lockedBuffer) Reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Reset()
}

// newInstance prepares an instance with its own ports and data directory
// (its instance ID) on the shared storage, in front of fake (a fake
// provider's base URL).
func newInstance(t testing.TB, name, storage string, fake *providertest.Server) *instance {
	return newInstanceURL(t, name, storage, fake.URL)
}

func newInstanceURL(t testing.TB, name, storage, fakeURL string) *instance {
	dir := t.TempDir()
	in := &instance{t: t, name: name, logDir: dir}
	in.env = append(os.Environ(),
		"XDG_DATA_HOME="+filepath.Join(dir, "data"),
		"XDG_CONFIG_HOME="+filepath.Join(dir, "config"),
		"HOME="+dir,
		"MG_LOG_DIR="+dir,
		"MG_STORAGE="+storage,
		"MG_FAKE="+fakeURL,
		"MG_OPENAI_KEY="+openAIKey,
		"MG_ALICE_KEY="+aliceKey,
	)
	in.pickPorts()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("instance %s, its warnings and errors:\n%s", name, in.problems(50))
		}
	})
	return in
}

// pickPorts gives the instance free HTTP and admin ports.
func (in *instance) pickPorts() {
	httpPort, adminPort := freePort(in.t), freePort(in.t)
	in.httpURL, in.adminURL = fmt.Sprintf("http://127.0.0.1:%d", httpPort), fmt.Sprintf("http://127.0.0.1:%d", adminPort)
	in.set(fmt.Sprintf("MG_ADMIN_PORT=%d", adminPort), fmt.Sprintf("MG_HTTP_PORT=%d", httpPort))
}

// set sets the variables of instance.Caddyfile given as NAME=value (such
// as MG_STORAGE_KIND=redis) for the next start.
func (in *instance) set(vars ...string) *instance {
	in.env = append(in.env, vars...)
	return in
}

// problems returns the last n lines of the instance's output and log at
// WARN or above.
func (in *instance) problems(n int) string {
	var lines []string
	for _, l := range strings.Split(in.logs(), "\n") {
		if strings.Contains(l, `"level":"warn"`) || strings.Contains(l, `"level":"error"`) || strings.Contains(l, "panic") {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// start runs the instance and waits until it answers. A free port is
// free only until someone takes it: if another process took one of the
// instance's between freePort and its first start (an outgoing
// connection's port, say), it starts again on new ones.
func (in *instance) start() {
	for try := 1; !in.run(); try++ {
		if try == 3 {
			in.t.Fatalf("instance %s: its ports were taken before it started, three times:\n%s", in.name, in.out.String())
		}
		in.t.Logf("instance %s: a port was taken before it started; again on new ports", in.name)
		_ = in.cmd.Process.Kill()
		_ = in.cmd.Wait()
		in.pickPorts()
	}
	in.started = true
}

// run runs the instance and waits until it answers; false if it could not
// listen on its ports before it started.
func (in *instance) run() bool {
	t := in.t
	name := in.config
	if name == "" {
		name = "instance.Caddyfile"
	}
	cfg, err := filepath.Abs("../testdata/caddyfiles/" + name)
	if err != nil {
		t.Fatal(err)
	}
	in.out.Reset()
	logged := len(in.caddyLog()) // what earlier runs logged
	in.cmd = exec.Command(caddyBinary(t), "run", "--config", cfg, "--adapter", "caddyfile")
	in.cmd.Env = in.env
	in.cmd.Stdout, in.cmd.Stderr = &in.out, &in.out
	dieWithTest(in.cmd)
	if err := in.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	cmd := in.cmd
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	var last string // the last answer, for a start that fails
	for {
		req, _ := http.NewRequest(http.MethodGet, in.httpURL+"/v1/models", nil)
		req.Header.Set("Authorization", "Bearer "+aliceKey)
		res, err := http.DefaultClient.Do(req)
		if err == nil {
			b, _ := io.ReadAll(io.LimitReader(res.Body, 512))
			res.Body.Close()
			if res.StatusCode == 200 {
				return true
			}
			last = fmt.Sprintf("%d %s", res.StatusCode, b)
		} else {
			last = err.Error()
		}
		if l := in.caddyLog(); !in.started && strings.Contains(l[min(logged, len(l)):], "address already in use") {
			return false
		}
		if time.Now().After(deadline) {
			t.Fatalf("instance %s did not start (GET /v1/models: %s):\n%s", in.name, last, in.out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// logs returns the instance's output and its Caddy log.
func (in *instance) logs() string { return in.out.String() + in.caddyLog() }

// caddyLog returns the instance's Caddy log, of all its runs.
func (in *instance) caddyLog() string {
	b, _ := os.ReadFile(filepath.Join(in.logDir, "caddy.log"))
	return string(b)
}

// kill ends the instance with SIGKILL: no cleanup of any kind.
func (in *instance) kill() {
	if err := in.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		in.t.Fatal(err)
	}
	_ = in.cmd.Wait()
}

func (in *instance) client() openai.Client {
	return openai.NewClient(option.WithBaseURL(in.httpURL+"/v1/"), option.WithAPIKey(aliceKey),
		option.WithMaxRetries(0), option.WithRequestTimeout(20*time.Second))
}

// slowLines are n chat lines for a fake that takes 50 ms per answer.
func slowLines(prefix string, n int) []string {
	lines := make([]string, n)
	for i := range lines {
		lines[i] = chatLine(fmt.Sprintf("%s%d", prefix, i), "oa/slow-50ms")
	}
	return lines
}

// waitProgress polls until at least n requests of the batch have results.
func waitProgress(t *testing.T, c openai.Client, id string, n int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := c.Batches.Get(context.Background(), id)
		if err == nil && b.RequestCounts.Completed+b.RequestCounts.Failed >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("batch %s made no progress: %v %+v", id, err, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkOnce checks that every input line has exactly one result line, in
// the output or the error file, and returns them.
func checkOnce(t *testing.T, c openai.Client, b *openai.Batch, lines int) {
	t.Helper()
	out, errs := fileLines(t, c, b.OutputFileID), fileLines(t, c, b.ErrorFileID)
	for id := range out {
		if _, twice := errs[id]; twice {
			t.Errorf("%s is in the output and the error file", id)
		}
	}
	if len(out)+len(errs) != lines || int64(len(out)) != b.RequestCounts.Completed || int64(len(errs)) != b.RequestCounts.Failed {
		t.Errorf("%d output + %d error lines for %d requests; counts %+v", len(out), len(errs), lines, b.RequestCounts)
	}
}

// TestProcessPortTaken: a port freePort gave an instance is taken by
// another process before the instance's first start; it starts on new
// ports instead of failing the test that started it.
func TestProcessPortTaken(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the caddy binary")
	}
	fake := providertest.Start(t, providertest.Options{OpenAIKey: openAIKey})
	in := newInstance(t, "a", t.TempDir(), fake)
	taken := strings.TrimPrefix(in.adminURL, "http://")
	l, err := net.Listen("tcp", taken)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	in.start()
	if in.adminURL == "http://"+taken {
		t.Fatalf("the instance kept its taken admin port %s", taken)
	}
	if statusWith(t, in.httpURL+"/v1/models", aliceKey) != 200 {
		t.Fatalf("the instance does not answer on %s", in.httpURL)
	}
}

// TestProcessCrash kills a caddy running a batch with SIGKILL, restarts
// it, and checks that every line has exactly one result, and that what was
// sent upstream twice is at most what the fake received in the last
// checkpoint interval before the kill.
func TestProcessCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the caddy binary")
	}
	fake := providertest.Start(t, providertest.Options{OpenAIKey: openAIKey})
	in := newInstance(t, "a", t.TempDir(), fake)
	in.start()
	c := in.client()

	const n = 600
	f := uploadLines(t, c, slowLines("k", n))
	b := newBatch(t, c, f.ID, openai.BatchNewParamsEndpointV1ChatCompletions)
	waitProgress(t, c, b.ID, 150)
	in.kill()
	killedAt := time.Now()
	before := len(fake.Requests())

	in.start()
	b = waitBatch(t, c, b.ID, 60*time.Second, "completed", "failed", "cancelled", "expired")
	if b.Status != "completed" {
		t.Fatalf("after restart: %s\n%s", b.RawJSON(), in.out.String())
	}
	checkOnce(t, c, b, n)

	// Requests sent twice: at most those the fake received within the last
	// checkpoint interval (500 ms) before the kill, with 250 ms to spare
	// for the kill itself and for answers under way (50 ms each).
	reqs := fake.Requests()
	window := 0
	for _, r := range reqs[:before] {
		if r.At.After(killedAt.Add(-750 * time.Millisecond)) {
			window++
		}
	}
	twice := 0
	for id, k := range sentTimes(fake) {
		if k > 2 {
			t.Errorf("%s sent %d times", id, k)
		}
		if k == 2 {
			twice++
		}
	}
	t.Logf("requests before the kill %d, after %d; sent twice %d; received in the last interval before the kill %d",
		before, len(reqs)-before, twice, window)
	if twice > window {
		t.Errorf("%d requests were sent twice, more than the %d of the last checkpoint interval", twice, window)
	}
	if len(reqs)-before >= n {
		t.Errorf("after the restart %d requests went upstream: the batch started over", len(reqs)-before)
	}
}

// TestProcessCluster runs two instances on one storage: both work on one
// large batch, then one is killed and the other finishes the batch; every
// line has exactly one result.
func TestProcessCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the caddy binary")
	}
	storage := t.TempDir()
	fakeA := providertest.Start(t, providertest.Options{OpenAIKey: openAIKey})
	fakeB := providertest.Start(t, providertest.Options{OpenAIKey: openAIKey})
	a, b := newInstance(t, "a", storage, fakeA), newInstance(t, "b", storage, fakeB)
	a.start()
	b.start()
	ca, cb := a.client(), b.client()

	const n = 2000
	f := uploadLines(t, ca, slowLines("c", n))
	batch := newBatch(t, ca, f.ID, openai.BatchNewParamsEndpointV1ChatCompletions)
	// Both instances get parts (instance b sees the batch through the
	// shared storage), then a dies.
	deadline := time.Now().Add(30 * time.Second)
	for len(fakeA.Requests()) < 300 || len(fakeB.Requests()) < 300 {
		if time.Now().After(deadline) {
			t.Fatalf("instances did not share the work: a sent %d, b %d", len(fakeA.Requests()), len(fakeB.Requests()))
		}
		time.Sleep(20 * time.Millisecond)
	}
	a.kill()
	sentByA := len(fakeA.Requests())

	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("instance b:\n%s", b.logs())
		}
	})
	got := waitBatch(t, cb, batch.ID, 40*time.Second, "completed", "failed", "cancelled", "expired")
	if got.Status != "completed" {
		t.Fatalf("after a died: %s\n%s", got.RawJSON(), b.out.String())
	}
	checkOnce(t, cb, got, n)
	sentByB := len(fakeB.Requests())
	t.Logf("a sent %d before it was killed; b sent %d", sentByA, sentByB)
	if sentByA+sentByB < n {
		t.Errorf("a and b sent %d requests for %d lines", sentByA+sentByB, n)
	}
	if sentByB >= n {
		t.Errorf("b sent %d requests: it did the whole batch alone", sentByB)
	}
	// Every line was answered once by a or b, or twice when a died with
	// its answer not yet checkpointed.
	for id, k := range mergeCounts(sentTimes(fakeA), sentTimes(fakeB)) {
		if k < 1 || k > 2 {
			t.Errorf("%s sent %d times", id, k)
		}
	}
}

func mergeCounts(a, b map[string]int) map[string]int {
	out := make(map[string]int, len(a)+len(b))
	for k, v := range a {
		out[k] += v
	}
	for k, v := range b {
		out[k] += v
	}
	return out
}

// TestProcessKeys: two instances share one storage. A key created through
// one instance's admin API works there at once and on the other within
// key_refresh (1 s in instance.Caddyfile); deleted, it is refused there at
// once and on the other within key_refresh.
func TestProcessKeys(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the caddy binary")
	}
	const refresh = time.Second
	fake := providertest.Start(t, providertest.Options{OpenAIKey: openAIKey})
	storage := t.TempDir()
	a, b := newInstance(t, "a", storage, fake), newInstance(t, "b", storage, fake)
	a.start()
	b.start()

	status, body, _ := request(t, http.MethodPost, a.adminURL+"/modelgate/keys", `{"name":"shared","owner":"team"}`)
	if status != http.StatusCreated {
		t.Fatalf("creating a key: %d %s", status, body)
	}
	secret, id := gjson.Get(body, "key").Str, gjson.Get(body, "id").Str
	if s := statusWith(t, a.httpURL+"/v1/models", secret); s != 200 {
		t.Fatalf("the new key on the instance that made it: %d", s)
	}
	took := waitStatusWith(t, b.httpURL+"/v1/models", secret, 200, 10*time.Second, "the new key on the other instance")
	t.Logf("the new key worked on the other instance after %v", took)
	if took > refresh+time.Second {
		t.Errorf("the other instance took %v to accept a new key; the bound is key_refresh (%v)", took, refresh)
	}

	if status, body, _ := request(t, http.MethodDelete, a.adminURL+"/modelgate/keys/"+id, ""); status != http.StatusNoContent {
		t.Fatalf("deleting the key: %d %s", status, body)
	}
	if s := statusWith(t, a.httpURL+"/v1/models", secret); s != 401 {
		t.Fatalf("the deleted key on the instance that deleted it: %d", s)
	}
	took = waitStatusWith(t, b.httpURL+"/v1/models", secret, 401, 10*time.Second, "the deleted key to be refused on the other instance")
	t.Logf("the deleted key was refused on the other instance after %v", took)
	if took > refresh+time.Second {
		t.Errorf("the other instance took %v to refuse a deleted key; the bound is key_refresh (%v)", took, refresh)
	}
}

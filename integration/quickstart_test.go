//go:build linux

package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/tidwall/gjson"
)

// TestProcessQuickStart runs the quick start as a newcomer does, in a copy
// of the clone's root with its own ports, and stops it each way it can be
// stopped: Ctrl-C in a terminal (SIGINT to its process group), SIGINT or
// SIGTERM to the quick start alone, SIGKILL, and SIGTERM to the go run
// that started it. Each time the gateway stops gracefully, so the usage
// of requests answered just before the stop is in the usage records
// afterwards; no caddy is left running; the ports are free again; and
// nothing was written to the user's own Caddy directories, only to
// .quickstart/ in the clone.
//
// The terminal run also checks what the quick start promises a newcomer:
// the addresses it prints, the gateway on 127.0.0.1 only, answering as
// localhost and 127.0.0.1 alike, and the clients of the README: plain
// HTTP, the OpenAI SDK, the Anthropic SDK (also with a newer
// anthropic-version than it sends itself) and Claude Code.
func TestProcessQuickStart(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	bin := quickStartBinary(t)
	caddy := caddyBinary(t)

	t.Run("terminal Ctrl-C", func(t *testing.T) {
		q := startQuickStart(t, bin, caddy, false)
		q.checkPromises()
		q.checkClients()
		q.checkReload(caddy)
		q.burst(5)
		if err := syscall.Kill(-q.cmd.Process.Pid, syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		q.checkStopped(true)
		q.checkUsage(5)
	})
	for _, tc := range []struct {
		name string
		sig  syscall.Signal
	}{{"SIGINT", syscall.SIGINT}, {"SIGTERM", syscall.SIGTERM}, {"SIGKILL", syscall.SIGKILL}} {
		t.Run(tc.name+" to the quick start alone", func(t *testing.T) {
			q := startQuickStart(t, bin, caddy, false)
			q.burst(3)
			if err := q.cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			q.checkStopped(tc.sig != syscall.SIGKILL)
			q.checkUsage(3)
		})
	}
	t.Run("SIGTERM to go run", func(t *testing.T) {
		q := startQuickStart(t, bin, caddy, true)
		q.burst(3)
		if err := q.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		q.checkStopped(false)
		q.checkUsage(3)
	})
}

var (
	quickStartOnce sync.Once
	quickStartBin  string
	quickStartErr  error
)

// quickStartBinary builds cmd/quickstart once per test binary.
func quickStartBinary(t *testing.T) string {
	t.Helper()
	quickStartOnce.Do(func() {
		dir, err := os.MkdirTemp(testRoot, "quickstart-bin")
		if err != nil {
			quickStartErr = err
			return
		}
		quickStartBin = filepath.Join(dir, "quickstart")
		if out, err := exec.Command("go", "build", "-o", quickStartBin, "../cmd/quickstart").CombinedOutput(); err != nil {
			quickStartErr = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if quickStartErr != nil {
		t.Fatal(quickStartErr)
	}
	return quickStartBin
}

// quickStart is one run of the quick start.
type quickStart struct {
	t *testing.T
	// clone is a copy of the clone's root (its Caddyfile); the quick start
	// runs there, as from a clone.
	clone string
	// home is the quick start's HOME, with XDG_DATA_HOME and
	// XDG_CONFIG_HOME unset: Caddy's default directories are in it.
	home        string
	port        int
	admin, fake string
	cmd         *exec.Cmd
	out         lockedBuffer
	done        chan error
	// requests counts the requests to the model burst uses.
	requests int
}

// burstModel is the model of the requests whose usage the tests count:
// no other request uses it.
const burstModel = "gpt-5.4-mini"

// startQuickStart runs the quick start binary (or, with goRun, go run
// ./cmd/quickstart, as the README says) and waits until the gateway
// answers.
func startQuickStart(t *testing.T, bin, caddy string, goRun bool) *quickStart {
	t.Helper()
	q := &quickStart{t: t, clone: t.TempDir(), home: t.TempDir(), port: freePort(t),
		admin: fmt.Sprintf("localhost:%d", freePort(t)), fake: fmt.Sprintf("127.0.0.1:%d", freePort(t)), done: make(chan error, 1)}
	cfg, err := os.ReadFile("../Caddyfile")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(q.clone, "Caddyfile"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"-caddy", caddy, "-no-build", "-port", fmt.Sprint(q.port), "-admin", q.admin, "-fake", q.fake}
	if goRun {
		// go run builds in the module: the state and the Caddyfile are
		// named in the copy.
		args = append([]string{"run", "./cmd/quickstart", "-state", filepath.Join(q.clone, ".quickstart"),
			"-config", filepath.Join(q.clone, "Caddyfile")}, args...)
		q.cmd = exec.Command("go", args...)
		q.cmd.Dir = ".."
	} else {
		q.cmd = exec.Command(bin, args...)
		q.cmd.Dir = q.clone
	}
	q.cmd.Env = q.env(goRun)
	q.cmd.Stdout, q.cmd.Stderr = &q.out, &q.out
	// Its own process group, as a shell gives a foreground job, so that a
	// terminal's SIGINT can be sent to the group; killed with the test.
	q.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := q.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { q.done <- q.cmd.Wait() }()
	t.Cleanup(func() {
		if q.cmd.ProcessState == nil {
			_ = syscall.Kill(-q.cmd.Process.Pid, syscall.SIGKILL)
			<-q.done //nolint:errcheck // the killed process's exit status
		}
		for _, pid := range q.caddyProcesses() {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if t.Failed() {
			t.Logf("the quick start's output:\n%s", q.out.String())
		}
	})

	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(q.out.String(), "quick start: ready") {
		select {
		case err := <-q.done:
			q.done <- err
			t.Fatalf("the quick start ended before it was ready: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("the quick start was not ready within a minute")
		}
	}
	return q
}

// env is the test's environment without what would change the quick
// start's behaviour (provider keys and addresses, modelgate's variables,
// Caddy's admin address and directories), with a HOME of its own. go run
// keeps the test's Go caches.
func (q *quickStart) env(goRun bool) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case k == "HOME", k == "XDG_DATA_HOME", k == "XDG_CONFIG_HOME", k == "CADDY_ADMIN",
			strings.HasPrefix(k, "OPENAI_"), strings.HasPrefix(k, "ANTHROPIC_"), strings.HasPrefix(k, "COHERE_"),
			strings.HasPrefix(k, "MODELGATE_"):
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "HOME="+q.home)
	if goRun {
		for _, v := range []string{"GOCACHE", "GOMODCACHE", "GOPATH"} {
			out, err := exec.Command("go", "env", v).Output()
			if err != nil {
				q.t.Fatal(err)
			}
			env = append(env, v+"="+strings.TrimSpace(string(out)))
		}
	}
	return env
}

func (q *quickStart) url(host string) string { return fmt.Sprintf("http://%s:%d", host, q.port) }

// checkPromises checks what the quick start prints and where it listens.
func (q *quickStart) checkPromises() {
	t := q.t
	out := q.out.String()
	for _, want := range []string{q.url("localhost") + "/v1", q.url("127.0.0.1") + "/v1", "mg-demo-key",
		q.url("localhost") + "/account/keys/", "demo-password", q.admin, "http://" + q.fake,
		filepath.Join(q.clone, ".quickstart")} {
		if !strings.Contains(out, want) {
			t.Errorf("the quick start does not tell %q:\n%s", want, out)
		}
	}
	// Every listener of the gateway is on the loopback interface.
	status, body, err := adminRequest(http.MethodGet, "http://"+q.admin+"/config/apps/http/servers", "")
	if err != nil || status != 200 {
		t.Fatalf("the gateway's servers: %d %s %v", status, body, err)
	}
	n := 0
	gjson.Parse(body).ForEach(func(name, srv gjson.Result) bool {
		for _, l := range srv.Get("listen").Array() {
			n++
			host, _, err := net.SplitHostPort(l.Str)
			if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
				t.Errorf("server %s listens on %q, not on a loopback address", name.Str, l.Str)
			}
		}
		return true
	})
	if n == 0 {
		t.Errorf("no listen address in %s", body)
	}
}

// checkClients sends the README's requests: plain HTTP to localhost and
// to 127.0.0.1, the OpenAI SDK, the Anthropic SDK and Claude Code.
func (q *quickStart) checkClients() {
	t := q.t
	body := `{"model":"smart","messages":[{"role":"user","content":"hello"}]}`
	for _, host := range []string{"localhost", "127.0.0.1"} {
		status, got, _ := requestNoFail(http.MethodPost, q.url(host)+"/v1/chat/completions", body, "Authorization", "Bearer mg-demo-key")
		if status != 200 || gjson.Get(got, "choices.0.message.content").Str != "echo: hello" {
			t.Errorf("%s: %d %s", host, status, got)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	oc := openai.NewClient(option.WithBaseURL(q.url("127.0.0.1")+"/v1"), option.WithAPIKey("mg-demo-key"), option.WithMaxRetries(0))
	chat, err := oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "anthropic/claude-sonnet-4-6",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")}})
	if err != nil || len(chat.Choices) != 1 || chat.Choices[0].Message.Content != "echo: hello" {
		t.Errorf("OpenAI SDK on 127.0.0.1: %v %+v", err, chat)
	}

	ac := anthropic.NewClient(aoption.WithBaseURL(q.url("localhost")), aoption.WithAPIKey("mg-demo-key"), aoption.WithMaxRetries(0))
	p := anthropic.MessageNewParams{Model: "claude-sonnet-4-6", MaxTokens: 1024,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hello"))}}
	msg, err := ac.Messages.New(ctx, p)
	if err != nil || len(msg.Content) != 1 || msg.Content[0].Text != "echo: hello" {
		t.Errorf("Anthropic SDK: %v %+v", err, msg)
	}
	// Newer SDKs and Claude Code send newer anthropic-version dates.
	stream := ac.Messages.NewStreaming(ctx, p, aoption.WithHeader("anthropic-version", "2026-10-21"))
	var acc anthropic.Message
	for stream.Next() {
		if err := acc.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil || len(acc.Content) != 1 || acc.Content[0].Text != "echo: hello" {
		t.Errorf("Anthropic SDK streaming, anthropic-version 2026-10-21: %v %+v", err, acc)
	}

	q.checkClaudeCode()
}

// checkReload reloads the gateway as the quick start tells, from a shell
// that has none of its other variables: the providers' addresses and keys
// are read by the running gateway, so it still answers through the fake.
func (q *quickStart) checkReload(caddy string) {
	t := q.t
	cmd := exec.Command(caddy, "reload", "--config", filepath.Join(q.clone, "Caddyfile"), "--adapter", "caddyfile")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(),
		fmt.Sprintf("MODELGATE_PORT=%d", q.port), "CADDY_ADMIN=" + q.admin}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("caddy reload: %v\n%s", err, out)
	}
	for _, model := range []string{"openai/gpt-5.5", "anthropic/claude-sonnet-4-6"} {
		body := `{"model":"` + model + `","messages":[{"role":"user","content":"after the reload"}]}`
		status, got, _ := requestNoFail(http.MethodPost, q.url("localhost")+"/v1/chat/completions", body, "Authorization", "Bearer mg-demo-key")
		if status != 200 || gjson.Get(got, "choices.0.message.content").Str != "echo: after the reload" {
			t.Errorf("%s after a reload: %d %s", model, status, got)
		}
	}
}

// checkClaudeCode runs Claude Code once against the gateway, with its one
// tool Read: the fake calls the tool, Claude Code answers with its result
// and the thinking block the fake signed, and prints the fake's last
// answer, "tool said: …".
func (q *quickStart) checkClaudeCode() {
	t := q.t
	claude := claudeCode(t)
	if claude == "" {
		return
	}
	work, home := t.TempDir(), t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, claude, "-p", "hello from the quick start test",
		"--model", "claude-sonnet-4-6", "--tools", "Read", "--no-session-persistence")
	cmd.Dir = work
	cmd.Env = append(claudeCodeEnv(home),
		"ANTHROPIC_BASE_URL="+q.url("localhost"), "ANTHROPIC_API_KEY=mg-demo-key")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "tool said: ") {
		t.Errorf("claude -p: %v\n%s", err, out)
	}
}

// claudeCode finds Claude Code: MODELGATE_CLAUDE_CODE, else where the
// test script installs its pinned version. Without one the check is
// skipped, unless MODELGATE_REQUIRE_CLAUDE_CODE=1 (the test script sets
// it) makes it fail.
func claudeCode(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("MODELGATE_CLAUDE_CODE"); p != "" {
		return p
	}
	if p, err := filepath.Abs("../.tmp/claude-code/node_modules/.bin/claude"); err == nil {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if os.Getenv("MODELGATE_REQUIRE_CLAUDE_CODE") == "1" {
		t.Fatal("no Claude Code (./scripts/test.sh installs it), and MODELGATE_REQUIRE_CLAUDE_CODE=1")
	}
	t.Log("no Claude Code: ./scripts/test.sh installs it; its check is skipped")
	return ""
}

// claudeCodeEnv is an environment for Claude Code that keeps it from
// calling anywhere but the gateway (no telemetry, error reports, update
// checks or other non-essential traffic) and keeps its files in home.
func claudeCodeEnv(home string) []string {
	env := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "TERM=dumb", "NO_PROXY=127.0.0.1,localhost,::1",
		"DISABLE_TELEMETRY=1", "DISABLE_AUTOUPDATER=1", "DISABLE_ERROR_REPORTING=1",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "CLAUDE_CONFIG_DIR=" + filepath.Join(home, ".claude")}
	return env
}

// burst sends n requests to burstModel and stops the clock on none: the
// quick start is stopped right after, well within the recorder's flush
// interval, so only a graceful stop writes their usage.
func (q *quickStart) burst(n int) {
	body := `{"model":"openai/` + burstModel + `","messages":[{"role":"user","content":"last words"}]}`
	for range n {
		status, got, _ := requestNoFail(http.MethodPost, q.url("127.0.0.1")+"/v1/chat/completions", body, "Authorization", "Bearer mg-demo-key")
		if status != 200 {
			q.t.Fatalf("burst: %d %s", status, got)
		}
		q.requests++
	}
}

// checkStopped waits for the quick start to end (exit status 0 when clean
// is set), then checks that its gateway and fake provider are gone: their
// ports free, no caddy left. Caddy's default directories in the quick
// start's HOME are untouched; its storage is in the clone.
func (q *quickStart) checkStopped(clean bool) {
	t := q.t
	select {
	case err := <-q.done:
		if clean && err != nil {
			t.Errorf("the quick start exited with %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the quick start did not stop within 30 s")
	}
	if strings.Contains(q.out.String(), `"force quit"`) {
		t.Error("Caddy was made to quit at once rather than stop gracefully")
	}
	deadline := time.Now().Add(15 * time.Second)
	for _, addr := range []string{fmt.Sprintf("127.0.0.1:%d", q.port), q.admin, q.fake} {
		for {
			c, err := net.DialTimeout("tcp", addr, time.Second)
			if err != nil {
				break
			}
			c.Close()
			if time.Now().After(deadline) {
				t.Fatalf("%s still answers after the quick start stopped", addr)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	for len(q.caddyProcesses()) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("caddy processes %v still run after the quick start stopped", q.caddyProcesses())
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, dir := range []string{".local/share/caddy", ".config/caddy"} {
		if _, err := os.Stat(filepath.Join(q.home, dir)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the quick start wrote to Caddy's default directory ~/%s (%v)", dir, err)
		}
	}
	if _, err := os.Stat(filepath.Join(q.clone, ".quickstart", "config", "caddy", "autosave.json")); err != nil {
		t.Errorf("no autosaved config in the clone's .quickstart/: %v", err)
	}
}

// caddyProcesses lists the processes running the quick start's Caddyfile.
func (q *quickStart) caddyProcesses() []int {
	cfg := filepath.Join(q.clone, "Caddyfile")
	var pids []int
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range dirs {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		args := strings.Split(string(bytes.TrimRight(b, "\x00")), "\x00")
		if len(args) > 1 && args[1] == "run" && strings.Contains(string(b), "\x00--config\x00"+cfg+"\x00") {
			// Never 0 (Kill would signal the test's own process group).
			if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(f))); err == nil && pid > 0 {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// checkUsage reads the usage records the stopped gateway left in the
// clone's .quickstart/ and checks that they count every request of the
// bursts, last one included.
func (q *quickStart) checkUsage(want int) {
	got := storedRequests(q.t, filepath.Join(q.clone, ".quickstart", "data", "caddy"), burstModel)
	if got != int64(want) || q.requests != want {
		q.t.Errorf("the usage records count %d requests to %s, want %d (%d sent)", got, burstModel, want, q.requests)
	}
}

// requestNoFail is request for polling: errors are a zero status.
func requestNoFail(method, url, body string, header ...string) (int, string, http.Header) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return 0, err.Error(), nil
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error(), nil
	}
	defer res.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(res.Body)
	return res.StatusCode, b.String(), res.Header
}

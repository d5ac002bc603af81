//go:build linux

package integration

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers/providertest"
)

// The coding agents the suite drives through the gateway, at the versions
// scripts/test.sh installs into .tmp/ (scripts/agents-latest.sh runs the
// same tests against the latest published ones): Claude Code speaks the
// Messages API, Codex CLI the Responses API. Each runs against the fake
// provider on a model passed through (Anthropic's Messages, OpenAI's
// Responses) and on one translated through the chat hub, once for a turn
// it completes without a tool ("no-tools" in the model name makes the
// fake answer in text) and once through a tool loop: the fake calls the
// agent's first tool, the agent runs it and sends its result, and the
// fake answers with it.

// agentModels are the models of each agent's runs: passed through, and
// translated.
var agentModels = map[string][2]string{
	"claude": {"anthropic/claude-sonnet-4-6", "openai/gpt-5.5"},
	"codex":  {"openai/gpt-5.5", "anthropic/claude-sonnet-4-6"},
}

// TestAgentClaudeCode runs Claude Code (claude -p) through the gateway.
// With its tools offered it answers a plain turn; with Read alone it runs
// a tool loop, its thinking blocks (adaptive thinking, which it asks
// for) signed by the fake and sent back with the tool's result.
func TestAgentClaudeCode(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Claude Code")
	}
	claude := claudeCode(t)
	if claude == "" {
		t.Skip("no Claude Code")
	}
	fake, _ := startProviders(t)
	home := newAgentHome(t)
	for i, model := range agentModels["claude"] {
		route := [2]string{"passed through", "translated"}[i]
		t.Run(route+"/plain", func(t *testing.T) {
			// The fake echoes the user's turn: Claude Code's reminders, then
			// the prompt (passed through, Anthropic's format echoes the
			// prompt's block alone).
			before := len(fake.Requests())
			out := home.run(t, claude, "-p", "hello from claude code", "--model", model+"-no-tools", "--no-session-persistence")
			if i == 0 {
				record(t, fake, before)
			}
			if out = strings.TrimSpace(out); !strings.HasPrefix(out, "echo: ") || !strings.HasSuffix(out, "hello from claude code") {
				t.Errorf("claude -p printed %q", out)
			}
		})
		t.Run(route+"/tool loop", func(t *testing.T) {
			file := filepath.Join(home.work, "notes.txt")
			if err := os.WriteFile(file, []byte("the notes say hi\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			before := len(fake.Requests())
			out := home.run(t, claude, "-p", "read "+file, "--model", model, "--tools", "Read", "--no-session-persistence")
			if i == 0 {
				record(t, fake, before)
			}
			if !strings.HasPrefix(strings.TrimSpace(out), "tool said: ") {
				t.Errorf("claude -p printed %q", out)
			}
			if !toolResultSent(calls(fake, before)) {
				t.Errorf("no request carried a tool's result back")
			}
		})
	}
	home.checkNoCallsOut(t)
}

// TestAgentCodex runs Codex CLI (codex exec) through the gateway, with the
// gateway as a custom model provider of the Responses wire API and the
// sub-agent tools on (a namespace tool). A plain turn; a tool loop in
// which the fake calls exec_command and Codex runs the command in its
// sandbox; and, on the translated model, what Codex sent reaching the
// provider as flattened function tools, its cached web search dropped.
func TestAgentCodex(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Codex")
	}
	codex := codexCLI(t)
	if codex == "" {
		return
	}
	fake, _ := startProviders(t)
	home := newAgentHome(t)
	home.writeCodexConfig(t)
	for i, model := range agentModels["codex"] {
		route := [2]string{"passed through", "translated"}[i]
		t.Run(route+"/plain", func(t *testing.T) {
			before := len(fake.Requests())
			out := home.codex(t, codex, model+"-no-tools", "hello from codex")
			if i == 0 {
				record(t, fake, before)
			}
			if out != "echo: hello from codex" {
				t.Errorf("codex exec answered %q", out)
			}
			sent := calls(fake, before)
			if len(sent) == 0 {
				t.Fatal("nothing reached the provider")
			}
			if i == 1 {
				checkFlattened(t, sent[0])
			}
		})
		t.Run(route+"/tool loop", func(t *testing.T) {
			before := len(fake.Requests())
			out := home.codex(t, codex, model, "echo hello-from-the-sandbox")
			if i == 0 {
				record(t, fake, before)
			}
			if !strings.HasPrefix(out, "tool said: ") || !strings.Contains(out, "hello-from-the-sandbox") {
				t.Errorf("codex exec answered %q", out)
			}
			if !toolResultSent(calls(fake, before)) {
				t.Errorf("no request carried the command's output back")
			}
		})
	}
	home.checkNoCallsOut(t)
}

// record writes the bodies of the requests since before that reached
// the provider, as the agent sent them (the route passed them through),
// to MODELGATE_AGENT_RECORD, when it names a directory:
// scripts/agents-latest.sh compares them with the recorded test data.
func record(t *testing.T, fake *providertest.Server, before int) {
	dir := os.Getenv("MODELGATE_AGENT_RECORD")
	if dir == "" {
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	name := strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
	for i, r := range calls(fake, before) {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-%d.json", name, i+1)), r.Body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// checkFlattened checks what a translated Codex request became at the
// provider (Anthropic's Messages): the namespace's tools as functions
// named <namespace>__<name>, and no web search (Codex's is of OpenAI's
// cache).
func checkFlattened(t *testing.T, r providertest.Recorded) {
	t.Helper()
	var names []string
	gjson.GetBytes(r.Body, "tools.#.name").ForEach(func(_, n gjson.Result) bool {
		names = append(names, n.Str)
		return true
	})
	joined := strings.Join(names, " ")
	if !strings.Contains(joined, "exec_command") || !strings.Contains(joined, "collaboration__spawn_agent") || strings.Contains(joined, "web_search") {
		t.Errorf("the provider got the tools %q", names)
	}
}

// toolResultSent reports whether one of the requests carries a tool's
// result: Anthropic's tool_result, a chat tool message, or a Responses
// function_call_output.
func toolResultSent(sent []providertest.Recorded) bool {
	for _, r := range sent {
		b := string(r.Body)
		if strings.Contains(b, `"tool_result"`) || strings.Contains(b, `"role":"tool"`) || strings.Contains(b, `"function_call_output"`) {
			return true
		}
	}
	return false
}

// agentHome is where an agent runs: its HOME, a working directory, and a
// proxy that every request not to the loopback goes to, which records
// them: an agent that calls home (telemetry, update checks, error reports,
// a model list) shows there.
type agentHome struct {
	home, work string
	proxy      *httptest.Server
	mu         sync.Mutex
	out        []string // requests that reached the proxy
}

func newAgentHome(t *testing.T) *agentHome {
	t.Helper()
	h := &agentHome{home: t.TempDir(), work: t.TempDir()}
	h.proxy = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.out = append(h.out, r.Method+" "+r.Host+r.URL.Path)
		h.mu.Unlock()
		http.Error(w, "no calls out of the test", http.StatusForbidden)
	}))
	t.Cleanup(h.proxy.Close)
	return h
}

// env is the agents' environment: nothing of the user's, the proxy for
// every host but the loopback, and the settings that keep Claude Code
// from calling anywhere but the gateway (claudeCodeEnv).
func (h *agentHome) env() []string {
	env := claudeCodeEnv(h.home)
	return append(env, "HTTP_PROXY="+h.proxy.URL, "HTTPS_PROXY="+h.proxy.URL, "ALL_PROXY="+h.proxy.URL,
		"http_proxy="+h.proxy.URL, "https_proxy="+h.proxy.URL, "no_proxy=127.0.0.1,localhost,::1",
		"CODEX_HOME="+filepath.Join(h.home, ".codex"),
		"ANTHROPIC_BASE_URL="+gatewayBase, "ANTHROPIC_API_KEY="+aliceKey, "MODELGATE_API_KEY="+aliceKey)
}

// run runs an agent in the working directory and returns its standard
// output; it fails the test when the agent fails.
func (h *agentHome) run(t *testing.T, bin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir, cmd.Env = h.work, h.env()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %q: %v\nstdout:\n%s\nstderr:\n%s", filepath.Base(bin), args, err, out, stderr.String())
	}
	return string(out)
}

// writeCodexConfig points Codex at the gateway: a custom model provider of
// the Responses wire API whose key is MODELGATE_API_KEY; no update check,
// no analytics, and neither plugins (which Codex fetches from GitHub) nor
// apps (ChatGPT's connectors); its sub-agent tools on.
func (h *agentHome) writeCodexConfig(t *testing.T) {
	t.Helper()
	dir := filepath.Join(h.home, ".codex")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`model_provider = "modelgate"
check_for_update_on_startup = false

[model_providers.modelgate]
name = "modelgate"
base_url = "%s/v1"
env_key = "MODELGATE_API_KEY"
wire_api = "responses"

[analytics]
enabled = false

[features]
multi_agent_v2 = true
plugins = false
apps = false
`, gatewayBase)
	if err := os.WriteFile(filepath.Join(dir, "config.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
}

// codex runs codex exec non-interactively for model and returns its last
// message.
func (h *agentHome) codex(t *testing.T, bin, model, prompt string) string {
	t.Helper()
	last := filepath.Join(t.TempDir(), "last.txt")
	h.run(t, bin, "exec", "--skip-git-repo-check", "--ephemeral", "-m", model, "-o", last, prompt)
	b, err := os.ReadFile(last)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// checkNoCallsOut fails the test for every request an agent sent past the
// gateway.
func (h *agentHome) checkNoCallsOut(t *testing.T) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.out) > 0 {
		t.Errorf("the agent called out of the test: %q", h.out)
	}
}

// codexCLI finds Codex CLI: MODELGATE_CODEX, else where the test script
// installs its pinned version. Without one the test is skipped, unless
// MODELGATE_REQUIRE_AGENTS=1 (the test script sets it) makes it fail.
func codexCLI(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("MODELGATE_CODEX"); p != "" {
		return p
	}
	if p, err := filepath.Abs("../.tmp/codex/node_modules/.bin/codex"); err == nil {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if os.Getenv("MODELGATE_REQUIRE_AGENTS") == "1" {
		t.Fatal("no Codex CLI (./scripts/test.sh installs it), and MODELGATE_REQUIRE_AGENTS=1")
	}
	t.Skip("no Codex CLI: ./scripts/test.sh installs it")
	return ""
}

package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestGatewayEnv checks what the quick start gives the gateway: Caddy's
// directories in its state, its admin address and port, the demo key, and
// the fake provider for each provider whose key is unset, while a provider
// whose key is set keeps its real endpoint (or the base URL set with it).
func TestGatewayEnv(t *testing.T) {
	for _, k := range []string{"OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "COHERE_API_KEY",
		"MODELGATE_KEY", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "CADDY_ADMIN"} {
		t.Setenv(k, "") // an empty variable counts as unset
	}
	t.Setenv("MODELGATE_SETTINGS_HASH", "hash") // no caddy hash-password
	t.Setenv("OPENAI_API_KEY", "sk-real")
	t.Setenv("COHERE_BASE_URL", "http://10.0.0.7:8000")

	o := options{state: "/clone/.quickstart", admin: "localhost:2119", port: 8181}
	env, notes, err := gatewayEnv(o, "http://127.0.0.1:9999")
	if err != nil {
		t.Fatal(err)
	}
	get := func(k string) string {
		v := ""
		for _, kv := range env {
			if strings.HasPrefix(kv, k+"=") {
				v = kv[len(k)+1:] // the last one wins, as in exec
			}
		}
		return v
	}
	for k, want := range map[string]string{
		"XDG_DATA_HOME":      filepath.Join("/clone/.quickstart", "data"),
		"XDG_CONFIG_HOME":    filepath.Join("/clone/.quickstart", "config"),
		"CADDY_ADMIN":        "localhost:2119",
		"MODELGATE_PORT":     "8181",
		"MODELGATE_KEY":      "mg-demo-key",
		"OPENAI_API_KEY":     "sk-real",
		"OPENAI_BASE_URL":    "",
		"ANTHROPIC_API_KEY":  "fake",
		"ANTHROPIC_BASE_URL": "http://127.0.0.1:9999",
		"COHERE_API_KEY":     "fake",
		"COHERE_BASE_URL":    "http://10.0.0.7:8000",
	} {
		if got := get(k); got != want {
			t.Errorf("%s=%q, want %q", k, got, want)
		}
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "OPENAI_API_KEY") || !strings.Contains(notes[0], "public endpoint") {
		t.Errorf("notes %q", notes)
	}
}

// TestStateIgnored checks that git ignores the quick start's state
// directory, which holds the demo's keys and usage.
func TestStateIgnored(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	cmd := exec.Command("git", "check-ignore", "-q", "--no-index", ".quickstart/data/caddy/instance.uuid")
	cmd.Dir = "../.."
	if err := cmd.Run(); err != nil {
		t.Errorf("git does not ignore .quickstart/: %v", err)
	}
}

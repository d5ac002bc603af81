package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelgate/modelgate/providers/providertest"
)

// syncBuffer is a bytes.Buffer safe for the server's and the test's
// goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor polls the log until re matches it.
func waitFor(t *testing.T, log *syncBuffer, re *regexp.Regexp) []string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if m := re.FindStringSubmatch(log.String()); m != nil {
			return m
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("log never matched %s:\n%s", re, log.String())
	return nil
}

// post makes one POST request and returns its status and body.
func post(t *testing.T, url, body string, header ...string) (int, string) {
	t.Helper()
	res, got := providertest.Send(t, http.MethodPost, url, body, header...)
	return res.StatusCode, got
}

func TestRun(t *testing.T) {
	var log syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-listen", "127.0.0.1:0", "-openai-key", "sk-secret-oa", "-anthropic-key", "sk-secret-an"}, &log)
	}()
	defer cancel()

	oa := waitFor(t, &log, regexp.MustCompile(`OpenAI-compatible base_url: (http://127\.0\.0\.1:\d+)/v1\n`))[1]
	an := waitFor(t, &log, regexp.MustCompile(`Anthropic base_url: (http://127\.0\.0\.1:\d+)\n`))[1]
	if oa != an {
		t.Errorf("two ports: %s and %s", oa, an)
	}

	status, body := post(t, oa+"/v1/chat/completions", `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`,
		"Authorization", "Bearer sk-secret-oa")
	if status != 200 || !strings.Contains(body, `"echo: hi"`) {
		t.Errorf("openai: %d %s", status, body)
	}
	status, body = post(t, an+"/v1/messages", `{"model":"claude-x","max_tokens":9,"messages":[{"role":"user","content":"hi"}]}`,
		"X-Api-Key", "sk-secret-an", "Anthropic-Version", "2023-06-01")
	if status != 200 || !strings.Contains(body, `"echo: hi"`) {
		t.Errorf("anthropic: %d %s", status, body)
	}
	if status, body = post(t, oa+"/v1/chat/completions", `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`,
		"Authorization", "Bearer wrong-key"); status != 401 {
		t.Errorf("wrong key: %d %s", status, body)
	}

	waitFor(t, &log, regexp.MustCompile(`POST /v1/chat/completions model="gpt-4o" status=200 `))
	waitFor(t, &log, regexp.MustCompile(`POST /v1/messages model="claude-x" status=200 `))
	waitFor(t, &log, regexp.MustCompile(`POST /v1/chat/completions model="gpt-4o" status=401 `))
	if strings.Contains(log.String(), "sk-secret") || strings.Contains(log.String(), "wrong-key") {
		t.Errorf("a key reached the log:\n%s", log.String())
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after the context ended")
	}
	if _, err := net.DialTimeout("tcp", strings.TrimPrefix(oa, "http://"), time.Second); err == nil {
		t.Error("still listening after shutdown")
	}
}

func TestRunErrors(t *testing.T) {
	for _, args := range [][]string{
		{"-listen", "256.0.0.1:0"},
		{"-no-such-flag"},
		{"extra"},
	} {
		var log syncBuffer
		if err := run(context.Background(), args, &log); err == nil {
			t.Errorf("run %q: no error", args)
		}
	}
}

func TestBaseHost(t *testing.T) {
	for _, tc := range []struct {
		addr *net.TCPAddr
		want string
	}{
		{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9999}, "127.0.0.1:9999"},
		{&net.TCPAddr{IP: net.IPv4zero, Port: 80}, "127.0.0.1:80"},
		{&net.TCPAddr{IP: net.IPv6unspecified, Port: 80}, "127.0.0.1:80"},
		{&net.TCPAddr{IP: net.IPv6loopback, Port: 80}, "[::1]:80"},
	} {
		if got := baseHost(tc.addr); got != tc.want {
			t.Errorf("baseHost(%v) = %s, want %s", tc.addr, got, tc.want)
		}
	}
}

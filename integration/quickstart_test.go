package integration

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestProcessQuickStart runs the quick start's one command as a newcomer
// does (go run ./cmd/quickstart, here its binary with the test's caddy and
// free ports): the gateway answers on the root Caddyfile through the fake
// provider, and Ctrl-C stops the gateway and the fake provider with it; a
// killed quick start takes the gateway down too.
func TestProcessQuickStart(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	bin := filepath.Join(t.TempDir(), "quickstart")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/quickstart").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	caddy := caddyBinary(t)

	for _, stop := range []syscall.Signal{syscall.SIGINT, syscall.SIGKILL} {
		t.Run(stop.String(), func(t *testing.T) {
			fakeAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
			site := fmt.Sprintf("http://localhost:%d", freePort(t))
			var out bytes.Buffer
			cmd := exec.Command(bin, "-caddy", caddy, "-no-build", "-fake", fakeAddr)
			cmd.Dir = ".."
			cmd.Env = append(os.Environ(),
				"OPENAI_BASE_URL=http://"+fakeAddr+"/v1", "ANTHROPIC_BASE_URL=http://"+fakeAddr,
				"COHERE_BASE_URL=http://"+fakeAddr+"/cohere", "MODELGATE_SITE="+site,
				fmt.Sprintf("CADDY_ADMIN=localhost:%d", freePort(t)), "XDG_DATA_HOME="+t.TempDir(), "XDG_CONFIG_HOME="+t.TempDir())
			cmd.Stdout, cmd.Stderr = &out, &out
			dieWithTest(cmd)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if cmd.ProcessState == nil {
					_ = cmd.Process.Kill()
					_ = cmd.Wait()
				}
			})

			body := `{"model":"smart","messages":[{"role":"user","content":"hello"}]}`
			deadline := time.Now().Add(30 * time.Second)
			for {
				status, got, _ := requestNoFail(http.MethodPost, site+"/v1/chat/completions", body, "Authorization", "Bearer mg-demo-key")
				if status == 200 && strings.Contains(got, `"content":"echo: hello"`) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the quick start's gateway did not answer (last %d %s):\n%s", status, got, out.String())
				}
				time.Sleep(100 * time.Millisecond)
			}

			if err := cmd.Process.Signal(stop); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				if stop == syscall.SIGINT && err != nil {
					t.Errorf("quick start exited with %v after Ctrl-C:\n%s", err, out.String())
				}
			case <-time.After(15 * time.Second):
				t.Fatalf("the quick start did not stop:\n%s", out.String())
			}
			// Both the fake provider and the gateway are gone (the gateway
			// may take a moment after a SIGKILL of its parent).
			deadline = time.Now().Add(10 * time.Second)
			for _, addr := range []string{fakeAddr, strings.TrimPrefix(site, "http://")} {
				for {
					c, err := net.DialTimeout("tcp", addr, time.Second)
					if err != nil {
						break
					}
					c.Close()
					if time.Now().After(deadline) {
						t.Fatalf("%s still listens after the quick start stopped (%s)", addr, stop)
					}
					time.Sleep(100 * time.Millisecond)
				}
			}
		})
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

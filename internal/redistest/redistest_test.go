package redistest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// do sends one command over a fresh connection and returns the first line
// of the reply (and the bulk string's value for $ replies).
func do(t *testing.T, addr string, args ...string) (string, error) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	fmt.Fprintf(c, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(c, "$%d\r\n%s\r\n", len(a), a)
	}
	br := bufio.NewReader(c)
	line, err := br.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSpace(line)
	if strings.HasPrefix(line, "$") && line != "$-1" {
		v, err := br.ReadString('\n')
		return strings.TrimSpace(v), err
	}
	return line, nil
}

func TestKillRestartKeepsAcknowledgedWrites(t *testing.T) {
	s := Start(t)
	if !strings.HasPrefix(s.Addr, "127.0.0.1:") {
		t.Fatalf("Addr = %s, want loopback", s.Addr)
	}
	conf, _ := os.ReadFile(s.Dir + "/redis.conf")
	for _, want := range []string{"appendonly yes", "appendfsync always", "bind 127.0.0.1"} {
		if !strings.Contains(string(conf), want) {
			t.Errorf("redis.conf lacks %q", want)
		}
	}
	for i := range 50 {
		if r, err := do(t, s.Addr, "SET", fmt.Sprint("k", i), fmt.Sprint("v", i)); err != nil || r != "+OK" {
			t.Fatalf("SET: %q %v", r, err)
		}
	}
	pid := s.PID()
	s.Kill()
	if s.Running() {
		t.Fatal("still running after Kill")
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Fatalf("process %d still exists after Kill", pid)
	}
	if _, err := do(t, s.Addr, "PING"); err == nil {
		t.Fatal("PING answered while killed")
	}
	s.Restart()
	if s.PID() == pid || !s.Running() {
		t.Fatalf("restart: pid %d (was %d)", s.PID(), pid)
	}
	for i := range 50 {
		if v, err := do(t, s.Addr, "GET", fmt.Sprint("k", i)); err != nil || v != fmt.Sprint("v", i) {
			t.Fatalf("after SIGKILL and restart, GET k%d = %q, %v", i, v, err)
		}
	}
}

func TestStopAndStartAgain(t *testing.T) {
	s := Start(t)
	if r, _ := do(t, s.Addr, "SET", "a", "1"); r != "+OK" {
		t.Fatalf("SET: %q", r)
	}
	s.Stop()
	if _, err := do(t, s.Addr, "PING"); err == nil {
		t.Fatal("reachable while stopped")
	}
	s.Stop() // stopping twice is harmless
	s.Restart()
	if v, _ := do(t, s.Addr, "GET", "a"); v != "1" {
		t.Fatalf("GET a = %q after stop and restart", v)
	}
}

func TestPasswordAndSeparateServers(t *testing.T) {
	a := Start(t, Options{Password: "s3cret"})
	b := Start(t)
	if a.Addr == b.Addr || a.Dir == b.Dir {
		t.Fatal("two servers share an address or a directory")
	}
	if r, _ := do(t, a.Addr, "GET", "x"); !strings.HasPrefix(r, "-NOAUTH") {
		t.Fatalf("GET without AUTH = %q, want NOAUTH", r)
	}
	if r, _ := do(t, b.Addr, "GET", "x"); r != "$-1" {
		t.Fatalf("GET on the open server = %q", r)
	}
}

func TestCleanupStopsTheServer(t *testing.T) {
	var pid int
	t.Run("inner", func(t *testing.T) {
		pid = Start(t).PID()
	})
	// The inner test's cleanup ran: the process is gone and reaped.
	if err := syscall.Kill(pid, 0); err == nil {
		t.Fatalf("redis-server %d still runs after its test ended", pid)
	}
}

func TestCluster(t *testing.T) {
	nodes := StartCluster(t, 3)
	for _, n := range nodes {
		info, err := command(n.Addr, "", "CLUSTER", "INFO")
		if err != nil || !strings.Contains(info, "cluster_slots_assigned:16384") {
			t.Fatalf("%s: %s %v", n.Addr, info, err)
		}
	}
	// A key lives on one node: the others redirect.
	moved := 0
	for _, n := range nodes {
		r, _ := do(t, n.Addr, "SET", "some-key", "v")
		if strings.HasPrefix(r, "-MOVED") {
			moved++
		}
	}
	if moved != 2 {
		t.Fatalf("%d of 3 nodes redirected a key, want 2", moved)
	}
}

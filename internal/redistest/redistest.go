// Package redistest runs a real redis-server for tests: on a free loopback
// port, in a temporary directory, with append-only persistence on, stopped
// by PID when the test ends. A test may kill it (SIGKILL) and restart it on
// the same port and data, or stop it for a while to make Redis unreachable.
//
// The binary is found on PATH (or in /usr/bin, /usr/sbin, /usr/local/bin);
// when it is missing and the process runs as root, Debian's redis-server
// package is installed with apt-get, once per machine, so a fresh CI machine
// needs nothing set up beforehand. MODELGATE_REDIS_SERVER names a binary to
// use instead.
//
// Persistence: appendonly yes with appendfsync always by default. Every
// write is in the append-only file (and fsynced) before Redis acknowledges
// it, so a test that kills redis-server with SIGKILL and restarts it sees
// every acknowledged write: "nothing lost" is then the gateway's property,
// not luck. (With everysec, what production setups usually run, a write is
// normally in the kernel before the reply too, and SIGKILL alone loses
// nothing the kernel has; but Redis may postpone that write by up to two
// seconds while a slow fsync runs, and a test must not depend on timing.)
// Benchmarks that want production-like numbers pass Options{AppendFsync:
// "everysec"}.
//
// Nothing here uses docker or listens beyond 127.0.0.1.
package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Options tune a server. The zero value is what tests want.
type Options struct {
	// AppendFsync is Redis's appendfsync: "always" (default) or "everysec".
	AppendFsync string
	// Password, when set, is required of clients (requirepass).
	Password string
	// Config holds extra redis.conf lines.
	Config []string
}

// Server is one redis-server process, restartable on its port and data.
type Server struct {
	// Addr is host:port on 127.0.0.1; it stays the same across restarts.
	Addr string
	// Port is Addr's port.
	Port int
	// Dir holds redis.conf, the append-only files and redis.log.
	Dir string

	t    testing.TB
	bin  string
	opts Options

	// sentinel, when set, makes this a Sentinel watching that master
	// ("<name> <port>").
	sentinel string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// Start starts a redis-server for t and stops it when t ends. It fails t
// when no redis-server can be found or installed.
func Start(t testing.TB, opts ...Options) *Server {
	t.Helper()
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	return start(t, o, "")
}

// StartSentinel starts a Redis Sentinel watching master under name (with
// a quorum of 1), and stops it when t ends.
func StartSentinel(t testing.TB, master *Server, name string) *Server {
	t.Helper()
	s := start(t, Options{}, name+" "+strconv.Itoa(master.Port))
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := command(s.Addr, "", "SENTINEL", "GET-MASTER-ADDR-BY-NAME", name)
		if err == nil && r == "*2" {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("sentinel does not know %s: %q %v", name, r, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func start(t testing.TB, opts Options, sentinel string) *Server {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		t.Fatalf("redis-server: %v", err)
	}
	s := &Server{t: t, bin: bin, Dir: t.TempDir(), opts: opts, sentinel: sentinel}
	if s.opts.AppendFsync == "" {
		s.opts.AppendFsync = "always"
	}
	// A free port can be taken by someone else before redis binds it: try
	// a few.
	var lastErr error
	for range 5 {
		s.Port, lastErr = freePort()
		if lastErr != nil {
			continue
		}
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port))
		if lastErr = s.start(); lastErr == nil {
			break
		}
	}
	if lastErr != nil {
		t.Fatalf("starting redis-server: %v", lastErr)
	}
	t.Cleanup(func() { s.Kill() })
	return s
}

// PID returns the running server's process ID, or 0 when it is not running.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Running reports whether the server process is running.
func (s *Server) Running() bool { return s.PID() != 0 }

// Kill ends the server with SIGKILL, as a crash would: nothing is flushed
// beyond what the append-only file already holds. It waits until the
// process is gone. Killing a stopped server does nothing.
func (s *Server) Kill() { s.signal(syscall.SIGKILL) }

// Stop ends the server with SIGTERM, as an operator would (Redis flushes
// the append-only file and exits), and waits until it is gone.
func (s *Server) Stop() { s.signal(syscall.SIGTERM) }

// Pause stops the server with SIGSTOP, as a hung server or a network
// partition looks to its clients: connections stay open, nothing answers.
// Resume lets it go on. Elsewhere than on Linux both return an error.
func (s *Server) Pause() error { return s.process(pause) }

// Resume lets a paused server go on (SIGCONT).
func (s *Server) Resume() error { return s.process(resume) }

// Hang pauses the server for d, and returns a channel closed once it goes
// on; the test does not end before that. It skips the test where the
// server cannot be paused.
func (s *Server) Hang(t testing.TB, d time.Duration) <-chan struct{} {
	t.Helper()
	if err := s.Pause(); err != nil {
		t.Skip(err)
	}
	resumed := make(chan struct{})
	time.AfterFunc(d, func() {
		if err := s.Resume(); err != nil {
			t.Error(err)
		}
		close(resumed)
	})
	t.Cleanup(func() { <-resumed })
	return resumed
}

func (s *Server) process(f func(*os.Process) error) error {
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	if cmd == nil {
		return errors.New("redistest: the server is not running")
	}
	return f(cmd.Process)
}

func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
	s.mu.Lock()
	if s.cmd == cmd {
		s.cmd, s.done = nil, nil
	}
	s.mu.Unlock()
}

// Restart starts the server again on the same port and data directory
// after Kill or Stop, waiting until it has loaded its data and answers. The
// port may still be in TIME_WAIT or briefly taken: it retries for a while.
func (s *Server) Restart() {
	s.t.Helper()
	if s.Running() {
		s.t.Fatal("redistest: Restart of a running server")
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := s.start()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("restarting redis-server on %s: %v", s.Addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Log returns what the server wrote to its log file so far.
func (s *Server) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.Dir, "redis.log"))
	return string(b)
}

func (s *Server) start() error {
	conf := []string{
		"bind 127.0.0.1",
		"port " + strconv.Itoa(s.Port),
		"protected-mode yes",
		"daemonize no",
		"dir " + s.Dir,
		"logfile " + filepath.Join(s.Dir, "redis.log"),
	}
	if s.sentinel == "" {
		conf = append(conf,
			"appendonly yes",
			"appendfsync "+s.opts.AppendFsync,
			`save ""`, // the append-only file is the persistence
		)
	} else {
		name, port, _ := strings.Cut(s.sentinel, " ")
		conf = append(conf, "sentinel monitor "+name+" 127.0.0.1 "+port+" 1",
			"sentinel down-after-milliseconds "+name+" 2000")
	}
	if s.opts.Password != "" {
		conf = append(conf, "requirepass "+s.opts.Password)
	}
	conf = append(conf, s.opts.Config...)
	confPath := filepath.Join(s.Dir, "redis.conf")
	if err := os.WriteFile(confPath, []byte(strings.Join(conf, "\n")+"\n"), 0o600); err != nil {
		return err
	}
	args := []string{confPath}
	if s.sentinel != "" {
		args = append(args, "--sentinel")
	}
	cmd := exec.Command(s.bin, args...)
	cmd.Dir = s.Dir
	setParentDeath(cmd)
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()

	// Wait until it answers PING with PONG (not LOADING) or exits.
	deadline := time.Now().Add(20 * time.Second)
	for {
		select {
		case <-done:
			return fmt.Errorf("redis-server exited at start: %s", lastLines(s.Log(), 5))
		default:
		}
		if err := ping(s.Addr, s.opts.Password); err == nil {
			break
		} else if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-done
			return fmt.Errorf("redis-server did not answer within 20s: %w", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	return nil
}

// ping sends PING over a raw connection and wants +PONG.
func ping(addr, password string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	br := bufio.NewReader(c)
	if password != "" {
		if _, err := fmt.Fprintf(c, "*2\r\n$4\r\nAUTH\r\n$%d\r\n%s\r\n", len(password), password); err != nil {
			return err
		}
		line, err := br.ReadString('\n')
		if err != nil {
			return fmt.Errorf("AUTH: %q %w", line, err)
		}
		if !strings.HasPrefix(line, "+OK") {
			return fmt.Errorf("AUTH: %q", line)
		}
	}
	if _, err := c.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		return err
	}
	line, err := br.ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return errors.New(strings.TrimSpace(line))
	}
	return nil
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

package redistest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"
)

var (
	binaryOnce sync.Once
	binaryPath string
	binaryErr  error
)

// Binary returns the path of a redis-server binary, installing Debian's
// package when none is found (see the package comment). The answer is
// computed once per process; concurrent test processes installing at the
// same time take turns through a lock file.
func Binary() (string, error) {
	binaryOnce.Do(func() { binaryPath, binaryErr = findOrInstall() })
	return binaryPath, binaryErr
}

func find() string {
	if p := os.Getenv("MODELGATE_REDIS_SERVER"); p != "" {
		return p
	}
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p
	}
	for _, dir := range []string{"/usr/bin", "/usr/sbin", "/usr/local/bin"} {
		p := filepath.Join(dir, "redis-server")
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

func findOrInstall() (string, error) {
	if p := find(); p != "" {
		return p, nil
	}
	if _, err := exec.LookPath("apt-get"); err != nil || os.Geteuid() != 0 {
		return "", errors.New("redis-server is not installed and cannot be installed here " +
			"(needs root and apt-get): install Debian's redis-server package, or set MODELGATE_REDIS_SERVER")
	}
	// Test binaries of several packages run at once: one installs, the
	// others wait on the lock and then find the binary.
	lock, err := os.OpenFile(filepath.Join(os.TempDir(), "modelgate-redistest-install.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return "", err
	}
	defer func() { _ = lock.Close() }() // the lock is released with the file; nothing was written
	if err := lockFile(lock); err != nil {
		return "", fmt.Errorf("locking the install: %w", err)
	}
	if p := find(); p != "" {
		return p, nil
	}
	install := func() ([]byte, error) {
		return apt("install", "-y", "-q", "--no-install-recommends", "redis-server")
	}
	out, err := install()
	if err != nil {
		// A fresh machine may have no package lists yet.
		if upd, uerr := apt("update", "-q"); uerr != nil {
			return "", fmt.Errorf("apt-get update: %w\n%s", uerr, tail(upd))
		}
		if out, err = install(); err != nil {
			return "", fmt.Errorf("apt-get install redis-server: %w\n%s", err, tail(out))
		}
	}
	if p := find(); p != "" {
		return p, nil
	}
	return "", fmt.Errorf("redis-server installed but not found\n%s", tail(out))
}

// apt runs apt-get non-interactively, waiting for a dpkg lock another
// process holds rather than failing at once.
func apt(args ...string) ([]byte, error) {
	args = append([]string{"-o", "DPkg::Lock::Timeout=300"}, args...)
	cmd := exec.Command("apt-get", args...)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return buf.Bytes(), err
	case <-time.After(10 * time.Minute):
		_ = cmd.Process.Kill()
		<-done //nolint:errcheck // the killed process's exit status
		return buf.Bytes(), errors.New("apt-get took more than 10 minutes")
	}
}

func tail(b []byte) string {
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

package redistest

import (
	"os"
	"os/exec"
	"syscall"
)

// setParentDeath makes the kernel kill redis-server when the test process
// dies without cleaning up (a panic, a timeout, a SIGKILL), and puts it in
// its own process group so a terminal's Ctrl-C reaches only the test.
func setParentDeath(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}

// pause stops the process with SIGSTOP, resume lets it go on (SIGCONT).
func pause(p *os.Process) error  { return p.Signal(syscall.SIGSTOP) }
func resume(p *os.Process) error { return p.Signal(syscall.SIGCONT) }

// lockFile takes an exclusive lock on f, released when f is closed.
func lockFile(f *os.File) error { return syscall.Flock(int(f.Fd()), syscall.LOCK_EX) }

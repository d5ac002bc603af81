package integration

import (
	"os/exec"
	"syscall"
)

// dieWithTest makes the kernel kill cmd when the test process ends, so a
// test binary killed by a timeout leaves no caddy behind holding ports.
func dieWithTest(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// pauseProcess stops pid with SIGSTOP, as a hung server or a network
// partition looks to its clients: connections stay open, nothing answers.
func pauseProcess(pid int) error { return syscall.Kill(pid, syscall.SIGSTOP) }

// resumeProcess lets a paused pid go on (SIGCONT).
func resumeProcess(pid int) error { return syscall.Kill(pid, syscall.SIGCONT) }

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

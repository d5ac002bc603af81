package main

import "syscall"

// childAttr puts the gateway in a process group of its own, so that a
// terminal's Ctrl-C reaches it once, through this process, and makes it
// stop gracefully when this process dies, even of a SIGKILL.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}

// stopWithParent asks for a SIGTERM when the process that started this one
// ends: go run, killed or terminated, does not pass its signal on, and
// would leave the quick start and its gateway running.
func stopWithParent() {
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGTERM), 0)
}

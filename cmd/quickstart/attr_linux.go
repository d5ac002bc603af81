package main

import "syscall"

// childAttr makes the gateway die with this process, even when this process
// is killed without a chance to stop it.
func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM} }

//go:build unix && !linux

package main

import "syscall"

// childAttr puts the gateway in a process group of its own, so that a
// terminal's Ctrl-C reaches it once, through this process.
func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// stopWithParent does nothing here: only Linux has a parent-death signal.
func stopWithParent() {}

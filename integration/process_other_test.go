//go:build !linux

package integration

import "os/exec"

// dieWithTest does nothing here: only Linux has a parent-death signal.
func dieWithTest(*exec.Cmd) {}

//go:build !linux

package integration

import (
	"errors"
	"os/exec"
)

// dieWithTest does nothing here: only Linux has a parent-death signal.
func dieWithTest(*exec.Cmd) {}

var errNoPause = errors.New("pausing a process is done on Linux only")

func pauseProcess(int) error  { return errNoPause }
func resumeProcess(int) error { return errNoPause }

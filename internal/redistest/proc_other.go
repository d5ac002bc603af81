//go:build !linux

package redistest

import (
	"errors"
	"os"
	"os/exec"
)

// setParentDeath does nothing where the kernel offers no parent-death
// signal; t.Cleanup still stops the server.
func setParentDeath(cmd *exec.Cmd) {}

var errNoPause = errors.New("redistest: pausing a process is done on Linux only")

func pause(*os.Process) error  { return errNoPause }
func resume(*os.Process) error { return errNoPause }

// lockFile does nothing here: installing with apt-get is Linux only.
func lockFile(f *os.File) error { return nil }

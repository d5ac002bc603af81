//go:build !linux

package redistest

import (
	"os"
	"os/exec"
)

// setParentDeath does nothing where the kernel offers no parent-death
// signal; t.Cleanup still stops the server.
func setParentDeath(cmd *exec.Cmd) {}

// lockFile does nothing here: installing with apt-get is Linux only.
func lockFile(f *os.File) error { return nil }

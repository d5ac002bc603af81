//go:build unix

package gateway

import "syscall"

// processCPU returns the CPU time the process has used (user and system,
// every thread: the garbage collector's included), in nanoseconds.
func processCPU() (int64, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return ru.Utime.Nano() + ru.Stime.Nano(), true
}

//go:build !unix

package guardrails

// processCPU is not measured on this system.
func processCPU() (int64, bool) { return 0, false }

//go:build linux

package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// syscalls is the number of read and write system calls a process has
// made so far (syscr and syscw in /proc/<pid>/io): what a request costs in
// the kernel, which no in-process benchmark sees.
func syscalls(pid int) (int64, error) {
	io, err := ioOf(pid)
	return io.reads + io.writes, err
}

// ioCounts are a process's read and write system calls so far, and the
// bytes it wrote (syscr, syscw and wchar in /proc/<pid>/io).
type ioCounts struct {
	reads, writes, written int64
}

// ioOf reads the ioCounts of process pid.
func ioOf(pid int) (ioCounts, error) {
	var io ioCounts
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return io, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		name, v, _ := strings.Cut(line, ":")
		var to *int64
		switch name {
		case "syscr":
			to = &io.reads
		case "syscw":
			to = &io.writes
		case "wchar":
			to = &io.written
		default:
			continue
		}
		x, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return io, fmt.Errorf("/proc/%d/io: unexpected format", pid)
		}
		*to = x
	}
	return io, nil
}

// memory returns a process's resident set size now and its peak since
// start or the last resetPeak, in KiB.
func memory(pid int) (rss, hwm int64, err error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	defer func() { _ = f.Close() }() // read only
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		for _, field := range []struct {
			name string
			v    *int64
		}{{"VmRSS:", &rss}, {"VmHWM:", &hwm}} {
			if v, ok := strings.CutPrefix(line, field.name); ok {
				*field.v, _ = strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			}
		}
	}
	return rss, hwm, sc.Err()
}

// resetPeak starts a new peak RSS measurement of a process: writing 5 to
// clear_refs sets VmHWM to the current RSS.
func resetPeak(pid int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}

// raiseFileLimit raises this process's soft limit of open files to the
// hard limit; children started afterwards inherit it.
func raiseFileLimit() uint64 {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0
	}
	if l.Cur < l.Max {
		l.Cur = l.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
	}
	_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l)
	return l.Cur
}

// fileLimits returns the soft and hard limits of open files.
func fileLimits() (soft, hard uint64) {
	var l syscall.Rlimit
	_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l)
	return l.Cur, l.Max
}

// allowedCPUs lists the CPUs this process may run on
// (Cpus_allowed_list in /proc/self/status, such as "0-3,6").
func allowedCPUs() []int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return nil
	}
	var out []int
	for _, line := range strings.Split(string(b), "\n") {
		list, ok := strings.CutPrefix(line, "Cpus_allowed_list:")
		if !ok {
			continue
		}
		for _, r := range strings.Split(strings.TrimSpace(list), ",") {
			lo, hi, isRange := strings.Cut(r, "-")
			a, err1 := strconv.Atoi(lo)
			z, err2 := a, error(nil)
			if isRange {
				z, err2 = strconv.Atoi(hi)
			}
			if err1 != nil || err2 != nil {
				return nil
			}
			for c := a; c <= z; c++ {
				out = append(out, c)
			}
		}
	}
	return out
}

// loadAverage is /proc/loadavg's first three fields.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

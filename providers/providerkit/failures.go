package providerkit

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// Failures runs check as a test's goroutine with a testing.TB that
// records failures instead of reporting them to t, and returns whether
// check failed and what it said. A test of a check shows with it that the
// check fails where it must: a check that cannot fail proves nothing.
func Failures(t testing.TB, check func(tb testing.TB)) (failed bool, log string) {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		check(r)
	}()
	<-done
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed, r.log.String()
}

// recorder is the testing.TB of Failures.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	failed bool
	log    strings.Builder
}

func (r *recorder) Helper() {}

func (r *recorder) Fail() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = true
}

func (r *recorder) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

func (r *recorder) FailNow() {
	r.Fail()
	runtime.Goexit()
}

func (r *recorder) Error(args ...any) { r.Errorf("%s", fmt.Sprint(args...)) }

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = true
	fmt.Fprintf(&r.log, format+"\n", args...)
}

func (r *recorder) Fatal(args ...any) { r.Fatalf("%s", fmt.Sprint(args...)) }

func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}

//go:build linux

// Command loadbench measures modelgate against plain Caddy reverse_proxy
// in front of the same fast fake upstream, as a user would measure it:
// separate processes on loopback, the gateway (one caddy process per
// variant, all from the same binary) and the upstream pinned to one CPU and
// the load generator to another. It is a module of its own, bench/, which
// uses the repository's code through a replace directive; from the
// repository's root:
//
//	cd bench && go run ./cmd/loadbench
//
// It builds what it needs (the caddy binary, with `go build ./cmd/caddy` in
// the repository's root, which Go's build cache makes a second's work when
// nothing changed; or -caddy names a binary, an xcaddy build say), starts the
// upstream and one caddy process per variant, and runs the suites (-suites):
//
//	live     every scenario (scenarios.go) through every variant
//	         (-variants), -rounds rounds interleaved: req/s, events/s,
//	         p50/p99, time to first event, CPU per request and peak RSS of
//	         the gateway process, and each ratio against tuned plain
//	         reverse_proxy in the same round, with the spread over rounds
//	streams  as many concurrent slow streams (one event a second) as the
//	         open-file limit allows, through tuned reverse_proxy and through
//	         modelgate: every stream must complete; RSS per open stream and
//	         CPU per event
//	batch    a 50,000-line batch through the Files and Batch APIs: lines/s
//	         against the live chat rate of the same process, peak RSS
//	pool     the provider pool experiment: modelgate's providers with
//	         Caddy's default idle pool, a larger one, and HTTP/1.1 against
//	         HTTP/2 to an HTTPS upstream (not in the default suites)
//	profile  a CPU profile of modelgate under load (the admin endpoint's
//	         /debug/pprof/profile), and its top entries
//
// Everything runs on 127.0.0.1; every run is bounded by -duration and the
// whole by -max-time. The report (Markdown) is printed and written, with
// the raw results (JSON), the configs, the logs and the profiles, to -out.
// Linux only: it reads /proc and pins processes with taskset.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	var err error
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "upstream":
			err = runUpstream(os.Args[2:])
		case "load":
			err = runLoad(os.Args[2:])
		case "streams":
			err = runStreams(os.Args[2:])
		case "batch":
			err = runBatch(os.Args[2:])
		case "breakdown":
			// loadbench breakdown <cpu.pprof>: where a profile's time goes.
			if len(os.Args) != 3 {
				err = errors.New("usage: loadbench breakdown <cpu profile>")
			} else {
				fmt.Println(breakdown(os.Args[2]))
			}
		default:
			err = orchestrate(os.Args[1:])
		}
	} else {
		err = orchestrate(nil)
	}
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "loadbench:", err)
		}
		os.Exit(1)
	}
}

// signalContext ends on SIGINT or SIGTERM.
func signalContext(parent context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
}

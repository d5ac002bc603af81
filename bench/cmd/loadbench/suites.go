//go:build linux

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/modelgate/modelgate/internal/procstat"
)

// liveCase is a scenario at a number of connections.
type liveCase struct {
	label string
	s     *scenario
	conns int
}

// cases are the scenarios selected, at -c connections; streams also at
// one connection, where the time to the first event is the proxy's own
// and not queueing.
func (b *bench) cases(names ...string) ([]liveCase, error) {
	all := scenarios()
	want := b.opt.scens
	if len(names) > 0 {
		want = names
	}
	var out []liveCase
	for _, s := range all {
		if len(want) > 0 && !contains(want, s.name) {
			continue
		}
		out = append(out, liveCase{label: s.name, s: s, conns: b.opt.conns})
		if s.stream && len(names) == 0 {
			out = append(out, liveCase{label: s.name + " @1", s: s, conns: 1})
		}
	}
	for _, w := range want {
		found := false
		for _, s := range all {
			found = found || s.name == w
		}
		if !found {
			return nil, fmt.Errorf("unknown scenario %q", w)
		}
	}
	return out, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// startVariants starts a caddy process for each variant; the reference
// variants the others are compared with come first.
func (b *bench) startVariants(names []string, tag string) ([]*proc, error) {
	var procs []*proc
	for _, name := range names {
		v := variants[name]
		up := b.upstream
		if v.tls {
			if b.tlsUp == nil {
				var err error
				if b.tlsUp, err = b.startUpstream("upstream-tls", "-kind", b.opt.upstreamKind, "-tls", "-provider-headers="+strconv.FormatBool(b.opt.providerHeaders)); err != nil {
					return nil, err
				}
				b.logf("HTTPS upstream (%s, HTTP/2 offered): %s", b.opt.upstreamKind, b.tlsUp.addr)
			}
			up = b.tlsUp
		}
		p, err := b.startCaddy(v, up, tag)
		if err != nil {
			stopProcs(procs)
			return nil, err
		}
		p.addr = up.addr
		procs = append(procs, p)
	}
	return procs, nil
}

func stopProcs(procs []*proc) {
	for _, p := range procs {
		p.stop()
	}
}

// upstreamOf is the upstream process a caddy process proxies to.
func (b *bench) upstreamOf(p *proc) *proc {
	if p.v.tls {
		return b.tlsUp
	}
	return b.upstream
}

// interleaved runs every case through every process, rounds times: in
// each round and case the processes run one after the other, in an order
// rotated by the round, so that drift in the machine's load hits every
// variant alike.
func (b *bench) interleaved(suite string, cases []liveCase, procs []*proc) {
	total := b.opt.rounds * len(cases) * len(procs)
	n := 0
	for round := 1; round <= b.opt.rounds; round++ {
		for _, c := range cases {
			for i := range procs {
				if b.ctx.Err() != nil {
					return
				}
				p := procs[(i+round-1)%len(procs)]
				n++
				r, err := b.measure(suite, c.label, c.s, p, b.upstreamOf(p), c.conns, round, 0)
				if err != nil {
					b.report.note("%s: round %d, %s via %s: %v", suite, round, c.label, p.v.name, err)
					b.logf("%s", err)
					continue
				}
				b.logf("%s %d/%d round %d %-18s %-15s %8.0f req/s %8.0f ev/s p50 %6.2fms cpu/req %5.1fµs load %s",
					suite, n, total, round, c.label, p.v.name, r.rps(), r.eps(), r.Load.P50/1000,
					float64(r.cpuPerReq())/float64(time.Microsecond), loadAverage())
			}
		}
	}
}

// live is the live suite.
func (b *bench) live() error {
	cases, err := b.cases()
	if err != nil {
		return err
	}
	names := b.opt.variants
	if !contains(names, reference) {
		names = append([]string{reference}, names...)
	}
	procs, err := b.startVariants(names, "")
	if err != nil {
		return err
	}
	defer stopProcs(procs)
	b.interleaved("live", cases, procs)
	return nil
}

// pool is the provider connection experiment: the idle pool's size, the
// connections' buffers, HTTP/1.1 against HTTP/2.
func (b *bench) pool() error {
	cases, err := b.cases("chat", "stream", "embeddings")
	if err != nil {
		return err
	}
	wide := liveCase{label: "chat @400", s: cases[0].s, conns: 400}
	cases = append(cases[:1], append([]liveCase{wide}, cases[1:]...)...)
	procs, err := b.startVariants([]string{"tuned", "mg_pool32", "modelgate", "mg_pool256", "mg_buf64k",
		"tuned_tls_h1", "tuned_tls_h2", "mg_tls_h1", "mg_tls_h2"}, "-pool")
	if err != nil {
		return err
	}
	defer stopProcs(procs)
	b.interleaved("pool", cases, procs)
	return nil
}

// streamsRun is one variant's many-streams measurement.
type streamsRun struct {
	Variant    string        `json:"variant"`
	Result     streamsResult `json:"result"`
	RSSBefore  int64         `json:"rss_before_kib"`
	RSSAllOpen int64         `json:"rss_all_open_kib"`
	// CPU and events from the moment every stream was open to the moment
	// the first one ended: the cost of an event on an open stream,
	// without opening or closing connections. None (zero) when a stream
	// ended before the last one opened.
	SteadyCPU    time.Duration `json:"steady_cpu_ns"`
	SteadyEvents int64         `json:"steady_events"`
	PeakRSS      int64         `json:"peak_rss_kib"`
	GatewayCPU   time.Duration `json:"gateway_cpu_ns"`
	Upstream     time.Duration `json:"upstream_cpu_ns"`
	// The gateway's read and write system calls, over the whole run and
	// in the steady phase: an event costs about one read from the
	// provider and one write to the client.
	Syscalls       int64 `json:"gateway_syscalls"`
	SteadySyscalls int64 `json:"steady_syscalls"`
	// What the gateway's Go runtime did in the steady phase (its
	// /debug/vars): allocations, bytes allocated, garbage collections
	// and their stop-the-world pauses. With every stream's goroutines
	// and buffers live, each collection marks all of them: what an
	// event allocates costs far more here than in a short request.
	Steady goStats `json:"steady_go"`
}

// goStats are a Go process's cumulative allocation and collection counts,
// from runtime.MemStats; the difference of two is what happened between.
type goStats struct {
	Mallocs      uint64 `json:"Mallocs"`
	TotalAlloc   uint64 `json:"TotalAlloc"`
	NumGC        uint32 `json:"NumGC"`
	PauseTotalNs uint64 `json:"PauseTotalNs"`
}

func (s goStats) minus(t goStats) goStats {
	return goStats{s.Mallocs - t.Mallocs, s.TotalAlloc - t.TotalAlloc, s.NumGC - t.NumGC, s.PauseTotalNs - t.PauseTotalNs}
}

// goRuntime reads p's goStats from its admin endpoint's /debug/vars.
func (b *bench) goRuntime(p *proc) (goStats, error) {
	body, err := b.admin(p, http.MethodGet, "/debug/vars", "")
	if err != nil {
		return goStats{}, err
	}
	var v struct {
		MemStats goStats `json:"memstats"`
	}
	err = json.Unmarshal(body, &v)
	return v.MemStats, err
}

// streams is the many-streams suite.
func (b *bench) streams() error {
	n := b.opt.streams
	_, hard := fileLimits()
	if n < 0 {
		// Each stream holds a client and an upstream connection in the
		// gateway; keep a thousand descriptors spare.
		n = min(9000, (int(hard)-1000)/2)
	}
	if n <= 0 {
		return fmt.Errorf("the open-file limit (%d) leaves no room for streams", hard)
	}
	s := pacedScenario()
	const events = pacedWords + 5 // role, "echo:", the words, finish, usage, [DONE]
	streamLen := time.Duration(events-1) * b.opt.pace
	// Two milliseconds a stream: opened faster, the gateway's accept queue
	// overflows while its one CPU serves the streams already open, and the
	// dropped connections open seconds later (SYN retries), after the
	// first streams have ended.
	ramp := min(max(2*time.Duration(n)*time.Millisecond, 2*time.Second), streamLen/2)
	b.report.note("streams: %d streams of %d events, one every %s, opened over %s (open-file limit %d)", n, events, b.opt.pace, ramp, hard)
	// Twice each, in the order tuned, modelgate, modelgate, tuned: this
	// host's speed drifts over minutes, and a drift that is steady over
	// the four runs weighs the same on both.
	for _, name := range []string{reference, "modelgate", "modelgate", reference} {
		if b.ctx.Err() != nil {
			break
		}
		procs, err := b.startVariants([]string{name}, "-streams")
		if err != nil {
			return err
		}
		p := procs[0]
		r, err := b.manyStreams(s, p, n, events, ramp, streamLen)
		p.stop()
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		b.report.streams = append(b.report.streams, r)
		b.logf("streams via %s: %d/%d completed, %.1f KiB per stream, %.1f µs CPU per event", name, r.Result.Completed, n,
			float64(r.PeakRSS-r.RSSBefore)/float64(n), float64(r.GatewayCPU)/float64(max(r.Result.Events, 1))/1000)
		time.Sleep(2 * time.Second) // let the upstream's connections close
	}
	return nil //nolint:nilerr // stopped early (the time cap or a signal): the run notes it and keeps what it measured
}

func (b *bench) manyStreams(s *scenario, p *proc, n, events int, ramp, streamLen time.Duration) (*streamsRun, error) {
	req := requestFor(s, p)
	kind := "plain"
	if p.v.gateway {
		kind = "gateway"
	}
	bf, err := b.bodyFile(s.name+"-"+kind, req.body)
	if err != nil {
		return nil, err
	}
	args := []string{"streams", "-url", fmt.Sprintf("http://127.0.0.1:%d%s", p.port, req.path), "-body", bf,
		"-n", strconv.Itoa(n), "-ramp", ramp.String(), "-events", strconv.Itoa(events)}
	for i := 0; i+1 < len(req.header); i += 2 {
		args = append(args, "-H", req.header[i]+": "+req.header[i+1])
	}
	time.Sleep(time.Second) // the process settles after its start
	r := &streamsRun{Variant: p.v.name}
	r.RSSBefore, _, _ = memory(p.pid())
	_ = resetPeak(p.pid())
	g0, _ := procstat.CPU(p.pid())
	u0, _ := procstat.CPU(b.upstream.pid())
	sc0, _ := syscalls(p.pid())
	cl, err := b.start("streams", b.loadCPU, false, nil, b.self, args...)
	if err != nil {
		return nil, err
	}
	defer cl.stop()
	var gOpen time.Duration
	var evOpen, scOpen int64
	var goOpen goStats
	goErr := errors.New("not open yet")
	for {
		line, err := b.readLine(cl, ramp+streamLen+3*time.Minute)
		if err != nil {
			return nil, errWithLog(err, filepath.Join(b.dir, "streams.log"))
		}
		switch {
		case strings.HasPrefix(line, "open "):
			gOpen, _ = procstat.CPU(p.pid())
			scOpen, _ = syscalls(p.pid())
			r.RSSAllOpen, _, _ = memory(p.pid())
			goOpen, goErr = b.goRuntime(p)
			if f := strings.Fields(line); len(f) == 3 {
				evOpen, _ = strconv.ParseInt(f[2], 10, 64)
			}
		case strings.HasPrefix(line, "closing "):
			// The client says it once, when the first stream ends.
			if gOpen > 0 {
				// Every stream was open until now: the steady phase.
				g, _ := procstat.CPU(p.pid())
				sc, _ := syscalls(p.pid())
				ev, _ := strconv.ParseInt(strings.TrimPrefix(line, "closing "), 10, 64)
				r.SteadyCPU, r.SteadyEvents, r.SteadySyscalls = g-gOpen, ev-evOpen, sc-scOpen
				if now, err := b.goRuntime(p); err == nil && goErr == nil {
					r.Steady = now.minus(goOpen)
				}
			}
		case strings.HasPrefix(line, "{"):
			g1, _ := procstat.CPU(p.pid())
			u1, _ := procstat.CPU(b.upstream.pid())
			_, r.PeakRSS, _ = memory(p.pid())
			r.GatewayCPU, r.Upstream = g1-g0, u1-u0
			if sc1, err := syscalls(p.pid()); err == nil {
				r.Syscalls = sc1 - sc0
			}
			if err := json.Unmarshal([]byte(line), &r.Result); err != nil {
				return nil, err
			}
			return r, nil
		}
	}
}

// batchRun is the batch suite's measurement.
type batchRun struct {
	Result      batchResult   `json:"result"`
	GatewayCPU  time.Duration `json:"gateway_cpu_ns"`
	UpstreamCPU time.Duration `json:"upstream_cpu_ns"`
	PeakRSS     int64         `json:"peak_rss_kib"`
	RSSBefore   int64         `json:"rss_before_kib"`
	Options     string        `json:"options"`
	// The chat scenario on the same process, right before the batch and
	// right after it: the batch is compared with their mean, so that a
	// drift of the host's speed weighs on both sides.
	LiveBefore *run `json:"live_before"`
	Live       *run `json:"live"`
}

// batch is the batch suite.
func (b *bench) batch() error {
	v := *variants["modelgate"]
	v.name = "modelgate_batch"
	opts := "defaults (workers 32, per_provider 16)"
	if b.opt.batchOpts != "" {
		v.extra = "batch {\n" + strings.ReplaceAll(b.opt.batchOpts, ";", "\n") + "\n}"
		opts = b.opt.batchOpts
	}
	p, err := b.startCaddy(&v, b.upstream, "")
	if err != nil {
		return err
	}
	defer p.stop()
	time.Sleep(time.Second)
	r := &batchRun{Options: opts}
	cases, _ := b.cases("chat")
	if live, err := b.measure("batch", "chat (before the batch)", cases[0].s, p, b.upstream, b.opt.conns, 1, 0); err == nil {
		r.LiveBefore = live
	} else {
		b.report.note("batch: the live chat run before the batch failed: %v", err)
	}
	r.RSSBefore, _, _ = memory(p.pid())
	cl, err := b.start("batch", b.loadCPU, false, nil, b.self, "batch", "-url", fmt.Sprintf("http://127.0.0.1:%d", p.port),
		"-lines", strconv.Itoa(b.opt.batchLines), "-key", p.key)
	if err != nil {
		return err
	}
	defer cl.stop()
	var g0, u0 time.Duration
	// A CPU profile of the batch's first seconds (it runs for ten or so),
	// to say where a line's time goes beside a live request's.
	const profileSecs = 5
	profFile := filepath.Join(b.dir, "cpu-batch.pprof")
	var profiled chan error
	for done := false; !done; {
		line, err := b.readLine(cl, 20*time.Minute)
		if err != nil {
			return errWithLog(err, filepath.Join(b.dir, "batch.log"))
		}
		switch {
		case line == "creating":
			_ = resetPeak(p.pid())
			g0, _ = procstat.CPU(p.pid())
			u0, _ = procstat.CPU(b.upstream.pid())
			profiled = make(chan error, 1)
			go func() {
				body, err := b.admin(p, http.MethodGet, "/debug/pprof/profile?seconds="+strconv.Itoa(profileSecs), "")
				if err == nil {
					err = os.WriteFile(profFile, body, 0o644)
				}
				profiled <- err
			}()
		case line == "ended":
			g1, _ := procstat.CPU(p.pid())
			u1, _ := procstat.CPU(b.upstream.pid())
			_, r.PeakRSS, _ = memory(p.pid())
			r.GatewayCPU, r.UpstreamCPU = g1-g0, u1-u0
		case strings.HasPrefix(line, "{"):
			if err := json.Unmarshal([]byte(line), &r.Result); err != nil {
				return err
			}
			done = true
		}
	}
	b.logf("batch: %d lines %s in %.1fs (%.0f lines/s), peak RSS %d MiB", r.Result.Lines, r.Result.Status, r.Result.Seconds,
		float64(r.Result.Lines)/r.Result.Seconds, r.PeakRSS>>10)
	if profiled != nil {
		if err := <-profiled; err != nil {
			b.report.note("batch: no CPU profile: %v", err)
		} else if bd, err := breakdownOf(profFile); err == nil {
			// Lines in the profile: the batch's mean rate over its length
			// (a profile longer than the batch covers all of them).
			lines := min(float64(r.Result.Lines), float64(r.Result.Lines)/r.Result.Seconds*profileSecs)
			b.report.profiles = append(b.report.profiles, &profileRun{Case: fmt.Sprintf("a %d-line batch via modelgate (its first %d s)", r.Result.Lines, profileSecs),
				File: profFile, Breakdown: bd.text(lines, nil), Flat: pprofTop(profFile, false)})
		}
	}
	if live, err := b.measure("batch", "chat (after the batch)", cases[0].s, p, b.upstream, b.opt.conns, 1, 0); err == nil {
		r.Live = live
	} else {
		b.report.note("batch: the live chat run after the batch failed: %v", err)
	}
	b.report.batch = r
	return nil
}

// profileRun is one CPU profile and its top entries.
type profileRun struct {
	Case      string `json:"case"`
	File      string `json:"file"`
	Breakdown string `json:"breakdown"`
	Flat      string `json:"flat"`
}

// profile takes CPU profiles of modelgate under load, of modelgate_full on the
// chat case, and of tuned reverse_proxy where it compares: each component's
// CPU per request beside the reference's says where the gateway's extra time
// goes.
func (b *bench) profile() error {
	procs, err := b.startVariants([]string{reference, "modelgate", "modelgate_full", "modelgate_guards"}, "-profile")
	if err != nil {
		return err
	}
	defer stopProcs(procs)
	ref, mg, full, guards := procs[0], procs[1], procs[2], procs[3]
	cases, err := b.cases("chat", "anthropic", "stream", "embeddings", "responses")
	if err != nil {
		return err
	}
	for _, c := range cases {
		if b.ctx.Err() != nil {
			break
		}
		var rp *refProfile
		if c.s.name == "chat" || c.s.name == "stream" {
			bd, requests, _, err := b.profileOne(c, ref)
			if err != nil {
				return err
			}
			rp = &refProfile{name: reference, bd: bd, requests: requests}
		}
		variants := []*proc{mg}
		switch c.s.name {
		case "chat":
			// What the limits and the usage records add, and the guards.
			variants = append(variants, full, guards)
		case "stream":
			variants = append(variants, guards) // what guarding a stream as it flows adds
		}
		for _, p := range variants {
			bd, requests, file, err := b.profileOne(c, p)
			if err != nil {
				return err
			}
			pr := &profileRun{Case: c.label + " via " + p.v.name, File: file}
			pr.Breakdown = bd.text(requests, rp)
			pr.Flat = pprofTop(file, false)
			b.report.profiles = append(b.report.profiles, pr)
		}
	}
	return nil
}

// profileOne profiles process p under case c's load and returns the
// profile's breakdown and the requests it covered (the run's rate over
// the profile's length).
func (b *bench) profileOne(c liveCase, p *proc) (*profileBreakdown, float64, string, error) {
	file := filepath.Join(b.dir, "cpu-"+c.s.name+"-"+p.v.name+".pprof")
	got := make(chan error, 1)
	secs := int(b.opt.profileTime.Seconds())
	go func() {
		// The window starts after the warm-up; the profile starts a
		// little after it and ends before the window does.
		time.Sleep(b.opt.warmup + 500*time.Millisecond)
		body, err := b.admin(p, http.MethodGet, "/debug/pprof/profile?seconds="+strconv.Itoa(secs), "")
		if err == nil {
			err = os.WriteFile(file, body, 0o644)
		}
		got <- err
	}()
	r, err := b.measure("profile", c.label, c.s, p, b.upstream, c.conns, 1, b.opt.profileTime+time.Second)
	if perr := <-got; perr != nil {
		return nil, 0, "", perr
	}
	if err != nil {
		return nil, 0, "", err
	}
	bd, err := breakdownOf(file)
	if err != nil {
		return nil, 0, "", err
	}
	return bd, r.rps() * float64(secs), file, nil
}

// pprofTop is `go tool pprof -top`'s first entries.
func pprofTop(file string, cum bool) string {
	args := []string{"tool", "pprof", "-top", "-nodecount=20"}
	if cum {
		args = append(args, "-cum")
	}
	out, err := exec.Command("go", append(args, file)...).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("go tool pprof: %v: %s", err, out)
	}
	return strings.TrimSpace(string(out))
}

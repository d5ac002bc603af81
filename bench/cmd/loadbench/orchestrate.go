//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/internal/procstat"
	"github.com/modelgate/modelgate/internal/redistest"
)

// options are the orchestrator's flags.
type options struct {
	duration, warmup, maxTime time.Duration
	rounds, conns             int
	suites, variants, scens   []string
	caddy, upstreamKind, out  string
	providerHeaders           bool
	streams                   int
	pace                      time.Duration
	batchLines                int
	batchOpts                 string
	profileTime               time.Duration
	pin                       bool
}

func parseOptions(args []string) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("loadbench", flag.ContinueOnError)
	// Many short rounds rather than a few long ones: on a shared machine
	// the speed of a CPU drifts over seconds, and a ratio is taken within
	// a round; the median of seven rounds moves less than that of three
	// (see docs/performance.md, "Measuring it yourself").
	fs.DurationVar(&o.duration, "duration", 2*time.Second, "measured window of each run")
	fs.DurationVar(&o.warmup, "warmup", 500*time.Millisecond, "unmeasured warm-up before each window")
	fs.DurationVar(&o.maxTime, "max-time", 40*time.Minute, "cap on the whole harness")
	fs.IntVar(&o.rounds, "rounds", 7, "rounds of every variant, interleaved")
	fs.IntVar(&o.conns, "c", 50, "connections of the load generator")
	suites := fs.String("suites", "live,streams,batch,profile", "suites to run: live, streams, batch, pool, profile, or all")
	vars := fs.String("variants", "plain,tuned,modelgate,modelgate_full", "variants of the live suite")
	scens := fs.String("scenarios", "all", "scenarios of the live suite (comma-separated names), or all")
	fs.StringVar(&o.caddy, "caddy", "", "caddy binary to run (default: go build ./cmd/caddy in the repository's root, into the user cache)")
	fs.StringVar(&o.upstreamKind, "upstream", "canned", "upstream: canned (recorded answers of the fake provider) or fake (the fake provider itself)")
	fs.BoolVar(&o.providerHeaders, "provider-headers", true, "canned upstream: send the real providers' documented response headers (request id, rate limits) with every answer")
	fs.StringVar(&o.out, "out", "", "directory for the report, raw results, configs, logs and profiles (default: a new temporary one)")
	fs.IntVar(&o.streams, "streams", -1, "streams of the streams suite (-1: as many as the open-file limit allows, at most 9000)")
	fs.DurationVar(&o.pace, "pace", time.Second, "time between the events of a slow stream")
	fs.IntVar(&o.batchLines, "batch-lines", 50000, "lines of the batch suite's batch")
	fs.StringVar(&o.batchOpts, "batch-options", "", "batch { … } options of the batch suite's gateway, ';'-separated (default: the defaults)")
	fs.DurationVar(&o.profileTime, "profile-time", 10*time.Second, "length of each CPU profile")
	fs.BoolVar(&o.pin, "pin", true, "pin the gateway and upstream to one CPU and the load generator to another (needs 2 CPUs and taskset)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	o.suites = split(*suites)
	if len(o.suites) == 1 && o.suites[0] == "all" {
		o.suites = []string{"live", "streams", "batch", "pool", "profile"}
	}
	for _, s := range o.suites {
		switch s {
		case "live", "streams", "batch", "pool", "profile":
		default:
			return nil, fmt.Errorf("-suites: unknown suite %q", s)
		}
	}
	o.variants = split(*vars)
	for _, v := range o.variants {
		if variants[v] == nil {
			return nil, fmt.Errorf("-variants: unknown variant %q", v)
		}
	}
	if *scens != "all" {
		o.scens = split(*scens)
	}
	return o, nil
}

func split(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// bench is one harness run.
type bench struct {
	opt                 *options
	self                string // this program, re-executed for the child processes
	caddyBin            string
	dir                 string
	gatewayCPU, loadCPU string // taskset CPU lists; empty: no pinning
	upstream            *proc
	tlsUp               *proc
	redis               *proc // started by the first variant on Redis
	report              *report
	ctx                 context.Context
}

func orchestrate(args []string) error {
	o, err := parseOptions(args)
	if err != nil {
		return err
	}
	ctx, cancel := signalContext(context.Background())
	defer cancel()
	ctx, cancelMax := context.WithTimeout(ctx, o.maxTime)
	defer cancelMax()

	b := &bench{opt: o, ctx: ctx, report: newReport()}
	if b.self, err = os.Executable(); err != nil {
		return err
	}
	b.dir = o.out
	if b.dir == "" {
		if b.dir, err = os.MkdirTemp("", "modelgate-loadbench-"); err != nil {
			return err
		}
	} else if err := os.MkdirAll(b.dir, 0o755); err != nil {
		return err
	}
	raiseFileLimit()
	b.machine()
	if err := b.build(); err != nil {
		return err
	}
	defer b.stopAll()

	kind := o.upstreamKind
	if b.upstream, err = b.startUpstream("upstream", "-kind", kind, "-pace", o.pace.String(), "-provider-headers="+strconv.FormatBool(o.providerHeaders)); err != nil {
		return err
	}
	b.logf("upstream (%s, provider headers %v): %s", kind, o.providerHeaders, b.upstream.addr)

	for _, suite := range o.suites {
		if ctx.Err() != nil {
			break
		}
		var err error
		switch suite {
		case "live":
			err = b.live()
		case "streams":
			err = b.streams()
		case "batch":
			err = b.batch()
		case "pool":
			err = b.pool()
		case "profile":
			err = b.profile()
		}
		if err != nil {
			b.report.note("suite %s failed: %v", suite, err)
			b.logf("suite %s failed: %v", suite, err)
		}
	}
	if ctx.Err() != nil {
		b.report.note("stopped early: %v (the -max-time cap or a signal)", context.Cause(ctx))
	}
	b.report.note("load average at the end: %s", loadAverage())
	return b.report.write(os.Stdout, b.dir)
}

func (b *bench) logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[%s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// machine records what the run ran on, and decides the pinning.
func (b *bench) machine() {
	cpus := allowedCPUs()
	soft, hard := fileLimits()
	_, tasksetErr := exec.LookPath("taskset")
	r := b.report
	r.note("machine: %d CPUs usable (%v), %s, GOMAXPROCS %d, open-file limit %d (hard %d)", len(cpus), cpus, runtime.Version(), runtime.GOMAXPROCS(0), soft, hard)
	r.note("load average at the start: %s", loadAverage())
	if rev, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		dirty := ""
		if out, _ := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); len(out) > 0 {
			dirty = " (with uncommitted changes)"
		}
		r.note("commit %s%s", strings.TrimSpace(string(rev)), dirty)
	}
	switch {
	case !b.opt.pin:
		r.note("no pinning (-pin=false)")
	case len(cpus) < 2 || tasksetErr != nil:
		r.note("no pinning: it needs 2 CPUs and taskset")
	default:
		b.gatewayCPU, b.loadCPU = strconv.Itoa(cpus[0]), strconv.Itoa(cpus[1])
		r.note("pinning: gateway and upstream on CPU %s, load generator on CPU %s (taskset)", b.gatewayCPU, b.loadCPU)
	}
	r.note("results, configs, logs and profiles: %s", b.dir)
}

// build makes the caddy binary, unless -caddy names one.
func (b *bench) build() error {
	if b.opt.caddy != "" {
		b.caddyBin = b.opt.caddy
		b.report.note("caddy: %s (given)", b.caddyBin)
		return nil
	}
	root, err := productDir()
	if err != nil {
		return err
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	b.caddyBin = filepath.Join(cache, "modelgate-loadbench", "caddy")
	b.logf("building %s (go build ./cmd/caddy; quick when nothing changed)", b.caddyBin)
	start := time.Now()
	cmd := exec.CommandContext(b.ctx, "go", "build", "-o", b.caddyBin, "./cmd/caddy")
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build ./cmd/caddy: %w", err)
	}
	b.report.note("caddy: go build ./cmd/caddy → %s (%.1fs)", b.caddyBin, time.Since(start).Seconds())
	return nil
}

// productModule is the module whose cmd/caddy the harness builds: the
// product, which the harness's own module (bench/) replaces with the
// directory above it.
const productModule = "github.com/modelgate/modelgate"

// productDir is the directory of the product module as the harness's
// module resolves it: the repository's root when loadbench runs from
// bench/.
func productDir() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", productModule).Output()
	dir := string(bytes.TrimSpace(out))
	if err != nil {
		return "", fmt.Errorf("run loadbench from the repository's bench/ directory, whose module replaces %s with the repository (go list -m %s: %w)", productModule, productModule, err)
	}
	if dir == "" {
		return "", fmt.Errorf("run loadbench from the repository's bench/ directory, whose module replaces %s with the repository (go list -m %s: no directory)", productModule, productModule)
	}
	if _, err := os.Stat(filepath.Join(dir, "cmd", "caddy")); err != nil {
		return "", fmt.Errorf("%s resolves to %s, which has no cmd/caddy: %w", productModule, dir, err)
	}
	return dir, nil
}

// proc is a child process.
type proc struct {
	name  string
	cmd   *exec.Cmd
	lines chan string // its stdout, line by line; closed at its end
	addr  string      // upstream: its address
	wait  chan error

	// caddy processes:
	v         *variant
	port      int
	adminPort int
	key       string // the gateway key clients send
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// start runs a child pinned to cpu (unless empty), its stdout readable
// line by line (unless quiet: then it goes to the log too), its stderr
// into <dir>/<name>.log.
func (b *bench) start(name, cpu string, quiet bool, env []string, prog string, args ...string) (*proc, error) {
	if cpu != "" {
		args = append([]string{"-c", cpu, prog}, args...)
		prog = "taskset"
	}
	cmd := exec.Command(prog, args...)
	cmd.Env = append(os.Environ(), env...)
	logf, err := os.OpenFile(filepath.Join(b.dir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd.Stderr = logf
	p := &proc{name: name, cmd: cmd, lines: make(chan string, 64), wait: make(chan error, 1)}
	var out io.ReadCloser
	if quiet {
		cmd.Stdout = logf
		close(p.lines)
	} else if out, err = cmd.StdoutPipe(); err != nil {
		return nil, err
	}
	// Children die with the harness, whatever ends it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logf.Close() // the child's log, diagnostics only; the start's error is the one to report
		return nil, err
	}
	go func() {
		// Wait closes the stdout pipe: only once everything in it is read.
		if out != nil {
			sc := bufio.NewScanner(out)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			for sc.Scan() {
				p.lines <- sc.Text()
			}
			close(p.lines)
		}
		err := cmd.Wait()
		_ = logf.Close() // the child's log, diagnostics only
		p.wait <- err
	}()
	return p, nil
}

// stop ends a child: SIGTERM, then SIGKILL.
func (p *proc) stop() {
	if p == nil {
		return
	}
	select {
	case err := <-p.wait:
		p.wait <- err
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.wait:
		p.wait <- err
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		p.wait <- <-p.wait
	}
}

// readLine returns the child's next stdout line, or why there is none.
func (b *bench) readLine(p *proc, timeout time.Duration) (string, error) {
	select {
	case line, ok := <-p.lines:
		if !ok {
			var status error
			select {
			case status = <-p.wait:
				p.wait <- status
			case <-time.After(5 * time.Second):
			}
			return "", fmt.Errorf("%s ended (%v); see %s", p.name, status, filepath.Join(b.dir, p.name+".log")) //nolint:errorlint // status is nil after a clean exit, which %w would print as %!w(<nil>)
		}
		return line, nil
	case <-time.After(timeout):
		return "", fmt.Errorf("%s: no output in %s", p.name, timeout)
	case <-b.ctx.Done():
		return "", context.Cause(b.ctx)
	}
}

var running []*proc

func (b *bench) stopAll() {
	for _, p := range running {
		p.stop()
	}
	running = nil
}

// startUpstream starts an upstream process on the gateway's CPU.
func (b *bench) startUpstream(name string, args ...string) (*proc, error) {
	p, err := b.start(name, b.gatewayCPU, false, nil, b.self, append([]string{"upstream"}, args...)...)
	if err != nil {
		return nil, err
	}
	running = append(running, p)
	line, err := b.readLine(p, 30*time.Second)
	if err != nil {
		return nil, err
	}
	if p.addr, err = parseListening(line); err != nil {
		return nil, err
	}
	return p, nil
}

// startRedis starts the harness's redis-server on the gateway's CPU, once,
// and returns its address: append-only with a sync every second, as
// production setups run it (redistest finds the binary, or installs
// Debian's package).
func (b *bench) startRedis() (string, error) {
	if b.redis != nil {
		return b.redis.addr, nil
	}
	bin, err := redistest.Binary()
	if err != nil {
		return "", err
	}
	port, err := freePort()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(b.dir, "redis")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	p, err := b.start("redis", b.gatewayCPU, true, nil, bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--dir", dir, "--save", "", "--appendonly", "yes", "--appendfsync", "everysec")
	if err != nil {
		return "", err
	}
	running = append(running, p)
	p.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if err := b.waitListening(p, p.addr, 10*time.Second); err != nil {
		return "", err
	}
	b.redis = p
	b.report.note("redis-server: %s, appendfsync everysec, on the gateway's CPU", bin)
	return p.addr, nil
}

// waitListening waits until child p accepts connections on addr, for at
// most within, or says why it does not.
func (b *bench) waitListening(p *proc, addr string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close() // a probe: nothing was written
			return nil
		}
		select {
		case err := <-p.wait:
			p.wait <- err
			return fmt.Errorf("%s exited (%v); see %s", p.name, err, filepath.Join(b.dir, p.name+".log")) //nolint:errorlint // err is nil after a clean exit, which %w would print as %!w(<nil>)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not start listening in %s; see %s", p.name, within, filepath.Join(b.dir, p.name+".log"))
		}
	}
}

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startCaddy starts a caddy process serving variant v in front of
// upstream, on the gateway's CPU, and waits until it answers.
func (b *bench) startCaddy(v *variant, up *proc, tag string) (*proc, error) {
	name := "caddy-" + v.name + tag
	httpPort, err := freePort()
	if err != nil {
		return nil, err
	}
	adminPort, err := freePort()
	if err != nil {
		return nil, err
	}
	home := filepath.Join(b.dir, name+"-home")
	pp := ports{admin: adminPort, http: httpPort, upstream: up.addr, storage: filepath.Join(home, "storage")}
	if v.redis {
		if pp.redis, err = b.startRedis(); err != nil {
			return nil, err
		}
	}
	cfg := v.caddyfile(pp)
	cfgPath := filepath.Join(b.dir, name+".Caddyfile")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	env := []string{"HOME=" + home, "XDG_DATA_HOME=" + filepath.Join(home, "data"), "XDG_CONFIG_HOME=" + filepath.Join(home, "config")}
	p, err := b.start(name, b.gatewayCPU, true, env, b.caddyBin, "run", "--config", cfgPath, "--adapter", "caddyfile")
	if err != nil {
		return nil, err
	}
	running = append(running, p)
	p.v, p.port, p.adminPort, p.key = v, httpPort, adminPort, gatewayKey
	if err := b.waitListening(p, fmt.Sprintf("127.0.0.1:%d", httpPort), 60*time.Second); err != nil {
		return nil, err
	}
	if v.managedKey {
		body, err := b.admin(p, http.MethodPost, "/modelgate/keys", `{"name":"loadbench"}`)
		if err != nil {
			return nil, fmt.Errorf("%s: creating a managed key: %w", name, err)
		}
		if p.key = gjson.GetBytes(body, "key").Str; p.key == "" {
			return nil, fmt.Errorf("%s: creating a managed key: %s", name, body)
		}
	}
	return p, nil
}

// admin calls the caddy process's admin endpoint.
func (b *bench) admin(p *proc, method, path, body string) ([]byte, error) {
	req, err := http.NewRequestWithContext(b.ctx, method, fmt.Sprintf("http://127.0.0.1:%d%s", p.adminPort, path), strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = res.Body.Close() }()
	out, err := io.ReadAll(res.Body)
	if err == nil && res.StatusCode/100 != 2 {
		err = fmt.Errorf("%s %s: status %d: %.300s", method, path, res.StatusCode, out)
	}
	return out, err
}

// requestFor is the scenario's request as variant process p gets it, its
// key substituted.
func requestFor(s *scenario, p *proc) request {
	r := s.plain
	if p.v.gateway {
		r = s.gateway
		h := append([]string(nil), r.header...)
		for i := 1; i < len(h); i += 2 {
			h[i] = strings.ReplaceAll(h[i], gatewayKey, p.key)
		}
		r.header = h
	}
	return r
}

// bodyFile writes a request body for the load generator, once.
func (b *bench) bodyFile(name string, body []byte) (string, error) {
	path := filepath.Join(b.dir, "bodies", name+".json")
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", err
	}
	return path, os.WriteFile(path, body, 0o644)
}

// run is one measured load run.
type run struct {
	Suite    string     `json:"suite"`
	Case     string     `json:"case"` // the scenario, and its connections when not -c
	Scenario string     `json:"scenario"`
	Variant  string     `json:"variant"`
	Round    int        `json:"round"`
	Conns    int        `json:"conns"`
	Load     loadResult `json:"load"`
	// CPU time of the gateway and upstream processes in the window, and
	// the load generator's.
	GatewayCPU  time.Duration `json:"gateway_cpu_ns"`
	UpstreamCPU time.Duration `json:"upstream_cpu_ns"`
	LoadCPU     time.Duration `json:"load_cpu_ns"`
	// RedisCPU is redis-server's, for variants on Redis: what a cluster's
	// Redis spends on the instance's requests.
	RedisCPU   time.Duration `json:"redis_cpu_ns,omitempty"`
	PeakRSSKiB int64         `json:"peak_rss_kib"` // gateway VmHWM in the window
	// Read and write system calls of the gateway process in the window,
	// the writes among them, and the bytes it wrote.
	GatewaySyscalls int64 `json:"gateway_syscalls"`
	GatewayWrites   int64 `json:"gateway_writes"`
	GatewayWritten  int64 `json:"gateway_written"`
}

func (r *run) rps() float64 { return float64(r.Load.Requests) / r.Load.Seconds }
func (r *run) eps() float64 { return float64(r.Load.Events) / r.Load.Seconds }
func (r *run) cpuPerReq() time.Duration {
	if r.Load.Requests == 0 {
		return 0
	}
	return r.GatewayCPU / time.Duration(r.Load.Requests)
}

// measure runs the load generator against caddy process p with scenario
// s's request, for a window of -duration, or of window when it is not 0
// (the profile suite's: the profile's length and a second).
func (b *bench) measure(suite, label string, s *scenario, p *proc, up *proc, conns int, round int, window time.Duration) (*run, error) {
	if window == 0 {
		window = b.opt.duration
	}
	req := requestFor(s, p)
	variantKind := "plain"
	if p.v.gateway {
		variantKind = "gateway"
	}
	bf, err := b.bodyFile(s.name+"-"+variantKind, req.body)
	if err != nil {
		return nil, err
	}
	args := []string{"load", "-url", fmt.Sprintf("http://127.0.0.1:%d%s", p.port, req.path), "-body", bf,
		"-c", strconv.Itoa(conns), "-duration", window.String(), "-warmup", b.opt.warmup.String(), "-expect", s.expect}
	if s.stream {
		args = append(args, "-stream")
	}
	for i := 0; i+1 < len(req.header); i += 2 {
		args = append(args, "-H", req.header[i]+": "+req.header[i+1])
	}
	lg, err := b.start("load", b.loadCPU, false, nil, b.self, args...)
	if err != nil {
		return nil, err
	}
	defer lg.stop()
	r := &run{Suite: suite, Case: label, Scenario: s.name, Variant: p.v.name, Round: round, Conns: conns}
	var g0, u0, l0, r0 time.Duration
	var io0 ioCounts
	var rp *proc // redis-server, for a variant on Redis
	if p.v.redis {
		rp = b.redis
	}
	timeout := b.opt.warmup + window + time.Minute
	for {
		line, err := b.readLine(lg, timeout)
		if err != nil {
			return nil, fmt.Errorf("%s via %s: %w", label, p.v.name, errWithLog(err, filepath.Join(b.dir, "load.log")))
		}
		switch {
		case line == "measuring":
			_ = resetPeak(p.pid())
			g0, _ = procstat.CPU(p.pid())
			u0, _ = procstat.CPU(up.pid())
			l0, _ = procstat.CPU(lg.pid())
			if rp != nil {
				r0, _ = procstat.CPU(rp.pid())
			}
			io0, _ = ioOf(p.pid())
		case line == "window ended":
			g1, _ := procstat.CPU(p.pid())
			u1, _ := procstat.CPU(up.pid())
			l1, _ := procstat.CPU(lg.pid())
			r.GatewayCPU, r.UpstreamCPU, r.LoadCPU = g1-g0, u1-u0, l1-l0
			if rp != nil {
				r1, _ := procstat.CPU(rp.pid())
				r.RedisCPU = r1 - r0
			}
			if io1, err := ioOf(p.pid()); err == nil {
				r.GatewaySyscalls = io1.reads + io1.writes - io0.reads - io0.writes
				r.GatewayWrites, r.GatewayWritten = io1.writes-io0.writes, io1.written-io0.written
			}
			_, r.PeakRSSKiB, _ = memory(p.pid())
		case strings.HasPrefix(line, "{"):
			if err := json.Unmarshal([]byte(line), &r.Load); err != nil {
				return nil, err
			}
			if r.Load.Errors > 0 {
				b.report.note("%s via %s, round %d: %d errors (first: %s)", label, p.v.name, round, r.Load.Errors, r.Load.FirstErr)
			}
			b.report.runs = append(b.report.runs, r)
			return r, nil
		}
	}
}

// errWithLog adds the tail of a log file to err.
func errWithLog(err error, path string) error {
	b, _ := os.ReadFile(path)
	if len(b) > 600 {
		b = b[len(b)-600:]
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return err
	}
	return fmt.Errorf("%w: %s", err, bytes.TrimSpace(b))
}

//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// report gathers what the suites measured and writes it as Markdown.
type report struct {
	notes    []string
	runs     []*run
	streams  []*streamsRun
	batch    *batchRun
	profiles []*profileRun
	started  time.Time
}

func newReport() *report { return &report{started: time.Now()} }

func (r *report) note(format string, args ...any) {
	r.notes = append(r.notes, fmt.Sprintf(format, args...))
}

// write prints the report and saves it, with the raw results, in dir.
func (r *report) write(w io.Writer, dir string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# modelgate loadbench, %s (%s)\n\n", r.started.Format("2006-01-02 15:04"), time.Since(r.started).Round(time.Second))
	for _, n := range r.notes {
		fmt.Fprintf(&b, "- %s\n", n)
	}
	r.writeRuns(&b, "live", "Live requests")
	r.writeSummary(&b)
	r.writeFeatures(&b)
	r.writeStreams(&b)
	r.writeBatch(&b)
	r.writeRuns(&b, "pool", "Provider connections (what modelgate's provider defaults are chosen from)")
	r.writeProfiles(&b)
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.md"), []byte(b.String()), 0o644); err != nil {
		return err
	}
	raw, _ := json.MarshalIndent(map[string]any{"runs": r.runs, "streams": r.streams, "batch": r.batch, "profiles": r.profiles, "notes": r.notes}, "", "  ")
	return os.WriteFile(filepath.Join(dir, "results.json"), raw, 0o644)
}

// cell is the aggregate of one case and variant over the rounds.
type cell struct {
	runs []*run
}

func (c *cell) median(f func(*run) float64) float64 {
	v := make([]float64, len(c.runs))
	for i, r := range c.runs {
		v[i] = f(r)
	}
	return median(v)
}

func (c *cell) spread(f func(*run) float64) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, r := range c.runs {
		lo, hi = math.Min(lo, f(r)), math.Max(hi, f(r))
	}
	return lo, hi
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// grid is a suite's runs by case and variant, in the order they ran.
type grid struct {
	cases, variants []string
	cells           map[[2]string]*cell
}

func (r *report) grid(suite string) *grid {
	g := &grid{cells: map[[2]string]*cell{}}
	for _, run := range r.runs {
		if run.Suite != suite {
			continue
		}
		if !contains(g.cases, run.Case) {
			g.cases = append(g.cases, run.Case)
		}
		if !contains(g.variants, run.Variant) {
			g.variants = append(g.variants, run.Variant)
		}
		k := [2]string{run.Case, run.Variant}
		if g.cells[k] == nil {
			g.cells[k] = &cell{}
		}
		g.cells[k].runs = append(g.cells[k].runs, run)
	}
	// The reference first, then as they ran.
	slices.SortStableFunc(g.variants, func(a, b string) int { return order(a) - order(b) })
	return g
}

// order sorts variants: references first, then plain, then modelgate's.
func order(v string) int {
	for i, name := range []string{"tuned", "plain", "modelgate", "modelgate_key", "modelgate_limit", "modelgate_full", "modelgate_guards", "modelgate_guards_request", "modelgate_key_redis", "modelgate_redis", "mg_pool32", "mg_pool256", "tuned_tls_h1", "tuned_tls_h2", "mg_tls_h1", "mg_tls_h2"} {
		if v == name {
			return i
		}
	}
	return 100
}

// ratios are a variant's per-round ratios against variant ref in the same
// round: f(variant)/f(ref).
func (g *grid) ratios(c, v, ref string, f func(*run) float64) []float64 {
	return g.paired(c, v, ref, func(a, r *run) (float64, bool) { return f(a) / f(r), f(r) > 0 })
}

// diffs are per-round differences f(variant) − f(ref).
func (g *grid) diffs(c, v, ref string, f func(*run) float64) []float64 {
	return g.paired(c, v, ref, func(a, r *run) (float64, bool) { return f(a) - f(r), true })
}

// paired is cmp of each of variant v's runs of case c with variant ref's
// run of the same round, where cmp says the pair counts.
func (g *grid) paired(c, v, ref string, cmp func(a, ref *run) (float64, bool)) []float64 {
	vc := g.cells[[2]string{c, v}]
	rc := g.cells[[2]string{c, ref}]
	if vc == nil || rc == nil {
		return nil
	}
	var out []float64
	for _, a := range vc.runs {
		for _, b := range rc.runs {
			if a.Round != b.Round {
				continue
			}
			if x, ok := cmp(a, b); ok {
				out = append(out, x)
			}
		}
	}
	return out
}

func refOf(v string) string {
	if vv := variants[v]; vv != nil {
		return vv.refName()
	}
	return reference
}

func minMax(v []float64) (float64, float64) {
	if len(v) == 0 {
		return math.NaN(), math.NaN()
	}
	return slices.Min(v), slices.Max(v)
}

// rate is what a case is measured in: events/s for streams, else req/s.
func rate(r *run) float64 {
	if r.Load.Events > 0 {
		return r.eps()
	}
	return r.rps()
}

func (r *report) writeRuns(b *strings.Builder, suite, title string) {
	g := r.grid(suite)
	if len(g.cases) == 0 {
		return
	}
	fmt.Fprintf(b, "\n## %s\n\n", title)
	fmt.Fprintf(b, "Medians over %s; [min–max] over the rounds. Ratio: the variant's rate over its reference's (tuned reverse_proxy, or for the HTTPS variants tuned_tls_h1) in the same round. Rate: events/s for streams, else req/s. CPU/req: the gateway process's user+system CPU per request (upstream's after the slash; for variants on Redis, redis-server's after the plus). Syscalls/req: the gateway process's read and write system calls per request, the writes among them and the bytes it wrote, to the client and the upstream (/proc/<pid>/io). core0: how busy the gateway's CPU was (gateway + upstream + redis-server CPU over the window; 100%% = saturated). Peak RSS: the gateway process's VmHWM in the window.\n",
		roundsText(g))
	for _, c := range g.cases {
		fmt.Fprintf(b, "\n### %s\n\n", caseTitle(c, g))
		stream := g.isStream(c)
		if stream {
			b.WriteString("| variant | events/s [min–max] | ratio [min–max] | streams/s | p50 | p99 | first event p50 | added vs ref | CPU/req (gw/up) | syscalls/req | core0 | peak RSS |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		} else {
			b.WriteString("| variant | req/s [min–max] | ratio [min–max] | p50 | p99 | CPU/req (gw/up) | syscalls/req | core0 | peak RSS |\n|---|---|---|---|---|---|---|---|---|\n")
		}
		for _, v := range g.variants {
			cl := g.cells[[2]string{c, v}]
			if cl == nil {
				continue
			}
			lo, hi := cl.spread(rate)
			ratio := "—"
			if v != refOf(v) {
				rs := g.ratios(c, v, refOf(v), rate)
				rlo, rhi := minMax(rs)
				ratio = fmt.Sprintf("%.2f [%.2f–%.2f]", median(rs), rlo, rhi)
			}
			var gw, up, rd, win time.Duration
			var reqs, sys, writes, written int64
			var peak int64
			for _, run := range cl.runs {
				gw += run.GatewayCPU
				up += run.UpstreamCPU
				rd += run.RedisCPU
				reqs += run.Load.Requests
				sys += run.GatewaySyscalls
				writes += run.GatewayWrites
				written += run.GatewayWritten
				win += time.Duration(run.Load.Seconds * float64(time.Second))
				peak = max(peak, run.PeakRSSKiB)
			}
			cpu := fmt.Sprintf("%.0f/%.0f µs", us(gw, reqs), us(up, reqs))
			if rd > 0 {
				cpu += fmt.Sprintf(" + Redis %.0f µs", us(rd, reqs))
			}
			sc := fmt.Sprintf("%.1f (%.1f w, %.1f KB)", float64(sys)/float64(max(reqs, 1)),
				float64(writes)/float64(max(reqs, 1)), float64(written)/1000/float64(max(reqs, 1)))
			// redis-server shares core 0 with the gateway and the upstream.
			busy := fmt.Sprintf("%.0f%%", 100*float64(gw+up+rd)/float64(max(win, 1)))
			p50, p99 := cl.median(func(r *run) float64 { return r.Load.P50 }), cl.median(func(r *run) float64 { return r.Load.P99 })
			if stream {
				ttft := cl.median(func(r *run) float64 { return r.Load.TTFT })
				added := "—"
				if v != refOf(v) {
					d := g.diffs(c, v, refOf(v), func(r *run) float64 { return r.Load.TTFT })
					dlo, dhi := minMax(d)
					added = fmt.Sprintf("%+.0f µs [%+.0f–%+.0f]", median(d), dlo, dhi)
				}
				fmt.Fprintf(b, "| %s | %.0f [%.0f–%.0f] | %s | %.0f | %s | %s | %s | %s | %s | %s | %s | %.0f MiB |\n", v,
					cl.median(rate), lo, hi, ratio, cl.median(func(r *run) float64 { return r.rps() }),
					ms(p50), ms(p99), ms(ttft), added, cpu, sc, busy, float64(peak)/1024)
			} else {
				fmt.Fprintf(b, "| %s | %.0f [%.0f–%.0f] | %s | %s | %s | %s | %s | %s | %.0f MiB |\n", v,
					cl.median(rate), lo, hi, ratio, ms(p50), ms(p99), cpu, sc, busy, float64(peak)/1024)
			}
		}
	}
}

func roundsText(g *grid) string {
	n := 0
	for _, cl := range g.cells {
		n = max(n, len(cl.runs))
	}
	if n == 1 {
		return "1 round"
	}
	return fmt.Sprintf("%d interleaved rounds", n)
}

func (g *grid) isStream(c string) bool {
	for _, cl := range g.cells {
		if cl.runs[0].Case == c {
			return cl.runs[0].Load.Events > 0
		}
	}
	return false
}

func caseTitle(c string, g *grid) string {
	for _, cl := range g.cells {
		if r := cl.runs[0]; r.Case == c {
			for _, s := range scenarios() {
				if s.name == r.Scenario {
					return fmt.Sprintf("%s — %s, %d connections", c, s.what, r.Conns)
				}
			}
			return fmt.Sprintf("%s, %d connections", c, r.Conns)
		}
	}
	return c
}

func us(d time.Duration, n int64) float64 {
	if n == 0 {
		return 0
	}
	return float64(d) / float64(n) / float64(time.Microsecond)
}

// ms formats microseconds.
func ms(usec float64) string {
	if usec < 1000 {
		return fmt.Sprintf("%.0f µs", usec)
	}
	return fmt.Sprintf("%.2f ms", usec/1000)
}

// writeSummary is the ratios of the live suite in one table, scenarios by
// variant.
func (r *report) writeSummary(b *strings.Builder) {
	g := r.grid("live")
	if len(g.cases) == 0 {
		return
	}
	b.WriteString("\n### Summary: ratio against tuned reverse_proxy (median [min–max]); peak RSS ratio\n\nNoise: how far tuned reverse_proxy's own rate moved between rounds, (max − min) / median: a ratio that differs from another by less than that says little.\n\n| case | noise |")
	var vs []string
	for _, v := range g.variants {
		if v != reference {
			vs = append(vs, v)
			fmt.Fprintf(b, " %s | RSS |", v)
		}
	}
	b.WriteString("\n|---|---|")
	for range vs {
		b.WriteString("---|---|")
	}
	b.WriteString("\n")
	for _, c := range g.cases {
		fmt.Fprintf(b, "| %s | %s |", c, noise(g.cells[[2]string{c, reference}]))
		for _, v := range vs {
			rs := g.ratios(c, v, refOf(v), rate)
			lo, hi := minMax(rs)
			mem := g.ratios(c, v, refOf(v), func(r *run) float64 { return float64(r.PeakRSSKiB) })
			fmt.Fprintf(b, " %.2f [%.2f–%.2f] | %.2f |", median(rs), lo, hi, median(mem))
		}
		b.WriteString("\n")
	}
}

// noise is how far a cell's rate moved between its rounds, (max − min) /
// median, or "—" with fewer than two rounds.
func noise(cl *cell) string {
	if cl == nil || len(cl.runs) < 2 {
		return "—"
	}
	lo, hi := cl.spread(rate)
	return fmt.Sprintf("%.0f %%", 100*(hi-lo)/cl.median(rate))
}

// featureVariants are compared with modelgate itself, round by round:
// what a managed key, a rate limit, and every feature, cost (the target:
// no more than 3 % below modelgate with a managed key, a rate limit and
// usage accounting on).
var featureVariants = []string{"modelgate_key", "modelgate_limit", "modelgate_full", "modelgate_guards", "modelgate_guards_request", "modelgate_key_redis", "modelgate_redis"}

// writeFeatures is the features' cost: each feature variant's rate over
// modelgate's in the same round, and the difference in the gateway's CPU
// per request, paired round by round (the rounds' drift cancels out of
// each pair, not out of the medians of the tables above).
func (r *report) writeFeatures(b *strings.Builder) {
	g := r.grid("live")
	var vs []string
	for _, v := range featureVariants {
		if contains(g.variants, v) && contains(g.variants, "modelgate") {
			vs = append(vs, v)
		}
	}
	if len(vs) == 0 {
		return
	}
	b.WriteString("\n### Features on: against modelgate in the same round (median [min–max])\n\nRate ratio: the variant's rate over modelgate's; CPU: the gateway's CPU per request minus modelgate's.\n\n| case |")
	for _, v := range vs {
		fmt.Fprintf(b, " %s rate | %s CPU |", v, v)
	}
	b.WriteString("\n|---|")
	for range vs {
		b.WriteString("---|---|")
	}
	b.WriteString("\n")
	cpu := func(r *run) float64 { return float64(r.cpuPerReq()) / float64(time.Microsecond) }
	for _, c := range g.cases {
		fmt.Fprintf(b, "| %s |", c)
		for _, v := range vs {
			rs := g.ratios(c, v, "modelgate", rate)
			ds := g.diffs(c, v, "modelgate", cpu)
			lo, hi := minMax(rs)
			dlo, dhi := minMax(ds)
			fmt.Fprintf(b, " %.3f [%.2f–%.2f] | %+.1f µs [%+.0f–%+.0f] |", median(rs), lo, hi, median(ds), dlo, dhi)
		}
		b.WriteString("\n")
	}
}

func (r *report) writeStreams(b *strings.Builder) {
	if len(r.streams) == 0 {
		return
	}
	b.WriteString("\n## Many open streams\n\nEach stream: its own client connection and, in the gateway, its own upstream connection. RSS per stream: (peak RSS − RSS before) / streams. CPU per event: the gateway process's CPU over the whole run (connections opened and closed included) / events delivered; steady: from the moment every stream was open to the moment the first one ended (events only, no connection opened or closed), over the events delivered meanwhile; — when a stream ended before the last one opened. Syscalls per event: the gateway's read and write system calls (/proc/<pid>/io), the same two ways. Go runtime, steady: the gateway's allocations and bytes allocated per event, and its garbage collections with their total stop-the-world pause, in the steady phase (its /debug/vars).\n\n")
	b.WriteString("| variant | streams | completed | failed | most open at once | all open after | RSS before | RSS all open | peak RSS | RSS per stream | CPU per event (gw/up) | steady CPU per event | syscalls per event (steady) | Go runtime, steady |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range r.streams {
		n := float64(s.Result.Streams)
		ev := max(s.Result.Events, 1)
		steadyCPU, steadySyscalls, steadyGo := "—", "—", "—"
		if s.SteadyEvents > 0 {
			sev := float64(s.SteadyEvents)
			steadyCPU = fmt.Sprintf("%.1f µs", float64(s.SteadyCPU)/sev/1000)
			steadySyscalls = fmt.Sprintf("%.2f", float64(s.SteadySyscalls)/sev)
			if g := s.Steady; g.Mallocs > 0 {
				steadyGo = fmt.Sprintf("%.2f allocs, %.0f B per event; %d GCs, %.1f ms paused", float64(g.Mallocs)/sev, float64(g.TotalAlloc)/sev,
					g.NumGC, float64(g.PauseTotalNs)/1e6)
			}
		}
		fmt.Fprintf(b, "| %s | %d | %d | %d | %d | %.1f s | %.0f MiB | %.0f MiB | %.0f MiB | %.1f KiB | %.1f/%.1f µs | %s | %.2f (%s) | %s |\n",
			s.Variant, s.Result.Streams, s.Result.Completed, s.Result.Failed, s.Result.MaxOpen, s.Result.AllOpenS,
			float64(s.RSSBefore)/1024, float64(s.RSSAllOpen)/1024, float64(s.PeakRSS)/1024,
			float64(s.PeakRSS-s.RSSBefore)/n, float64(s.GatewayCPU)/float64(ev)/1000, float64(s.Upstream)/float64(ev)/1000,
			steadyCPU, float64(s.Syscalls)/float64(ev), steadySyscalls, steadyGo)
		if s.Result.FirstErr != "" {
			fmt.Fprintf(b, "\nfirst error via %s: %s\n\n", s.Variant, s.Result.FirstErr)
		}
	}
	// Each variant's runs pooled: RSS per stream averaged, CPU over all
	// their events.
	type pooled struct {
		rss                  float64
		runs, steadyRuns     int
		cpu, steady          time.Duration
		events, steadyEvents int64
	}
	var order []string
	by := map[string]*pooled{}
	for _, s := range r.streams {
		p := by[s.Variant]
		if p == nil {
			p = &pooled{}
			by[s.Variant] = p
			order = append(order, s.Variant)
		}
		p.rss += float64(s.PeakRSS-s.RSSBefore) / float64(s.Result.Streams)
		p.runs++
		p.cpu += s.GatewayCPU
		p.events += s.Result.Events
		if s.SteadyEvents > 0 {
			p.steady += s.SteadyCPU
			p.steadyEvents += s.SteadyEvents
			p.steadyRuns++
		}
	}
	if len(order) == 2 {
		a, g := by[order[0]], by[order[1]]
		cpu := func(p *pooled) float64 { return float64(p.cpu) / float64(max(p.events, 1)) }
		// The steady ratio only from runs that all had a steady phase:
		// one of a pair alone would not cancel the host's drift.
		steady := "a run without a steady phase"
		if a.steadyRuns == a.runs && g.steadyRuns == g.runs {
			per := func(p *pooled) float64 { return float64(p.steady) / float64(p.steadyEvents) }
			steady = fmt.Sprintf("steady %.2f×", per(g)/per(a))
		}
		fmt.Fprintf(b, "\n%s against %s, each one's runs pooled: RSS per stream %.2f×, CPU per event %.2f× (%s).\n", order[1], order[0],
			(g.rss/float64(g.runs))/(a.rss/float64(a.runs)), cpu(g)/cpu(a), steady)
	}
}

func (r *report) writeBatch(b *strings.Builder) {
	br := r.batch
	if br == nil {
		return
	}
	res := br.Result
	lps := float64(res.Lines) / res.Seconds
	fmt.Fprintf(b, "\n## Batch\n\nA %d-line chat batch (the chat scenario's request on every line) through POST /v1/files and /v1/batches, polled to its end, the output file checked; batch options: %s. Lines/s: from creation to completed (validation, execution, checkpoints, result files; the runner's 1 s poll included).\n\n", res.Lines, br.Options)
	b.WriteString("| status | lines/s | seconds | completed | failed | 200 results in the output | peak RSS (RSS before) | CPU per line (gw/up) | core0 | live chat req/s, same process, before / after the batch | batch ÷ live (their mean) |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	parts, sum, measured := []string{"—", "—"}, 0.0, 0
	for i, l := range []*run{br.LiveBefore, br.Live} {
		if l != nil {
			parts[i] = fmt.Sprintf("%.0f (CPU/req %.0f µs)", l.rps(), us(l.GatewayCPU, l.Load.Requests))
			sum += l.rps()
			measured++
		}
	}
	live, ratio := "—", "—"
	if measured > 0 {
		live = strings.Join(parts, " / ")
	}
	if sum > 0 {
		ratio = fmt.Sprintf("%.2f", lps/(sum/float64(measured)))
	}
	busy := 100 * float64(br.GatewayCPU+br.UpstreamCPU) / (res.Seconds * float64(time.Second))
	fmt.Fprintf(b, "| %s | %.0f | %.1f | %d | %d | %d | %.0f MiB (%.0f MiB) | %.0f/%.0f µs | %.0f%% | %s | %s |\n", res.Status, lps, res.Seconds,
		res.Completed, res.Failed, res.OutputLines, float64(br.PeakRSS)/1024, float64(br.RSSBefore)/1024,
		us(br.GatewayCPU, int64(res.Lines)), us(br.UpstreamCPU, int64(res.Lines)), busy, live, ratio)
}

func (r *report) writeProfiles(b *strings.Builder) {
	if len(r.profiles) == 0 {
		return
	}
	b.WriteString("\n## CPU profiles of modelgate under load\n")
	for _, p := range r.profiles {
		fmt.Fprintf(b, "\n### %s (%s)\n\n```\n%s\n```\n\nTop functions by flat time (`go tool pprof -top`):\n\n```\n%s\n```\n", p.Case, p.File, p.Breakdown, trimPprofHeader(p.Flat))
	}
}

// trimPprofHeader drops go tool pprof's header lines but the totals.
func trimPprofHeader(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, "File:") || strings.HasPrefix(l, "Build ID:") || strings.HasPrefix(l, "Type:") || strings.HasPrefix(l, "Time:") || strings.HasPrefix(l, "Dropped") {
			continue
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}

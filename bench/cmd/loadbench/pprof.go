//go:build linux

package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// stackSamples is a CPU profile as stacks of function names (inlined
// functions included) and their sample counts, read from
// `go tool pprof -raw`.
type stackSamples struct {
	stacks [][]string // leaf first
	counts []int64
	total  int64
	period time.Duration // CPU time per sample
}

var (
	rawSample   = regexp.MustCompile(`^\s+(\d+)\s+\d+: ([\d ]+)$`)
	rawLocation = regexp.MustCompile(`^\s+(\d+): 0x[0-9a-f]+ M=\d+ (\S+) `)
	rawInlined  = regexp.MustCompile(`^\s+(\S+) \S+:\d+(:\d+)? s=\d+$`)
)

func readProfile(file string) (*stackSamples, error) {
	out, err := exec.Command("go", "tool", "pprof", "-raw", file).Output()
	if err != nil {
		return nil, fmt.Errorf("go tool pprof -raw: %w", err)
	}
	type sample struct {
		n   int64
		loc []int
	}
	var samples []sample
	locs := map[int][]string{}
	section, last := "", 0
	period := 10 * time.Millisecond
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "Samples:" || line == "Locations" || line == "Mappings":
			section = line
			continue
		case strings.HasPrefix(line, "Period: "):
			if ns, err := strconv.ParseInt(strings.TrimPrefix(line, "Period: "), 10, 64); err == nil && ns > 0 {
				period = time.Duration(ns)
			}
		}
		switch section {
		case "Samples:":
			if m := rawSample.FindStringSubmatch(line); m != nil {
				n, _ := strconv.ParseInt(m[1], 10, 64)
				var ids []int
				for _, f := range strings.Fields(m[2]) {
					id, _ := strconv.Atoi(f)
					ids = append(ids, id)
				}
				samples = append(samples, sample{n, ids})
			}
		case "Locations":
			if m := rawLocation.FindStringSubmatch(line); m != nil {
				last, _ = strconv.Atoi(m[1])
				locs[last] = []string{m[2]}
			} else if m := rawInlined.FindStringSubmatch(line); m != nil && last != 0 {
				locs[last] = append(locs[last], m[1])
			}
		}
	}
	p := &stackSamples{period: period}
	for _, s := range samples {
		var stack []string
		for _, id := range s.loc {
			stack = append(stack, locs[id]...)
		}
		p.stacks = append(p.stacks, stack)
		p.counts = append(p.counts, s.n)
		p.total += s.n
	}
	if p.total == 0 {
		return nil, fmt.Errorf("%s: no samples", file)
	}
	return p, nil
}

// components, leafmost first wins: a sample is charged to the component
// of the frame nearest its leaf that belongs to one (so allocation and
// system calls go to the code that asked for them).
var components = []struct{ name, prefix string }{
	{"modelgate (its packages, and gjson/sjson which only it uses)", "github.com/modelgate/modelgate/"},
	{"modelgate (its packages, and gjson/sjson which only it uses)", "github.com/tidwall/"},
	{"Caddy reverse_proxy", "github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy."},
	{"Caddy HTTP server, routing, replacer", "github.com/caddyserver/caddy/"},
	{"logging (zap)", "go.uber.org/zap"},
	{"metrics (prometheus)", "github.com/prometheus/"},
	{"crypto (TLS, key digests)", "crypto/"},
	{"HTTP/2", "golang.org/x/net/http2"},
	{"net/http (server and client transport, and their I/O)", "net/http."},
	{"net/http (server and client transport, and their I/O)", "net/textproto."},
	{"net/http (server and client transport, and their I/O)", "internal/poll."},
	{"net/http (server and client transport, and their I/O)", "net."},
	{"net/http (server and client transport, and their I/O)", "bufio."},
	{"garbage collector (background)", "runtime.gcBgMarkWorker"},
	{"garbage collector (background)", "runtime.bgsweep"},
	{"garbage collector (background)", "runtime.bgscavenge"},
	{"scheduler, timers, network poller", "runtime.schedule"},
	{"scheduler, timers, network poller", "runtime.mstart"},
}

func component(stack []string) string {
	for _, f := range stack {
		for _, c := range components {
			if strings.HasPrefix(f, c.prefix) {
				return c.name
			}
		}
	}
	return "other"
}

// profileBreakdown is where a profile's time went: by component (each
// sample charged to the nearest one), and modelgate's functions by
// inclusive time.
type profileBreakdown struct {
	samples int64
	period  time.Duration
	by      map[string]int64
	incl    map[string]int64
}

func breakdownOf(file string) (*profileBreakdown, error) {
	p, err := readProfile(file)
	if err != nil {
		return nil, err
	}
	bd := &profileBreakdown{samples: p.total, period: p.period, by: map[string]int64{}, incl: map[string]int64{}}
	for i, s := range p.stacks {
		bd.by[component(s)] += p.counts[i]
		seen := map[string]bool{}
		for _, f := range s {
			if strings.HasPrefix(f, "github.com/modelgate/modelgate/") && !seen[f] {
				seen[f] = true
				bd.incl[f] += p.counts[i]
			}
		}
	}
	return bd, nil
}

// breakdown is breakdownOf as text; requests, when known, turns shares
// into CPU time per request.
func breakdown(file string) string {
	bd, err := breakdownOf(file)
	if err != nil {
		return err.Error()
	}
	return bd.text(0, nil)
}

// perRequest is n samples as CPU time per request.
func (bd *profileBreakdown) perRequest(n int64, requests float64) float64 {
	return float64(n) * float64(bd.period) / float64(time.Microsecond) / requests
}

// text writes the breakdown; with requests > 0 it adds µs per request,
// and with ref (the same case through the reference variant) its µs per
// request beside.
func (bd *profileBreakdown) text(requests float64, ref *refProfile) string {
	pct := func(n int64) float64 { return 100 * float64(n) / float64(bd.samples) }
	var b strings.Builder
	fmt.Fprintf(&b, "%d samples; by component (each sample charged to the component of the frame nearest its leaf)", bd.samples)
	if requests > 0 {
		fmt.Fprintf(&b, "; µs of CPU per request (%.0f requests in the profile)", requests)
		if ref != nil {
			fmt.Fprintf(&b, ", beside %s's", ref.name)
		}
	}
	b.WriteString(":\n")
	names := sortedByValue(bd.by)
	if ref != nil {
		for _, n := range sortedByValue(ref.bd.by) {
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	var sum, refSum float64
	for _, name := range names {
		fmt.Fprintf(&b, "%5.1f%%", pct(bd.by[name]))
		if requests > 0 {
			v := bd.perRequest(bd.by[name], requests)
			sum += v
			fmt.Fprintf(&b, "  %6.1f µs", v)
			if ref != nil {
				r := ref.bd.perRequest(ref.bd.by[name], ref.requests)
				refSum += r
				fmt.Fprintf(&b, "  %6.1f µs  %+6.1f", r, v-r)
			}
		}
		fmt.Fprintf(&b, "  %s\n", name)
	}
	if requests > 0 {
		fmt.Fprintf(&b, "        %6.1f µs", sum)
		if ref != nil {
			fmt.Fprintf(&b, "  %6.1f µs  %+6.1f", refSum, sum-refSum)
		}
		b.WriteString("  in all\n")
	}
	b.WriteString("\nmodelgate's functions by inclusive time (reverse_proxy and everything else they call included):\n")
	fns := sortedByValue(bd.incl)
	for _, f := range fns[:min(len(fns), 20)] {
		fmt.Fprintf(&b, "%5.1f%%", pct(bd.incl[f]))
		if requests > 0 {
			fmt.Fprintf(&b, "  %6.1f µs", bd.perRequest(bd.incl[f], requests))
		}
		fmt.Fprintf(&b, "  %s\n", strings.TrimPrefix(f, "github.com/modelgate/modelgate/"))
	}
	return strings.TrimRight(b.String(), "\n")
}

// refProfile is the reference variant's profile of the same case.
type refProfile struct {
	name     string
	bd       *profileBreakdown
	requests float64
}

func sortedByValue(m map[string]int64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if m[a] != m[b] {
			return int(m[b] - m[a])
		}
		return strings.Compare(a, b)
	})
	return keys
}

package routing

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/modelgate/modelgate/internal/redistest"
	"github.com/modelgate/modelgate/state"
	"github.com/modelgate/modelgate/state/redisclient"
	"github.com/modelgate/modelgate/state/redisstate"
)

func init() {
	// go-redis logs failed dials; nothing here needs them.
	redis.SetLogger(redisclient.Logger(func(string, ...any) {}))
}

// cluster makes the Shared of a new instance of one cluster.
type cluster func(t *testing.T) Shared

// localCluster is instances in one process: one in-process state and
// one set of deadlines, as a test of several routers shares them.
func localCluster(t *testing.T) cluster {
	st := state.NewLocal()
	t.Cleanup(func() { _ = st.Close() })
	dl := state.NewLocalDeadlines()
	return func(*testing.T) Shared { return Shared{PubSub: st, Deadlines: dl} }
}

var prefixes atomic.Int64

// redisCluster is instances on one real redis-server, each with a client
// of its own.
func redisCluster(t *testing.T) cluster {
	srv := redistest.Start(t)
	prefix := fmt.Sprintf("rt%d:", prefixes.Add(1))
	return func(t *testing.T) Shared {
		rdb, err := redisclient.New(redisclient.Options{Addresses: []string{srv.Addr}, Timeout: redisclient.Duration(time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		st, err := redisstate.New(rdb, redisstate.Options{KeyPrefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close(); _ = rdb.Close() })
		return Shared{PubSub: st, Deadlines: st}
	}
}

func TestClusterInProcess(t *testing.T) { testCluster(t, localCluster(t)) }
func TestClusterOnRedis(t *testing.T)   { testCluster(t, redisCluster(t)) }

// instance is one gateway of a cluster: its router on the real clock
// (the shared deadlines expire by it), and the changes it saw.
type instance struct {
	r       *Router
	mu      sync.Mutex
	changes []Change
}

func (in *instance) remote() []string {
	in.mu.Lock()
	defer in.mu.Unlock()
	var out []string
	for _, c := range in.changes {
		if c.Remote {
			kind := c.To.String()
			if c.Cooldown {
				kind = "cool"
			}
			out = append(out, c.Target.Key()+" "+kind)
		}
	}
	return out
}

func join(t *testing.T, c cluster, cfg Config) *instance {
	t.Helper()
	in := new(instance)
	r, err := New(cfg, Options{OnChange: func(c Change) {
		in.mu.Lock()
		in.changes = append(in.changes, c)
		in.mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stop, err := r.Share(ctx, c(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	in.r = r
	return in
}

// eventually waits for cond, which messages make true.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func testCluster(t *testing.T, c cluster) {
	const openFor = 400 * time.Millisecond
	cfg := Config{Breaker: BreakerConfig{ConsecutiveFailures: 1, OpenFor: openFor},
		Aliases: []AliasConfig{alias("a", Ordered, 3)}}
	a, b := join(t, c, cfg), join(t, c, cfg)

	// A target opened on one instance is skipped on the others.
	attempt(t, a.r, "a", failing(refused, "p0/m"))
	ha := healthOf(a.r, "p0/m")
	if ha.State != Open {
		t.Fatalf("p0/m on a: %s", ha.State)
	}
	eventually(t, "b learns that p0/m is open", func() bool { return healthOf(b.r, "p0/m").State == Open })
	if hb := healthOf(b.r, "p0/m"); hb.OpenUntil.Sub(ha.OpenUntil).Abs() > time.Millisecond || hb.Requests != 0 {
		t.Fatalf("p0/m on b: open until %v, a says %v; %d attempts", hb.OpenUntil, ha.OpenUntil, hb.Requests)
	}
	if tried, _ := attempt(t, b.r, "a", always(ok200)); !slices.Equal(tried, []string{"p1/m"}) {
		t.Fatalf("b tried %v, want p1/m without an attempt at the open p0/m", tried)
	}

	// A cool-down asked of one instance holds on the others.
	attempt(t, a.r, "a", failing(rateLimit("Retry-After", "30"), "p1/m"))
	eventually(t, "b learns of p1/m's cool-down", func() bool { return !healthOf(b.r, "p1/m").CooldownUntil.IsZero() })
	if d := healthOf(b.r, "p1/m").CooldownUntil.Sub(healthOf(a.r, "p1/m").CooldownUntil).Abs(); d > time.Millisecond {
		t.Fatalf("cool-downs differ by %v", d)
	}
	if tried, _ := attempt(t, b.r, "a", always(ok200)); !slices.Equal(tried, []string{"p2/m"}) {
		t.Fatalf("b tried %v, want p2/m", tried)
	}

	// An instance that starts now finds both in the shared deadlines,
	// before any message.
	late := join(t, c, cfg)
	if h := healthOf(late.r, "p0/m"); h.State != Open {
		t.Fatalf("p0/m on a late instance: %s", h.State)
	}
	if h := healthOf(late.r, "p1/m"); h.CooldownUntil.IsZero() {
		t.Fatal("p1/m's cool-down is not known to a late instance")
	}

	// A successful trial closes the target everywhere.
	time.Sleep(openFor)
	if tried, _ := attempt(t, a.r, "a", always(ok200)); !slices.Equal(tried, []string{"p0/m"}) {
		t.Fatalf("after open_for, a tried %v, want the trial of p0/m", tried)
	}
	if h := healthOf(a.r, "p0/m"); h.State != Closed {
		t.Fatalf("p0/m on a after its trial succeeded: %s", h.State)
	}
	for _, in := range []*instance{b, late} {
		eventually(t, "p0/m closes on the others", func() bool { return healthOf(in.r, "p0/m").State == Closed })
	}
	if h := healthOf(join(t, c, cfg).r, "p0/m"); h.State != Closed {
		t.Fatalf("p0/m on an instance started after the close: %s", h.State)
	}

	// Each instance applies the others' changes, never its own.
	if got := a.remote(); len(got) != 0 {
		t.Fatalf("a applied its own changes as remote: %v", got)
	}
	want := []string{"p0/m open", "p1/m cool", "p0/m closed"}
	if got := b.remote(); !slices.Equal(got, want) {
		t.Fatalf("b applied %v, want %v", got, want)
	}
}

// Counts stay local: failures spread over instances open nothing until
// one instance sees enough of them.
func TestClusterCountsStayLocal(t *testing.T) {
	c := localCluster(t)
	cfg := Config{Breaker: BreakerConfig{ConsecutiveFailures: 3}, Aliases: []AliasConfig{alias("a", Ordered, 2)}}
	a, b := join(t, c, cfg), join(t, c, cfg)
	for range 2 {
		attempt(t, a.r, "a", failing(refused, "p0/m"))
		attempt(t, b.r, "a", failing(refused, "p0/m"))
	}
	time.Sleep(20 * time.Millisecond)
	if ha, hb := healthOf(a.r, "p0/m"), healthOf(b.r, "p0/m"); ha.State != Closed || hb.State != Closed {
		t.Fatalf("two failures on each of two instances opened the breaker: %s, %s", ha.State, hb.State)
	}
	attempt(t, b.r, "a", failing(refused, "p0/m"))
	eventually(t, "a learns that b opened p0/m", func() bool { return healthOf(a.r, "p0/m").State == Open })
}

// A stopped link neither sends nor applies.
func TestShareStop(t *testing.T) {
	c := localCluster(t)
	cfg := Config{Breaker: BreakerConfig{ConsecutiveFailures: 1}, Aliases: []AliasConfig{alias("a", Ordered, 2)}}
	a, b := join(t, c, cfg), join(t, c, cfg)
	r, _ := New(cfg, Options{})
	ctx := context.Background()
	stop, err := r.Share(ctx, c(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Share(ctx, c(t)); err == nil {
		t.Fatal("a router shared twice")
	}
	stop()
	attempt(t, r, "a", failing(refused, "p0/m"))
	p, _ := a.r.PlanTarget("p1/m", false)
	p.Next()
	p.Report(refused)
	p.Close()
	eventually(t, "b learns of p1/m", func() bool { return healthOf(b.r, "p1/m").State == Open })
	if h := healthOf(b.r, "p0/m"); h.State != Closed {
		t.Fatalf("a stopped router's change reached b: %s", h.State)
	}
	if h := healthOf(r, "p1/m"); h.State != Closed {
		t.Fatalf("a stopped router applied a's change: %s", h.State)
	}
	if _, err := r.Share(ctx, Shared{}); err == nil || !strings.Contains(err.Error(), "publish/subscribe") {
		t.Fatalf("Share without a PubSub: %v", err)
	}
}

// Messages from other instances are bounded: an opening is capped by
// MaxOpenFor, a cool-down by the cool-down cap; garbage and unknown
// targets are ignored.
func TestApplyBoundsMessages(t *testing.T) {
	cfg := Config{Breaker: BreakerConfig{MaxOpenFor: time.Minute}, Cooldown: CooldownConfig{Max: 10 * time.Second},
		Aliases: []AliasConfig{alias("a", Ordered, 1)}}
	r, clk := testRouter(t, cfg)
	l := &link{r: r, id: "me", log: zapNop()}
	far := clk.Now().Add(24 * time.Hour).UnixMilli()
	l.apply(fmt.Appendf(nil, "v1 other open %d p0/m", far))
	l.apply(fmt.Appendf(nil, "v1 other cool %d p0/m", far))
	l.apply(fmt.Appendf(nil, "v1 other open %d nobody/m", far))
	l.apply([]byte("v2 other open 1 p0/m"))
	l.apply([]byte("garbage"))
	h := healthOf(r, "p0/m")
	if h.State != Open || h.OpenUntil.Sub(clk.Now()) != time.Minute || h.CooldownUntil.Sub(clk.Now()) != 10*time.Second {
		t.Fatalf("after far deadlines: %+v", h)
	}
	// An opening in the past, or the instance's own, changes nothing.
	l.apply(fmt.Appendf(nil, "v1 other close 0 p0/m"))
	l.apply(fmt.Appendf(nil, "v1 other open %d p0/m", clk.Now().Add(-time.Second).UnixMilli()))
	l.apply(fmt.Appendf(nil, "v1 me open %d p0/m", far))
	if h := healthOf(r, "p0/m"); h.State != Closed {
		t.Fatalf("after a close, a past opening and its own: %s", h.State)
	}
}

func TestMessageRoundTrip(t *testing.T) {
	for _, m := range []message{
		{instance: "abc", kind: msgOpen, until: 1767225600123 * int64(time.Millisecond), target: "openai/gpt-4o"},
		{instance: "abc", kind: msgClose, target: "or/meta llama/with spaces"},
		{instance: "x", kind: msgCool, until: int64(time.Millisecond), target: "a/b"},
	} {
		got, err := parseMessage(m.append(nil))
		if err != nil || got != m {
			t.Fatalf("%q: %+v, %v; want %+v", m.append(nil), got, err, m)
		}
	}
	for _, bad := range []string{"", "v1", "v1 a open 1", "v1 a open 1 ", "v1  open 1 t", "v1 a shut 1 t",
		"v1 a open -1 t", "v1 a open 1e3 t", "v1 a open 99999999999999999 t", "v0 a open 1 t"} {
		if _, err := parseMessage([]byte(bad)); err == nil {
			t.Errorf("parseMessage(%q) accepted it", bad)
		}
	}
}

func FuzzParseMessage(f *testing.F) {
	f.Add([]byte("v1 abc open 1767225600123 openai/gpt-4o"))
	f.Add([]byte("v1 abc close 0 a/b c"))
	f.Add([]byte("v1 abc cool 5 x"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := parseMessage(b)
		if err != nil {
			return
		}
		again, err := parseMessage(m.append(nil))
		if err != nil || again != m {
			t.Fatalf("%q parsed to %+v, which writes %q, which parses to %+v, %v", b, m, m.append(nil), again, err)
		}
		if m.until < 0 || m.kind == 0 || m.target == "" || m.instance == "" {
			t.Fatalf("%q parsed to %+v", b, m)
		}
	})
}

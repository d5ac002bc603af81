package routing

import (
	"net/http"
	"slices"
	"testing"
	"time"
)

func TestCooldownHeaders(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		header []string // name, value pairs
		want   time.Duration
		ok     bool
	}{
		{"nothing", nil, 0, false},
		{"retry-after seconds", []string{"Retry-After", "30"}, 30 * time.Second, true},
		{"retry-after fraction", []string{"Retry-After", "1.5"}, 1500 * time.Millisecond, true},
		{"retry-after zero", []string{"Retry-After", "0"}, 0, true},
		{"retry-after padded", []string{"Retry-After", " 7 "}, 7 * time.Second, true},
		{"retry-after HTTP date", []string{"Retry-After", "Sun, 01 Mar 2026 12:02:00 GMT"}, 2 * time.Minute, true},
		{"retry-after RFC 850 date", []string{"Retry-After", "Sunday, 01-Mar-26 12:00:45 GMT"}, 45 * time.Second, true},
		{"retry-after ANSI C date", []string{"Retry-After", "Sun Mar  1 12:00:10 2026"}, 10 * time.Second, true},
		{"retry-after date passed", []string{"Retry-After", "Sun, 01 Mar 2026 11:00:00 GMT"}, 0, true},
		{"retry-after negative", []string{"Retry-After", "-5"}, 0, false},
		{"retry-after garbage", []string{"Retry-After", "soon"}, 0, false},
		{"retry-after infinity", []string{"Retry-After", "Inf"}, 0, false},
		{"retry-after NaN", []string{"Retry-After", "NaN"}, 0, false},
		{"retry-after hex", []string{"Retry-After", "0x10"}, 0, false},
		{"retry-after huge", []string{"Retry-After", "1e300"}, maxHeaderCooldown, true},
		{"retry-after-ms", []string{"Retry-After-Ms", "250"}, 250 * time.Millisecond, true},
		{"retry-after-ms fraction", []string{"Retry-After-Ms", "12.5"}, 12500 * time.Microsecond, true},
		{"retry-after-ms first", []string{"Retry-After", "30", "Retry-After-Ms", "50"}, 50 * time.Millisecond, true},
		{"retry-after-ms bad, retry-after", []string{"Retry-After-Ms", "x", "Retry-After", "2"}, 2 * time.Second, true},
		{"retry-after over resets", []string{"Retry-After", "3", "X-Ratelimit-Reset-Requests", "20s", "X-Ratelimit-Remaining-Requests", "0"}, 3 * time.Second, true},
		{"openai requests spent", []string{
			"X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "1s",
			"X-Ratelimit-Remaining-Tokens", "149984", "X-Ratelimit-Reset-Tokens", "6m0s"}, time.Second, true},
		{"openai tokens spent", []string{
			"X-Ratelimit-Remaining-Requests", "59", "X-Ratelimit-Reset-Requests", "1s",
			"X-Ratelimit-Remaining-Tokens", "0", "X-Ratelimit-Reset-Tokens", "6m0s"}, 6 * time.Minute, true},
		{"openai both spent: the later", []string{
			"X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "1m30.5s",
			"X-Ratelimit-Remaining-Tokens", "0", "X-Ratelimit-Reset-Tokens", "20ms"}, 90500 * time.Millisecond, true},
		{"openai none spent: the earlier", []string{
			"X-Ratelimit-Reset-Requests", "17ms", "X-Ratelimit-Reset-Tokens", "8.64s"}, 17 * time.Millisecond, true},
		{"openai bare seconds", []string{"X-Ratelimit-Reset-Requests", "2"}, 2 * time.Second, true},
		{"openai reset garbage", []string{"X-Ratelimit-Reset-Requests", "-1s"}, 0, false},
		{"openai reset hours", []string{"X-Ratelimit-Reset-Tokens", "2h3m4s"}, 2*time.Hour + 3*time.Minute + 4*time.Second, true},
		{"anthropic requests spent", []string{
			"Anthropic-Ratelimit-Requests-Remaining", "0", "Anthropic-Ratelimit-Requests-Reset", "2026-03-01T12:00:20Z",
			"Anthropic-Ratelimit-Tokens-Remaining", "3999000", "Anthropic-Ratelimit-Tokens-Reset", "2026-03-01T12:00:01Z"}, 20 * time.Second, true},
		{"anthropic output tokens spent, offset zone", []string{
			"Anthropic-Ratelimit-Output-Tokens-Remaining", "0", "Anthropic-Ratelimit-Output-Tokens-Reset", "2026-03-01T13:00:40+01:00"}, 40 * time.Second, true},
		{"anthropic input tokens spent", []string{
			"Anthropic-Ratelimit-Input-Tokens-Remaining", "0", "Anthropic-Ratelimit-Input-Tokens-Reset", "2026-03-01T12:00:05.5Z"}, 5500 * time.Millisecond, true},
		{"anthropic reset passed", []string{
			"Anthropic-Ratelimit-Requests-Remaining", "0", "Anthropic-Ratelimit-Requests-Reset", "2026-03-01T11:59:00Z"}, 0, true},
		{"anthropic reset not RFC 3339", []string{"Anthropic-Ratelimit-Requests-Reset", "tomorrow"}, 0, false},
		{"anthropic retry-after wins", []string{"Retry-After", "12",
			"Anthropic-Ratelimit-Requests-Remaining", "0", "Anthropic-Ratelimit-Requests-Reset", "2026-03-01T12:00:20Z"}, 12 * time.Second, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			for i := 0; i+1 < len(tc.header); i += 2 {
				h.Add(tc.header[i], tc.header[i+1])
			}
			got, ok := Cooldown(h, now)
			if got != tc.want || ok != tc.ok {
				t.Fatalf("Cooldown = %v, %v; want %v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

// A 429 with Retry-After keeps the target out for that long, and no
// longer; the next target serves meanwhile.
func TestCooldownKeepsTargetOut(t *testing.T) {
	r, clk := testRouter(t, Config{Aliases: []AliasConfig{alias("a", Ordered, 2)}})
	tried, _ := attempt(t, r, "a", failing(rateLimit("Retry-After", "30"), "p0/m"))
	if !slices.Equal(tried, []string{"p0/m", "p1/m"}) {
		t.Fatalf("tried %v", tried)
	}
	h := healthOf(r, "p0/m")
	if h.CooldownUntil.Sub(clk.Now()) != 30*time.Second || h.Available || h.Cooldowns != 1 || h.State != Closed {
		t.Fatalf("after a 429 with retry-after 30: %+v", h)
	}
	for range 29 {
		clk.Advance(time.Second)
		if tried, _ := attempt(t, r, "a", always(ok200)); !slices.Equal(tried, []string{"p1/m"}) {
			t.Fatalf("during the cool-down, tried %v", tried)
		}
	}
	clk.Advance(time.Second)
	if tried, _ := attempt(t, r, "a", always(ok200)); !slices.Equal(tried, []string{"p0/m"}) {
		t.Fatalf("after the cool-down, tried %v, want the primary", tried)
	}
}

func TestCooldownCapDefaultAndOverload(t *testing.T) {
	cfg := Config{Cooldown: CooldownConfig{Default: 2 * time.Second, Max: time.Minute},
		Aliases: []AliasConfig{alias("a", Ordered, 1)}}
	tests := []struct {
		name string
		res  Result
		want time.Duration
	}{
		{"capped", rateLimit("Retry-After", "86400"), time.Minute},
		{"capped date", rateLimit("Retry-After", "Mon, 02 Mar 2026 12:00:00 GMT"), time.Minute},
		{"no header: the default", rateLimit(), 2 * time.Second},
		{"unusable header: the default", rateLimit("Retry-After", "later"), 2 * time.Second},
		{"zero: none", rateLimit("Retry-After", "0"), 0},
		{"503 without a time: none", Result{Kind: Answered, Status: 503}, 0},
		{"503 with a time", Result{Kind: Answered, Status: 503, Header: http.Header{"Retry-After": {"9"}}}, 9 * time.Second},
		{"529 with a time", Result{Kind: Answered, Status: 529, Header: http.Header{"Retry-After-Ms": {"700"}}}, 700 * time.Millisecond},
		{"500 with a time: none", Result{Kind: Answered, Status: 500, Header: http.Header{"Retry-After": {"9"}}}, 0},
		{"200 with a time: none", Result{Kind: Answered, Status: 200, Header: http.Header{"Retry-After": {"9"}}}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, clk := testRouter(t, cfg)
			attempt(t, r, "a", always(tc.res))
			h := healthOf(r, "p0/m")
			var got time.Duration
			if !h.CooldownUntil.IsZero() {
				got = h.CooldownUntil.Sub(clk.Now())
			}
			if got != tc.want {
				t.Fatalf("cool-down %v, want %v", got, tc.want)
			}
		})
	}
}

// A later cool-down extends one in force; an earlier one does not
// shorten it, nor count as a new one.
func TestCooldownOnlyExtends(t *testing.T) {
	var changes []Change
	r, clk := testRouter(t, Config{Aliases: []AliasConfig{alias("a", Ordered, 1)}},
		Options{OnChange: func(c Change) { changes = append(changes, c) }})
	tg := r.Target("p0/m")
	now := clk.Now().UnixNano()
	tg.coolFrom(now, rateLimit("Retry-After", "30"))
	tg.coolFrom(now, rateLimit("Retry-After", "10"))
	if h := healthOf(r, "p0/m"); h.CooldownUntil.Sub(clk.Now()) != 30*time.Second || h.Cooldowns != 1 {
		t.Fatalf("after 30s then 10s: until +%v, %d cool-downs", h.CooldownUntil.Sub(clk.Now()), h.Cooldowns)
	}
	tg.coolFrom(now, rateLimit("Retry-After", "60"))
	if h := healthOf(r, "p0/m"); h.CooldownUntil.Sub(clk.Now()) != time.Minute || h.Cooldowns != 1 {
		t.Fatalf("after 60s: until +%v, %d cool-downs", h.CooldownUntil.Sub(clk.Now()), h.Cooldowns)
	}
	if len(changes) != 2 || !changes[0].Cooldown || changes[0].Reason != ReasonRateLimited {
		t.Fatalf("changes %+v, want two cool-downs (30s, then the extension to 60s)", changes)
	}
	clk.Advance(time.Minute)
	tg.coolFrom(clk.Now().UnixNano(), rateLimit("Retry-After", "1"))
	if h := healthOf(r, "p0/m"); h.Cooldowns != 2 {
		t.Fatalf("a cool-down after the last ended is a new one; counted %d", h.Cooldowns)
	}
}

func FuzzCooldown(f *testing.F) {
	for _, s := range []string{"30", "1.5", "Sun, 01 Mar 2026 12:02:00 GMT", "-1", "1e309", "6m0s", "2026-03-01T12:00:20Z", ".", "0x1p3"} {
		f.Add(s, s, s, "0")
	}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, ms, ra, reset, remaining string) {
		for _, h := range []http.Header{
			{"Retry-After-Ms": {ms}},
			{"Retry-After": {ra}},
			{"X-Ratelimit-Reset-Tokens": {reset}, "X-Ratelimit-Remaining-Tokens": {remaining}},
			{"Anthropic-Ratelimit-Tokens-Reset": {reset}, "Anthropic-Ratelimit-Tokens-Remaining": {remaining}},
			{"Retry-After-Ms": {ms}, "Retry-After": {ra}, "X-Ratelimit-Reset-Requests": {reset}},
		} {
			d, ok := Cooldown(h, now)
			if d < 0 || d > maxHeaderCooldown || (!ok && d != 0) {
				t.Fatalf("Cooldown(%v) = %v, %v", h, d, ok)
			}
		}
	})
}

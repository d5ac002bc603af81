package providertest

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	gwrouting "github.com/modelgate/modelgate/routing"
)

const (
	chaosOA       = `{"model":"gpt-4o","messages":[{"role":"user","content":"hello chaos"}]}`
	chaosOAStream = `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hello chaos"}]}`
	chaosAN       = `{"model":"claude-x","max_tokens":64,"messages":[{"role":"user","content":"hello chaos"}]}`
	chaosANStream = `{"model":"claude-x","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hello chaos"}]}`
)

// fakeClock is a clock a test moves by hand.
type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

func newClock() *fakeClock {
	c := new(fakeClock)
	c.ns.Store(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func startChaos(t *testing.T, b Behaviour, clk *fakeClock) *Chaos {
	o := ChaosOptions{Options: Options{OpenAIKey: "ok", AnthropicKey: "ak"}}
	if clk != nil {
		o.Now = clk.Now
	}
	return StartChaos(t, b, o)
}

func chaosPost(t *testing.T, c *Chaos, path, body string) (*http.Response, string) {
	t.Helper()
	return Send(t, http.MethodPost, c.URL+path, body, authFor(path)...)
}

func TestChaosHealthy(t *testing.T) {
	c := startChaos(t, Healthy(), nil)
	res, body := chaosPost(t, c, oaPath, chaosOA)
	if res.StatusCode != 200 || gjson.Get(body, "choices.0.message.content").Str != "echo: hello chaos" {
		t.Fatalf("%d %s", res.StatusCode, body)
	}
	res, body = chaosPost(t, c, anPath, chaosAN)
	if res.StatusCode != 200 || gjson.Get(body, "content.0.text").Str != "echo: hello chaos" {
		t.Fatalf("%d %s", res.StatusCode, body)
	}
	if s := c.Stats(); s.Requests != 2 || s.Passed != 2 || len(c.Fake.Requests()) != 2 {
		t.Fatalf("stats %+v, fake saw %d", s, len(c.Fake.Requests()))
	}
}

// A black hole takes the request and never answers: the client's own
// timeout ends it.
func TestChaosBlackHole(t *testing.T) {
	c := startChaos(t, BlackHole(), nil)
	for _, path := range []string{oaPath, anPath} {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		req := NewRequest(t, http.MethodPost, c.URL+path, chaosOA, authFor(path)...)
		res, err := http.DefaultClient.Do(req.WithContext(ctx))
		cancel()
		if err == nil {
			res.Body.Close()
			t.Fatalf("%s: a black hole answered %d", path, res.StatusCode)
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s: %v, want the client's timeout", path, err)
		}
	}
	if s := c.Stats(); s.Held != 2 || s.Passed != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// A stream's first event arrives, then the connection is reset; an
// answer that is not a stream is reset before any byte.
func TestChaosResetMidStream(t *testing.T) {
	c := startChaos(t, ResetMidStream(), nil)
	for _, tc := range []struct{ path, body, first string }{
		{oaPath, chaosOAStream, `"object":"chat.completion.chunk"`},
		{anPath, chaosANStream, "event: message_start"},
	} {
		req := NewRequest(t, http.MethodPost, c.URL+tc.path, tc.body, authFor(tc.path)...)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", tc.path, err)
		}
		if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
			t.Fatalf("%s: %d %s", tc.path, res.StatusCode, res.Header.Get("Content-Type"))
		}
		rd := bufio.NewReader(res.Body)
		line, err := rd.ReadString('\n')
		if err != nil || !strings.Contains(line, tc.first) {
			t.Fatalf("%s: first line %q, %v", tc.path, line, err)
		}
		_, err = io.ReadAll(rd)
		res.Body.Close()
		if !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("%s: after the first event: %v, want a connection reset", tc.path, err)
		}
	}
	req := NewRequest(t, http.MethodPost, c.URL+oaPath, chaosOA, oaAuth...)
	res, err := http.DefaultClient.Do(req)
	if err == nil {
		res.Body.Close()
		t.Fatalf("not a stream: answered %d, want the connection reset", res.StatusCode)
	}
	if s := c.Stats(); s.Reset != 3 {
		t.Fatalf("stats %+v, want 3 resets", s)
	}
}

// A 429 storm announces its wait in each form, in each format's error
// shape; the router reads the wait the form says.
func TestChaosRateLimited(t *testing.T) {
	clk := newClock()
	forms := []struct {
		name  string
		form  RetryForm
		check func(h http.Header) bool
	}{
		{"seconds", RetryAfterSeconds, func(h http.Header) bool { return h.Get("Retry-After") == "2" }},
		{"date", RetryAfterDate, func(h http.Header) bool { return h.Get("Retry-After") == "Sun, 01 Mar 2026 12:00:02 GMT" }},
		{"ms", RetryAfterMs, func(h http.Header) bool { return h.Get("Retry-After-Ms") == "1500" && h.Get("Retry-After") == "" }},
		{"openai", OpenAIResets, func(h http.Header) bool {
			return h.Get("X-Ratelimit-Remaining-Requests") == "0" && h.Get("X-Ratelimit-Reset-Requests") == "1.5s" &&
				h.Get("X-Ratelimit-Reset-Tokens") == "6m0s"
		}},
		{"anthropic", AnthropicResets, func(h http.Header) bool {
			return h.Get("Anthropic-Ratelimit-Requests-Remaining") == "0" &&
				h.Get("Anthropic-Ratelimit-Requests-Reset") == "2026-03-01T12:00:01.5Z" &&
				h.Get("Anthropic-Ratelimit-Tokens-Remaining") != "0"
		}},
	}
	for _, f := range forms {
		t.Run(f.name, func(t *testing.T) {
			c := startChaos(t, RateLimited(RateLimit{RetryAfter: 1500 * time.Millisecond, Headers: f.form}), clk)
			res, body := chaosPost(t, c, oaPath, chaosOA)
			if res.StatusCode != 429 || gjson.Get(body, "error.code").Str != "rate_limit_exceeded" || res.Header.Get("X-Request-Id") == "" {
				t.Fatalf("OpenAI: %d %s", res.StatusCode, body)
			}
			if !f.check(res.Header) {
				t.Fatalf("headers %v", res.Header)
			}
			want := 1500 * time.Millisecond
			if f.form == RetryAfterSeconds || f.form == RetryAfterDate {
				want = 2 * time.Second // whole seconds, rounded up
			}
			if d, ok := gwrouting.Cooldown(res.Header, clk.Now()); !ok || d != want {
				t.Fatalf("the router reads %v, %v; want %v", d, ok, want)
			}
			res, body = chaosPost(t, c, anPath, chaosAN)
			if res.StatusCode != 429 || gjson.Get(body, "type").Str != "error" ||
				gjson.Get(body, "error.type").Str != "rate_limit_error" || res.Header.Get("Request-Id") == "" || !f.check(res.Header) {
				t.Fatalf("Anthropic: %d %s %v", res.StatusCode, body, res.Header)
			}
			if s := c.Stats(); s.RateLimited != 2 || s.Passed != 0 {
				t.Fatalf("stats %+v", s)
			}
		})
	}
}

// A storm with an end announces what is left of it, and lets requests
// through once it is over.
func TestChaosRateLimitStormEnds(t *testing.T) {
	clk := newClock()
	c := startChaos(t, RateLimited(RateLimit{For: 30 * time.Second, Headers: RetryAfterSeconds | RetryAfterMs}), clk)
	clk.Advance(10*time.Second + 300*time.Millisecond)
	res, _ := chaosPost(t, c, oaPath, chaosOA)
	if res.StatusCode != 429 || res.Header.Get("Retry-After") != "20" || res.Header.Get("Retry-After-Ms") != "19700" {
		t.Fatalf("%d retry-after %q, retry-after-ms %q", res.StatusCode, res.Header.Get("Retry-After"), res.Header.Get("Retry-After-Ms"))
	}
	clk.Advance(20 * time.Second)
	if res, body := chaosPost(t, c, oaPath, chaosOA); res.StatusCode != 200 {
		t.Fatalf("after the storm: %d %s", res.StatusCode, body)
	}
}

func TestChaosServerErrors(t *testing.T) {
	for _, tc := range []struct {
		b        Behaviour
		oa, an   int
		anType   string
		oaErrTyp string
	}{
		{ServerErrors(), 500, 500, "api_error", "server_error"},
		{Overloaded(), 503, 529, "overloaded_error", "server_error"},
	} {
		c := startChaos(t, tc.b, nil)
		res, body := chaosPost(t, c, oaPath, chaosOA)
		if res.StatusCode != tc.oa || gjson.Get(body, "error.type").Str != tc.oaErrTyp {
			t.Fatalf("OpenAI: %d %s", res.StatusCode, body)
		}
		res, body = chaosPost(t, c, anPath, chaosAN)
		if res.StatusCode != tc.an || gjson.Get(body, "error.type").Str != tc.anType {
			t.Fatalf("Anthropic: %d %s", res.StatusCode, body)
		}
		if s := c.Stats(); s.Failed != 2 {
			t.Fatalf("stats %+v", s)
		}
	}
}

// The status and headers come at once, the first byte of the body only
// after the delay.
func TestChaosSlowFirstToken(t *testing.T) {
	const delay = 500 * time.Millisecond
	c := startChaos(t, SlowFirstToken(delay), nil)
	for _, tc := range []struct{ path, body string }{{oaPath, chaosOAStream}, {anPath, chaosANStream}, {oaPath, chaosOA}} {
		start := time.Now()
		req := NewRequest(t, http.MethodPost, c.URL+tc.path, tc.body, authFor(tc.path)...)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		headers := time.Now()
		var first time.Time
		buf := make([]byte, 1)
		if _, err := io.ReadFull(res.Body, buf); err != nil {
			t.Fatal(err)
		}
		first = time.Now()
		rest, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil || res.StatusCode != 200 || !strings.Contains(string(buf)+string(rest), "hello") {
			t.Fatalf("%s: %d %v %s", tc.path, res.StatusCode, err, rest)
		}
		if first.Sub(start) < delay || !headers.Before(first) {
			t.Fatalf("%s: headers after %v, first byte after %v; want the headers first and the body after %v",
				tc.path, headers.Sub(start), first.Sub(start), delay)
		}
	}
}

func TestChaosSlow(t *testing.T) {
	const delay = 300 * time.Millisecond
	c := startChaos(t, Slow(delay), nil)
	start := time.Now()
	res, body := chaosPost(t, c, oaPath, chaosOA)
	if res.StatusCode != 200 || time.Since(start) < delay || !strings.Contains(body, "echo: hello chaos") {
		t.Fatalf("%d after %v: %s", res.StatusCode, time.Since(start), body)
	}
}

// Flapping follows its clock: healthy, failing, healthy again.
func TestChaosFlapping(t *testing.T) {
	clk := newClock()
	c := startChaos(t, Flapping(10*time.Second, 5*time.Second, ServerErrors()), clk)
	status := func() int {
		res, _ := chaosPost(t, c, oaPath, chaosOA)
		return res.StatusCode
	}
	for _, step := range []struct {
		advance time.Duration
		want    int
	}{{0, 200}, {9 * time.Second, 200}, {time.Second, 500}, {4 * time.Second, 500}, {time.Second, 200}, {10 * time.Second, 500}} {
		clk.Advance(step.advance)
		if got := status(); got != step.want {
			t.Fatalf("at +%v: %d, want %d", clk.Now().Sub(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)), got, step.want)
		}
	}
	// Set starts again from now, healthy.
	c.Set(Flapping(10*time.Second, 5*time.Second, ServerErrors()))
	if got := status(); got != 200 {
		t.Fatalf("after Set: %d", got)
	}
	c.Set(nil)
	if got := status(); got != 200 {
		t.Fatalf("after Set(nil): %d", got)
	}
}

// A black hole holding requests does not keep the test from ending, and
// many clients at once are fine (-race).
func TestChaosConcurrent(t *testing.T) {
	c := startChaos(t, Flapping(time.Millisecond, time.Millisecond, ResetMidStream()), nil)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 20 {
				req, _ := http.NewRequest(http.MethodPost, c.URL+oaPath, strings.NewReader(chaosOAStream))
				req.Header.Set("Authorization", "Bearer ok")
				if res, err := http.DefaultClient.Do(req); err == nil {
					_, _ = io.Copy(io.Discard, res.Body)
					res.Body.Close()
				}
			}
		})
	}
	wg.Wait()
	if s := c.Stats(); s.Requests != 160 || s.Passed != 160 {
		t.Fatalf("stats %+v", s)
	}
	c.Set(BlackHole())
	go func() {
		req, _ := http.NewRequest(http.MethodPost, c.URL+oaPath, strings.NewReader(chaosOA))
		if res, err := http.DefaultClient.Do(req); err == nil {
			res.Body.Close()
		}
	}()
	for c.Stats().Held == 0 {
		time.Sleep(time.Millisecond)
	}
}

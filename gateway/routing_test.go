package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/modelgate/modelgate/batch"
	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/openai"
	"github.com/modelgate/modelgate/routing"
)

// These tests serve calls through a gateway whose aliases are routed by
// the routing engine, to providers whose upstreams the tests script: a
// target that fails, rate limits, stalls, is slow.

// scripted is an OpenAI provider's upstream whose answers a function
// writes; it counts the requests it was sent.
type scripted struct {
	calls atomic.Int64
	mu    sync.Mutex
	fn    func(ctx context.Context, stream bool, w http.ResponseWriter) error
}

func (u *scripted) Send(ctx context.Context, _ providers.Request, stream bool, w http.ResponseWriter) error {
	u.calls.Add(1)
	u.mu.Lock()
	fn := u.fn
	u.mu.Unlock()
	return fn(ctx, stream, w)
}

// set changes what u answers.
func (u *scripted) set(fn func(ctx context.Context, stream bool, w http.ResponseWriter) error) {
	u.mu.Lock()
	u.fn = fn
	u.mu.Unlock()
}

// answers is a working provider that says text: a chat completion, or a
// stream of it.
func answers(text string) func(context.Context, bool, http.ResponseWriter) error {
	return func(ctx context.Context, stream bool, w http.ResponseWriter) error {
		if !stream {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(200)
			_, _ = fmt.Fprintf(w, `{"id":"c","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`, text)
			return nil
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		for _, ev := range streamEvents(text) {
			_, _ = w.Write([]byte(ev))
		}
		return nil
	}
}

// streamEvents are the events of a chat stream that says text.
func streamEvents(text string) []string {
	return []string{
		fmt.Sprintf("data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":%q},\"finish_reason\":null}]}\n\n", text),
		"data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
		"data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1,\"total_tokens\":2}}\n\n",
		"data: [DONE]\n\n",
	}
}

// answerStatus is a provider that answers code with the headers h and an
// OpenAI error body.
func answerStatus(code int, h map[string]string) func(context.Context, bool, http.ResponseWriter) error {
	return func(_ context.Context, _ bool, w http.ResponseWriter) error {
		for k, v := range h {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_, _ = fmt.Fprintf(w, `{"error":{"message":"status %d","type":"server_error"}}`, code)
		return nil
	}
}

// refused is a provider that cannot be reached.
func refused(context.Context, bool, http.ResponseWriter) error {
	return errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
}

// routed is a gateway of providers "a", "b" and "c" (OpenAI's API, on
// scripted upstreams), an alias "smart" of their model "m", and the
// routing engine of cfg on a clock the test moves.
type routed struct {
	g      *Gateway
	router *routing.Router
	ups    map[string]*scripted
	now    *atomic.Int64
}

func newRouted(t testing.TB, cfg routing.Config, rand func() uint64) *routed {
	t.Helper()
	r := &routed{ups: map[string]*scripted{}, now: new(atomic.Int64)}
	r.now.Store(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).UnixNano())
	provs := map[string]*Provider{}
	for _, name := range []string{"a", "b", "c"} {
		u := &scripted{fn: answers("from " + name)}
		r.ups[name] = u
		provs[name] = NewProvider(name, "openai", nil, Endpoints{Chat: openai.Chat{}}, u)
	}
	if len(cfg.Aliases) == 0 {
		ac := routing.AliasConfig{Name: "smart"}
		for _, name := range []string{"a", "b", "c"} {
			ac.Targets = append(ac.Targets, routing.TargetConfig{Provider: name, Model: "m"})
		}
		cfg.Aliases = []routing.AliasConfig{ac}
	}
	aliases := map[string][]string{}
	for _, ac := range cfg.Aliases {
		for _, tc := range ac.Targets {
			aliases[ac.Name] = append(aliases[ac.Name], tc.Key())
		}
	}
	var err error
	r.router, err = routing.New(cfg, routing.Options{Now: func() time.Time { return time.Unix(0, r.now.Load()) }, Rand: rand})
	if err != nil {
		t.Fatal(err)
	}
	r.g, err = New(Config{Providers: provs, Aliases: aliases, Router: r.router, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *routed) advance(d time.Duration) { r.now.Add(int64(d)) }

// chat serves a chat call to model (streamed when stream) and returns
// its outcome and what a stream sent.
func (r *routed) chat(t testing.TB, model string, stream bool) (*Outcome, *recordingSink) {
	t.Helper()
	fields := ""
	if stream {
		fields = `,"stream":true`
	}
	sink := &recordingSink{}
	o := &Outcome{}
	r.g.Serve(context.Background(), &Call{API: APIChat, Body: chatBody(model, fields, "hi"), Sink: sink, Path: "/v1/chat/completions"}, o)
	return o, sink
}

// calls is how many requests each provider was sent.
func (r *routed) calls() [3]int64 {
	return [3]int64{r.ups["a"].calls.Load(), r.ups["b"].calls.Load(), r.ups["c"].calls.Load()}
}

// health is the routing engine's view of target key.
func (r *routed) health(key string) routing.TargetHealth {
	for _, th := range r.router.Health().Targets {
		if th.Target == key {
			return th
		}
	}
	return routing.TargetHealth{}
}

func TestRoutingBreakerSkipsOpenTarget(t *testing.T) {
	for _, tc := range []struct {
		name    string
		breaker routing.BreakerConfig
		fail    func(context.Context, bool, http.ResponseWriter) error
		opensAt int64 // the attempts at a when its breaker opens
	}{
		{"consecutive failures, 500", routing.BreakerConfig{ConsecutiveFailures: 3, OpenFor: time.Minute}, answerStatus(500, nil), 3},
		{"consecutive failures, refused", routing.BreakerConfig{ConsecutiveFailures: 2, OpenFor: time.Minute}, refused, 2},
		{"error rate", routing.BreakerConfig{ConsecutiveFailures: 100, ErrorRate: 0.5, MinRequests: 4, OpenFor: time.Minute}, answerStatus(503, nil), 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRouted(t, routing.Config{Breaker: tc.breaker, RetryBudget: routing.BudgetConfig{Off: true}}, nil)
			r.ups["a"].set(tc.fail)
			for i := range 10 {
				o, _ := r.chat(t, "smart", false)
				if o.Status != 200 || !strings.Contains(string(o.Body), "from b") {
					t.Fatalf("request %d: %d %s", i, o.Status, o.Body)
				}
			}
			if got := r.calls(); got != [3]int64{tc.opensAt, 10, 0} {
				t.Fatalf("calls %v: a was not skipped once its breaker opened after %d", got, tc.opensAt)
			}
			if h := r.health("a/m"); h.State != routing.Open || h.Opens != 1 || h.Available {
				t.Fatalf("health %+v", h)
			}
			// Half-open after open_for: one trial, whose success closes it.
			r.ups["a"].set(answers("from a"))
			r.advance(time.Minute + time.Second)
			o, _ := r.chat(t, "smart", false)
			if o.Status != 200 || !strings.Contains(string(o.Body), "from a") {
				t.Fatalf("trial: %d %s", o.Status, o.Body)
			}
			if h := r.health("a/m"); h.State != routing.Closed {
				t.Fatalf("after a successful trial: %+v", h)
			}
		})
	}
}

func TestRoutingHalfOpenTrialFails(t *testing.T) {
	r := newRouted(t, routing.Config{Breaker: routing.BreakerConfig{ConsecutiveFailures: 1, OpenFor: time.Minute}}, nil)
	r.ups["a"].set(answerStatus(500, nil))
	r.chat(t, "smart", false)
	r.advance(61 * time.Second)
	r.chat(t, "smart", false) // the trial, which fails: open again, for twice as long
	r.advance(61 * time.Second)
	for range 3 {
		r.chat(t, "smart", false)
	}
	if got := r.calls()[0]; got != 2 {
		t.Fatalf("a was sent %d requests; want 2 (the failure, the failed trial)", got)
	}
	if h := r.health("a/m"); h.State != routing.Open || h.Opens != 2 {
		t.Fatalf("health %+v", h)
	}
}

func TestRoutingCooldowns(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		code   int
		header map[string]string
		wait   time.Duration
	}{
		{"retry-after", 429, map[string]string{"Retry-After": "30"}, 30 * time.Second},
		{"retry-after-ms", 429, map[string]string{"Retry-After-Ms": "20000"}, 20 * time.Second},
		{"openai resets", 429, map[string]string{"X-Ratelimit-Remaining-Requests": "0", "X-Ratelimit-Reset-Requests": "45s"}, 45 * time.Second},
		{"anthropic resets", 429, map[string]string{"Anthropic-Ratelimit-Requests-Remaining": "0",
			"Anthropic-Ratelimit-Requests-Reset": now.Add(40 * time.Second).Format(time.RFC3339)}, 40 * time.Second},
		{"503 with retry-after", 503, map[string]string{"Retry-After": "25"}, 25 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRouted(t, routing.Config{}, nil)
			r.ups["a"].set(answerStatus(tc.code, tc.header))
			for range 5 {
				if o, _ := r.chat(t, "smart", false); o.Status != 200 || !strings.Contains(string(o.Body), "from b") {
					t.Fatalf("%d %s", o.Status, o.Body)
				}
			}
			r.advance(tc.wait - time.Second)
			r.chat(t, "smart", false)
			if got := r.calls()[0]; got != 1 {
				t.Fatalf("a was sent %d requests during its cool-down; want 1", got)
			}
			if h := r.health("a/m"); h.Cooldowns != 1 || h.CooldownUntil.IsZero() {
				t.Fatalf("health %+v", h)
			}
			r.advance(2 * time.Second)
			r.chat(t, "smart", false)
			if got := r.calls()[0]; got != 2 {
				t.Fatalf("a was sent %d requests after its cool-down; want 2", got)
			}
		})
	}
}

func TestRoutingEveryTargetOut(t *testing.T) {
	r := newRouted(t, routing.Config{}, nil)
	for _, u := range r.ups {
		u.set(answerStatus(429, map[string]string{"Retry-After": "12"}))
	}
	if o, _ := r.chat(t, "smart", false); o.Status != 429 {
		t.Fatalf("first request: %d %s; want the last target's 429", o.Status, o.Body)
	}
	o, _ := r.chat(t, "smart", false)
	var body struct {
		Error struct{ Message, Type, Code string }
	}
	if err := json.Unmarshal(o.Body, &body); err != nil {
		t.Fatal(err)
	}
	if o.Status != 503 || body.Error.Code != "targets_unavailable" || body.Error.Type != "server_error" ||
		!strings.Contains(body.Error.Message, "every target of model smart is out of rotation") ||
		o.Header.Get("Retry-After") != "12" || o.Header.Get("Retry-After-Ms") != "12000" || !o.Retryable {
		t.Fatalf("%d %s %v", o.Status, o.Body, o.Header)
	}
	if got := r.calls(); got != [3]int64{1, 1, 1} {
		t.Fatalf("calls %v: the second request tried a target", got)
	}

	// The Messages API answers in Anthropic's shape, still 503.
	mo := &Outcome{}
	r.g.Serve(context.Background(), &Call{API: APIMessages, Body: []byte(`{"model":"smart","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`)}, mo)
	if mo.Status != 503 || !strings.Contains(string(mo.Body), `"type":"overloaded_error"`) || mo.Header.Get("Retry-After") == "" {
		t.Fatalf("messages: %d %s %v", mo.Status, mo.Body, mo.Header)
	}

	// A target named itself is out too.
	if o, _ := r.chat(t, "a/m", false); o.Status != 503 {
		t.Fatalf("a/m: %d %s", o.Status, o.Body)
	}
}

// slowFirstEvent is a provider that sends its stream's status and headers
// at once, and its first event after d (or when the request is given up).
func slowFirstEvent(d time.Duration, text string) func(context.Context, bool, http.ResponseWriter) error {
	return func(ctx context.Context, _ bool, w http.ResponseWriter) error {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		_ = http.NewResponseController(w).Flush()
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", ErrAborted, ctx.Err())
		}
		for _, ev := range streamEvents(text) {
			if _, err := w.Write([]byte(ev)); err != nil {
				return fmt.Errorf("%w: %w", ErrAborted, err)
			}
		}
		return nil
	}
}

func TestRoutingFirstTokenTimeout(t *testing.T) {
	cfg := routing.Config{Aliases: []routing.AliasConfig{{Name: "smart", Targets: []routing.TargetConfig{
		{Provider: "a", Model: "m", FirstTokenTimeout: 50 * time.Millisecond}, {Provider: "b", Model: "m"}}}}}
	r := newRouted(t, cfg, nil)
	r.ups["a"].set(slowFirstEvent(10*time.Second, "from a"))
	start := time.Now()
	o, sink := r.chat(t, "smart", true)
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("took %v", took)
	}
	if o.Status != 200 || !o.Streamed || sink.status != 200 || !strings.Contains(sink.body.String(), "from b") ||
		strings.Contains(sink.body.String(), "from a") || o.Target.Provider.Name != "b" {
		t.Fatalf("%d %v %q", o.Status, o.Target, sink.body.String())
	}
	if h := r.health("a/m"); h.Failures != 1 || h.ConsecutiveFailures != 1 {
		t.Fatalf("a's health %+v", h)
	}
	// A non-streamed request is not bound by it.
	r.ups["a"].set(answers("from a"))
	if o, _ := r.chat(t, "smart", false); !strings.Contains(string(o.Body), "from a") {
		t.Fatalf("%s", o.Body)
	}
}

func TestRoutingIdleTimeout(t *testing.T) {
	cfg := routing.Config{IdleTimeout: 50 * time.Millisecond}
	r := newRouted(t, cfg, nil)
	r.ups["a"].set(func(ctx context.Context, _ bool, w http.ResponseWriter) error {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		_, _ = w.Write([]byte(streamEvents("from a")[0]))
		<-ctx.Done() // silent until given up
		return fmt.Errorf("%w: %w", ErrAborted, ctx.Err())
	})
	o, sink := r.chat(t, "smart", true)
	body := sink.body.String()
	if o.Status != 200 || !strings.Contains(body, "from a") || !strings.Contains(body, `"code":"upstream_stalled"`) ||
		strings.Contains(body, "from b") || r.calls()[1] != 0 {
		t.Fatalf("%d %q calls %v", o.Status, body, r.calls())
	}
	if h := r.health("a/m"); h.Failures != 1 {
		t.Fatalf("a's health %+v", h)
	}
}

func TestRoutingResetMidStream(t *testing.T) {
	r := newRouted(t, routing.Config{}, nil)
	r.ups["a"].set(func(ctx context.Context, _ bool, w http.ResponseWriter) error {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		_, _ = w.Write([]byte(streamEvents("from a")[0]))
		return ErrAborted
	})
	o, sink := r.chat(t, "smart", true)
	if body := sink.body.String(); o.Status != 200 || !strings.Contains(body, "from a") || !strings.Contains(body, `"error"`) || r.calls()[1] != 0 {
		t.Fatalf("%q calls %v", body, r.calls())
	}
	if h := r.health("a/m"); h.Failures != 1 {
		t.Fatalf("a's health %+v", h)
	}
	// Broken before its first event, it falls over.
	r.ups["a"].set(func(ctx context.Context, _ bool, w http.ResponseWriter) error {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		return ErrAborted
	})
	o, sink = r.chat(t, "smart", true)
	if body := sink.body.String(); o.Status != 200 || !strings.Contains(body, "from b") || strings.Contains(body, `"error"`) {
		t.Fatalf("%q", body)
	}
}

func TestRoutingPolicies(t *testing.T) {
	t.Run("weighted", func(t *testing.T) {
		cfg := routing.Config{Aliases: []routing.AliasConfig{{Name: "smart", Policy: routing.Weighted, Targets: []routing.TargetConfig{
			{Provider: "a", Model: "m", Weight: 3}, {Provider: "b", Model: "m", Weight: 1}}}}}
		r := newRouted(t, cfg, nil)
		for range 400 {
			r.chat(t, "smart", false)
		}
		if c := r.calls(); c[0] < 250 || c[0] > 350 || c[0]+c[1] != 400 {
			t.Fatalf("calls %v; want about 300:100", c)
		}
	})
	t.Run("latency", func(t *testing.T) {
		cfg := routing.Config{Aliases: []routing.AliasConfig{{Name: "smart", Policy: routing.LowestLatency, Targets: []routing.TargetConfig{
			{Provider: "a", Model: "m"}, {Provider: "b", Model: "m"}}}}}
		r := newRouted(t, cfg, nil)
		r.ups["a"].set(func(ctx context.Context, stream bool, w http.ResponseWriter) error {
			time.Sleep(20 * time.Millisecond)
			return answers("slow")(ctx, stream, w)
		})
		for range 60 {
			r.chat(t, "smart", false)
		}
		if c := r.calls(); c[1] < 57 {
			t.Fatalf("calls %v: the fast target b did not serve most", c)
		}
	})
	t.Run("cost", func(t *testing.T) {
		costs := map[string]float64{"a": 3, "b": 1, "c": 2}
		cfg := routing.Config{Aliases: []routing.AliasConfig{{Name: "smart", Policy: routing.LowestCost, Targets: []routing.TargetConfig{
			{Provider: "a", Model: "m"}, {Provider: "b", Model: "m"}, {Provider: "c", Model: "m"}}}}}
		r := newRouted(t, cfg, nil)
		var err error
		r.router, err = routing.New(cfg, routing.Options{Cost: func(p, _ string) (float64, bool) { return costs[p], true }})
		if err != nil {
			t.Fatal(err)
		}
		r.g.router = r.router
		r.ups["b"].set(answerStatus(500, nil))
		o, _ := r.chat(t, "smart", false)
		if c := r.calls(); !strings.Contains(string(o.Body), "from c") || c != [3]int64{0, 1, 1} {
			t.Fatalf("%s calls %v: want b (cheapest), then c", o.Body, c)
		}
	})
	t.Run("priority groups", func(t *testing.T) {
		cfg := routing.Config{Breaker: routing.BreakerConfig{ConsecutiveFailures: 1, OpenFor: time.Hour},
			Aliases: []routing.AliasConfig{{Name: "smart", Policy: routing.Weighted, Targets: []routing.TargetConfig{
				{Provider: "a", Model: "m"}, {Provider: "b", Model: "m"}, {Provider: "c", Model: "m", Priority: 1}}}}}
		r := newRouted(t, cfg, nil)
		for range 50 {
			r.chat(t, "smart", false)
		}
		if c := r.calls(); c[2] != 0 {
			t.Fatalf("calls %v: the priority 1 target served while the group before it was in rotation", c)
		}
		r.ups["a"].set(refused)
		r.ups["b"].set(refused)
		for range 5 {
			if o, _ := r.chat(t, "smart", false); !strings.Contains(string(o.Body), "from c") {
				t.Fatalf("%d %s", o.Status, o.Body)
			}
		}
	})
}

func TestRoutingRetryBudget(t *testing.T) {
	cfg := routing.Config{Breaker: routing.BreakerConfig{Off: true},
		RetryBudget: routing.BudgetConfig{Ratio: 0.1, MinPerSecond: 0.01, Window: 10 * time.Second}}
	r := newRouted(t, cfg, nil)
	r.ups["a"].set(answerStatus(500, nil))
	var failed int
	for range 50 {
		o, _ := r.chat(t, "smart", false)
		if o.Status == 500 {
			failed++
		}
	}
	c := r.calls()
	if c[0] != 50 || c[1] > 10 || failed < 40 || int64(failed)+c[1] != 50 {
		t.Fatalf("calls %v, %d failed: the retries were not bounded", c, failed)
	}
	var exhausted uint64
	for _, a := range r.router.Health().Aliases {
		exhausted += a.RetryBudget.Exhausted
	}
	if exhausted != uint64(failed) {
		t.Fatalf("exhausted %d, failed %d", exhausted, failed)
	}
}

func TestRoutingUnroutedModels(t *testing.T) {
	// A target no alias lists, named itself, is tried once and feeds no
	// breaker: as without routing.
	r := newRouted(t, routing.Config{Aliases: []routing.AliasConfig{{Name: "smart", Targets: []routing.TargetConfig{{Provider: "a", Model: "m"}}}}}, nil)
	r.ups["b"].set(answerStatus(500, nil))
	for range 10 {
		if o, _ := r.chat(t, "b/other", false); o.Status != 500 {
			t.Fatalf("%d", o.Status)
		}
	}
	if c := r.calls(); c[1] != 10 {
		t.Fatalf("calls %v", c)
	}
}

func TestRoutingCooldownFromTranslatedRetryInfo(t *testing.T) {
	// A wait the provider says in its body (Google's RetryInfo), which
	// its translator reads into the error, cools the target as a
	// Retry-After would; the client's headers say it too.
	r := newRouted(t, routing.Config{}, nil)
	gemini := func(_ context.Context, _ bool, w http.ResponseWriter) error {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(429)
		_, _ = w.Write([]byte(`{"error":{"message":"slow down","type":"rate_limit_error"}}`))
		return nil
	}
	r.ups["a"].set(gemini)
	r.g.providers["a"].chatError = func(status int, _ http.Header, _ []byte) *providers.Error {
		return &providers.Error{Status: status, Type: "rate_limit_error", Message: "slow down", RetryAfter: 20 * time.Second}
	}
	for range 3 {
		if o, _ := r.chat(t, "smart", false); o.Status != 200 {
			t.Fatalf("%d %s", o.Status, o.Body)
		}
	}
	if c := r.calls(); c[0] != 1 {
		t.Fatalf("calls %v", c)
	}
	if h := r.health("a/m"); time.Unix(0, r.now.Load()).Add(19 * time.Second).After(h.CooldownUntil) {
		t.Fatalf("cool-down until %v", h.CooldownUntil)
	}
}

func TestRoutingBatchLineTargetsUnavailable(t *testing.T) {
	// A batch line whose targets are all out of rotation gets a
	// retryable 503 with the time to retry after, which the batch runner
	// waits for; nothing is sent.
	r := newRouted(t, routing.Config{}, nil)
	k := &Key{Name: "k", Owner: "k"}
	r.g.static = map[string]*Key{"k": k}
	for _, u := range r.ups {
		u.set(answerStatus(429, map[string]string{"Retry-After": "7"}))
	}
	req := batch.Request{BatchID: "batch_x", CustomID: "a", Owner: k.StorageOwner(), KeyName: "k", Endpoint: batch.EndpointChat,
		Body: chatBody("smart", "", "hi")}
	ex := r.g.BatchExecutor()
	if resp := ex.Do(context.Background(), req); resp.Status != 429 || resp.Final {
		t.Fatalf("first line: %+v", resp)
	}
	resp := ex.Do(context.Background(), req)
	if resp.Status != 503 || resp.Final || resp.RetryAfter != 7*time.Second || !strings.Contains(string(resp.Body), "targets_unavailable") {
		t.Fatalf("second line: %+v %s", resp, resp.Body)
	}
	if c := r.calls(); c != [3]int64{1, 1, 1} {
		t.Fatalf("calls %v", c)
	}
}

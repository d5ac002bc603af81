package gateway

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelgate/modelgate/batch"
	"github.com/modelgate/modelgate/guardrails"
	"github.com/modelgate/modelgate/pricing"
	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/usage"
)

// upstreamFunc is an Upstream of a function.
type upstreamFunc func(ctx context.Context, req providers.Request, stream bool, w http.ResponseWriter) error

func (f upstreamFunc) Send(ctx context.Context, req providers.Request, stream bool, w http.ResponseWriter) error {
	return f(ctx, req, stream, w)
}

// TestNativeSend: a batch API's request goes through the provider's
// Upstream with its upload streamed as it is; the answer's status and
// headers come as soon as they are written and its body as it arrives
// (the upstream is still writing when the reader has the first bytes); a
// provider that breaks off its answer is an error of the body; one that
// never answers is Send's error.
func TestNativeSend(t *testing.T) {
	ctx := context.Background()
	t.Run("streamed both ways", func(t *testing.T) {
		more := make(chan struct{})
		var upload string
		send := NativeSend(upstreamFunc(func(_ context.Context, req providers.Request, stream bool, w http.ResponseWriter) error {
			b, _ := io.ReadAll(req.Upload)
			if stream || req.Body != nil || req.Length != int64(len(b)) {
				t.Errorf("stream %v, body %q, length %d of %d", stream, req.Body, req.Length, len(b))
			}
			upload = string(b)
			w.Header().Set("X-Request-Id", "req_1")
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, "first ")
			<-more // the reader has the first bytes before the rest is written
			w.Header().Set("X-Late", "1")
			_, _ = io.WriteString(w, "second")
			return nil
		}))
		ans, err := send(ctx, providers.Request{Path: "/files", Upload: strings.NewReader("records"), Length: 7})
		if err != nil || ans.Status != 200 || ans.Header.Get("X-Request-Id") != "req_1" {
			t.Fatalf("%+v, %v", ans, err)
		}
		buf := make([]byte, 6)
		if _, err := io.ReadFull(ans.Body, buf); err != nil || string(buf) != "first " {
			t.Fatalf("first bytes %q, %v", buf, err)
		}
		close(more)
		rest, err := io.ReadAll(ans.Body)
		if err != nil || string(rest) != "second" || upload != "records" || ans.Header.Get("X-Late") != "" {
			t.Errorf("rest %q, %v; upload %q; headers %v", rest, err, upload, ans.Header)
		}
		_ = ans.Body.Close()
	})
	t.Run("broken off", func(t *testing.T) {
		send := NativeSend(upstreamFunc(func(_ context.Context, _ providers.Request, _ bool, w http.ResponseWriter) error {
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, "part")
			return ErrAborted
		}))
		ans, err := send(ctx, providers.Request{Method: http.MethodGet, Path: "/files/f/content"})
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(ans.Body)
		if string(b) != "part" || !errors.Is(err, ErrAborted) {
			t.Errorf("%q, %v; want the part and ErrAborted", b, err)
		}
	})
	t.Run("no answer", func(t *testing.T) {
		dial := errors.New("connection refused")
		send := NativeSend(upstreamFunc(func(context.Context, providers.Request, bool, http.ResponseWriter) error { return dial }))
		if _, err := send(ctx, providers.Request{Path: "/batches"}); !errors.Is(err, dial) {
			t.Errorf("%v, want the upstream's error", err)
		}
		silent := NativeSend(upstreamFunc(func(context.Context, providers.Request, bool, http.ResponseWriter) error { return nil }))
		if _, err := silent(ctx, providers.Request{Path: "/batches"}); err == nil {
			t.Error("an upstream that wrote nothing gave an answer")
		}
	})
}

// TestBatchCheckUpstream: a batch line's route names the provider's own
// model of its first target, what a native part encodes it for, and none
// when that target does not serve the endpoint (the line runs in the
// gateway on a later one).
func TestBatchCheckUpstream(t *testing.T) {
	g := newTestGateway(t)
	g.cfg.Aliases = map[string][]string{"smart": {"claude/claude-sonnet-4-5", "oa/gpt-4o"}, "vec": {"claude/x", "oa/text-embedding-3-small"}}
	g.rebuild(t)
	ex := g.BatchExecutor()
	for _, tc := range []struct {
		endpoint, body string
		want           batch.Route
	}{
		{batch.EndpointChat, `{"model":"oa/gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`, batch.Route{Model: "oa/gpt-4o-mini", Provider: "oa", Upstream: "gpt-4o-mini"}},
		{batch.EndpointChat, `{"model":"smart","messages":[{"role":"user","content":"hi"}]}`, batch.Route{Model: "smart", Provider: "claude", Upstream: "claude-sonnet-4-5"}},
		{batch.EndpointEmbeddings, `{"model":"vec","input":"hi"}`, batch.Route{Model: "vec", Provider: "claude"}},
	} {
		got, err := ex.Check(tc.endpoint, []byte(tc.body), nil)
		if err != nil || got != tc.want {
			t.Errorf("%s: %+v, %v; want %+v", tc.body, got, err, tc.want)
		}
	}
}

// TestNativeAccounting: the estimate is at the batch price; a budget too
// small for a part's reservation refuses it with the budget's 429; a
// result is counted once however often it is settled, at the batch
// price, in the usage records and against the budget; an error result
// costs nothing.
func TestNativeAccounting(t *testing.T) {
	ctx := context.Background()
	g := newTestGateway(t)
	g.withLimits(t, budgetOf(t, "0.01"))
	acc := g.NativeAccounting()
	body := []byte(`{"model":"oa/gpt-4o-mini","max_tokens":100,"messages":[{"role":"user","content":"hello there"}]}`)
	est := acc.Estimate(batch.EndpointChat, "oa", "gpt-4o-mini", body)
	live := g.estimateCall(&request{endpoint: endpointChat, body: body}, []Target{{Provider: g.Provider("oa"), Model: "gpt-4o-mini"}})
	if est <= 0 || est >= int64(live.cost) {
		t.Errorf("batch estimate %d, live %d: want below the live one", est, live.cost)
	}

	r := batch.Reservation{ID: "mg-test-part", BatchID: "batch_1", Owner: StaticOwnerPrefix + "bench", KeyName: "bench",
		Endpoint: batch.EndpointChat, Provider: "oa", Model: "gpt-4o-mini", Requests: 1}
	r.Amount = int64(pricing.Dollar) // more than the budget
	if refusal, err := acc.Reserve(ctx, r); err != nil || refusal == nil || refusal.Status != 429 || !strings.Contains(string(refusal.Body), "insufficient_quota") {
		t.Fatalf("a reservation over the budget: %+v, %v", refusal, err)
	}
	r.Amount = est
	if refusal, err := acc.Reserve(ctx, r); err != nil || refusal != nil {
		t.Fatalf("a reservation within the budget: %+v, %v", refusal, err)
	}
	answer := []byte(`{"object":"chat.completion","usage":{"prompt_tokens":1000,"completion_tokens":2000}}`)
	for range 3 {
		acc.Settle(ctx, batch.Settlement{Reservation: r, LineID: "batch_req_1", CustomID: "a", Status: 200, Body: answer})
	}
	acc.Settle(ctx, batch.Settlement{Reservation: r, LineID: "batch_req_2", CustomID: "b", Status: 500, Body: answer})
	acc.Release(ctx, r)

	want, _ := g.prices.BatchCost("openai", "gpt-4o-mini", pricing.Usage{PromptTokens: 1000, CompletionTokens: 2000})
	rep, err := g.cfg.Usage.Query(ctx, usage.Query{From: time.Now().Add(-time.Hour), To: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Total.Requests != 1 || rep.Total.Cost != want || rep.Total.InputTokens != 1000 {
		t.Errorf("usage %+v, want one request of %v", rep.Total, want)
	}
	st, err := g.cfg.Limits.Quota.Status(ctx, g.cfg.Limits.Policies.Subjects(g.static))
	if err != nil {
		t.Fatal(err)
	}
	if st.Key.Budget.Spent != want || st.Key.Budget.Reserved != 0 {
		t.Errorf("budget spent %v, reserved %v; want %v and nothing", st.Key.Budget.Spent, st.Key.Budget.Reserved, want)
	}
}

// TestBatchCheckGuarded: a line a guard may apply to — by its model, by a
// target of its alias, or by a guard limited to some keys, which Check
// cannot rule out — runs in the gateway, where its guards see it; a
// guard of other models leaves it to the provider's batch API.
func TestBatchCheckGuarded(t *testing.T) {
	chat := func(model string) []byte {
		return []byte(`{"model":"` + model + `","messages":[{"role":"user","content":"hi"}]}`)
	}
	for _, tc := range []struct {
		name   string
		guard  guardrails.GuardConfig
		model  string
		native bool
	}{
		{"every model", guardrails.GuardConfig{Name: "pii", Type: "pii"}, "oa/gpt-4o-mini", false},
		{"its model", guardrails.GuardConfig{Name: "pii", Type: "pii", Models: []string{"oa/gpt-4o-mini"}}, "oa/gpt-4o-mini", false},
		{"a target of its alias", guardrails.GuardConfig{Name: "pii", Type: "pii", Models: []string{"claude/claude-sonnet-4-5"}}, "smart", false},
		{"some keys", guardrails.GuardConfig{Name: "pii", Type: "pii", Keys: []string{"someone"}}, "oa/gpt-4o-mini", false},
		{"another model", guardrails.GuardConfig{Name: "pii", Type: "pii", Models: []string{"oa/gpt-4o"}}, "oa/gpt-4o-mini", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gt := newGuardTest(t, tc.guard)
			gt.cfg.Aliases = map[string][]string{"smart": {"claude/claude-sonnet-4-5", "oa/gpt-4o"}}
			gt.rebuild(t)
			got, err := gt.BatchExecutor().Check(batch.EndpointChat, chat(tc.model), nil)
			if err != nil {
				t.Fatal(err)
			}
			if native := got.Upstream != ""; native != tc.native {
				t.Errorf("%+v: native %v, want %v", got, native, tc.native)
			}
		})
	}
}

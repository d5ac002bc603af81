package quota_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelgate/modelgate/internal/storagetest"
	"github.com/modelgate/modelgate/pricing"
	"github.com/modelgate/modelgate/quota"
	"github.com/modelgate/modelgate/state"
	"github.com/modelgate/modelgate/usage"
)

// t0 is 10 seconds into a minute, far from now: windows are computed
// from the clock given, so the tests are exact.
var t0 = time.Date(2031, 3, 4, 5, 6, 10, 0, time.UTC)

func key(id string) quota.Subject { return quota.Subject{ID: id, Name: "name-" + id} }

func withLimits(s quota.Subject, l quota.Limits) quota.Subject { s.Limits = l; return s }

func withBudget(s quota.Subject, amount pricing.Money, p quota.Period) quota.Subject {
	s.Budget = quota.Budget{Amount: amount, Period: p}
	return s
}

// Each limit admits what it allows and then refuses, naming itself and
// its subject; the tightest of the key's and the owner's refuses first.
func TestEachLimitRefuses(t *testing.T) {
	bothStates(t, func(t *testing.T, open opener) {
		cases := []struct {
			name     string
			subj     quota.Subjects
			ask      quota.Ask
			admitted int
			limit    quota.Limit
			kind     quota.Kind
		}{
			{"key requests", quota.Subjects{Key: withLimits(key("k"), quota.Limits{RequestsPerMinute: 3})},
				quota.Ask{Rate: true, EstimatedTokens: 10}, 3, quota.LimitRequests, quota.KindKey},
			{"key tokens", quota.Subjects{Key: withLimits(key("k"), quota.Limits{TokensPerMinute: 1000})},
				quota.Ask{Rate: true, EstimatedTokens: 400}, 2, quota.LimitTokens, quota.KindKey},
			{"key concurrent", quota.Subjects{Key: withLimits(key("k"), quota.Limits{Concurrent: 2})},
				quota.Ask{Rate: true, EstimatedTokens: 10}, 2, quota.LimitConcurrent, quota.KindKey},
			{"key budget", quota.Subjects{Key: withBudget(key("k"), dollar, quota.Day)},
				quota.Ask{Rate: true, EstimatedCost: 30 * pricing.Cent}, 3, quota.LimitBudget, quota.KindKey},
			{"owner requests", quota.Subjects{Key: key("k"), Owner: withLimits(key("o"), quota.Limits{RequestsPerMinute: 2})},
				quota.Ask{Rate: true, EstimatedTokens: 10}, 2, quota.LimitRequests, quota.KindOwner},
			{"owner tokens", quota.Subjects{Key: key("k"), Owner: withLimits(key("o"), quota.Limits{TokensPerMinute: 100})},
				quota.Ask{Rate: true, EstimatedTokens: 50}, 2, quota.LimitTokens, quota.KindOwner},
			{"owner concurrent", quota.Subjects{Key: key("k"), Owner: withLimits(key("o"), quota.Limits{Concurrent: 1})},
				quota.Ask{Rate: true, EstimatedTokens: 10}, 1, quota.LimitConcurrent, quota.KindOwner},
			{"owner budget", quota.Subjects{Key: withBudget(key("k"), 10*dollar, quota.Month), Owner: withBudget(key("o"), dollar, quota.Total)},
				quota.Ask{EstimatedCost: 40 * pricing.Cent}, 2, quota.LimitBudget, quota.KindOwner},
			{"tightest: owner", quota.Subjects{Key: withLimits(key("k"), quota.Limits{RequestsPerMinute: 5}),
				Owner: withLimits(key("o"), quota.Limits{RequestsPerMinute: 2})},
				quota.Ask{Rate: true}, 2, quota.LimitRequests, quota.KindOwner},
			{"tightest: key", quota.Subjects{Key: withLimits(key("k"), quota.Limits{RequestsPerMinute: 1}),
				Owner: withLimits(key("o"), quota.Limits{RequestsPerMinute: 2})},
				quota.Ask{Rate: true}, 1, quota.LimitRequests, quota.KindKey},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				q := newQuota(t, open(t, 1)[0], nil, newClock(t0), 0)
				for i := range tc.admitted {
					if _, ref := admit(t, q, tc.subj, tc.ask); ref != nil {
						t.Fatalf("request %d refused: %s", i+1, ref.Message())
					}
				}
				_, ref := admit(t, q, tc.subj, tc.ask)
				if ref == nil {
					t.Fatalf("request %d admitted over the limit", tc.admitted+1)
				}
				if ref.Limit != tc.limit || ref.Subject != tc.kind {
					t.Fatalf("refused by %v of %v, want %v of %v: %s", ref.Limit, ref.Subject, tc.limit, tc.kind, ref.Message())
				}
				wantCode := "rate_limit_exceeded"
				if tc.limit == quota.LimitBudget {
					wantCode = "insufficient_quota"
				}
				if ref.Code() != wantCode || ref.Retryable() != (tc.limit != quota.LimitBudget) {
					t.Fatalf("code %s, retryable %v", ref.Code(), ref.Retryable())
				}
				id := tc.subj.Key.ID
				if tc.kind == quota.KindOwner {
					id = tc.subj.Owner.ID
				}
				if ref.ID != id || !strings.Contains(ref.Message(), `"name-`+id+`"`) {
					t.Fatalf("refusal of %s: %s", ref.ID, ref.Message())
				}
			})
		}
	})
}

// A request-rate refusal says exactly when to retry, in the headers and
// the message the SDKs and Codex read.
func TestRateRefusalHeaders(t *testing.T) {
	q := newQuota(t, state.NewLocal(), nil, newClock(t0), 0)
	s := quota.Subjects{Key: withLimits(key("k"), quota.Limits{RequestsPerMinute: 2, TokensPerMinute: 1000})}
	ask := quota.Ask{Rate: true, EstimatedTokens: 100}
	adm, _ := admit(t, q, s, ask)
	h := http.Header{}
	adm.Headers().SetOpenAI(h)
	want := map[string]string{
		"x-ratelimit-limit-requests": "2", "x-ratelimit-remaining-requests": "1", "x-ratelimit-reset-requests": "1m50s",
		"x-ratelimit-limit-tokens": "1000", "x-ratelimit-remaining-tokens": "900", "x-ratelimit-reset-tokens": "1m50s",
	}
	for k, v := range want {
		if h.Get(k) != v {
			t.Errorf("admission %s = %q, want %q", k, h.Get(k), v)
		}
	}
	admitted(t, q, s, ask)
	_, ref := admit(t, q, s, ask)
	if ref == nil || ref.Limit != quota.LimitRequests {
		t.Fatalf("refusal %+v", ref)
	}
	// Sliding window: the two requests of this minute weigh 1 a
	// millisecond into the next, leaving room for one.
	if ref.RetryAfter != 50*time.Second+time.Millisecond || ref.Max != 2 || ref.Used != 2 || ref.Asked != 1 {
		t.Fatalf("refusal %+v", ref)
	}
	h = http.Header{}
	ref.SetOpenAIHeaders(h)
	want = map[string]string{
		"retry-after": "51", "retry-after-ms": "50001", "x-should-retry": "",
		"x-ratelimit-limit-requests": "2", "x-ratelimit-remaining-requests": "0",
		// The tokens of the refused request were not counted.
		"x-ratelimit-remaining-tokens": "800",
	}
	for k, v := range want {
		if h.Get(k) != v {
			t.Errorf("refusal %s = %q, want %q", k, h.Get(k), v)
		}
	}
	if msg := ref.Message(); msg != `Rate limit reached for requests per minute on key "name-k": limit 2, used 2, requested 1. Please try again in 50.001s.` {
		t.Errorf("message %q", msg)
	}
	if ref.Type() != "rate_limit_error" || ref.Error() != ref.Message() {
		t.Errorf("type %q", ref.Type())
	}
	h = http.Header{}
	ref.SetAnthropicHeaders(h, t0.Add(500*time.Millisecond))
	want = map[string]string{
		"retry-after": "51", "anthropic-ratelimit-requests-limit": "2", "anthropic-ratelimit-requests-remaining": "0",
		"anthropic-ratelimit-requests-reset":   "2031-03-04T05:08:01Z", // 1m50s after 05:06:10.5, rounded up
		"anthropic-ratelimit-tokens-remaining": "800",
	}
	for k, v := range want {
		if h.Get(k) != v {
			t.Errorf("anthropic %s = %q, want %q", k, h.Get(k), v)
		}
	}
}

// A request larger than the limit can never fit: no retry-after, and the
// SDKs are told not to retry.
func TestTooLargeNeverFits(t *testing.T) {
	q := newQuota(t, state.NewLocal(), nil, newClock(t0), 0)
	s := quota.Subjects{Key: withLimits(key("k"), quota.Limits{TokensPerMinute: 1000, RequestsPerMinute: 100})}
	_, ref := admit(t, q, s, quota.Ask{Rate: true, EstimatedTokens: 1500})
	if ref == nil || ref.Limit != quota.LimitTokens || ref.RetryAfter != 0 || ref.Retryable() {
		t.Fatalf("refusal %+v", ref)
	}
	h := http.Header{}
	ref.SetOpenAIHeaders(h)
	if h.Get("retry-after") != "" || h.Get("x-should-retry") != "false" {
		t.Fatalf("headers %v", h)
	}
	if !strings.HasPrefix(ref.Message(), "Request too large for tokens per minute") {
		t.Fatalf("message %q", ref.Message())
	}
}

// A budget refusal is insufficient_quota; it tells when a day or month
// budget resets, and a total budget never does.
func TestBudgetRefusal(t *testing.T) {
	for _, tc := range []struct {
		period quota.Period
		resets time.Time
		per    string
	}{
		{quota.Day, time.Date(2031, 3, 5, 0, 0, 0, 0, time.UTC), "per day"},
		{quota.Month, time.Date(2031, 4, 1, 0, 0, 0, 0, time.UTC), "per month"},
		{quota.Total, time.Time{}, "in total"},
	} {
		t.Run(string(tc.period), func(t *testing.T) {
			q := newQuota(t, state.NewLocal(), nil, newClock(t0), 0)
			s := quota.Subjects{Key: withBudget(key("k"), 5*dollar, tc.period)}
			adm, _ := admit(t, q, s, quota.Ask{EstimatedCost: 3 * dollar})
			done(t, adm, quota.Actual{Cost: 4 * dollar, Priced: true})
			_, ref := admit(t, q, s, quota.Ask{EstimatedCost: 2 * dollar})
			if ref == nil || ref.Limit != quota.LimitBudget || ref.Spent != 4*dollar || ref.Estimated != 2*dollar || !ref.Resets.Equal(tc.resets) {
				t.Fatalf("refusal %+v", ref)
			}
			h := http.Header{}
			ref.SetOpenAIHeaders(h)
			if h.Get("x-should-retry") != "false" || ref.Type() != "insufficient_quota" {
				t.Fatalf("headers %v, type %s", h, ref.Type())
			}
			if tc.resets.IsZero() {
				if h.Get("retry-after") != "" || ref.RetryAfter != 0 {
					t.Fatalf("a total budget has a retry-after: %v", h)
				}
			} else if ref.RetryAfter != tc.resets.Sub(t0) || h.Get("retry-after") == "" {
				t.Fatalf("retry after %v, header %q", ref.RetryAfter, h.Get("retry-after"))
			}
			// Something is left: the message says what the request
			// would do.
			msg := ref.Message()
			if !strings.Contains(msg, "This request, estimated at $2, would pass the budget of key \"name-k\": $1 left of $5 "+tc.per+" ($4 spent or reserved).") ||
				strings.Contains(msg, "exceeded") {
				t.Fatalf("message %q", msg)
			}
			// What is left still admits a request that fits.
			if _, ref := admit(t, q, s, quota.Ask{EstimatedCost: dollar}); ref != nil {
				t.Fatalf("a request within the budget refused: %s", ref.Message())
			}
		})
	}
}

// A budget refusal says what happened: a request estimated at more than
// the whole budget can never be admitted (no retry-after), one that would
// pass what is left says so, and once the budget is spent it is exceeded.
func TestBudgetRefusalSays(t *testing.T) {
	q := newQuota(t, state.NewLocal(), nil, newClock(t0), 0)
	s := quota.Subjects{Key: withBudget(key("k"), 5*dollar, quota.Day)}
	_, ref := admit(t, q, s, quota.Ask{EstimatedCost: 6 * dollar})
	h := http.Header{}
	if ref == nil {
		t.Fatal("a request estimated at more than the budget admitted")
	}
	ref.SetOpenAIHeaders(h)
	if msg := ref.Message(); msg != `This request, estimated at $6, is more than the whole budget of key "name-k" ($5 per day). Ask for fewer tokens (max_tokens, n) or send less, or have the budget raised.` ||
		ref.RetryAfter != 0 || h.Get("retry-after") != "" || h.Get("x-should-retry") != "false" {
		t.Fatalf("message %q, retry after %v, headers %v", msg, ref.RetryAfter, h)
	}
	adm, _ := admit(t, q, s, quota.Ask{EstimatedCost: 5 * dollar})
	done(t, adm, quota.Actual{Cost: 5 * dollar, Priced: true})
	_, ref = admit(t, q, s, quota.Ask{EstimatedCost: dollar})
	if ref == nil || !strings.HasPrefix(ref.Message(), `You exceeded the budget of key "name-k": $5 per day, $5 spent or reserved, and this request is estimated at $1.`) {
		t.Fatalf("refusal %+v", ref)
	}
}

// When one limit refuses, nothing of the others is counted: not the key's
// windows, slot or reservation when the owner refuses, nor the owner's
// when the key refuses.
func TestRollbackOnPartialRefusal(t *testing.T) {
	bothStates(t, func(t *testing.T, open opener) {
		st := open(t, 1)[0]
		sp := &spender{spent: map[string]pricing.Money{"owner:o": 99 * pricing.Cent}}
		q := newQuota(t, st, sp, newClock(t0), 0)
		k := withBudget(withLimits(key("k"), quota.Limits{RequestsPerMinute: 10, TokensPerMinute: 10000, Concurrent: 1}), 10*dollar, quota.Day)
		o := withBudget(withLimits(key("o"), quota.Limits{RequestsPerMinute: 100}), dollar, quota.Day)
		s := quota.Subjects{Key: k, Owner: o}
		for range 3 {
			_, ref := admit(t, q, s, quota.Ask{Rate: true, EstimatedTokens: 500, EstimatedCost: 5 * pricing.Cent})
			if ref == nil || ref.Limit != quota.LimitBudget || ref.Subject != quota.KindOwner {
				t.Fatalf("refusal %+v", ref)
			}
		}
		s0 := status(t, q, s)
		if s0.Key.Requests.Remaining != 10 || s0.Key.Tokens.Remaining != 10000 || s0.Key.Budget.Reserved != 0 ||
			s0.Owner.Requests.Remaining != 100 || s0.Owner.Budget.Spent != 99*pricing.Cent || s0.Owner.Budget.Reserved != 0 {
			t.Fatalf("a refused request was counted: %+v", s0)
		}
		// Within the owner's budget, exactly to the nano-dollar.
		adm, ref := admit(t, q, s, quota.Ask{Rate: true, EstimatedTokens: 500, EstimatedCost: pricing.Cent})
		if ref != nil {
			t.Fatalf("refused: %s", ref.Message())
		}
		s1 := status(t, q, s)
		if s1.Owner.Requests.Remaining != 99 || s1.Owner.Budget.Reserved != pricing.Cent || s1.Key.Tokens.Remaining != 9500 {
			t.Fatalf("after one admission: %+v", s1)
		}
		done(t, adm, quota.Actual{Tokens: 300, Cost: 2 * pricing.Cent, Priced: true})
		s2 := status(t, q, s)
		if s2.Owner.Budget.Spent != dollar+pricing.Cent || s2.Owner.Budget.Reserved != 0 || s2.Owner.Budget.Left != 0 ||
			s2.Key.Budget.Spent != 2*pricing.Cent || s2.Key.Tokens.Remaining != 9700 {
			t.Fatalf("after Done: %+v", s2)
		}
		if sp.calls.Load() != 2 {
			t.Fatalf("the usage records were read %d times, want once per subject", sp.calls.Load())
		}

		// The other way: the key's one slot refuses, and nothing of the
		// owner's is counted.
		s = quota.Subjects{Key: withLimits(key("k2"), quota.Limits{Concurrent: 1}),
			Owner: withBudget(withLimits(key("o2"), quota.Limits{RequestsPerMinute: 100, TokensPerMinute: 1000}), 100*dollar, quota.Total)}
		if _, ref := admit(t, q, s, quota.Ask{Rate: true, EstimatedTokens: 100, EstimatedCost: dollar}); ref != nil {
			t.Fatalf("refused: %s", ref.Message())
		}
		for range 3 {
			_, ref := admit(t, q, s, quota.Ask{Rate: true, EstimatedTokens: 100, EstimatedCost: dollar})
			if ref == nil || ref.Limit != quota.LimitConcurrent || ref.Subject != quota.KindKey {
				t.Fatalf("refusal %+v", ref)
			}
			h := http.Header{}
			ref.SetOpenAIHeaders(h)
			if h.Get("x-ratelimit-remaining-requests") != "99" || h.Get("x-ratelimit-remaining-tokens") != "900" {
				t.Fatalf("refusal headers %v", h)
			}
		}
		if st := status(t, q, s); st.Owner.Requests.Remaining != 99 || st.Owner.Tokens.Remaining != 900 || st.Owner.Budget.Reserved != dollar {
			t.Fatalf("the key's refusals counted against the owner: %+v", st.Owner)
		}
	})
}

// Done replaces the estimate with the actual tokens in the window the
// request was counted in, even once the clock has moved on.
func TestWindowCorrection(t *testing.T) {
	bothStates(t, func(t *testing.T, open opener) {
		c := newClock(t0)
		q := newQuota(t, open(t, 1)[0], nil, c, 0)
		s := quota.Subjects{Key: withLimits(key("k"), quota.Limits{TokensPerMinute: 1000})}
		ask := func(n int64) (*quota.Admission, *quota.Refusal) {
			return admit(t, q, s, quota.Ask{Rate: true, EstimatedTokens: n})
		}
		a1, _ := ask(800)
		if _, ref := ask(800); ref == nil {
			t.Fatal("1600 tokens admitted in a 1000 window")
		}
		c.Add(30 * time.Second) // 05:06:40, the same minute
		done(t, a1, quota.Actual{Tokens: 100})
		if got := status(t, q, s).Key.Tokens.Remaining; got != 900 {
			t.Fatalf("after the correction, %d left, want 900", got)
		}
		a2, ref := ask(800)
		if ref != nil {
			t.Fatalf("refused after the correction: %s", ref.Message())
		}
		// Done in the next minute reaches the window of 05:06.
		c.Add(30 * time.Second) // 05:07:10
		done(t, a2, quota.Actual{Tokens: 0})
		// The 05:06 window counts 100, weighing 100*50/60 = 83 now.
		if got := status(t, q, s).Key.Tokens.Remaining; got != 1000-83 {
			t.Fatalf("after a correction from the next minute, %d left, want 917", got)
		}
		// A request that used more than its estimate counts all of it,
		// past the limit if so: the limit then refuses until it drains.
		a3, _ := ask(10)
		done(t, a3, quota.Actual{Tokens: 1200})
		if got := status(t, q, s); got.Key.Tokens.Remaining != 0 {
			t.Fatalf("after an answer over the estimate: %+v", got.Key.Tokens)
		}
		if _, ref := ask(1); ref == nil || ref.RetryAfter <= 0 {
			t.Fatalf("admitted over the limit, or never retryable: %+v", ref)
		}
	})
}

// A request that never calls Done (its instance crashed) leaks nothing for
// ever: its slot expires after Hold, its reservation after Hold to twice
// Hold.
func TestCrashedRequestsExpire(t *testing.T) {
	bothStates(t, func(t *testing.T, open opener) {
		q := newQuota(t, open(t, 1)[0], nil, nil, time.Second)
		conc := quota.Subjects{Key: withLimits(key("c"), quota.Limits{Concurrent: 1})}
		budget := quota.Subjects{Key: withBudget(key("b"), dollar, quota.Total)}
		start := time.Now()
		admitted(t, q, conc, quota.Ask{Rate: true})
		admitted(t, q, budget, quota.Ask{EstimatedCost: 90 * pricing.Cent})
		if _, ref := admit(t, q, conc, quota.Ask{Rate: true}); ref == nil {
			t.Fatal("a second request in a 1-slot set")
		}
		if _, ref := admit(t, q, budget, quota.Ask{EstimatedCost: 20 * pricing.Cent}); ref == nil {
			t.Fatal("a reservation did not count")
		}
		time.Sleep(time.Until(start.Add(1100 * time.Millisecond)))
		if _, ref := admit(t, q, conc, quota.Ask{Rate: true}); ref != nil {
			t.Fatalf("the slot of a crashed request is still held after Hold: %s", ref.Message())
		}
		time.Sleep(time.Until(start.Add(2100 * time.Millisecond)))
		if st := status(t, q, budget); st.Key.Budget.Reserved != 0 || st.Key.Budget.Spent != 0 {
			t.Fatalf("the reservation of a crashed request is held after twice Hold: %+v", st.Key.Budget)
		}
		if _, ref := admit(t, q, budget, quota.Ask{EstimatedCost: 20 * pricing.Cent}); ref != nil {
			t.Fatalf("refused: %s", ref.Message())
		}
	})
}

// Done counts once; an unpriced request settles 0; a spent budget refuses
// even requests estimated at 0.
func TestDoneOnceAndUnpriced(t *testing.T) {
	bothStates(t, func(t *testing.T, open opener) {
		q := newQuota(t, open(t, 1)[0], nil, newClock(t0), 0)
		s := quota.Subjects{Key: withLimits(withBudget(key("k"), dollar, quota.Month), quota.Limits{Concurrent: 5})}
		adm, _ := admit(t, q, s, quota.Ask{Rate: true, EstimatedCost: 10 * pricing.Cent})
		for range 3 {
			done(t, adm, quota.Actual{Cost: 30 * pricing.Cent, Priced: true})
		}
		if b := status(t, q, s).Key.Budget; b.Spent != 30*pricing.Cent || b.Reserved != 0 || b.Left != 70*pricing.Cent {
			t.Fatalf("after Done three times: %+v", b)
		}
		adm, _ = admit(t, q, s, quota.Ask{Rate: true}) // unpriced: estimated at 0
		if b := status(t, q, s).Key.Budget; b.Reserved != pricing.Nanodollar {
			t.Fatalf("an unpriced request reserves %v, want one nano-dollar", b.Reserved)
		}
		done(t, adm, quota.Actual{Tokens: 500, Cost: 99 * pricing.Cent, Priced: false})
		if b := status(t, q, s).Key.Budget; b.Spent != 30*pricing.Cent || b.Reserved != 0 {
			t.Fatalf("an unpriced request spent: %+v", b)
		}
		adm, _ = admit(t, q, s, quota.Ask{EstimatedCost: 70 * pricing.Cent})
		done(t, adm, quota.Actual{Cost: 70 * pricing.Cent, Priced: true})
		if _, ref := admit(t, q, s, quota.Ask{Rate: true}); ref == nil || ref.Limit != quota.LimitBudget {
			t.Fatalf("a spent budget admitted a request estimated at 0: %+v", ref)
		}
		var nilAdm *quota.Admission
		if err := nilAdm.Done(bg, quota.Actual{}); err != nil {
			t.Fatal(err)
		}
	})
}

// Done settles with a context the client's departure cancelled, or past
// its deadline: the state is given one that is neither, and keeps the
// values of the request's.
func TestDoneAfterCancel(t *testing.T) {
	bothStates(t, func(t *testing.T, open opener) {
		seen := &ctxSeen{Atomic: open(t, 1)[0]}
		q, err := quota.New(quota.Config{State: seen})
		if err != nil {
			t.Fatal(err)
		}
		s := quota.Subjects{Key: withLimits(withBudget(key("k"), dollar, quota.Month), quota.Limits{Concurrent: 1})}
		type ctxKey struct{}
		for _, cancelled := range []func() context.Context{
			func() context.Context {
				ctx, cancel := context.WithCancel(context.WithValue(bg, ctxKey{}, "v"))
				cancel()
				return ctx
			},
			func() context.Context {
				ctx, cancel := context.WithDeadline(context.WithValue(bg, ctxKey{}, "v"), time.Now().Add(-time.Second))
				t.Cleanup(cancel)
				return ctx
			},
		} {
			adm, ref := admit(t, q, s, quota.Ask{Rate: true, EstimatedCost: 10 * pricing.Cent})
			if ref != nil {
				t.Fatalf("refused: %+v", ref)
			}
			if err := adm.Done(cancelled(), quota.Actual{Cost: 20 * pricing.Cent, Priced: true}); err != nil {
				t.Fatal(err)
			}
			if err, v := seen.ctx.Err(), seen.ctx.Value(ctxKey{}); err != nil || seen.ctx.Done() != nil || v != "v" {
				t.Fatalf("Done gave the state a context with error %v, value %v", err, v)
			}
			if _, ok := seen.ctx.Deadline(); ok {
				t.Fatal("Done gave the state a context with a deadline")
			}
		}
		if b := status(t, q, s).Key.Budget; b.Spent != 40*pricing.Cent || b.Reserved != 0 {
			t.Fatalf("after two requests settled with cancelled contexts: %+v", b)
		}
		if adm, ref := admit(t, q, s, quota.Ask{Rate: true}); ref != nil { // the slot was freed
			t.Fatalf("refused: %+v", ref)
		} else {
			done(t, adm, quota.Actual{})
		}
	})
}

// ctxSeen is a state that notes the context of the last Apply.
type ctxSeen struct {
	state.Atomic
	ctx context.Context
}

func (c *ctxSeen) Apply(ctx context.Context, scope string, ops []state.Op, res []state.Result) (bool, error) {
	c.ctx = ctx
	return c.Atomic.Apply(ctx, scope, ops, res)
}

// Batch lines (Rate false) count against budgets, not rate limits.
func TestBatchLinesBudgetOnly(t *testing.T) {
	q := newQuota(t, state.NewLocal(), nil, newClock(t0), 0)
	s := quota.Subjects{Key: withBudget(withLimits(key("k"), quota.Limits{RequestsPerMinute: 1, TokensPerMinute: 10, Concurrent: 1}), dollar, quota.Day)}
	for i := range 4 {
		adm, ref := admit(t, q, s, quota.Ask{EstimatedTokens: 100, EstimatedCost: 25 * pricing.Cent})
		if ref != nil {
			t.Fatalf("batch line %d refused: %s", i, ref.Message())
		}
		if adm.Headers() != (quota.RateLimits{}) {
			t.Fatalf("a batch line has rate-limit headers: %+v", adm.Headers())
		}
	}
	if _, ref := admit(t, q, s, quota.Ask{EstimatedCost: pricing.Cent}); ref == nil || ref.Limit != quota.LimitBudget {
		t.Fatalf("batch line over the budget: %+v", ref)
	}
	if st := status(t, q, s).Key; st.Requests.Remaining != 1 || st.Tokens.Remaining != 10 {
		t.Fatalf("batch lines counted in the rate windows: %+v", st)
	}
}

// Budget counters missing from the state are seeded from the usage
// records once per subject and period; instances seeding at once seed
// once.
func TestSeedingOnceAcrossInstances(t *testing.T) {
	bothStates(t, func(t *testing.T, open opener) {
		const instances, requests = 3, 30
		sp := &spender{spent: map[string]pricing.Money{"key:k": 40 * pricing.Cent, "owner:o": 2 * dollar}, delay: 20 * time.Millisecond}
		ss := open(t, instances)
		qs := make([]*quota.Quota, instances)
		for i := range qs {
			qs[i] = newQuota(t, ss[i], sp, newClock(t0), 0)
		}
		s := quota.Subjects{Key: withBudget(key("k"), 10*dollar, quota.Month), Owner: withBudget(key("o"), 100*dollar, quota.Month)}
		var wg sync.WaitGroup
		for g := range requests {
			wg.Add(1)
			go func() {
				defer wg.Done()
				adm, ref, err := qs[g%instances].Admit(bg, s, quota.Ask{EstimatedCost: pricing.Cent})
				if err != nil || ref != nil {
					t.Errorf("request %d: %v %v", g, ref, err)
					return
				}
				if err := adm.Done(bg, quota.Actual{Cost: pricing.Cent, Priced: true}); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		st := status(t, qs[0], s)
		if st.Key.Budget.Spent != 40*pricing.Cent+requests*pricing.Cent || st.Owner.Budget.Spent != 2*dollar+requests*pricing.Cent {
			t.Fatalf("spent %v and %v: seeded more than once?", st.Key.Budget.Spent, st.Owner.Budget.Spent)
		}
		if n := sp.calls.Load(); n < 2 || n > 2*instances {
			t.Fatalf("the usage records were read %d times for 2 subjects on %d instances", n, instances)
		}
		want := "key:k 2031-03-01..2031-04-01"
		if sp.asked[0] != want && sp.asked[1] != want {
			t.Fatalf("asked %v, want the month's range", sp.asked)
		}
	})
}

// A budget spent before a restart stays spent: the in-process state is
// seeded from the usage records the gateway wrote.
func TestSeedFromUsageAfterRestart(t *testing.T) {
	store := storagetest.NewMemory()
	s := quota.Subjects{Key: withBudget(key("k"), dollar, quota.Day), Owner: withBudget(key("o"), 2*dollar, quota.Total)}
	// serve admits and records one request as the gateway does.
	serve := func(q *quota.Quota, rec *usage.Recorder, cost pricing.Money) *quota.Refusal {
		adm, ref := admit(t, q, s, quota.Ask{EstimatedCost: cost})
		if ref != nil {
			return ref
		}
		rec.Add(usage.Bucket{KeyID: "k", Owner: "o", Model: "m", Day: usage.DayOf(adm.At())}, usage.Counts{Requests: 1, Cost: cost})
		done(t, adm, quota.Actual{Cost: cost, Priced: true})
		return nil
	}
	c := newClock(t0)
	start := func() (*quota.Quota, *usage.Recorder) {
		rec, err := usage.New(store, usage.Options{Instance: "gw"})
		if err != nil {
			t.Fatal(err)
		}
		return newQuota(t, state.NewLocal(), rec, c, 0), rec
	}
	q, rec := start()
	for range 3 {
		if ref := serve(q, rec, 30*pricing.Cent); ref != nil {
			t.Fatal(ref)
		}
	}
	if err := rec.Stop(bg); err != nil {
		t.Fatal(err)
	}
	// Restart: a new in-process state, the same storage.
	q, rec = start()
	if st := status(t, q, s); st.Key.Budget.Spent != 90*pricing.Cent || st.Owner.Budget.Spent != 90*pricing.Cent {
		t.Fatalf("after the restart: %+v", st)
	}
	if ref := serve(q, rec, 20*pricing.Cent); ref == nil || ref.Limit != quota.LimitBudget || ref.Subject != quota.KindKey {
		t.Fatalf("the day's budget was forgotten: %v", ref)
	}
	// The next day, the key's daily budget starts again; the owner's total
	// does not.
	c.Add(24 * time.Hour)
	for range 3 {
		if ref := serve(q, rec, 30*pricing.Cent); ref != nil {
			t.Fatal(ref)
		}
	}
	if err := rec.Stop(bg); err != nil {
		t.Fatal(err)
	}
	q, _ = start()
	if st := status(t, q, s); st.Key.Budget.Spent != 90*pricing.Cent || st.Owner.Budget.Spent != 180*pricing.Cent {
		t.Fatalf("after the second restart: %+v", st)
	}
}

// A budget found spent when seeded refuses without reading the usage
// records again for every request.
func TestSpentBudgetSeedsOnce(t *testing.T) {
	bothStates(t, func(t *testing.T, open opener) {
		sp := &spender{spent: map[string]pricing.Money{"key:k": 5 * dollar}}
		q := newQuota(t, open(t, 1)[0], sp, newClock(t0), 0)
		s := quota.Subjects{Key: withBudget(key("k"), 5*dollar, quota.Day)}
		for range 5 {
			if _, ref := admit(t, q, s, quota.Ask{EstimatedCost: pricing.Cent}); ref == nil || ref.Spent != 5*dollar {
				t.Fatalf("refusal %+v", ref)
			}
		}
		if n := sp.calls.Load(); n != 1 {
			t.Fatalf("read the usage records %d times", n)
		}
	})
}

// A new period, or a changed budget, starts a counter seeded again.
func TestPeriodsAndBudgetChanges(t *testing.T) {
	c := newClock(time.Date(2031, 3, 31, 23, 59, 0, 0, time.UTC))
	sp := &spender{spent: map[string]pricing.Money{}}
	q := newQuota(t, state.NewLocal(), sp, c, 0)
	s := quota.Subjects{Key: withBudget(key("k"), dollar, quota.Day)}
	adm, _ := admit(t, q, s, quota.Ask{EstimatedCost: 60 * pricing.Cent})
	c.Add(2 * time.Minute) // 2031-04-01 00:01
	// It settles in the period it was admitted in.
	done(t, adm, quota.Actual{Cost: 60 * pricing.Cent, Priced: true})
	if _, ref := admit(t, q, s, quota.Ask{EstimatedCost: 60 * pricing.Cent}); ref != nil {
		t.Fatalf("yesterday's spend counted today: %s", ref.Message())
	}
	s.Key.Budget = quota.Budget{Amount: 2 * dollar, Period: quota.Month}
	admitted(t, q, s, quota.Ask{EstimatedCost: pricing.Cent})
	s.Key.Budget.Amount = 3 * dollar
	admitted(t, q, s, quota.Ask{EstimatedCost: pricing.Cent})
	want := []string{"key:k 2031-03-31..2031-04-01", "key:k 2031-04-01..2031-04-02", "key:k 2031-04-01..2031-05-01", "key:k 2031-04-01..2031-05-01"}
	if strings.Join(sp.asked, ",") != strings.Join(want, ",") {
		t.Fatalf("seeded %v, want %v", sp.asked, want)
	}
}

func TestConfigAndBadInput(t *testing.T) {
	if _, err := quota.New(quota.Config{}); err == nil {
		t.Fatal("no state accepted")
	}
	if _, err := quota.New(quota.Config{State: state.NewLocal(), Hold: time.Millisecond}); err == nil {
		t.Fatal("a hold under a second accepted")
	}
	q := newQuota(t, state.NewLocal(), nil, nil, 0)
	if _, _, err := q.Admit(bg, quota.Subjects{}, quota.Ask{}); err == nil {
		t.Fatal("a request without a key")
	}
	if _, _, err := q.Admit(bg, quota.Subjects{Key: quota.Subject{ID: "k", Budget: quota.Budget{Amount: dollar}}}, quota.Ask{}); err == nil {
		t.Fatal("a budget without a period")
	}
	if p, err := quota.ParsePeriod("month"); err != nil || p != quota.Month {
		t.Fatal(p, err)
	}
	if _, err := quota.ParsePeriod("week"); err == nil {
		t.Fatal("a budget per week")
	}
	// No limits at all: admitted, nothing to settle.
	adm, _ := admit(t, q, quota.Subjects{Key: key("k")}, quota.Ask{Rate: true})
	done(t, adm, quota.Actual{Tokens: 5})
}

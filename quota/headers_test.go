package quota

import (
	"net/http"
	"net/textproto"
	"reflect"
	"strconv"
	"testing"
	"time"
)

// TestHeaderNamesCanonical: the names SetOpenAI and SetAnthropic write
// into the header map directly are those http.Header.Set would use.
func TestHeaderNamesCanonical(t *testing.T) {
	for _, names := range [][2][3]string{openAINames, anthropicNames} {
		for _, ns := range names {
			for _, n := range ns {
				if c := textproto.CanonicalMIMEHeaderKey(n); c != n {
					t.Errorf("%q is not canonical: %q", n, c)
				}
			}
		}
	}
}

// TestSetHeadersAsHeaderSet: the headers are those the plain http.Header.Set
// calls would set, for limits with and without tokens, resets of every
// size, and on a header holding older values.
func TestSetHeadersAsHeaderSet(t *testing.T) {
	now := time.Date(2031, 3, 4, 5, 6, 10, 500_000_000, time.UTC)
	want := func(l RateLimits, anthropic bool) http.Header {
		h := http.Header{"X-Ratelimit-Limit-Requests": {"old"}, "Anthropic-Ratelimit-Tokens-Reset": {"old"}, "Other": {"kept"}}
		for _, r := range []struct {
			what string
			r    RateLimit
		}{{"requests", l.Requests}, {"tokens", l.Tokens}} {
			if r.r.Limit <= 0 {
				continue
			}
			if !anthropic {
				h.Set("x-ratelimit-limit-"+r.what, strconv.FormatInt(r.r.Limit, 10))
				h.Set("x-ratelimit-remaining-"+r.what, strconv.FormatInt(r.r.Remaining, 10))
				h.Set("x-ratelimit-reset-"+r.what, r.r.Reset.Round(time.Millisecond).String())
				continue
			}
			h.Set("anthropic-ratelimit-"+r.what+"-limit", strconv.FormatInt(r.r.Limit, 10))
			h.Set("anthropic-ratelimit-"+r.what+"-remaining", strconv.FormatInt(r.r.Remaining, 10))
			at := now.Add(r.r.Reset).UTC()
			if tr := at.Truncate(time.Second); tr.Before(at) {
				at = tr.Add(time.Second)
			}
			h.Set("anthropic-ratelimit-"+r.what+"-reset", at.Format(time.RFC3339))
		}
		return h
	}
	resets := []time.Duration{0, time.Nanosecond, 499 * time.Microsecond, 500 * time.Microsecond, 7 * time.Millisecond,
		999*time.Millisecond + 600*time.Microsecond, time.Second, 1500 * time.Millisecond, 59*time.Second + 999*time.Millisecond,
		time.Minute, 110 * time.Second, 36*time.Hour + 61*time.Second + 5*time.Millisecond}
	for _, reset := range resets {
		for _, l := range []RateLimits{
			{},
			{Requests: RateLimit{Limit: 2, Remaining: 1, Reset: reset}},
			{Tokens: RateLimit{Limit: 100_000_000_000, Remaining: 99_999_999_000, Reset: reset}},
			{Requests: RateLimit{Limit: 100_000_000, Remaining: 0, Reset: reset}, Tokens: RateLimit{Limit: 1000, Remaining: -5, Reset: 2 * reset}},
		} {
			for _, anthropic := range []bool{false, true} {
				got := http.Header{"X-Ratelimit-Limit-Requests": {"old"}, "Anthropic-Ratelimit-Tokens-Reset": {"old"}, "Other": {"kept"}}
				if anthropic {
					l.SetAnthropic(got, now)
				} else {
					l.SetOpenAI(got)
				}
				if w := want(l, anthropic); !reflect.DeepEqual(got, w) {
					t.Errorf("%+v (anthropic %v):\n got %v\nwant %v", l, anthropic, got, w)
				}
				// Each value is its own slice: appending to one leaves
				// the others as they are.
				for k := range got {
					got[k] = append(got[k], "more")
				}
				for k, v := range want(l, anthropic) {
					if g := got[k]; len(g) != len(v)+1 || !reflect.DeepEqual(g[:len(v)], v) {
						t.Errorf("after appending: %s %q, want %q and more", k, g, v)
					}
				}
			}
		}
	}
}

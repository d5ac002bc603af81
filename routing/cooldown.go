package routing

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxHeaderCooldown bounds what a header can say before the configured
// cap applies, so that no arithmetic on it overflows.
const maxHeaderCooldown = 365 * 24 * time.Hour

// Cooldown reads how long the provider asks to be left alone from an
// answer's headers, at now, and whether any header said so. In order of
// preference, as the OpenAI and Anthropic SDKs read them:
//
//   - retry-after-ms: milliseconds, fractions allowed;
//   - retry-after: seconds (fractions allowed), or an HTTP date;
//   - the rate-limit reset headers: OpenAI's x-ratelimit-reset-requests and
//     x-ratelimit-reset-tokens (durations such as "1s", "6m0s", "20ms"; a
//     bare number is seconds) and Anthropic's
//     anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-reset
//     (RFC 3339 times). The limits whose remaining count is 0 are the
//     ones that ran out: the latest of their resets is the answer. When
//     none says 0, the earliest reset given is, so that a limit that did
//     not run out cannot keep the target away long.
//
// A date or reset in the past is a cool-down of 0 (come back now).
// Negative, unreadable or infinite values are ignored; values beyond a
// year are a year. The caller caps the result (CooldownConfig.Max).
func Cooldown(h http.Header, now time.Time) (time.Duration, bool) {
	if v, ok := header(h, "Retry-After-Ms"); ok {
		if d, ok := number(v, float64(time.Millisecond)); ok {
			return d, true
		}
	}
	if v, ok := header(h, "Retry-After"); ok {
		if d, ok := number(v, float64(time.Second)); ok {
			return d, true
		}
		if at, err := http.ParseTime(v); err == nil {
			return until(at, now), true
		}
	}
	return resets(h, now)
}

// header returns the first value of a header by its canonical name.
func header(h http.Header, name string) (string, bool) {
	v := h[name]
	if len(v) == 0 {
		return "", false
	}
	return strings.TrimSpace(v[0]), true
}

// number reads a non-negative decimal number of units.
func number(s string, unit float64) (time.Duration, bool) {
	if s == "" || !(s[0] >= '0' && s[0] <= '9' || s[0] == '.') {
		return 0, false // not a number; ParseFloat would take "Inf", "0x1p3"
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || f < 0 {
		return 0, false
	}
	return clampDuration(f * unit), true
}

func clampDuration(ns float64) time.Duration {
	if ns >= float64(maxHeaderCooldown) {
		return maxHeaderCooldown
	}
	return time.Duration(ns)
}

// until is the time from now to at, 0 if at has passed.
func until(at, now time.Time) time.Duration {
	d := at.Sub(now)
	switch {
	case d < 0:
		return 0
	case d > maxHeaderCooldown:
		return maxHeaderCooldown
	}
	return d
}

// resetHeader is one rate limit's remaining count and reset headers.
type resetHeader struct {
	remaining, reset string
	date             bool // RFC 3339 (Anthropic's); else a duration (OpenAI's)
}

var resetHeaders = [...]resetHeader{
	{"X-Ratelimit-Remaining-Requests", "X-Ratelimit-Reset-Requests", false},
	{"X-Ratelimit-Remaining-Tokens", "X-Ratelimit-Reset-Tokens", false},
	{"Anthropic-Ratelimit-Requests-Remaining", "Anthropic-Ratelimit-Requests-Reset", true},
	{"Anthropic-Ratelimit-Tokens-Remaining", "Anthropic-Ratelimit-Tokens-Reset", true},
	{"Anthropic-Ratelimit-Input-Tokens-Remaining", "Anthropic-Ratelimit-Input-Tokens-Reset", true},
	{"Anthropic-Ratelimit-Output-Tokens-Remaining", "Anthropic-Ratelimit-Output-Tokens-Reset", true},
}

// resets reads the rate-limit reset headers (see Cooldown).
func resets(h http.Header, now time.Time) (time.Duration, bool) {
	var spent, earliest time.Duration
	var anySpent, anyReset bool
	for _, rh := range resetHeaders {
		v, ok := header(h, rh.reset)
		if !ok {
			continue
		}
		var d time.Duration
		if rh.date {
			at, err := time.Parse(time.RFC3339, v)
			if err != nil {
				continue
			}
			d = until(at, now)
		} else if d, ok = resetDuration(v); !ok {
			continue
		}
		if rem, _ := header(h, rh.remaining); rem == "0" {
			spent, anySpent = max(spent, d), true
		}
		if !anyReset || d < earliest {
			earliest, anyReset = d, true
		}
	}
	if anySpent {
		return spent, true
	}
	return earliest, anyReset
}

// resetDuration reads an OpenAI reset value: a Go duration such as "1s",
// "6m0s" or "1m30.5s", or a bare number of seconds.
func resetDuration(s string) (time.Duration, bool) {
	if d, ok := number(s, float64(time.Second)); ok {
		return d, true
	}
	if s == "" || s[0] == '-' || s[0] == '+' {
		return 0, false
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, false
	}
	return min(d, maxHeaderCooldown), true
}

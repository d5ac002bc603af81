package keys

import (
	"context"
	"fmt"
	"regexp"
	"strings"
)

// Limits are a key's own rate limits; a zero field is "no limit of this
// kind" for the key (its owner's limits still apply).
type Limits struct {
	// RequestsPerMinute bounds the requests the key sends in any minute.
	RequestsPerMinute int64 `json:"requests_per_minute,omitempty"`
	// TokensPerMinute bounds the tokens (input and output) of any minute.
	TokensPerMinute int64 `json:"tokens_per_minute,omitempty"`
	// ConcurrentRequests bounds the key's requests in flight at once.
	ConcurrentRequests int64 `json:"concurrent_requests,omitempty"`
}

// Budget is a key's spending budget: USD dollars (a decimal string, at most
// six places: "25", "0.50") per Period.
type Budget struct {
	USD string `json:"usd"`
	// Period is "day" or "month" (UTC calendar), or "total".
	Period string `json:"period"`
}

// Policy is what a key may use: its limits and budget. A nil field is
// "the gateway's default for keys".
type Policy struct {
	Limits *Limits `json:"limits,omitempty"`
	Budget *Budget `json:"budget,omitempty"`
}

var usdPattern = regexp.MustCompile(`^(0|[1-9][0-9]{0,11})(\.[0-9]{1,6})?$`)

// ValidatePolicy checks limits and a budget; a refusal is an
// *InvalidError naming the field.
func ValidatePolicy(p Policy) error {
	if l := p.Limits; l != nil {
		for _, f := range []struct {
			name string
			v    int64
		}{{"limits.requests_per_minute", l.RequestsPerMinute}, {"limits.tokens_per_minute", l.TokensPerMinute},
			{"limits.concurrent_requests", l.ConcurrentRequests}} {
			if f.v < 0 {
				return &InvalidError{Param: f.name, Message: f.name + " must not be negative"}
			}
		}
	}
	if b := p.Budget; b != nil {
		if !usdPattern.MatchString(b.USD) {
			return &InvalidError{Param: "budget.usd", Message: fmt.Sprintf("budget.usd %q is not an amount of dollars such as 25 or 0.50", b.USD)}
		}
		if strings.Trim(b.USD, "0.") == "" {
			return &InvalidError{Param: "budget.usd", Message: "budget.usd must be more than 0 (to stop a key, delete it)"}
		}
		switch b.Period {
		case "day", "month", "total":
		default:
			return &InvalidError{Param: "budget.period", Message: "budget.period must be day, month or total"}
		}
	}
	return nil
}

// SetPolicy replaces the limits and budget of the key id (nil fields: the
// defaults) in storage and in the index, and tells Changed. ErrNotFound if
// there is no such key; an *InvalidError for a policy that is refused.
func (m *Manager) SetPolicy(ctx context.Context, id string, p Policy) (Key, error) {
	if !validID(id) {
		return Key{}, ErrNotFound
	}
	if err := ValidatePolicy(p); err != nil {
		return Key{}, err
	}
	var k Key
	var digest [32]byte
	err := m.withLock(ctx, id, func() error {
		var err error
		if k, digest, err = m.load(ctx, id); err != nil {
			return err
		}
		k.Limits, k.Budget = cloneLimits(p.Limits), cloneBudget(p.Budget)
		return m.store(ctx, k, digest)
	})
	if err != nil {
		return Key{}, err
	}
	m.update(change{op: opUpdate, entry: &entry{key: k.clone(), digest: digest}})
	m.changed(id)
	return m.withUse(k), nil
}

func cloneLimits(l *Limits) *Limits {
	if l == nil {
		return nil
	}
	c := *l
	return &c
}

func cloneBudget(b *Budget) *Budget {
	if b == nil {
		return nil
	}
	c := *b
	return &c
}

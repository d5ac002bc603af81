// Package usage is the gateway's exact, durable usage accounting: requests,
// tokens and cost per key × owner × model × provider × UTC day.
//
// The request path calls Recorder.Add, which adds to totals in memory (no
// I/O). A Recorder flushes its totals to the storage (Caddy's: the file
// system, or Redis) every FlushInterval and when it stops, each instance
// into records of its own, one per day:
//
//	<prefix>/<day>/<instance>.json
//
// A flush reads the instance's record of the day, adds what was counted
// since the last flush and writes it back, under the storage's lock of that
// record. So nothing is counted twice across instances (each writes only
// its own record, and a query sums them), a restart of an instance (same
// instance id) continues its totals instead of overwriting them, and two
// recorders with one instance id (the old and the new configuration during
// a reload) add up instead of overwriting each other. A crash loses what
// was counted since the last flush: at most one FlushInterval of usage
// (longer only while the storage refuses writes; the totals are kept in
// memory and written when it takes them again).
//
// Query sums every instance's records over a range of days, grouped by any
// of key, owner, model, provider and day; Spent is the cost of one key or
// owner, which budgets are seeded from. This package imports nothing of
// Caddy.
package usage

import (
	"fmt"
	"strings"
	"time"

	"github.com/modelgate/modelgate/pricing"
)

// Day is a UTC calendar day, counted from 1970-01-01 (day 0).
type Day int32

// DayOf returns the UTC day of t.
func DayOf(t time.Time) Day {
	s := t.Unix()
	d := s / 86400
	if s%86400 < 0 {
		d--
	}
	return Day(d)
}

// Time returns the start of d: midnight UTC.
func (d Day) Time() time.Time { return time.Unix(int64(d)*86400, 0).UTC() }

// String writes d as 2006-01-02.
func (d Day) String() string { return d.Time().Format(time.DateOnly) }

// ParseDay reads a day written as 2006-01-02.
func ParseDay(s string) (Day, error) {
	t, err := time.Parse(time.DateOnly, s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a day such as 2026-07-24", s)
	}
	return DayOf(t), nil
}

// Bucket is what usage is counted by.
type Bucket struct {
	KeyID   string
	KeyName string
	Owner   string
	// Model is the model as the client named it.
	Model string
	// Provider is the configured name of the provider that served the
	// request; ProviderType its type (openai, anthropic, …).
	Provider     string
	ProviderType string
	// Day is the UTC day the request was admitted on (so that the budget
	// period it reserved in and its usage agree; see quota.Admission.At).
	Day Day
}

// Counts are the usage of a bucket.
type Counts struct {
	Requests int64
	// InputTokens are the prompt tokens, cached and cache-write tokens
	// included (the hub's usage.prompt_tokens).
	InputTokens int64
	// CachedTokens are the prompt tokens read from the provider's cache.
	CachedTokens int64
	// CacheWriteTokens are the prompt tokens written to the provider's
	// cache.
	CacheWriteTokens int64
	// OutputTokens are the answer's tokens, reasoning tokens included.
	OutputTokens int64
	// ReasoningTokens are the reasoning tokens among OutputTokens.
	ReasoningTokens int64
	// Searches are rerank searches.
	Searches int64
	// EmbeddingTokens are the tokens sent to embedding models.
	EmbeddingTokens int64
	// CacheHits are the Requests answered from the gateway's response
	// cache, without a provider call; their tokens (those the stored
	// answer used) are counted above, their cost is the cache_hit price.
	CacheHits int64
	// Cost is the cost of the priced requests.
	Cost pricing.Money
	// Unpriced counts the requests whose model had no price: their
	// tokens are counted above, their cost is not in Cost. A report with
	// unpriced requests has a cost that is a lower bound, never a $0 that
	// looks true.
	Unpriced int64
}

// Add adds o to c.
func (c *Counts) Add(o Counts) {
	c.Requests += o.Requests
	c.InputTokens += o.InputTokens
	c.CachedTokens += o.CachedTokens
	c.CacheWriteTokens += o.CacheWriteTokens
	c.OutputTokens += o.OutputTokens
	c.ReasoningTokens += o.ReasoningTokens
	c.Searches += o.Searches
	c.EmbeddingTokens += o.EmbeddingTokens
	c.CacheHits += o.CacheHits
	c.Cost += o.Cost
	c.Unpriced += o.Unpriced
}

// Dimension is what a query groups by.
type Dimension string

// The dimensions of a query.
const (
	ByKey      Dimension = "key"
	ByOwner    Dimension = "owner"
	ByModel    Dimension = "model"
	ByProvider Dimension = "provider"
	ByDay      Dimension = "day"
)

// ParseDimensions reads a comma-separated list of dimensions, as the admin
// API's group_by takes them: "key,day". An empty string is no grouping.
func ParseDimensions(s string) ([]Dimension, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []Dimension
	for f := range strings.SplitSeq(s, ",") {
		d := Dimension(strings.TrimSpace(f))
		switch d {
		case ByKey, ByOwner, ByModel, ByProvider, ByDay:
		default:
			return nil, fmt.Errorf("cannot group usage by %q: use key, owner, model, provider or day", d)
		}
		out = append(out, d)
	}
	return out, nil
}

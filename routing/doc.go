// Package routing decides, for each request to a model alias, which of the
// alias's targets (a provider and a model) to try and in what order, and
// keeps failing targets out of rotation so that a dead or rate-limited
// provider costs a request nothing:
//
//   - a circuit breaker per target, opened by consecutive failures or by
//     an error rate over a sliding window, half-open after a while to let a
//     bounded number of trial requests through, closed by their success;
//   - cool-downs the providers ask for (Retry-After, retry-after-ms,
//     OpenAI's x-ratelimit-reset-* and Anthropic's
//     anthropic-ratelimit-*-reset on a 429 or 503), capped;
//   - policies: ordered, weighted, lowest latency (an exponentially
//     weighted average, power of two random choices) and lowest cost,
//     each within priority groups;
//   - a retry budget per alias, so that failures cannot multiply the load;
//   - health snapshots for an admin endpoint and metrics.
//
// A host asks a Router for a Plan per request, takes targets from it with
// Next, tries each and reports what became of it with Report; Close ends
// the plan:
//
//	p, ok := router.Plan(alias, stream)
//	defer p.Close()
//	for t, ok := p.Next(); ok; t, ok = p.Next() {
//		res := try(t) // the host's upstream call, bounded by t's timeouts
//		p.Report(res)
//		if !res.Retry() {
//			break
//		}
//	}
//	// p.Stop() says why no further target was offered.
//
// Plan, Next, Report and Close take no lock on the request path and
// allocate nothing; the request path never waits for the shared state.
// Share links a Router to the other instances of a cluster: breaker
// openings and closings and cool-downs are published, and kept as
// deadlines in the shared state for instances that start later or missed
// a message, while each instance keeps its own counts. The reasons are in
// docs/design/routing.md.
//
// This package imports nothing of Caddy.
package routing

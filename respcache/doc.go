// Package respcache is the gateway's response cache: an answer the gateway
// has given is kept for a while, and an exact repeat of its request, by
// the same account, is answered from it without a provider call.
//
// The host computes a request's Key (KeyOf: the account, the API, the
// route, and the request body canonicalised, so that key order and
// whitespace do not matter, without the members that only shape the
// transport), reads the client's Cache-Control (PolicyOf), and then:
//
//   - Lookup: a hit is the stored answer (Entry: its body in the client's
//     API, its usage as data, who answered and when). A streamed request
//     gets it as server-sent events in its API (Replay).
//   - on a miss, after the provider answered in full, Store: the answer
//     body (a streamed one rebuilt by a Collector from the events the
//     client got) and its usage. Errors and broken streams are never
//     stored.
//
// Entries live in memory on one machine (Memory: least recently used
// first out, bounded by entries and bytes, each for the configured ttl)
// or on the shared state (Shared, over state.Values: Redis for a cluster).
//
// The cache sits after authentication and admission in the host's
// request path: a hit is still authenticated, admitted against limits and
// budgets, guarded and recorded. This package imports nothing of Caddy.
package respcache

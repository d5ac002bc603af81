package respcache

import (
	"net/http"
	"strings"
)

// HeaderName is the response header the host sets on every answer of a
// cacheable API while the cache is on: StatusHit, StatusMiss or
// StatusBypass.
const HeaderName = "X-Modelgate-Cache"

// The values of HeaderName.
const (
	StatusHit    = "hit"    // answered from the cache
	StatusMiss   = "miss"   // looked up, not found: the provider answered
	StatusBypass = "bypass" // not looked up: the client said no-cache or no-store, or the request is not cacheable
)

// Policy is what a request lets the cache do with it.
type Policy struct {
	// Lookup: the request may be answered from the cache.
	Lookup bool
	// Store: its answer may be stored.
	Store bool
}

// PolicyOf reads the client's Cache-Control request header, as HTTP
// caches do: no-cache asks for a fresh answer (not looked up; the fresh
// answer is stored for the next request), no-store for nothing to be
// kept (neither looked up nor stored). Directives are case-insensitive,
// in any number of headers; others (max-age, …) change nothing.
func PolicyOf(h http.Header) Policy {
	p := Policy{Lookup: true, Store: true}
	for _, line := range h.Values("Cache-Control") {
		for d := range strings.SplitSeq(line, ",") {
			name, _, _ := strings.Cut(d, "=")
			switch strings.ToLower(strings.TrimSpace(name)) {
			case "no-cache":
				p.Lookup = false
			case "no-store":
				p.Lookup, p.Store = false, false
			}
		}
	}
	return p
}

// Status is the value of HeaderName for a request with policy p that the
// cache looked up (or not) with the outcome hit.
func (p Policy) Status(hit bool) string {
	switch {
	case !p.Lookup:
		return StatusBypass
	case hit:
		return StatusHit
	}
	return StatusMiss
}

package gateway

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/modelgate/modelgate/accounts"
	"github.com/modelgate/modelgate/keys"
)

// This file handles exposed managed keys: reported by a code host's
// secret scanning (modelgate_secret_scanning), or found by the gateway
// itself where a key must never be — in a request's content (a prompt, a
// tool result, a batch line: it is now in a provider's logs) or in a URL's
// query string. Either way the key is marked exposed with where it was
// seen, key_exposed is emitted, and the reporter (the secret-scanning
// handler, when one is configured) tells the owner and applies its
// auto_revoke.

// ExposureReporter tells the owner of a newly exposed key and applies its
// policy (auto_revoke). modelgate_secret_scanning registers itself with the
// gateway, so that exposures the gateway finds are told as partner alerts
// are (with several such handlers, the one provisioned last).
type ExposureReporter interface {
	// ReportExposure is called once per key, at its first exposure; it
	// says whether it revoked (deleted) the key.
	ReportExposure(ctx context.Context, k keys.Key, e keys.Exposure) (revoked bool, err error)
}

// SetExposureReporter makes r the reporter of exposed keys.
func (g *Gateway) SetExposureReporter(r ExposureReporter) { g.reporter.Store(&r) }

// Exposed marks the managed key with this secret's digest exposed, as e
// says where. found is false when no managed key has that digest. The
// first exposure of a key is logged, emitted as key_exposed and handed to
// r (nil: the app's reporter, registered by a secret-scanning handler);
// later ones change nothing.
func (g *Gateway) Exposed(ctx context.Context, digest [32]byte, e keys.Exposure, r ExposureReporter) (found bool, err error) {
	if g.managed == nil {
		return false, nil
	}
	before, found, err := g.managed.FindByDigest(ctx, digest)
	if err != nil || !found {
		return false, err
	}
	k, first, err := g.managed.MarkExposed(ctx, before.ID, e)
	if errors.Is(err, keys.ErrNotFound) {
		return false, nil // deleted meanwhile
	}
	if err != nil || !first {
		return true, err
	}
	if g.accounts != nil {
		g.accounts.KeyExposed(ctx, accounts.Scanner(e.Reporter), before, k)
	}
	revoked := false
	if r == nil {
		if p := g.reporter.Load(); p != nil {
			r = *p
		}
	}
	if r != nil {
		if revoked, err = r.ReportExposure(ctx, k, e); err != nil {
			return true, err
		}
	}
	g.log.Warn("API key exposed", zap.String("key_id", k.ID), zap.String("name", k.Name),
		zap.String("owner", k.Owner), zap.String("hint", k.Hint), zap.String("reporter", e.Reporter),
		zap.String("url", e.URL), zap.String("source", e.Source), zap.Bool("revoked", revoked))
	g.obs.KeyExposed(k, e, revoked)
	return true, nil
}

// keyPattern is how every managed key starts.
var keyPattern = []byte(keys.Prefix)

// findKeys returns the well-formed managed keys (mgk_, 36 base62
// characters, a matching checksum, not inside a longer token) in b.
func findKeys(b []byte) []string {
	var found []string
	eachKey(b, func(s string) { found = append(found, s) })
	return found
}

// eachKey calls f with each well-formed managed key in b, in order. It
// costs one search for "mgk_" when there is none, which is nearly always.
func eachKey(b []byte, f func(string)) {
	for i := 0; ; {
		j := bytes.Index(b[i:], keyPattern)
		if j < 0 {
			return
		}
		start := i + j
		end := start + keys.Length
		i = start + len(keyPattern)
		if end > len(b) || start > 0 && isBase62(b[start-1]) || end < len(b) && isBase62(b[end]) {
			continue
		}
		if s := string(b[start:end]); keys.WellFormed(s) {
			f(s)
		}
	}
}

func isBase62(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_'
}

// maxExposureLookups is how many of the distinct keys found in one
// request that no key in memory has are looked up in storage (keys created
// on another instance since this one last refreshed are found there).
// Anyone can write well-formed keys, as the checksum is public: a request
// full of them must cost no more than this many reads. Keys the in-memory
// index knows are checked whatever their number.
const maxExposureLookups = 16

// ScanQuery looks for managed keys in a request's URL query (path names
// the request, key who sent it), and reports each one found, as Serve does
// those in a call's body.
func (g *Gateway) ScanQuery(method, path, query string, key *Key) {
	if strings.Contains(query, keys.Prefix) {
		g.scanExposure(method+" "+path, query, nil, key)
	}
}

// scanExposure looks for managed keys in a request's content and URL
// query and reports each one found. It never holds the request up: finding
// none costs a search for "mgk_" (benchmarked); each distinct key found is
// checked against the in-memory index at once, and those to mark exposed
// or to look up in storage (at most maxExposureLookups of them) go to the
// gateway's exposure queue. where names the request ("POST
// /v1/chat/completions", or a batch line), key who sent it.
func (g *Gateway) scanExposure(where, query string, body []byte, key *Key) {
	if g.managed == nil {
		return
	}
	s := exposureScan{managed: g.managed}
	s.find(body, "the request content")
	if strings.Contains(query, keys.Prefix) {
		s.find([]byte(query), "the URL query")
	}
	if s.capped > 0 {
		g.obs.ExposureSkipped("request_cap", s.capped)
	}
	if len(s.checks) == 0 {
		return
	}
	by := sender(key)
	for i := range s.checks {
		s.checks[i].e.Source += " of " + where + ", sent by " + by
	}
	g.exposures.add(s.checks)
}

// exposureScan gathers the checks of one request's keys.
type exposureScan struct {
	managed *keys.Manager
	seen    map[[32]byte]struct{} // the digests checked
	lookups int                   // checks of keys not in memory
	capped  int                   // keys not looked up, past maxExposureLookups
	checks  []exposureCheck
}

// find adds the checks of the keys in b, found in source: each distinct
// key once. Past maxExposureLookups the keys not in memory are counted,
// not remembered, so a body full of them costs no memory but the count.
func (s *exposureScan) find(b []byte, source string) {
	eachKey(b, func(secret string) {
		d := keys.Digest(secret)
		if _, dup := s.seen[d]; dup {
			return
		}
		k, known := s.managed.Known(d)
		switch {
		case known && k.ExposedAt != nil:
			return // marked already: nothing to do
		case !known && s.lookups == maxExposureLookups:
			s.capped++
			return
		case !known:
			s.lookups++
		}
		if s.seen == nil {
			s.seen = make(map[[32]byte]struct{})
		}
		s.seen[d] = struct{}{}
		s.checks = append(s.checks, exposureCheck{digest: d, known: known,
			e: keys.Exposure{Reporter: "modelgate", Type: "managed_key", Source: source}})
	})
}

// checkExposure marks the key of c exposed, if it is a managed key.
func (g *Gateway) checkExposure(c exposureCheck) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := g.Exposed(ctx, c.digest, c.e, nil); err != nil {
		g.log.Error("marking a key found in a request exposed", zap.String("source", c.e.Source), zap.Error(err))
	}
}

// WaitExposures returns once the checks of keys found in requests so far
// have run (tests; a host shutting down).
func (g *Gateway) WaitExposures() { g.exposures.wait() }

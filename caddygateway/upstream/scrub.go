package upstream

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
)

// Keeping a provider's credentials out of what the gateway passes on.
//
// A provider may quote the credential it was sent — in an error message
// ("Incorrect API key provided: sk-…"), a header, an event of a stream that
// fails — and whatever the gateway makes of its answer goes to the client,
// to the logs (the dispatcher's WARN lines, reverse_proxy's debug lines) and
// into batch error files. So the provider's transport, which every request
// to a provider and every answer passes through, scrubs each answer of the
// credentials (authTransport.RoundTrip): its headers before reverse_proxy
// reads them, its body as reverse_proxy reads it, and the text of a failed
// round trip's error. Everything downstream — the error mapping of any
// status, clientHeaders, streams translated or passed through, the batch
// runner — sees the scrubbed answer only.
//
// The credentials are the provider's configured secrets (api_key, and what
// its type declares in ProviderType.Secrets: an Entra ID client secret, an
// AWS secret key and session token) and those the request carried when it
// left (credentialHeaders): the bearer tokens the gateway fetched (Google,
// Entra ID), the session token of AWS credentials from the environment.
// Each is replaced by REDACTED where it appears literally. A secret shorter
// than minSecret is not looked for: it is no secret worth the name, and
// replacing it would garble the text around it.

// minSecret is the length below which a credential is not scrubbed. It is
// not less than len(redaction), so a replacement never lengthens the text
// (scrub works in place).
const minSecret = 8

// redaction replaces a credential.
const redaction = "REDACTED"

// credentialHeaders are the request headers that carry a provider
// credential, in canonical form. The scheme of an Authorization header is
// not part of the credential; a signature (AWS's) is not a credential.
var credentialHeaders = [...]string{"Authorization", "Proxy-Authorization", "X-Api-Key", "Api-Key", "X-Goog-Api-Key", "X-Amz-Security-Token"}

// scrubber replaces a set of secrets. The zero value, and nil, replace
// nothing. A scrubber is not modified once made: it is safe for concurrent
// use.
type scrubber struct {
	secrets  []*finder // longest first, none shorter than minSecret, no two alike
	text     []string  // the same, as strings
	inSecret [256]bool // the bytes the secrets are made of
}

// newScrubber returns a scrubber of the secrets long enough to be one.
func newScrubber(secrets ...string) *scrubber {
	s := new(scrubber)
	for _, v := range secrets {
		if len(v) >= minSecret && !slices.Contains(s.text, v) {
			s.text = append(s.text, v)
		}
	}
	// Longest first: a secret that holds another is replaced whole.
	slices.SortStableFunc(s.text, func(a, b string) int { return len(b) - len(a) })
	for _, v := range s.text {
		s.secrets = append(s.secrets, newFinder(v))
		for i := range len(v) {
			s.inSecret[v[i]] = true
		}
	}
	return s
}

// finder finds a secret in text with Horspool's algorithm: where the
// byte under the secret's last one does not end the secret, the search
// moves on by as much as that byte allows, most often by nearly the whole
// secret, where bytes.Index would try every occurrence of the key's
// first byte (an "s" in base64 every 64 bytes or so).
type finder struct {
	pattern []byte
	skip    [256]int32 // how far the search moves on after each byte
}

// newFinder returns the finder of secret, which is not empty.
func newFinder(secret string) *finder {
	f := &finder{pattern: []byte(secret)}
	m := len(f.pattern)
	for i := range f.skip {
		f.skip[i] = int32(m)
	}
	for i, c := range f.pattern[:m-1] {
		f.skip[c] = int32(m - 1 - i)
	}
	return f
}

// index returns the index of the first occurrence of the secret in b, or
// -1.
func (f *finder) index(b []byte) int {
	m := len(f.pattern)
	last := f.pattern[m-1]
	for i := m - 1; i < len(b); {
		c := b[i]
		if c == last && bytes.Equal(b[i-m+1:i+1], f.pattern) {
			return i - m + 1
		}
		i += int(f.skip[c])
	}
	return -1
}

// has reports whether v is one of s's secrets.
func (s *scrubber) has(v string) bool {
	return s != nil && slices.Contains(s.text, v)
}

// empty reports whether s replaces nothing.
func (s *scrubber) empty() bool { return s == nil || len(s.secrets) == 0 }

// scrub replaces the secrets in b, in place, and returns what is left of
// b (never longer).
func (s *scrubber) scrub(b []byte) []byte {
	if s == nil {
		return b
	}
	for _, secret := range s.secrets {
		b = replaceAll(b, secret)
	}
	return b
}

// replaceAll replaces every secret in b with redaction, in place: the
// replacement is never longer than the secret, so what is written never
// overtakes what is still to read.
func replaceAll(b []byte, secret *finder) []byte {
	i := secret.index(b)
	if i < 0 {
		return b
	}
	w, r := i, i
	for {
		w += copy(b[w:], redaction)
		r += len(secret.pattern)
		j := secret.index(b[r:])
		if j < 0 {
			w += copy(b[w:], b[r:])
			return b[:w]
		}
		w += copy(b[w:], b[r:r+j])
		r += j
	}
}

// scrubString returns v without the secrets.
func (s *scrubber) scrubString(v string) string {
	if s.empty() || !s.within(v) {
		return v
	}
	return string(s.scrub([]byte(v)))
}

// within reports whether v holds a secret.
func (s *scrubber) within(v string) bool {
	for _, secret := range s.text {
		if strings.Contains(v, secret) {
			return true
		}
	}
	return false
}

// header scrubs the values of h in place.
func (s *scrubber) header(h http.Header) {
	if s.empty() {
		return
	}
	for _, vv := range h {
		for i, v := range vv {
			vv[i] = s.scrubString(v)
		}
	}
}

// cut returns where the bytes that must wait for the next ones begin in
// b, what was read and not yet scrubbed: len(b) when none must. They are
// the longest end of b that begins a secret, which the next bytes may
// complete, and any secret that ends among them: a longer one the next
// bytes complete may overlap it, and secrets are replaced longest first.
// Replacing in b[:cut], and later in the rest with the bytes that follow,
// is replacing in the whole.
func (s *scrubber) cut(b []byte) int {
	c := len(b) - s.heldBack(b)
	for moved := c < len(b); moved; {
		moved = false
		for _, f := range s.secrets {
			secret := f.pattern
			// An occurrence that begins before c and ends after it.
			for j := max(0, c-len(secret)+1); ; {
				i := bytes.Index(b[j:], secret)
				if i < 0 || j+i >= c {
					break
				}
				if j+i+len(secret) > c {
					c, moved = j+i, true
					break
				}
				j += i + 1
			}
		}
	}
	return c
}

// heldBack returns the length of the longest end of b that is the
// beginning of a secret (not the whole of it).
func (s *scrubber) heldBack(b []byte) int {
	if len(b) == 0 || !s.inSecret[b[len(b)-1]] {
		// The usual end of a read (an event's blank line, a JSON
		// value's brace) is in no secret.
		return 0
	}
	held := 0
	for _, f := range s.secrets {
		secret := f.pattern
		tail := b[max(0, len(b)-len(secret)+1):]
		for from := 0; len(tail)-from > held; from++ {
			i := bytes.IndexByte(tail[from:], secret[0])
			if i < 0 || len(tail)-from-i <= held {
				break
			}
			from += i
			if bytes.HasPrefix(secret, tail[from:]) {
				held = len(tail) - from
				break
			}
		}
	}
	return held
}

// body returns rc scrubbed as it is read (see scrubReader).
func (s *scrubber) body(rc io.ReadCloser) io.ReadCloser {
	if s.empty() || rc == nil || rc == http.NoBody {
		return rc
	}
	return &scrubReader{src: rc, s: s}
}

// scrubReader is a body scrubbed of secrets as it is read. What is read
// goes out at once, except the few bytes at its end that may begin a
// secret (cut), which wait for the next read to tell: a stream's events,
// which end in a blank line, are never held back.
type scrubReader struct {
	src io.ReadCloser
	s   *scrubber

	hold []byte // bytes held back, not scrubbed
	buf  []byte // the bytes held back and those read after them
	out  []byte // scrubbed bytes that did not fit in the reader's buffer
	err  error  // the source's error, once it returned one
}

// Read reads the next scrubbed bytes.
func (r *scrubReader) Read(p []byte) (int, error) {
	for {
		if len(r.out) > 0 {
			n := copy(p, r.out)
			r.out = r.out[n:]
			return n, nil
		}
		if r.err != nil {
			return 0, r.err
		}
		if len(p) == 0 {
			return 0, nil
		}
		// Nothing held back, the bytes are read, scrubbed and passed on
		// in p itself; else after those held back, in buf.
		var got, n int
		read := p
		if held := len(r.hold); held > 0 {
			r.buf = slices.Grow(append(r.buf[:0], r.hold...), len(p))
			got, r.err = r.src.Read(r.buf[held : held+len(p)])
			read, n = r.buf, held+got
		} else {
			got, r.err = r.src.Read(p)
			n = got
		}
		c := n
		if r.err == nil {
			c = r.s.cut(read[:n])
		}
		r.hold = append(r.hold[:0], read[c:n]...)
		done := r.s.scrub(read[:c])
		if len(done) == 0 {
			if got == 0 && r.err == nil {
				return 0, nil // as the source did
			}
			continue
		}
		if &done[0] == &p[0] {
			return len(done), nil
		}
		k := copy(p, done)
		r.out = done[k:]
		return k, nil
	}
}

// Close closes the source.
func (r *scrubReader) Close() error { return r.src.Close() }

// scrubbedError is an error whose text is scrubbed of secrets; errors.Is
// and errors.As see the error it wraps. It is a net.Error as the error it
// wraps is one: reverse_proxy tells a timeout (504) by asserting the
// transport's error to net.Error, without errors.As.
type scrubbedError struct {
	err error
	s   *scrubber
}

func (e scrubbedError) Error() string { return e.s.scrubString(e.err.Error()) }
func (e scrubbedError) Unwrap() error { return e.err }

// Timeout reports whether the wrapped error is a timeout.
func (e scrubbedError) Timeout() bool {
	ne, ok := errors.AsType[net.Error](e.err)
	return ok && ne.Timeout()
}

// Temporary reports whether the wrapped error is temporary.
func (e scrubbedError) Temporary() bool {
	ne, ok := errors.AsType[net.Error](e.err)
	return ok && ne.Temporary() //nolint:staticcheck // part of net.Error
}

// error returns err with its text scrubbed, or err itself when its text
// holds no secret (nearly always: the error of a connection, a timeout).
func (s *scrubber) error(err error) error {
	if err == nil || s.empty() || !s.within(err.Error()) {
		return err
	}
	return scrubbedError{err: err, s: s}
}

// providerSecrets are what a provider's answers are scrubbed of: its
// configured secrets, and the credentials each request carries. Tokens an
// Authenticator fetches change rarely: the scrubber of the last ones sent
// is kept, and most requests find theirs there. Its methods accept nil
// (nothing configured).
type providerSecrets struct {
	configured *scrubber
	sent       atomic.Pointer[sentScrubber]
}

// sentScrubber is the scrubber of requests that carry the credentials
// sent, besides the configured ones.
type sentScrubber struct {
	sent []string
	s    *scrubber
}

// newProviderSecrets returns the secrets of a provider configured with
// these.
func newProviderSecrets(configured ...string) *providerSecrets {
	return &providerSecrets{configured: newScrubber(configured...)}
}

// configuredScrubber returns the scrubber of the configured secrets.
func (p *providerSecrets) configuredScrubber() *scrubber {
	if p == nil {
		return nil
	}
	return p.configured
}

// scrubberFor returns the scrubber of a request with header h: the
// configured secrets and the credentials h carries (credentialHeaders).
func (p *providerSecrets) scrubberFor(h http.Header) *scrubber {
	configured := p.configuredScrubber()
	var sent [len(credentialHeaders)]string
	n := 0
	for _, k := range credentialHeaders {
		for _, v := range h[k] {
			if c := credentialOf(v, k); len(c) >= minSecret && !configured.has(c) && n < len(sent) {
				sent[n] = c
				n++
			}
		}
	}
	if n == 0 {
		return configured
	}
	if p != nil {
		if last := p.sent.Load(); last != nil && slices.Equal(last.sent, sent[:n]) {
			return last.s
		}
	}
	all := sent[:n:n]
	if configured != nil {
		all = append(all, configured.text...)
	}
	s := newScrubber(all...)
	if p != nil {
		p.sent.Store(&sentScrubber{sent: slices.Clone(sent[:n]), s: s})
	}
	return s
}

// credentialOf returns the credential a header value carries: the value,
// or for an authorization header what follows its scheme, unless it is a
// signature (AWS's SigV4), which is no credential.
func credentialOf(v, header string) string {
	if header != "Authorization" && header != "Proxy-Authorization" {
		return strings.TrimSpace(v)
	}
	if strings.Contains(v, "Signature=") {
		return ""
	}
	if _, cred, ok := strings.Cut(v, " "); ok {
		return strings.TrimSpace(cred)
	}
	return strings.TrimSpace(v)
}

// Package scanning verifies and reads secret-scanning partner alerts: the
// signed lists of leaked tokens GitHub (and GitLab, with the same protocol)
// post to a token issuer's endpoint.
//
// An alert's raw body is signed with ECDSA P-256 over SHA-256; the signature
// (ASN.1 DER, base64) and the identifier of the signing key travel in two
// headers. A Reporter holds the header names and the public keys, configured
// or fetched from the reporter's key list and cached.
package scanning

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

var (
	// ErrUnsigned is an alert without the reporter's two headers.
	ErrUnsigned = errors.New("the alert is not signed")
	// ErrUnknownKey is a signature by a key the reporter does not list.
	ErrUnknownKey = errors.New("the alert is signed with an unknown key")
	// ErrBadSignature is a signature that does not verify.
	ErrBadSignature = errors.New("the alert's signature does not verify")
	// ErrKeysUnavailable wraps a failure to fetch the reporter's key list.
	ErrKeysUnavailable = errors.New("the reporter's public keys could not be fetched")
)

// GitHubKeysURL is GitHub's list of secret-scanning signing keys.
const GitHubKeysURL = "https://api.github.com/meta/public_keys/secret_scanning"

// refetchGap is the least time between two fetches of the key list caused
// by unknown key identifiers, so that forged identifiers cannot make the
// gateway hammer the reporter.
const refetchGap = time.Minute

// After a fetch fails, the next waits retryMin, doubled at each further
// failure up to retryMax: alerts that come meanwhile (forged ones too)
// cause no fetch.
const (
	retryMin = time.Second
	retryMax = 5 * time.Minute
)

// fetchTimeout bounds one fetch of the key list, whatever the Client.
const fetchTimeout = 30 * time.Second

// Reporter is one alert sender: its header names and its public keys.
type Reporter struct {
	// Name is "github" or "gitlab".
	Name string
	// KeyIDHeader and SignatureHeader name the headers that carry the
	// signing key's identifier and the base64 signature.
	KeyIDHeader, SignatureHeader string
	// PublicKeys are configured keys, by key identifier.
	PublicKeys map[string]*ecdsa.PublicKey
	// KeysURL, when set, is a key list to fetch:
	// {"public_keys": [{"key_identifier", "key" (PEM), "is_current"}]}.
	KeysURL string
	// Token, when set, is sent to KeysURL as a bearer token.
	Token string
	// Client fetches KeysURL; nil: a client with a 10 s timeout.
	Client *http.Client
	// CacheTTL is how long a fetched list is used. Default: 30 minutes.
	CacheTTL time.Duration
	// Now is the clock; nil: time.Now.
	Now func() time.Time

	mu        sync.Mutex
	fetched   map[string]*ecdsa.PublicKey
	fetchedAt time.Time
	triedAt   time.Time     // last fetch attempt, successful or not
	failures  int           // fetches failed in a row
	fetchErr  error         // the last fetch's error; nil when it worked
	retryAt   time.Time     // after a failure, no fetch before this
	inflight  chan struct{} // closed when the fetch under way ends; nil for none
}

// GitHub returns a reporter for GitHub's alerts, with GitHub's key list.
func GitHub() *Reporter {
	return &Reporter{Name: "github", KeyIDHeader: "Github-Public-Key-Identifier",
		SignatureHeader: "Github-Public-Key-Signature", KeysURL: GitHubKeysURL}
}

// GitLab returns a reporter for GitLab's alerts. GitLab gives its key list's
// address to partners: set KeysURL or PublicKeys.
func GitLab() *Reporter {
	return &Reporter{Name: "gitlab", KeyIDHeader: "Gitlab-Public-Key-Identifier",
		SignatureHeader: "Gitlab-Public-Key-Signature"}
}

// ParsePublicKey reads a PEM SubjectPublicKeyInfo. Only ECDSA keys on P-256
// are accepted: the protocol signs with P-256 and SHA-256.
func ParsePublicKey(pemText []byte) (*ecdsa.PublicKey, error) {
	block, _ := pem.Decode(pemText)
	if block == nil {
		return nil, errors.New("no PEM block")
	}
	pub, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("not a public key: %w", err)
	}
	ec, ok := pub.(*ecdsa.PublicKey)
	if !ok {
		return nil, fmt.Errorf("a %T, not an ECDSA key", pub)
	}
	if ec.Curve != elliptic.P256() {
		return nil, fmt.Errorf("an ECDSA key on %s, not P-256", ec.Curve.Params().Name)
	}
	return ec, nil
}

// Signed reports whether h carries this reporter's two headers.
func (r *Reporter) Signed(h http.Header) bool {
	return h.Get(r.KeyIDHeader) != "" && h.Get(r.SignatureHeader) != ""
}

// Verify checks the signature of body. It never parses body.
func (r *Reporter) Verify(ctx context.Context, h http.Header, body []byte) error {
	id, sigText := strings.TrimSpace(h.Get(r.KeyIDHeader)), strings.TrimSpace(h.Get(r.SignatureHeader))
	if id == "" || sigText == "" {
		return ErrUnsigned
	}
	sig, err := base64.StdEncoding.DecodeString(sigText)
	if err != nil {
		if sig, err = base64.RawStdEncoding.DecodeString(sigText); err != nil {
			return fmt.Errorf("%w: the signature is not base64", ErrBadSignature)
		}
	}
	pub, err := r.key(ctx, id)
	if err != nil {
		return err
	}
	digest := sha256.Sum256(body)
	if !ecdsa.VerifyASN1(pub, digest[:], sig) {
		return ErrBadSignature
	}
	return nil
}

// key finds the public key with identifier id: configured, else from the
// fetched list, fetched when missing or stale, and again (at most once per
// refetchGap) when id is not in it. One fetch runs at a time: an alert that
// needs the list while it is being fetched waits for that fetch (or for
// its own context). After a failed fetch the next one waits (retryMin,
// doubling up to retryMax); meanwhile a stale list still serves, and an
// identifier it lacks is ErrKeysUnavailable.
func (r *Reporter) key(ctx context.Context, id string) (*ecdsa.PublicKey, error) {
	if k := r.PublicKeys[id]; k != nil {
		return k, nil
	}
	if r.KeysURL == "" {
		return nil, ErrUnknownKey
	}
	r.mu.Lock()
	now := r.now()
	stale := r.fetched == nil || now.Sub(r.fetchedAt) > r.ttl()
	k := r.fetched[id]
	if k != nil && !stale {
		r.mu.Unlock()
		return k, nil
	}
	done := r.inflight
	if done == nil {
		due := !now.Before(r.retryAt) && (stale || now.Sub(r.triedAt) >= refetchGap)
		if !due {
			err := r.missing()
			r.mu.Unlock()
			if k != nil {
				return k, nil // a stale list beats none while the reporter is down
			}
			return nil, err
		}
		done = r.startFetch(now)
	}
	r.mu.Unlock()

	select {
	case <-done:
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %w", ErrKeysUnavailable, ctx.Err())
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if k := r.fetched[id]; k != nil {
		return k, nil
	}
	return nil, r.missing()
}

// missing is the error for an identifier the list lacks: unknown when the
// last fetch worked, else unavailable. r.mu is held.
func (r *Reporter) missing() error {
	if r.fetchErr != nil {
		return fmt.Errorf("%w: %w", ErrKeysUnavailable, r.fetchErr)
	}
	return ErrUnknownKey
}

func (r *Reporter) ttl() time.Duration {
	if r.CacheTTL <= 0 {
		return 30 * time.Minute
	}
	return r.CacheTTL
}

// startFetch starts fetching the key list and returns a channel closed
// when it ends. The fetch runs on its own, bounded by fetchTimeout, so that
// an alert that stops waiting does not end it for the others. r.mu is
// held.
func (r *Reporter) startFetch(now time.Time) chan struct{} {
	done := make(chan struct{})
	r.inflight, r.triedAt = done, now
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), fetchTimeout)
		keys, err := r.fetch(ctx)
		cancel()
		r.mu.Lock()
		defer r.mu.Unlock()
		if err != nil {
			r.failures++
			r.fetchErr = err
			r.retryAt = r.now().Add(backoff(r.failures))
		} else {
			r.fetched, r.fetchedAt = keys, now
			r.failures, r.fetchErr, r.retryAt = 0, nil, time.Time{}
		}
		r.inflight = nil
		close(done)
	}()
	return done
}

// backoff is the wait before the next fetch after failures failed ones in
// a row.
func backoff(failures int) time.Duration {
	d := retryMin
	for i := 1; i < failures && d < retryMax; i++ {
		d *= 2
	}
	return min(d, retryMax)
}

func (r *Reporter) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// fetch reads the reporter's key list.
func (r *Reporter) fetch(ctx context.Context) (map[string]*ecdsa.PublicKey, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.KeysURL, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	if r.Token != "" {
		req.Header.Set("Authorization", "Bearer "+r.Token)
	}
	c := r.Client
	if c == nil {
		c = &http.Client{Timeout: 10 * time.Second}
	}
	res, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = res.Body.Close() }()
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s answered %s", r.KeysURL, res.Status)
	}
	var list struct {
		PublicKeys []struct {
			KeyIdentifier string `json:"key_identifier"`
			Key           string `json:"key"`
		} `json:"public_keys"`
	}
	if err := json.NewDecoder(io.LimitReader(res.Body, 1<<20)).Decode(&list); err != nil {
		return nil, fmt.Errorf("the key list is not JSON: %w", err)
	}
	keys := make(map[string]*ecdsa.PublicKey, len(list.PublicKeys))
	for _, k := range list.PublicKeys {
		pub, err := ParsePublicKey([]byte(k.Key))
		if err != nil || k.KeyIdentifier == "" {
			continue // one odd entry does not spoil the others
		}
		keys[k.KeyIdentifier] = pub
	}
	if len(keys) == 0 {
		return nil, errors.New("the key list holds no P-256 key")
	}
	return keys, nil
}

// Alert is one reported token.
type Alert struct {
	Token  string `json:"token"`
	Type   string `json:"type"`
	URL    string `json:"url"`
	Source string `json:"source"`
}

// MaxAlerts is the most tokens one alert may report.
const MaxAlerts = 1000

// ParseAlerts reads a verified alert body: a JSON array of objects with
// string token and type (required) and url and source (optional).
func ParseAlerts(body []byte) ([]Alert, error) {
	var raw []map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, errors.New("the body is not a JSON array of objects")
	}
	if len(raw) > MaxAlerts {
		return nil, fmt.Errorf("%d tokens in one alert; at most %d", len(raw), MaxAlerts)
	}
	out := make([]Alert, 0, len(raw))
	for i, o := range raw {
		if o == nil {
			return nil, fmt.Errorf("entry %d is not an object", i)
		}
		var a Alert
		for _, f := range []struct {
			name     string
			dst      *string
			required bool
		}{{"token", &a.Token, true}, {"type", &a.Type, true}, {"url", &a.URL, false}, {"source", &a.Source, false}} {
			v, ok := o[f.name]
			if !ok || string(v) == "null" {
				if f.required {
					return nil, fmt.Errorf("entry %d has no %s", i, f.name)
				}
				continue
			}
			if err := json.Unmarshal(v, f.dst); err != nil {
				return nil, fmt.Errorf("entry %d: %s is not a string", i, f.name)
			}
			if f.required && *f.dst == "" {
				return nil, fmt.Errorf("entry %d: %s is empty", i, f.name)
			}
		}
		out = append(out, a)
	}
	return out, nil
}

// Labels, as GitHub's false-positive feedback reads them.
const (
	TruePositive  = "true_positive"
	FalsePositive = "false_positive"
)

// Label is the answer about one reported token.
type Label struct {
	TokenHash string `json:"token_hash"`
	TokenType string `json:"token_type"`
	Label     string `json:"label"`
}

// NewLabel labels a reported token by its SHA-256, never by its value.
func NewLabel(a Alert, truePositive bool) Label {
	d := sha256.Sum256([]byte(a.Token))
	l := Label{TokenHash: hex.EncodeToString(d[:]), TokenType: a.Type, Label: FalsePositive}
	if truePositive {
		l.Label = TruePositive
	}
	return l
}

package scanning

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func newKey(t testing.TB, curve elliptic.Curve) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(curve, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func pemOf(t testing.TB, pub any) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

func sign(t testing.TB, k *ecdsa.PrivateKey, body []byte) string {
	t.Helper()
	d := sha256.Sum256(body)
	sig, err := ecdsa.SignASN1(rand.Reader, k, d[:])
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(sig)
}

func headers(r *Reporter, id, sig string) http.Header {
	h := http.Header{}
	if id != "" {
		h.Set(r.KeyIDHeader, id)
	}
	if sig != "" {
		h.Set(r.SignatureHeader, sig)
	}
	return h
}

const body = `[{"source":"commit","token":"some_token","type":"some_type","url":"https://example.com/base-repo-url/"}]`

func TestVerify(t *testing.T) {
	good, other := newKey(t, elliptic.P256()), newKey(t, elliptic.P256())
	for _, rep := range []*Reporter{GitHub(), GitLab()} {
		rep.KeysURL = ""
		rep.PublicKeys = map[string]*ecdsa.PublicKey{"k1": &good.PublicKey}
		b := []byte(body)
		for _, tc := range []struct {
			name string
			hdr  http.Header
			body []byte
			want error
		}{
			{"good", headers(rep, "k1", sign(t, good, b)), b, nil},
			{"unpadded base64", headers(rep, "k1", strings.TrimRight(sign(t, good, b), "=")), b, nil},
			{"no headers", http.Header{}, b, ErrUnsigned},
			{"identifier only", headers(rep, "k1", ""), b, ErrUnsigned},
			{"signature only", headers(rep, "", sign(t, good, b)), b, ErrUnsigned},
			{"a newline added to the body", headers(rep, "k1", sign(t, good, b)), append([]byte(body), '\n'), ErrBadSignature},
			{"signed by another key", headers(rep, "k1", sign(t, other, b)), b, ErrBadSignature},
			{"unknown identifier", headers(rep, "k2", sign(t, good, b)), b, ErrUnknownKey},
			{"not base64", headers(rep, "k1", "%%%"), b, ErrBadSignature},
			{"not DER", headers(rep, "k1", base64.StdEncoding.EncodeToString([]byte("not a signature"))), b, ErrBadSignature},
		} {
			err := rep.Verify(context.Background(), tc.hdr, tc.body)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Errorf("%s %s: %v, want %v", rep.Name, tc.name, err, tc.want)
			}
		}
		// Header names are case-insensitive.
		h := http.Header{}
		h[strings.ToUpper(rep.KeyIDHeader)] = []string{"k1"}
		h[strings.ToLower(rep.SignatureHeader)] = []string{sign(t, good, b)}
		canon := http.Header{}
		for k, v := range h {
			canon[http.CanonicalHeaderKey(k)] = v
		}
		if !rep.Signed(canon) || rep.Verify(context.Background(), canon, b) != nil {
			t.Errorf("%s: headers in other cases", rep.Name)
		}
	}
	// A GitLab signature under GitHub's headers is not GitLab's alert.
	if GitLab().Signed(headers(GitHub(), "k1", "x")) {
		t.Error("GitLab accepts GitHub's headers")
	}
}

func TestParsePublicKey(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		pem  string
		ok   bool
	}{
		{"P-256", pemOf(t, &newKey(t, elliptic.P256()).PublicKey), true},
		{"P-384", pemOf(t, &newKey(t, elliptic.P384()).PublicKey), false},
		{"RSA", pemOf(t, &rsaKey.PublicKey), false},
		{"not PEM", "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE", false},
		{"garbage in PEM", "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n", false},
	} {
		_, err := ParsePublicKey([]byte(tc.pem))
		if (err == nil) != tc.ok {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

// keyServer serves a key list and counts fetches.
type keyServer struct {
	*httptest.Server
	mu      sync.Mutex
	keys    map[string]string // id -> PEM
	fetches atomic.Int64
	auth    atomic.Value
	down    atomic.Bool
	hold    atomic.Pointer[chan struct{}] // when set, answers wait until it is closed
}

func newKeyServer(t *testing.T) *keyServer {
	ks := &keyServer{keys: map[string]string{}}
	ks.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ks.fetches.Add(1)
		ks.auth.Store(r.Header.Get("Authorization"))
		if hold := ks.hold.Load(); hold != nil {
			<-*hold
		}
		if ks.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		ks.mu.Lock()
		defer ks.mu.Unlock()
		var list struct {
			PublicKeys []map[string]any `json:"public_keys"`
		}
		for id, p := range ks.keys {
			list.PublicKeys = append(list.PublicKeys, map[string]any{"key_identifier": id, "key": p, "is_current": true})
		}
		_ = json.NewEncoder(w).Encode(list)
	}))
	t.Cleanup(ks.Close)
	return ks
}

func (ks *keyServer) set(id, p string) {
	ks.mu.Lock()
	ks.keys[id] = p
	ks.mu.Unlock()
}

func TestFetchedKeys(t *testing.T) {
	ks := newKeyServer(t)
	k1, k2 := newKey(t, elliptic.P256()), newKey(t, elliptic.P256())
	ks.set("k1", pemOf(t, &k1.PublicKey))
	ks.set("odd", "not a key")
	now := time.Unix(1_800_000_000, 0)
	rep := GitHub()
	rep.KeysURL, rep.Token = ks.URL, "ghp_token"
	rep.Now = func() time.Time { return now }
	b := []byte(body)
	ctx := context.Background()

	for range 5 {
		if err := rep.Verify(ctx, headers(rep, "k1", sign(t, k1, b)), b); err != nil {
			t.Fatal(err)
		}
	}
	if n := ks.fetches.Load(); n != 1 {
		t.Errorf("%d fetches for five alerts, want 1 (cached)", n)
	}
	if a := ks.auth.Load(); a != "Bearer ghp_token" {
		t.Errorf("Authorization %q", a)
	}

	// Rotation: a new identifier fetches again, once; forged identifiers
	// do not fetch more than once a minute.
	ks.set("k2", pemOf(t, &k2.PublicKey))
	now = now.Add(2 * time.Minute)
	if err := rep.Verify(ctx, headers(rep, "k2", sign(t, k2, b)), b); err != nil {
		t.Fatalf("rotated key: %v", err)
	}
	for range 10 {
		if err := rep.Verify(ctx, headers(rep, "forged", sign(t, k2, b)), b); !errors.Is(err, ErrUnknownKey) {
			t.Fatalf("forged identifier: %v", err)
		}
	}
	if n := ks.fetches.Load(); n != 2 {
		t.Errorf("%d fetches after rotation and forged identifiers, want 2", n)
	}

	// Stale list, reporter down: the old key still verifies; an unknown
	// one is unavailable.
	ks.down.Store(true)
	now = now.Add(time.Hour)
	if err := rep.Verify(ctx, headers(rep, "k1", sign(t, k1, b)), b); err != nil {
		t.Errorf("stale key while the list is down: %v", err)
	}
	now = now.Add(2 * time.Minute)
	if err := rep.Verify(ctx, headers(rep, "k3", sign(t, k1, b)), b); !errors.Is(err, ErrKeysUnavailable) {
		t.Errorf("unknown key while the list is down: %v", err)
	}

	// Concurrent alerts under -race.
	ks.down.Store(false)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if err := rep.Verify(ctx, headers(rep, "k2", sign(t, k2, b)), b); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
}

// TestKeyFetchBackoff: while the key list cannot be fetched, forged alerts
// (unknown key identifiers) do not each cause a fetch: concurrent ones wait
// for the fetch under way and share its failure, and after a failure the
// next fetch waits 1s, 2s, 4s … up to 5 minutes; a fetch that works ends
// the backoff.
func TestKeyFetchBackoff(t *testing.T) {
	ks := newKeyServer(t)
	ks.down.Store(true)
	var mu sync.Mutex
	now := time.Unix(1_800_000_000, 0)
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	rep := GitHub()
	rep.KeysURL = ks.URL
	rep.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	signer := newKey(t, elliptic.P256())
	b := []byte(body)
	ctx := context.Background()
	forged := func() error { return rep.Verify(ctx, headers(rep, "forged", sign(t, signer, b)), b) }

	// Fifty at once while the first fetch hangs: one fetch.
	hold := make(chan struct{})
	ks.hold.Store(&hold)
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for range 50 {
		wg.Go(func() { errs <- forged() })
	}
	for ks.fetches.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // the others reach the fetch under way
	ks.hold.Store(nil)
	close(hold)
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, ErrKeysUnavailable) {
			t.Fatalf("a forged alert while the list is down: %v", err)
		}
	}
	if n := ks.fetches.Load(); n != 1 {
		t.Fatalf("%d fetches for 50 concurrent forged alerts, want 1", n)
	}

	// Then backoff: 1s, 2s, 4s … with no fetch in between, however many
	// alerts come.
	fetches := int64(1)
	for wait := time.Second; wait <= 5*time.Minute; wait *= 2 {
		advance(wait - time.Millisecond)
		for range 100 {
			if err := forged(); !errors.Is(err, ErrKeysUnavailable) {
				t.Fatalf("a forged alert during the backoff: %v", err)
			}
		}
		if n := ks.fetches.Load(); n != fetches {
			t.Fatalf("%d fetches %v after a failure, want %d", n, wait-time.Millisecond, fetches)
		}
		advance(time.Millisecond)
		if err := forged(); !errors.Is(err, ErrKeysUnavailable) {
			t.Fatal(err)
		}
		if fetches++; ks.fetches.Load() != fetches {
			t.Fatalf("no fetch %v after a failure", wait)
		}
	}
	// Capped at 5 minutes.
	for range 3 {
		advance(5*time.Minute - time.Millisecond)
		_ = forged()
		if ks.fetches.Load() != fetches {
			t.Fatalf("a fetch before the 5 minute cap")
		}
		advance(time.Millisecond)
		_ = forged()
		if fetches++; ks.fetches.Load() != fetches {
			t.Fatalf("no fetch 5 minutes after a failure")
		}
	}

	// The list is back: the next fetch, when due, works; a real alert
	// verifies, and forged identifiers are unknown (no fetch for a minute).
	ks.down.Store(false)
	ks.set("k1", pemOf(t, &signer.PublicKey))
	advance(5 * time.Minute)
	if err := rep.Verify(ctx, headers(rep, "k1", sign(t, signer, b)), b); err != nil {
		t.Fatalf("a real alert once the list is back: %v", err)
	}
	fetches++
	for range 100 {
		if err := forged(); !errors.Is(err, ErrUnknownKey) {
			t.Fatalf("a forged alert with the list fetched: %v", err)
		}
	}
	if n := ks.fetches.Load(); n != fetches {
		t.Errorf("%d fetches, want %d", n, fetches)
	}
}

// A fetch that hangs does not hold up an alert past its context: it gets
// ErrKeysUnavailable, and the fetch goes on for the next alert.
func TestKeyFetchContext(t *testing.T) {
	ks := newKeyServer(t)
	signer := newKey(t, elliptic.P256())
	ks.set("k1", pemOf(t, &signer.PublicKey))
	hold := make(chan struct{})
	ks.hold.Store(&hold)
	rep := GitHub()
	rep.KeysURL = ks.URL
	b := []byte(body)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := rep.Verify(ctx, headers(rep, "k1", sign(t, signer, b)), b); !errors.Is(err, ErrKeysUnavailable) {
		t.Fatalf("an alert whose context ended during the fetch: %v", err)
	}
	ks.hold.Store(nil)
	close(hold)
	if err := rep.Verify(context.Background(), headers(rep, "k1", sign(t, signer, b)), b); err != nil {
		t.Fatalf("the next alert: %v", err)
	}
	if n := ks.fetches.Load(); n != 1 {
		t.Errorf("%d fetches, want 1", n)
	}
}

func TestParseAlerts(t *testing.T) {
	many := "[" + strings.Repeat(`{"token":"t","type":"x"},`, MaxAlerts) + `{"token":"t","type":"x"}]`
	for _, tc := range []struct {
		name string
		body string
		n    int // -1: error
	}{
		{"the docs' sample", body, 1},
		{"empty", `[]`, 0},
		{"no url or source", `[{"token":"a","type":"t"}]`, 1},
		{"null url", `[{"token":"a","type":"t","url":null}]`, 1},
		{"not an array", `{"token":"a","type":"t"}`, -1},
		{"not JSON", `[{`, -1},
		{"missing token", `[{"type":"t"}]`, -1},
		{"empty token", `[{"token":"","type":"t"}]`, -1},
		{"token a number", `[{"token":1,"type":"t"}]`, -1},
		{"missing type", `[{"token":"a"}]`, -1},
		{"url an object", `[{"token":"a","type":"t","url":{}}]`, -1},
		{"null entry", `[null]`, -1},
		{"an entry a string", `["a"]`, -1},
		{"too many", many, -1},
	} {
		as, err := ParseAlerts([]byte(tc.body))
		if tc.n < 0 {
			if err == nil {
				t.Errorf("%s: no error", tc.name)
			}
			continue
		}
		if err != nil || len(as) != tc.n {
			t.Errorf("%s: %d alerts, %v", tc.name, len(as), err)
		}
	}
	as, _ := ParseAlerts([]byte(body))
	if as[0] != (Alert{Token: "some_token", Type: "some_type", URL: "https://example.com/base-repo-url/", Source: "commit"}) {
		t.Errorf("%+v", as[0])
	}
}

func TestNewLabel(t *testing.T) {
	a := Alert{Token: "some_token", Type: "some_type"}
	d := sha256.Sum256([]byte("some_token"))
	for _, tp := range []bool{true, false} {
		l := NewLabel(a, tp)
		want := map[bool]string{true: TruePositive, false: FalsePositive}[tp]
		if l.TokenHash != fmt.Sprintf("%x", d) || l.TokenType != "some_type" || l.Label != want {
			t.Errorf("%+v", l)
		}
		b, _ := json.Marshal(l)
		if strings.Contains(string(b), "some_token") {
			t.Errorf("the label holds the token: %s", b)
		}
	}
}

func FuzzParseAlerts(f *testing.F) {
	f.Add([]byte(body))
	f.Add([]byte(`[{"token":"a","type":"t","url":null,"source":""}]`))
	f.Add([]byte(`[null,{}]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		as, err := ParseAlerts(b)
		if err != nil {
			return
		}
		for _, a := range as {
			if a.Token == "" || a.Type == "" {
				t.Fatalf("accepted %+v", a)
			}
		}
	})
}

func FuzzVerify(f *testing.F) {
	k := newKey(f, elliptic.P256())
	rep := GitHub()
	rep.KeysURL = ""
	rep.PublicKeys = map[string]*ecdsa.PublicKey{"k1": &k.PublicKey}
	f.Add("k1", sign(f, k, []byte(body)), []byte(body+" "))
	f.Add("k1", "MEQCIA==", []byte(body))
	f.Add("", "", []byte{})
	f.Fuzz(func(t *testing.T, id, sig string, b []byte) {
		// Without the private key, nothing verifies but what it signed.
		if err := rep.Verify(context.Background(), headers(rep, id, sig), b); err == nil {
			if string(b) == body+" " || string(b) == body {
				return
			}
			t.Fatalf("verified %q with %q", b, sig)
		}
	})
}

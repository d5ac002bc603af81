package upstream

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// TestScrubber checks the replacement of secrets in text: every
// occurrence, the longest of two secrets that overlap, none shorter than
// minSecret.
func TestScrubber(t *testing.T) {
	for _, tc := range []struct {
		name    string
		secrets []string
		in      string
		want    string
	}{
		{"none", []string{"sk-secret-1"}, "nothing here", "nothing here"},
		{"one", []string{"sk-secret-1"}, "Incorrect API key provided: sk-secret-1.", "Incorrect API key provided: REDACTED."},
		{"every occurrence", []string{"sk-secret-1"}, "sk-secret-1sk-secret-1 and sk-secret-1", "REDACTEDREDACTED and REDACTED"},
		{"whole text", []string{"sk-secret-1"}, "sk-secret-1", "REDACTED"},
		{"two secrets", []string{"sk-secret-1", "token-abcdef"}, `{"a":"sk-secret-1","b":"Bearer token-abcdef"}`, `{"a":"REDACTED","b":"Bearer REDACTED"}`},
		{"one inside another", []string{"secret-1", "sk-secret-1-long"}, "sk-secret-1-long, secret-1", "REDACTED, REDACTED"},
		{"too short", []string{"k", "short"}, "k short", "k short"},
		{"exactly minSecret", []string{"12345678"}, "a12345678b", "aREDACTEDb"},
		{"empty", []string{"sk-secret-1"}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newScrubber(tc.secrets...)
			if got := s.scrubString(tc.in); got != tc.want {
				t.Errorf("scrubString: %q, want %q", got, tc.want)
			}
			if got := string(s.scrub([]byte(tc.in))); got != tc.want {
				t.Errorf("scrub: %q, want %q", got, tc.want)
			}
			if got := readScrubbed(t, s, tc.in, 3, 3); got != tc.want {
				t.Errorf("body read 3 bytes at a time: %q, want %q", got, tc.want)
			}
		})
	}
	var none *scrubber
	if got := none.scrubString("sk-secret-1"); got != "sk-secret-1" || !none.empty() {
		t.Errorf("a nil scrubber replaced %q", got)
	}
}

// chunks is a source that returns its chunks one per read.
type chunks struct{ c [][]byte }

func (s *chunks) Read(p []byte) (int, error) {
	if len(s.c) == 0 {
		return 0, io.EOF
	}
	n := copy(p, s.c[0])
	if s.c[0] = s.c[0][n:]; len(s.c[0]) == 0 {
		s.c = s.c[1:]
	}
	return n, nil
}

func (*chunks) Close() error { return nil }

// split cuts s into pieces of n bytes.
func split(s string, n int) [][]byte {
	var out [][]byte
	for len(s) > 0 {
		k := min(n, len(s))
		out = append(out, []byte(s[:k]))
		s = s[k:]
	}
	return out
}

// readScrubbed reads in, cut into chunks of chunk bytes, through s's body
// reader, with a buffer of buf bytes.
func readScrubbed(t testing.TB, s *scrubber, in string, chunk, buf int) string {
	t.Helper()
	r := s.body(&chunks{c: split(in, chunk)})
	var out []byte
	p := make([]byte, buf)
	for {
		k, err := r.Read(p)
		out = append(out, p[:k]...)
		if err == io.EOF {
			return string(out)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestScrubReaderChunks reads a body with secrets at every place through
// every cut into chunks and every reader's buffer size: the result is the
// body scrubbed whole.
func TestScrubReaderChunks(t *testing.T) {
	s := newScrubber("sk-proj-0123456789", "abababab", "secret-1", "sk-secret-1-long")
	in := "x sk-proj-0123456789 sk-proj-01234 ababababab sk-proj-0123456789sk-proj-0123456789 sk-secret-1-long secret-1 sk-secret-1-lon abababa"
	want := string(s.scrub([]byte(in)))
	for chunk := 1; chunk <= len(in); chunk++ {
		for buf := 1; buf <= 24; buf++ {
			if out := readScrubbed(t, s, in, chunk, buf); out != want {
				t.Fatalf("chunks of %d, buffer of %d: %q, want %q", chunk, buf, out, want)
			}
		}
	}
}

// TestScrubReaderEvents checks that a stream's events are passed on as
// they are read: an event that ends in a blank line is never held back,
// even when the secret could follow.
func TestScrubReaderEvents(t *testing.T) {
	s := newScrubber("sk-secret-of-the-provider")
	events := []string{
		"data: {\"choices\":[{\"delta\":{\"content\":\"sk\"}}]}\n\n",
		"data: {\"error\":{\"message\":\"bad key sk-secret-of-the-provider\"}}\n\n",
		"data: [DONE]\n\n",
	}
	src := &chunks{}
	for _, e := range events {
		src.c = append(src.c, []byte(e))
	}
	r := s.body(src)
	p := make([]byte, 4096)
	for i, e := range events {
		n, err := r.Read(p)
		if err != nil {
			t.Fatal(err)
		}
		if want := strings.ReplaceAll(e, "sk-secret-of-the-provider", "REDACTED"); string(p[:n]) != want {
			t.Errorf("read %d: %q, want %q", i, p[:n], want)
		}
	}
	// A read that ends in what may begin the secret waits for the next.
	r = s.body(&chunks{c: [][]byte{[]byte("key: sk-sec"), []byte("ret-of-the-provider.")}})
	n, err := r.Read(p)
	if err != nil || string(p[:n]) != "key: " {
		t.Errorf("first read %q, %v; want \"key: \"", p[:n], err)
	}
	if n, err = r.Read(p); err != nil || string(p[:n]) != "REDACTED." {
		t.Errorf("second read %q, %v; want \"REDACTED.\"", p[:n], err)
	}
}

// FuzzScrubReader checks that a body read through the scrubber in any
// chunks, with any buffer, is the body scrubbed whole, and holds no
// secret. The secrets share no byte with the replacement, which could
// otherwise form a secret with the text beside it; they may overlap each
// other.
func FuzzScrubReader(f *testing.F) {
	f.Add([]byte("x sk-proj-0123456789 sk-proj-01 sk-proj-0123456789sk-proj-0123456789"), "sk-proj-0123456789", "", uint8(3), uint8(5))
	f.Add([]byte("aaaaaaaaaaaaaaaaaaaaaaa"), "aaaaaaaa", "", uint8(1), uint8(7))
	f.Add([]byte("ababababababab"), "abababab", "babababa", uint8(2), uint8(1))
	f.Add([]byte("sk-secret-1-long, secret-1, sk-secret-1-lon"), "secret-1", "sk-secret-1-long", uint8(3), uint8(3))
	f.Add([]byte("abcdefghijklmn abcdefghij"), "abcdefgh", "efghijklmn", uint8(4), uint8(2))
	f.Fuzz(func(t *testing.T, body []byte, secret1, secret2 string, chunk, buf uint8) {
		if chunk == 0 || buf == 0 || strings.ContainsAny(secret1+secret2, redaction) {
			return
		}
		s := newScrubber(secret1, secret2)
		if s.empty() {
			return
		}
		want := string(s.scrub(bytes.Clone(body)))
		if got := readScrubbed(t, s, string(body), int(chunk), int(buf)); got != want {
			t.Fatalf("chunks of %d, buffer of %d: read %q, want %q", chunk, buf, got, want)
		}
		all, err := io.ReadAll(s.body(&chunks{c: split(string(body), int(chunk))}))
		if err != nil || string(all) != want {
			t.Fatalf("ReadAll: %q, %v; want %q", all, err, want)
		}
		for _, secret := range s.text {
			if strings.Contains(want, secret) {
				t.Fatalf("%q holds the secret %q", want, secret)
			}
		}
	})
}

// TestProviderSecretsScrubberFor checks which credentials a request's
// scrubber adds to the configured secrets: those of the credential
// headers, without an authorization scheme; not a signature, not a value
// too short to be a secret; and that requests with the same credentials
// share a scrubber.
func TestProviderSecretsScrubberFor(t *testing.T) {
	p := newProviderSecrets("sk-configured-key", "")
	for _, tc := range []struct {
		name   string
		header http.Header
		want   []string
	}{
		{"configured key", http.Header{"Authorization": {"Bearer sk-configured-key"}}, []string{"sk-configured-key"}},
		{"a token", http.Header{"Authorization": {"Bearer ya29.a-google-token"}}, []string{"ya29.a-google-token", "sk-configured-key"}},
		{"x-goog-api-key", http.Header{"X-Goog-Api-Key": {"AIza-gemini-key"}}, []string{"sk-configured-key", "AIza-gemini-key"}},
		{"api-key and session token", http.Header{"Api-Key": {"azure-key-1234"}, "X-Amz-Security-Token": {"IQoJ-session-token"}},
			[]string{"IQoJ-session-token", "sk-configured-key", "azure-key-1234"}},
		{"a signature", http.Header{"Authorization": {"AWS4-HMAC-SHA256 Credential=AKID/20250101/us-east-1/bedrock/aws4_request, SignedHeaders=host, Signature=abcdef0123456789"}},
			[]string{"sk-configured-key"}},
		{"too short", http.Header{"X-Api-Key": {"short"}}, []string{"sk-configured-key"}},
		{"other headers", http.Header{"X-Goog-User-Project": {"my-billing-project"}}, []string{"sk-configured-key"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := p.scrubberFor(tc.header)
			if got := s.text; fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("secrets %q, want %q", got, tc.want)
			}
			if again := p.scrubberFor(tc.header.Clone()); again != s {
				t.Error("the same credentials got another scrubber")
			}
		})
	}
	var none *providerSecrets
	if s := none.scrubberFor(http.Header{"Authorization": {"Bearer ya29.a-google-token"}}); !s.has("ya29.a-google-token") {
		t.Error("without configured secrets, a token sent is not scrubbed")
	}
}

// TestScrubbedError checks that an error's text is scrubbed and that
// errors.Is and errors.As still see what it wraps.
func TestScrubbedError(t *testing.T) {
	s := newScrubber("entra-client-secret")
	cause := errors.New(`oauth2: "invalid_client" "client secret entra-client-secret is not valid"`)
	err := s.error(authError{cause})
	if strings.Contains(err.Error(), "entra-client-secret") || !strings.Contains(err.Error(), "client secret REDACTED is not valid") {
		t.Errorf("error text %q", err)
	}
	if !errors.Is(err, cause) || !errors.As(err, new(authError)) {
		t.Error("the wrapped error is lost")
	}
	if s.error(err) != err { //nolint:errorlint // the very error, not one it wraps
		t.Error("an error is wrapped twice")
	}
	if s.error(nil) != nil || s.error(cause) == cause { //nolint:errorlint // the very error, not one it wraps
		t.Error("nil became an error, or an error with a secret stayed itself")
	}
	// An error without a secret is not wrapped; one that is keeps its
	// timeout, which reverse_proxy reads by asserting net.Error.
	plain := &net.OpError{Op: "dial", Err: errors.New("connection refused")}
	if s.error(plain) != error(plain) { //nolint:errorlint // the very error, not one it wraps
		t.Error("an error without a secret was wrapped")
	}
	timeout := s.error(timeoutError{"i/o timeout after sending entra-client-secret"})
	if ne, ok := timeout.(net.Error); !ok || !ne.Timeout() || strings.Contains(timeout.Error(), "entra-client-secret") { //nolint:errorlint // reverse_proxy asserts the error itself, unwrapped
		t.Errorf("a timeout became %#v (%q)", timeout, timeout)
	}
}

// timeoutError is a net.Error that timed out.
type timeoutError struct{ msg string }

func (e timeoutError) Error() string { return e.msg }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

// BenchmarkScrubReader is what scrubbing costs an answer: a stream of 50
// chat chunks read one event at a time, and a 1 MiB body (a large
// embeddings answer) read as reverse_proxy reads it, with a secret of a
// real key's length that does not occur; the plain rows read the same
// without the scrubber.
func BenchmarkScrubReader(b *testing.B) {
	s := newScrubber("sk-proj-bench-provider-key-0123456789abcdefghijklmnopqrstuvwxyz")
	event := []byte(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"word "},"finish_reason":null}]}` + "\n\n")
	large := bytes.Repeat([]byte(`{"embedding":"AAAAPwAAgD8AAMA/AAAAQAAAIEAAAEBAAABgQAAAgEAAAJBAAACgQAAAsEAAAMBA"},`), 1<<20/80)
	stream := make([][]byte, 50)
	for i := range stream {
		stream[i] = event
	}
	for _, bc := range []struct {
		name   string
		chunks [][]byte
		s      *scrubber
	}{
		{"stream_50_events", stream, s},
		{"stream_50_events_plain", stream, nil},
		{"body_1MiB", split(string(large), 32<<10), s},
		{"body_1MiB_plain", split(string(large), 32<<10), nil},
	} {
		b.Run(bc.name, func(b *testing.B) {
			p := make([]byte, 32<<10)
			size := 0
			for _, c := range bc.chunks {
				size += len(c)
			}
			b.SetBytes(int64(size))
			b.ReportAllocs()
			src := &chunks{}
			for b.Loop() {
				src.c = append(src.c[:0], bc.chunks...)
				r := bc.s.body(src)
				for {
					if _, err := r.Read(p); err != nil {
						break
					}
				}
			}
		})
	}
}

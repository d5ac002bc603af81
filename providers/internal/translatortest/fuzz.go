package translatortest

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
)

// SeedFiles adds the contents of every file in dir ending in suffix to
// f's seed corpus; it fails when there are none.
func SeedFiles(f *testing.F, dir, suffix string) {
	f.Helper()
	for _, name := range GoldenCases(f, dir, suffix) {
		f.Add(ReadFile(f, filepath.Join(dir, name+suffix)))
	}
}

// FuzzChatRequest fuzzes request, a translator's ChatRequest for the
// provider's model, with bodies: every body providers.ValidateChat
// accepts translates into valid JSON or fails with a 4xx
// *providers.Error (see CheckFuzzedRequest).
func FuzzChatRequest(f *testing.F, request func(body []byte) (providers.Request, error)) {
	f.Fuzz(func(t *testing.T, body []byte) {
		if _, err := providers.ValidateChat(body); err != nil {
			return
		}
		req, err := request(body)
		CheckFuzzedRequest(t, body, req, err)
	})
}

// CheckFuzzedRequest checks what a translator made of a body
// providers.ValidateChat accepted: a request whose body is valid JSON, or
// a 4xx *providers.Error. It reports whether there is a request.
func CheckFuzzedRequest(t testing.TB, body []byte, req providers.Request, err error) bool {
	t.Helper()
	if err != nil {
		var e *providers.Error
		if !errors.As(err, &e) || e.Status < 400 || e.Status >= 500 {
			t.Fatalf("ChatRequest error %v is not a 4xx *providers.Error", err)
		}
		return false
	}
	if !gjson.ValidBytes(req.Body) || !json.Valid(req.Body) {
		t.Fatalf("invalid JSON for %s:\n%s", body, req.Body)
	}
	return true
}

// FuzzChatResponse fuzzes response, a translator's ChatResponse: any
// answer body translates into valid JSON or fails with an error, never a
// panic.
func FuzzChatResponse(f *testing.F, response func(body []byte) ([]byte, error)) {
	f.Fuzz(func(t *testing.T, body []byte) {
		out, err := response(body)
		if err == nil && !json.Valid(out) {
			t.Fatalf("invalid JSON for %s:\n%s", body, out)
		}
	})
}

// SeedTranscripts adds the upstream stream of every transcript in dir
// (*.txt), and whether it is translated with IncludeUsage, to f's seed
// corpus.
func SeedTranscripts(f *testing.F, dir string) {
	f.Helper()
	for _, path := range Transcripts(f, dir, ".txt") {
		upstream, _, opts := ReadTranscript(f, path)
		f.Add(upstream, opts.IncludeUsage)
	}
}

// Fuzz feeds arbitrary bytes (and include_usage either way), cut by the
// replay's framing, through a new translator and checks that what comes
// out is a well-formed unified stream (see ValidUnifiedStream).
func (r Replay) Fuzz(f *testing.F) {
	f.Fuzz(func(t *testing.T, upstream []byte, includeUsage bool) {
		out, err := r.Translate(providers.StreamOptions{IncludeUsage: includeUsage}, upstream, nil)
		if err != nil {
			// The gateway ends the stream with its own error here; what
			// was written so far must still be well-formed events.
			out = append(out, "data: {\"error\":{}}\n\n"...)
		}
		if msg := ValidUnifiedStream(out); msg != "" {
			t.Fatalf("%s\nupstream: %q\nunified:\n%s", msg, upstream, out)
		}
	})
}

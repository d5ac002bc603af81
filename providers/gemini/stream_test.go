package gemini

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelgate/modelgate/providers"
)

const sseDir = "../../testdata/sse/gemini"

// separator divides a transcript's upstream stream from the expected
// unified stream.
const separator = "----------"

// readTranscript splits testdata/sse/gemini/<name>.txt. Transcripts whose
// name contains "include_usage" are translated with IncludeUsage.
func readTranscript(t testing.TB, path string) (upstream, want []byte, opts providers.StreamOptions) {
	t.Helper()
	data := readFile(t, path)
	i := bytes.Index(data, []byte("\n"+separator+"\n"))
	if i < 0 {
		t.Fatalf("%s: no %q line", path, separator)
	}
	upstream, want = data[:i+1], data[i+len(separator)+2:]
	opts.IncludeUsage = strings.Contains(filepath.Base(path), "include_usage")
	return upstream, want, opts
}

// translate feeds upstream to a new translator in pieces of random sizes
// (rng nil: all at once), cut into events by Gemini's Framing as the
// gateway cuts them, and returns the unified stream. It stops at the first
// Event or framing error.
func translate(c Chat, opts providers.StreamOptions, upstream []byte, rng *rand.Rand) ([]byte, error) {
	tr := c.ChatStream(opts)
	var out, buf []byte
	feed := func(final bool) error {
		for {
			event, rest, ok, err := Framing.Cut(buf)
			if err != nil {
				return err
			}
			if !ok {
				break
			}
			if out, err = tr.Event(out, event); err != nil {
				return err
			}
			buf = rest
		}
		// sse.Cut cannot tell a final "\r\r" from a "\r" followed by
		// "\n" still to come, so at the end of the body a trailing "\r"
		// completes the line.
		if final && bytes.HasSuffix(buf, []byte("\r")) {
			if event, _, ok, _ := Framing.Cut(append(buf, '\n')); ok {
				var err error
				out, err = tr.Event(out, event)
				return err
			}
		}
		return nil
	}
	for len(upstream) > 0 {
		n := len(upstream)
		if rng != nil {
			n = min(n, 1+rng.IntN(64))
		}
		buf = append(buf, upstream[:n]...)
		upstream = upstream[n:]
		if err := feed(len(upstream) == 0); err != nil {
			return out, err
		}
	}
	return tr.Close(out), nil
}

func transcripts(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(sseDir, "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no transcripts in %s (%v)", sseDir, err)
	}
	return files
}

func TestStreamTranscripts(t *testing.T) {
	for _, path := range transcripts(t) {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			upstream, want, opts := readTranscript(t, path)
			got, err := translate(testChat(), opts, upstream, nil)
			if err != nil {
				t.Fatalf("Event: %v", err)
			}
			if *update {
				data := append(append(upstream, separator+"\n"...), got...)
				if err := os.WriteFile(path, data, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			checkUnifiedStream(t, got)
			if !bytes.Equal(got, want) {
				t.Fatalf("unified stream differs\ngot:\n%s\nwant:\n%s", got, want)
			}

			// Framing must not matter: random chunk sizes, one byte at a
			// time, and every line-ending style SSE allows.
			rng := rand.New(rand.NewPCG(1, uint64(len(upstream))))
			for range 50 {
				if got, err := translate(testChat(), opts, upstream, rng); err != nil || !bytes.Equal(got, want) {
					t.Fatalf("random chunking changed the output (err %v):\n%s", err, got)
				}
			}
			lf := bytes.ReplaceAll(upstream, []byte("\r\n"), []byte("\n"))
			for _, nl := range []string{"\n", "\r\n", "\r"} {
				in := bytes.ReplaceAll(lf, []byte("\n"), []byte(nl))
				if got, err := translate(testChat(), opts, in, rng); err != nil || !bytes.Equal(got, want) {
					t.Fatalf("line ending %q changed the output (err %v):\n%s", nl, err, got)
				}
			}
		})
	}
}

// checkUnifiedStream checks that out is a sequence of well-formed unified
// events: single data lines, each a JSON object or [DONE], with [DONE] or an
// error last, and chunks sharing id and created.
func checkUnifiedStream(t testing.TB, out []byte) {
	t.Helper()
	if err := validUnifiedStream(out); err != "" {
		t.Fatalf("%s\nstream:\n%s", err, out)
	}
	var id, created string
	for _, ev := range bytes.SplitAfter(out, []byte("\n\n")) {
		data := bytes.TrimSuffix(bytes.TrimPrefix(ev, []byte("data: ")), []byte("\n\n"))
		if len(data) == 0 || data[0] != '{' {
			continue
		}
		var chunk struct {
			ID      json.RawMessage `json:"id"`
			Created json.RawMessage `json:"created"`
			Error   json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal(data, &chunk); err != nil {
			t.Fatal(err)
		}
		if chunk.Error != nil {
			continue
		}
		if id == "" {
			id, created = string(chunk.ID), string(chunk.Created)
		} else if string(chunk.ID) != id || string(chunk.Created) != created {
			t.Errorf("chunks disagree on id or created: %s", data)
		}
	}
}

// validUnifiedStream describes what is wrong with a unified stream, or
// returns "".
func validUnifiedStream(out []byte) string {
	if len(out) == 0 {
		return "the stream is empty"
	}
	events := bytes.SplitAfter(out, []byte("\n\n"))
	if len(events[len(events)-1]) == 0 {
		events = events[:len(events)-1]
	}
	for i, ev := range events {
		if !bytes.HasPrefix(ev, []byte("data: ")) || !bytes.HasSuffix(ev, []byte("\n\n")) {
			return "malformed event " + quote(ev)
		}
		data := ev[len("data: ") : len(ev)-2]
		if bytes.ContainsAny(data, "\r\n") {
			return "event spans lines: " + quote(ev)
		}
		last := i == len(events)-1
		switch {
		case string(data) == "[DONE]":
			if !last {
				return "events follow [DONE]"
			}
		case !json.Valid(data):
			return "invalid JSON: " + quote(ev)
		case bytes.HasPrefix(data, []byte(`{"error":`)):
			if !last {
				return "events follow an error"
			}
		case last:
			return "the stream ends without [DONE] or an error"
		}
	}
	return ""
}

func quote(b []byte) string {
	q, _ := json.Marshal(string(b))
	return string(q)
}

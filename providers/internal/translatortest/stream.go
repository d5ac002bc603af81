package translatortest

import (
	"bytes"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/providerkit"
)

// Separator is the line that divides the parts of a stream transcript: the
// upstream stream, then the stream the translator makes of it.
const Separator = "----------"

// Transcripts lists the files in dir ending in ext (".txt"); it fails when
// there are none.
func Transcripts(t testing.TB, dir, ext string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*"+ext))
	if err != nil || len(files) == 0 {
		t.Fatalf("no transcripts in %s (%v)", dir, err)
	}
	return files
}

// ReadTranscript splits the transcript at path into the upstream stream
// (ending with its last line break) and the stream wanted of it, divided
// by a Separator line. A transcript that starts with the Separator line
// has an empty upstream stream. Transcripts whose name contains
// "include_usage" are translated with IncludeUsage.
func ReadTranscript(t testing.TB, path string) (upstream, want []byte, opts providers.StreamOptions) {
	t.Helper()
	data := ReadFile(t, path)
	var i int
	if bytes.HasPrefix(data, []byte(Separator+"\n")) {
		i = -1
	} else if i = bytes.Index(data, []byte("\n"+Separator+"\n")); i < 0 {
		t.Fatalf("%s: no %q line", path, Separator)
	}
	upstream, want = data[:i+1], data[i+len(Separator)+2:]
	opts.IncludeUsage = strings.Contains(filepath.Base(path), "include_usage")
	return upstream, want, opts
}

// Replay is a stream translator under test: New makes a translator for
// one stream, and Framing cuts the upstream stream into its events (nil:
// providers.SSE).
type Replay struct {
	New     func(providers.StreamOptions) providers.StreamTranslator
	Framing providers.Framing
}

// Translate translates upstream with a new translator; see providerkit.Translate.
func (r Replay) Translate(opts providers.StreamOptions, upstream []byte, rng *rand.Rand) ([]byte, error) {
	return providerkit.Translate(r.New(opts), r.Framing, upstream, rng)
}

// Transcripts runs one subtest for each SSE transcript (*.txt) in dir:
// the translated upstream stream is a well-formed unified stream (see
// providerkit.CheckUnifiedStream) equal to the one the transcript wants, and stays so
// when the upstream bytes arrive in pieces of random sizes or with any of
// the line endings SSE allows. Under -update the transcript's wanted
// stream is rewritten instead.
func (r Replay) Transcripts(t *testing.T, dir string) {
	for _, path := range Transcripts(t, dir, ".txt") {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			upstream, want, opts := ReadTranscript(t, path)
			got, err := r.Translate(opts, upstream, nil)
			if err != nil {
				t.Fatalf("Event: %v", err)
			}
			if *update {
				WriteFile(t, path, append(append(upstream, Separator+"\n"...), got...))
				return
			}
			providerkit.CheckUnifiedStream(t, got, opts)
			if !bytes.Equal(got, want) {
				t.Fatalf("unified stream differs\ngot:\n%s\nwant:\n%s", got, want)
			}
			providerkit.CheckStreamUsage(t, r.New, r.Framing, opts, upstream)

			// Framing must not matter: random chunk sizes, one byte at a
			// time, and every line-ending style SSE allows.
			rng := rand.New(rand.NewPCG(1, uint64(len(upstream))))
			for range 50 {
				if got, err := r.Translate(opts, upstream, rng); err != nil || !bytes.Equal(got, want) {
					t.Fatalf("random chunking changed the output (err %v):\n%s", err, got)
				}
			}
			lf := bytes.ReplaceAll(upstream, []byte("\r\n"), []byte("\n"))
			for _, nl := range []string{"\n", "\r\n", "\r"} {
				in := bytes.ReplaceAll(lf, []byte("\n"), []byte(nl))
				if got, err := r.Translate(opts, in, rng); err != nil || !bytes.Equal(got, want) {
					t.Fatalf("line ending %q changed the output (err %v):\n%s", nl, err, got)
				}
			}
		})
	}
}

// Refuses checks that a new translator refuses each of events, given
// alone, with an error.
func (r Replay) Refuses(t *testing.T, events ...string) {
	t.Helper()
	for _, ev := range events {
		if out, err := r.New(providers.StreamOptions{}).Event(nil, []byte(ev)); err == nil {
			t.Errorf("Event(%q) = %q, want an error", ev, out)
		}
	}
}

// Ignores checks that a new translator makes nothing of events, one after
// the other, and that Close then ends the stream, which gave nothing, with
// the stream_incomplete error (and a second Close adds nothing).
func (r Replay) Ignores(t *testing.T, events ...string) {
	t.Helper()
	tr := r.New(providers.StreamOptions{})
	for _, ev := range events {
		out, err := tr.Event(nil, []byte(ev))
		if err != nil || len(out) != 0 {
			t.Errorf("Event(%q) = %q, %v; want nothing", ev, out, err)
		}
	}
	out := tr.Close(nil)
	want := `data: {"error":{"message":"the provider's stream ended before the answer was complete","type":"server_error","param":null,"code":"stream_incomplete"}}` + "\n\n"
	if string(out) != want {
		t.Errorf("Close = %q, want %q", out, want)
	}
	if out := tr.Close(nil); len(out) != 0 {
		t.Errorf("a second Close = %q", out)
	}
}

// Bench measures a new translator (with IncludeUsage) translating the
// whole upstream stream, cut into events by the replay's framing as the
// gateway cuts them, Close included; ns/op divided by the number of events
// is the cost of one.
func (r Replay) Bench(b *testing.B, upstream []byte) {
	framing := r.Framing
	if framing == nil {
		framing = providers.SSE
	}
	out := make([]byte, 0, 4*len(upstream))
	b.SetBytes(int64(len(upstream)))
	b.ReportAllocs()
	for b.Loop() {
		tr := r.New(providers.StreamOptions{IncludeUsage: true})
		out = out[:0]
		buf := upstream
		for {
			event, rest, ok, err := framing.Cut(buf)
			if err != nil {
				b.Fatal(err)
			}
			if !ok {
				break
			}
			if out, err = tr.Event(out, event); err != nil {
				b.Fatal(err)
			}
			buf = rest
		}
		out = tr.Close(out)
	}
}

// BenchEvent measures tr translating event, one event of a stream, again
// and again, after first (nil: none) has started the stream.
func BenchEvent(b *testing.B, tr providers.StreamTranslator, first, event []byte) {
	var out []byte
	var err error
	if first != nil {
		if out, err = tr.Event(nil, first); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(len(event)))
	b.ReportAllocs()
	for b.Loop() {
		if out, err = tr.Event(out[:0], event); err != nil {
			b.Fatal(err)
		}
	}
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

// Fuzz runs providerkit.FuzzStream on the replay's translator and framing.
func (r Replay) Fuzz(f *testing.F) { providerkit.FuzzStream(f, r.New, r.Framing) }

// RelayWrites sends a provider's stream, in writes, through the relay r
// as the gateway does: a write of whole events that r lets pass
// (Relay.Passes) goes to the client as it is; anything else is cut into
// events, each given to Event; then Close. It returns what the client got.
func RelayWrites(r providers.Relay, writes ...string) string {
	var out, pending []byte
	for _, p := range writes {
		if len(pending) == 0 && r.Passes([]byte(p)) {
			out = append(out, p...)
			continue
		}
		pending = append(pending, p...)
		for {
			ev, rest, ok, _ := providers.SSE.Cut(pending)
			if !ok {
				break
			}
			out, _ = r.Event(out, ev)
			pending = rest
		}
		pending = append([]byte(nil), pending...)
	}
	return string(r.Close(out))
}

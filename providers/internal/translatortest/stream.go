package translatortest

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
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

// Translate feeds upstream to tr in pieces of random sizes (rng nil: all
// at once), cut into events by framing (nil: providers.SSE) as the gateway
// cuts them, and returns what tr makes of it, Close included. It stops at
// the first framing or Event error.
func Translate(tr providers.StreamTranslator, framing providers.Framing, upstream []byte, rng *rand.Rand) ([]byte, error) {
	if framing == nil {
		framing = providers.SSE
	}
	var out, buf []byte
	for len(upstream) > 0 {
		n := len(upstream)
		if rng != nil {
			n = min(n, 1+rng.IntN(64))
		}
		buf = append(buf, upstream[:n]...)
		upstream = upstream[n:]
		var err error
		if out, buf, err = Feed(tr, framing, out, buf); err != nil {
			return out, err
		}
	}
	// SSE cannot tell a final "\r\r" from a "\r" followed by "\n" still
	// to come, so at the end of the body a trailing "\r" completes the
	// line.
	if bytes.HasSuffix(buf, []byte("\r")) {
		if event, _, ok, _ := framing.Cut(append(buf, '\n')); ok {
			var err error
			if out, err = tr.Event(out, event); err != nil {
				return out, err
			}
		}
	}
	return tr.Close(out), nil
}

// Feed translates the complete events in buf, as framing cuts them, and
// returns tr's output appended to out and the bytes left in buf.
func Feed(tr providers.StreamTranslator, framing providers.Framing, out, buf []byte) ([]byte, []byte, error) {
	for {
		event, rest, ok, err := framing.Cut(buf)
		if err != nil {
			return out, buf, err
		}
		if !ok {
			return out, buf, nil
		}
		if out, err = tr.Event(out, event); err != nil {
			return out, buf, err
		}
		buf = rest
	}
}

// Replay is a stream translator under test: New makes a translator for
// one stream, and Framing cuts the upstream stream into its events (nil:
// providers.SSE).
type Replay struct {
	New     func(providers.StreamOptions) providers.StreamTranslator
	Framing providers.Framing
}

// Translate translates upstream with a new translator; see Translate.
func (r Replay) Translate(opts providers.StreamOptions, upstream []byte, rng *rand.Rand) ([]byte, error) {
	return Translate(r.New(opts), r.Framing, upstream, rng)
}

// Transcripts runs one subtest for each SSE transcript (*.txt) in dir:
// the translated upstream stream is a well-formed unified stream (see
// CheckUnifiedStream) equal to the one the transcript wants, and stays so
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
			CheckUnifiedStream(t, got, opts)
			if !bytes.Equal(got, want) {
				t.Fatalf("unified stream differs\ngot:\n%s\nwant:\n%s", got, want)
			}
			r.checkUsage(t, opts, upstream)

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

// checkUsage checks that a translator reports the usage its stream
// carries, as data (StreamTranslator.Usage): what the usage chunk of the
// stream translated with IncludeUsage says, whether the client asked for
// usage or not.
func (r Replay) checkUsage(t *testing.T, opts providers.StreamOptions, upstream []byte) {
	t.Helper()
	var want providers.Used
	for _, includeUsage := range []bool{true, false} {
		o := opts
		o.IncludeUsage = includeUsage
		tr := r.New(o)
		out, err := Translate(tr, r.Framing, upstream, nil)
		if err != nil {
			t.Fatalf("Event: %v", err)
		}
		if includeUsage {
			want = StreamUsage(out)
		}
		if got := tr.Usage(); got != want {
			t.Errorf("include_usage %v: the translator reports the usage %+v; the stream's usage chunk carries %+v", includeUsage, got, want)
		}
	}
}

// StreamUsage reads the usage a unified stream's usage chunk carries; not
// Known when it has none.
func StreamUsage(out []byte) providers.Used {
	var u providers.Used
	for _, data := range Data(out) {
		if bytes.Contains(data, []byte(`"usage":{`)) {
			u = providers.ReadUsage(gjson.GetBytes(data, "usage"))
		}
	}
	return u
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

// Data returns the data of each event of a unified stream.
func Data(out []byte) [][]byte {
	var ds [][]byte
	for _, ev := range bytes.SplitAfter(out, []byte("\n\n")) {
		if d, ok := bytes.CutPrefix(ev, []byte("data: ")); ok {
			ds = append(ds, bytes.TrimSuffix(d, []byte("\n\n")))
		}
	}
	return ds
}

// CheckUnifiedStream checks that out is a sequence of well-formed unified
// events (see CheckStreamShape), with "usage" as opts.IncludeUsage wants
// it: null in every chunk but the last one, which has no choices, with
// IncludeUsage; absent without.
func CheckUnifiedStream(t testing.TB, out []byte, opts providers.StreamOptions) {
	t.Helper()
	checkStream(t, out, &opts)
}

// CheckStreamShape checks that out is a sequence of well-formed unified
// events (see ValidUnifiedStream) and that its chunks share id and
// created.
func CheckStreamShape(t testing.TB, out []byte) {
	t.Helper()
	checkStream(t, out, nil)
}

// checkStream is CheckUnifiedStream, without the checks of usage when
// opts is nil.
func checkStream(t testing.TB, out []byte, opts *providers.StreamOptions) {
	t.Helper()
	if err := ValidUnifiedStream(out); err != "" {
		t.Fatalf("%s\nstream:\n%s", err, out)
	}
	var id, created string
	for _, data := range Data(out) {
		if data[0] != '{' {
			continue
		}
		chunk := gjson.ParseBytes(data)
		if chunk.Get("error").Exists() {
			continue
		}
		if id == "" {
			id, created = chunk.Get("id").Raw, chunk.Get("created").Raw
		} else if chunk.Get("id").Raw != id || chunk.Get("created").Raw != created {
			t.Errorf("chunks disagree on id or created: %s", data)
		}
		if opts == nil {
			continue
		}
		u := chunk.Get("usage")
		switch {
		case !opts.IncludeUsage && u.Exists():
			t.Errorf("usage without include_usage: %s", data)
		case opts.IncludeUsage && !u.Exists():
			t.Errorf("chunk without usage: %s", data)
		case opts.IncludeUsage && u.Type != gjson.Null && chunk.Get("choices.#").Int() != 0:
			t.Errorf("usage in a chunk with choices: %s", data)
		}
	}
}

// ValidUnifiedStream describes what is wrong with a unified stream, or
// returns "": every event a single data line, each a JSON value or
// [DONE], with [DONE] or an error event last, and no internal_error event
// (the one providers.Chunks writes in place of an event it was misused
// to write).
func ValidUnifiedStream(out []byte) string {
	if len(out) == 0 {
		return "the stream is empty"
	}
	events := bytes.SplitAfter(out, []byte("\n\n"))
	if len(events[len(events)-1]) == 0 {
		events = events[:len(events)-1]
	}
	for i, ev := range events {
		if !bytes.HasPrefix(ev, []byte("data: ")) || !bytes.HasSuffix(ev, []byte("\n\n")) {
			return "malformed event " + Quote(ev)
		}
		data := ev[len("data: ") : len(ev)-2]
		if bytes.ContainsAny(data, "\r\n") {
			return "event spans lines: " + Quote(ev)
		}
		last := i == len(events)-1
		switch {
		case string(data) == "[DONE]":
			if !last {
				return "events follow [DONE]"
			}
		case !json.Valid(data):
			return "invalid JSON: " + Quote(ev)
		case bytes.HasPrefix(data, []byte(`{"error":`)):
			if gjson.GetBytes(data, "error.code").Str == "internal_error" {
				return "the translator misused the JSON writer: " + Quote(ev)
			}
			if !last {
				return "events follow an error"
			}
		case last:
			return "the stream ends without [DONE] or an error"
		}
	}
	return ""
}

// Quote returns b as a JSON string, for messages.
func Quote(b []byte) string {
	q, _ := json.Marshal(string(b))
	return string(q)
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

// Fuzz feeds arbitrary bytes (and include_usage either way), cut by the
// replay's framing, through a new translator and checks that what comes
// out is a well-formed unified stream (see ValidUnifiedStream).
func (r Replay) Fuzz(f *testing.F) {
	f.Fuzz(func(t *testing.T, upstream []byte, includeUsage bool) {
		tr := r.New(providers.StreamOptions{IncludeUsage: includeUsage})
		out, err := Translate(tr, r.Framing, upstream, nil)
		switch {
		case err != nil && providers.StreamEnded(tr):
			// As the gateway: what follows the end is dropped.
			out = tr.Close(out)
		case err != nil:
			// The gateway ends the stream with its own error here; what
			// was written so far must still be well-formed events.
			out = append(out, "data: {\"error\":{}}\n\n"...)
		}
		if msg := ValidUnifiedStream(out); msg != "" {
			t.Fatalf("%s\nupstream: %q\nunified:\n%s", msg, upstream, out)
		}
	})
}

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

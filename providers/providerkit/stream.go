package providerkit

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
)

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

// CheckStreamUsage checks that a stream translator reports the usage its
// stream carries as data (StreamTranslator.Usage), which is what the
// gateway meters: translators newStream makes of upstream, cut by framing
// (nil: providers.SSE), report what the usage chunk of the stream
// translated with IncludeUsage says, whether opts asks for usage or not.
// It returns that usage.
func CheckStreamUsage(t testing.TB, newStream func(providers.StreamOptions) providers.StreamTranslator, framing providers.Framing, opts providers.StreamOptions, upstream []byte) providers.Used {
	t.Helper()
	var want providers.Used
	for _, includeUsage := range []bool{true, false} {
		o := opts
		o.IncludeUsage = includeUsage
		tr := newStream(o)
		out, err := Translate(tr, framing, upstream, nil)
		if err != nil {
			t.Fatalf("the stream: %v\nunified so far:\n%s", err, out)
		}
		if includeUsage {
			want = StreamUsage(out)
		}
		if got := tr.Usage(); got != want {
			t.Errorf("include_usage %v: the translator reports the usage %+v; the stream's usage chunk carries %+v", includeUsage, got, want)
		}
	}
	return want
}

// FuzzStream feeds arbitrary bytes (and include_usage either way), cut by
// framing (nil: providers.SSE), through a translator newStream makes and
// checks that what comes out is a well-formed unified stream (see
// ValidUnifiedStream), as the gateway would send it: a translator that
// has ended its stream (providers.StreamEnder) may refuse what follows;
// one that has not is followed by the gateway's error event.
func FuzzStream(f *testing.F, newStream func(providers.StreamOptions) providers.StreamTranslator, framing providers.Framing) {
	f.Fuzz(func(t *testing.T, upstream []byte, includeUsage bool) {
		CheckFuzzedStream(t, newStream(providers.StreamOptions{IncludeUsage: includeUsage}), framing, upstream)
	})
}

// CheckFuzzedStream translates upstream, whatever its bytes, with tr cut
// by framing (nil: providers.SSE), and checks the result as FuzzStream
// does.
func CheckFuzzedStream(t testing.TB, tr providers.StreamTranslator, framing providers.Framing, upstream []byte) {
	t.Helper()
	out, err := Translate(tr, framing, upstream, nil)
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
}

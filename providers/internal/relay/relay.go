// Package relay is the stream translator of a pass-through: the provider's
// events go to the client as they are, read for their usage and for the
// end of the answer, and — on a chat stream whose client did not ask for
// usage — without the usage the gateway asked for. providers/openai,
// providers/messages and providers/responses each make one for their API
// (docs/design/streaming.md).
package relay

import (
	"bytes"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/sse"
)

// Stream is a relay: a providers.Relay.
type Stream struct {
	// Read reads the usage of one event, as the provider sent it (its
	// lines without the blank line), into u; nil: the API's events carry
	// none.
	Read func(event []byte, u *providers.Used)

	// Strip takes out of a chat stream what the client did not ask for:
	// the usage chunk (StripChunk reports it) and every "usage":null.
	Strip      bool
	StripChunk func(event []byte) bool

	// Ends reports whether an event gives the client the whole answer:
	// the API's last event or an error event.
	Ends func(event []byte) bool

	// Incomplete appends the API's error event for a stream the provider
	// closed before its end (providers.StreamIncomplete).
	Incomplete func(dst []byte, e *providers.Error) []byte

	used  providers.Used
	ended bool
}

var _ providers.Relay = (*Stream)(nil)

// Event passes one event on, read, and without what Strip takes out.
func (s *Stream) Event(dst, ev []byte) ([]byte, error) {
	start := len(dst)
	dst = append(append(dst, ev...), "\n\n"...)
	return s.read(dst, start), nil
}

// Ended reports whether the client has the whole answer.
func (s *Stream) Ended() bool { return s.ended }

// Usage is the usage the events read so far reported.
func (s *Stream) Usage() providers.Used { return s.used }

// Close appends the API's error event when the provider closed its stream
// cleanly, between two events, but before its last one ([DONE],
// message_stop, response.completed): without it a client could not tell
// a cut-off answer from a whole one.
func (s *Stream) Close(dst []byte) []byte {
	if s.ended {
		return dst
	}
	return s.Incomplete(dst, providers.StreamIncomplete())
}

// Passes reports whether seg, whole events with "\n" line ends (what
// cutting them and writing each with its blank line gives byte for byte),
// may go to the client as it is: none with a usage to read or a field to
// take out. Then it notes whether they end the answer, as Event does.
func (s *Stream) Passes(seg []byte) bool {
	if s.Strip || !bytes.HasSuffix(seg, []byte("\n\n")) || bytes.IndexByte(seg, '\r') >= 0 {
		return false
	}
	if s.Read != nil {
		if _, plain := nullUsages(seg); !plain {
			return false
		}
	}
	if !s.ended {
		s.noteEnd(seg)
	}
	return true
}

// noteEnd notes whether one of the events of seg, whole events each
// followed by a blank line, gives the client the whole answer. Once one
// has, what follows changes nothing (a keep-alive, or a provider's chunk
// after [DONE], which the SDKs do not read).
func (s *Stream) noteEnd(seg []byte) {
	for len(seg) > 0 && !s.ended {
		ev := seg
		if i := bytes.Index(seg, []byte("\n\n")); i >= 0 {
			ev, seg = seg[:i], seg[i+2:]
		} else {
			seg = nil
		}
		// A stray line end (three in a row) starts the next event with
		// an empty line, which its fields ignore.
		if len(ev) > 0 && s.Ends(ev) {
			s.ended = true
		}
	}
}

// read looks at the events out[start:] the client is about to get.
func (s *Stream) read(out []byte, start int) []byte {
	out = s.readUsage(out, start)
	if !s.ended && len(out) > start {
		s.noteEnd(out[start:])
	}
	return out
}

// readUsage reads the usage in out[start:] and, when stripping, takes out
// what the client did not ask for.
func (s *Stream) readUsage(out []byte, start int) []byte {
	seg := out[start:]
	if len(seg) == 0 || s.Read == nil {
		return out
	}
	// Every chunk of a chat stream the gateway asked usage for carries
	// "usage":null, and usage is only ever in an object: a segment whose
	// every "usage" is such a field has nothing to read, and stripping it
	// is dropping those fields. One scan tells; only a segment with more
	// in it (the usage chunk, once a stream) is cut into events and read.
	if n, plain := nullUsages(seg); plain {
		if s.Strip && n > 0 {
			return stripNullUsages(out, start, n)
		}
		return out
	}
	return s.readEvents(out, start)
}

// readEvents reads out[start:] event by event, each parsed, and when
// stripping rewrites it without the usage chunk and the nullUsage fields.
func (s *Stream) readEvents(out []byte, start int) []byte {
	seg := out[start:]
	if !s.Strip {
		for rest := seg; ; {
			ev, r, ok := sse.Cut(rest)
			if !ok {
				break
			}
			s.Read(ev, &s.used)
			rest = r
		}
		return out
	}
	// Rewrite the segment without what the client did not ask for, in
	// place: what is kept of each event is never longer than the event
	// and its blank line, so w never passes the bytes still to be read.
	w := start
	for rest := seg; ; {
		ev, r, ok := sse.Cut(rest)
		if !ok {
			w += copy(out[w:], rest)
			break
		}
		rest = r
		s.Read(ev, &s.used)
		if s.StripChunk(ev) {
			continue
		}
		if i := bytes.Index(ev, []byte(nullUsage)); i >= 0 {
			w += copy(out[w:], ev[:i])
			w += copy(out[w:], ev[i+len(nullUsage):])
		} else {
			w += copy(out[w:], ev)
		}
		w += copy(out[w:], "\n\n")
	}
	return out[:w]
}

// nullUsage is the field every chunk of a chat stream that includes usage
// carries, but the last.
const nullUsage = `,"usage":null`

// nullUsages counts the "usage" keys in seg and reports whether each is a
// nullUsage field, no two in one event (a blank line between them): then
// seg holds no usage to read, and stripping it is dropping those n fields,
// as the event-by-event rewrite would. A "usage" inside a JSON string
// cannot match: its quotes are escaped there.
func nullUsages(seg []byte) (n int, plain bool) {
	prev := 0
	for from := 0; ; n++ {
		i := indexUsageKey(seg[from:])
		if i < 0 {
			return n, true
		}
		at := from + i - 1 // where nullUsage would start
		if at < 0 || !bytes.HasPrefix(seg[at:], []byte(nullUsage)) ||
			(n > 0 && !bytes.Contains(seg[prev:at], []byte("\n\n"))) {
			return n, false
		}
		from = at + len(nullUsage)
		prev = from
	}
}

// stripNullUsages drops the n nullUsage fields from out[start:], moving
// what follows each back over it.
func stripNullUsages(out []byte, start, n int) []byte {
	w, r := start, start
	for range n {
		i := r + indexUsageKey(out[r:]) - 1 // every "usage" is a nullUsage
		w += copy(out[w:], out[r:i])
		r = i + len(nullUsage)
	}
	w += copy(out[w:], out[r:])
	return out[:w]
}

// indexUsageKey returns the index of the first "usage" (quotes included)
// in b, or -1. It looks for the key's 'g', rare in a chunk, where
// bytes.Index would stop at every quote, every few bytes of JSON.
func indexUsageKey(b []byte) int {
	const key, g = `"usage"`, 4 // the 'g' is key[g]
	for from := 0; ; {
		i := bytes.IndexByte(b[from:], 'g')
		if i < 0 {
			return -1
		}
		at := from + i - g
		if at >= 0 && at+len(key) <= len(b) && string(b[at:at+len(key)]) == key {
			return at
		}
		from += i + 1
	}
}

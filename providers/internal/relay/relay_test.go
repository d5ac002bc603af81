package relay

import (
	"bytes"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/sse"
)

// chat is a relay of a chat stream, as providers/openai makes one.
func chat(strip bool) *Stream {
	return &Stream{
		Read: func(ev []byte, u *providers.Used) {
			if _, data := sse.Fields(ev); bytes.Contains(data, []byte(`"usage":{`)) {
				*u = providers.ReadUsage(gjson.GetBytes(data, "usage"))
			}
		},
		Strip: strip,
		StripChunk: func(ev []byte) bool {
			_, data := sse.Fields(ev)
			return bytes.Contains(data, []byte(`"usage":{`)) && len(gjson.GetBytes(data, "choices").Array()) == 0
		},
		Ends:       func(ev []byte) bool { return bytes.Contains(ev, []byte("[DONE]")) },
		Incomplete: func(dst []byte, e *providers.Error) []byte { return sse.AppendData(dst, e.JSON()) },
	}
}

// FuzzRead checks the relay's one scan of a segment against its
// event-by-event read, for segments of events as they reach read (each
// ending in a blank line "\n\n"): the same bytes to the client, the same
// usage read.
func FuzzRead(f *testing.F) {
	for _, s := range []string{
		`{"choices":[{"delta":{"content":"a"}}],"usage":null}`,
		`{"choices":[],"usage":{"prompt_tokens":14,"completion_tokens":3}}`,
		`{"choices":[{"delta":{"content":"\"usage\":null"}}],"usage":null}`,
		`{"usage":null,"choices":[],"usage":null}`,
		`{"choices":[{"delta":{"content":"usage"}}],"usage":null,"x":{"usage":null}}`,
		`[DONE]`,
	} {
		f.Add(s, s, true)
	}
	// Two fields in the second event: only its first goes.
	f.Add(`{"choices":[],"usage":null}`, `{"choices":[],"usage":null,"x":{},"usage":null}`, true)
	f.Fuzz(func(t *testing.T, a, b string, strip bool) {
		var seg []byte
		for _, data := range []string{a, b} {
			// Any data, as one event: no blank line inside it.
			data = strings.NewReplacer("\r", " ", "\n", " ").Replace(data)
			seg = append(append(append(seg, "data: "...), data...), "\n\n"...)
		}
		fast, slow := chat(strip), chat(strip)
		got := fast.read(bytes.Clone(seg), 0)
		want := slow.readEvents(bytes.Clone(seg), 0)
		if !bytes.Equal(got, want) || fast.used != slow.used {
			t.Errorf("segment %q, strip %v:\n got %q %+v\nwant %q %+v", seg, strip, got, fast.used, want, slow.used)
		}
	})
}

// FuzzNoteEnd checks the relay's search of a segment's events for one that
// ends the stream (cut at blank lines, stray line ends trimmed) against
// cutting the segment event by event: a segment of events with names, data
// and comments ends the stream when one of its events does, for the ways
// the APIs tell their last event (by name, by data, by a prefix of the
// data).
func FuzzNoteEnd(f *testing.F) {
	f.Add("", "[DONE]", ": keep-alive", "", true)
	f.Add("message_stop", `{"type":"message_stop"}`, "", "", false)
	f.Add("", `{"error":{"message":"x"}}`, "", `{"type":"response.completed"}`, true)
	f.Fuzz(func(t *testing.T, name, data, comment, data2 string, before bool) {
		clean := strings.NewReplacer("\r", " ", "\n", " ")
		ev := "data: " + clean.Replace(data)
		if name != "" {
			ev = "event: " + clean.Replace(name) + "\n" + ev
		}
		var seg string
		if before {
			seg += "data: " + clean.Replace(data2) + "\n\n"
		}
		seg += ev + "\n\n"
		if comment != "" {
			seg += ":" + clean.Replace(comment) + "\n\n"
		}
		for _, ends := range []func([]byte) bool{
			func(ev []byte) bool {
				n, _ := sse.Fields(ev)
				return string(n) == "message_stop" || string(n) == "error"
			},
			func(ev []byte) bool { _, d := sse.Fields(ev); return string(bytes.TrimSpace(d)) == "[DONE]" },
			func(ev []byte) bool {
				_, d := sse.Fields(ev)
				return bytes.HasPrefix(bytes.TrimSpace(d), []byte(`{"error"`))
			},
		} {
			// What cutting the segment event by event says.
			var want bool
			for rest := []byte(seg); ; {
				ev, r, ok := sse.Cut(rest)
				if !ok {
					break
				}
				want = want || len(ev) > 0 && ends(ev)
				rest = r
			}
			s := &Stream{Ends: ends}
			s.noteEnd([]byte(seg))
			if s.ended != want {
				t.Errorf("segment %q: ended %v, want %v", seg, s.ended, want)
			}
		}
	})
}

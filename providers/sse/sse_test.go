package sse

import (
	"bytes"
	"strings"
	"testing"
)

func TestCut(t *testing.T) {
	for _, tc := range []struct {
		name, in    string
		event, rest string
		ok          bool
	}{
		{"lf", "data: a\n\nrest", "data: a", "rest", true},
		{"crlf", "data: a\r\ndata: b\r\n\r\nrest", "data: a\r\ndata: b", "rest", true},
		{"cr", "data: a\r\rrest", "data: a", "rest", true},
		{"mixed", "event: x\ndata: a\r\n\nrest", "event: x\ndata: a", "rest", true},
		{"partial", "data: a\n", "", "data: a\n", false},
		{"no end", "data: a", "", "data: a", false},
		{"cr at end waits for lf", "data: a\r\n\r", "", "data: a\r\n\r", false},
		{"lone cr then cr", "data: a\r\r", "", "data: a\r\r", false},
		{"several", "data: 1\n\ndata: 2\n\n", "data: 1", "data: 2\n\n", true},
		{"comment", ": ping\n\ndata: 2\n\n", ": ping", "data: 2\n\n", true},
		{"leading blank line", "\n\ndata: a\n\n", "", "data: a\n\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev, rest, ok := Cut([]byte(tc.in))
			if ok != tc.ok || string(ev) != tc.event || string(rest) != tc.rest {
				t.Errorf("Cut(%q) = %q, %q, %v; want %q, %q, %v", tc.in, ev, rest, ok, tc.event, tc.rest, tc.ok)
			}
		})
	}
}

func TestFields(t *testing.T) {
	for _, tc := range []struct{ in, name, data string }{
		{"data: {\"a\":1}", "", `{"a":1}`},
		{"event: message_start\ndata: {}", "message_start", "{}"},
		{"data:nospace", "", "nospace"},
		{"data: one\ndata: two", "", "one\ntwo"},
		{"data: one\r\ndata: two\r\nevent: e", "e", "one\ntwo"},
		{": comment\ndata: x\nid: 7\nretry: 10", "", "x"},
		{"data: [DONE]", "", "[DONE]"},
		{"event: ping", "ping", ""},
	} {
		name, data := Fields([]byte(tc.in))
		if string(name) != tc.name || string(data) != tc.data {
			t.Errorf("Fields(%q) = %q, %q; want %q, %q", tc.in, name, data, tc.name, tc.data)
		}
	}
}

// cutAll cuts every complete event of stream, fed in pieces of the given
// sizes (cycled), as a writer that appends each piece to its pending bytes
// does.
func cutAll(stream []byte, sizes []int) []string {
	var events []string
	var pending []byte
	for i, k := 0, 0; i < len(stream); k++ {
		n := 1
		if len(sizes) > 0 {
			n = sizes[k%len(sizes)]%64 + 1
		}
		n = min(n, len(stream)-i)
		pending = append(pending, stream[i:i+n]...)
		i += n
		for {
			ev, rest, ok := Cut(pending)
			if !ok {
				break
			}
			events = append(events, string(ev))
			pending = append(pending[:0], rest...)
		}
	}
	return events
}

func FuzzCut(f *testing.F) {
	f.Add([]byte("event: a\ndata: 1\n\ndata: 2\ndata: 3\n\n: c\n\n"), []byte{3, 1, 7})
	f.Add([]byte("data: x\n\n\n\ndata: y\n\n"), []byte{1})
	f.Fuzz(func(t *testing.T, stream, sizes []byte) {
		// A lone "\r" at a piece boundary is legitimately ambiguous (it may
		// be the start of "\r\n"), so the property holds for "\n" streams.
		stream = bytes.ReplaceAll(stream, []byte("\r"), nil)
		whole := cutAll(stream, []int{len(stream)})
		var ns []int
		for _, s := range sizes {
			ns = append(ns, int(s))
		}
		if pieces := cutAll(stream, ns); strings.Join(pieces, "\x00") != strings.Join(whole, "\x00") {
			t.Fatalf("piecewise %q, whole %q", pieces, whole)
		}
	})
}

func BenchmarkCutFields(b *testing.B) {
	var sb strings.Builder
	for i := 0; i < 200; i++ {
		sb.WriteString("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"word \"}}\n\n")
	}
	stream := []byte(sb.String())
	b.ReportAllocs()
	b.SetBytes(int64(len(stream)))
	for b.Loop() {
		rest := stream
		for {
			ev, r, ok := Cut(rest)
			if !ok {
				break
			}
			_, _ = Fields(ev)
			rest = r
		}
	}
}

package sse

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

func TestCut(t *testing.T) {
	tests := []struct {
		name, in    string
		event, rest string
		ok          bool
	}{
		{"lf", "data: a\n\nrest", "data: a", "rest", true},
		{"crlf", "data: a\r\ndata: b\r\n\r\nrest", "data: a\r\ndata: b", "rest", true},
		{"cr", "data: a\r\rrest", "data: a", "rest", true},
		{"cr lines", "event: e\rdata: a\r\rrest", "event: e\rdata: a", "rest", true},
		{"lf then crlf", "data: a\n\r\nrest", "data: a", "rest", true},
		{"crlf then lf", "data: a\r\n\nrest", "data: a", "rest", true},
		{"lf then cr", "data: a\n\rrest", "data: a", "rest", true},
		{"cr then crlf", "data: a\r\r\nrest", "data: a", "rest", true},
		{"mixed line ends", "event: x\ndata: a\r\ndata: b\rdata: c\n\nrest", "event: x\ndata: a\r\ndata: b\rdata: c", "rest", true},
		{"exactly one event", "data: a\n\n", "data: a", "", true},
		{"several events", "data: 1\n\ndata: 2\n\ndata: 3\n\n", "data: 1", "data: 2\n\ndata: 3\n\n", true},
		{"comment event", ": ping\n\ndata: 2\n\n", ": ping", "data: 2\n\n", true},
		{"comment line in an event", ": keep-alive\ndata: 2\n\n", ": keep-alive\ndata: 2", "", true},
		{"leading blank line", "\n\ndata: a\n\n", "", "data: a\n\n", true},
		{"leading crlf blank line", "\r\n\r\ndata: a\n\n", "", "data: a\n\n", true},
		{"three line ends", "data: a\n\n\ndata: b\n\n", "data: a", "\ndata: b\n\n", true},

		// Incomplete: ok is false and rest is all of buf.
		{"empty", "", "", "", false},
		{"no line end", "data: a", "", "data: a", false},
		{"one line", "data: a\n", "", "data: a\n", false},
		{"one crlf line", "data: a\r\n", "", "data: a\r\n", false},
		{"partial second line", "data: a\ndata: b", "", "data: a\ndata: b", false},
		{"cr at the end may be crlf", "data: a\r", "", "data: a\r", false},
		{"crlf then cr at the end waits for lf", "data: a\r\n\r", "", "data: a\r\n\r", false},
		{"lf then cr at the end waits for lf", "data: a\n\r", "", "data: a\n\r", false},
		// "\r\r" at the end could be "\r" + "\r\n": the rest would then
		// start after the "\n". Cut waits for the next byte.
		{"cr cr at the end", "data: a\r\r", "", "data: a\r\r", false},
		{"lone lf", "\n", "", "\n", false},
		{"lone cr", "\r", "", "\r", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			buf := []byte(tc.in)
			ev, rest, ok := Cut(buf)
			if ok != tc.ok || string(ev) != tc.event || string(rest) != tc.rest {
				t.Errorf("Cut(%q) = %q, %q, %v; want %q, %q, %v", tc.in, ev, rest, ok, tc.event, tc.rest, tc.ok)
			}
			// Event and rest are windows into buf, not copies.
			if len(ev) > 0 && &ev[0] != &buf[0] {
				t.Error("event is a copy")
			}
			if len(rest) > 0 && &rest[len(rest)-1] != &buf[len(buf)-1] {
				t.Error("rest is a copy")
			}
		})
	}
}

func TestFields(t *testing.T) {
	tests := []struct{ name, in, event, data string }{
		{"data", `data: {"a":1}`, "", `{"a":1}`},
		{"event and data", "event: message_start\ndata: {}", "message_start", "{}"},
		{"data before event", "data: {}\nevent: e", "e", "{}"},
		{"no space", "event:e\ndata:nospace", "e", "nospace"},
		{"only one space is dropped", "data:  two", "", " two"},
		{"tab is kept", "data:\tx", "", "\tx"},
		{"colon in the value", "data: {\"a\":\"b:c\"}", "", `{"a":"b:c"}`},
		{"multi-line data", "data: one\ndata: two\ndata: three", "", "one\ntwo\nthree"},
		{"crlf", "data: one\r\ndata: two\r\nevent: e", "e", "one\ntwo"},
		{"cr", "event: e\rdata: one\rdata: two", "e", "one\ntwo"},
		{"empty data line first", "data:\ndata: x", "", "\nx"},
		{"empty data line last", "data: x\ndata:", "", "x\n"},
		{"bare data line", "data\ndata: x", "", "\nx"},
		{"bare data line only", "data", "", ""},
		{"comment", ": comment\ndata: x", "", "x"},
		{"comment that looks like data", ":data: x\ndata: y", "", "y"},
		{"id and retry ignored", "id: 7\ndata: x\nretry: 10", "", "x"},
		{"unknown field ignored", "foo: bar\ndata: x", "", "x"},
		{"field name is exact", "Data: x\n data: y\ndata : z", "", ""},
		{"last event name wins", "event: a\nevent: b\ndata: x", "b", "x"},
		{"done", "data: [DONE]", "", "[DONE]"},
		{"event without data", "event: ping", "ping", ""},
		{"empty", "", "", ""},
		{"leading line end", "\ndata: x", "", "x"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := []byte(tc.in)
			event, data := Fields(in)
			if string(event) != tc.event || string(data) != tc.data {
				t.Errorf("Fields(%q) = %q, %q; want %q, %q", tc.in, event, data, tc.event, tc.data)
			}
			if string(in) != tc.in {
				t.Errorf("Fields changed its input to %q", in)
			}
		})
	}
}

// TestFieldsNoData tells an event without data from one with empty data.
func TestFieldsNoData(t *testing.T) {
	if _, data := Fields([]byte("event: ping\n: c")); data != nil {
		t.Errorf("data %q, want nil", data)
	}
	if _, data := Fields([]byte("data:")); data == nil {
		t.Error("an empty data line gives nil data")
	}
}

func TestAppendData(t *testing.T) {
	got := AppendData([]byte("data: [x]\n\n"), []byte(`{"a":1}`))
	if want := "data: [x]\n\ndata: {\"a\":1}\n\n"; string(got) != want {
		t.Errorf("AppendData = %q, want %q", got, want)
	}
	ev, rest, ok := Cut(Done)
	if !ok || len(rest) != 0 {
		t.Fatalf("Done is not one event: %q", Done)
	}
	if _, data := Fields(ev); string(data) != "[DONE]" {
		t.Errorf("Done's data = %q", data)
	}
}

// writer frames events as the gateway's stream writer does: it appends each
// piece that arrives to its pending bytes and cuts every complete event.
type writer struct {
	pending []byte
	events  []string
}

func (w *writer) Write(p []byte) {
	w.pending = append(w.pending, p...)
	for {
		ev, rest, ok := Cut(w.pending)
		if !ok {
			break
		}
		w.events = append(w.events, string(ev))
		w.pending = append(w.pending[:0], rest...)
	}
}

// feed writes stream to a writer in pieces whose sizes cycle through sizes
// (each taken modulo 64, plus one); no sizes means the whole stream at once.
func feed(stream, sizes []byte) *writer {
	w := &writer{}
	if len(sizes) == 0 {
		w.Write(stream)
		return w
	}
	for i, k := 0, 0; i < len(stream); k++ {
		n := min(int(sizes[k%len(sizes)]%64)+1, len(stream)-i)
		w.Write(stream[i : i+n])
		i += n
	}
	return w
}

// FuzzCut checks that the events do not depend on how the stream is split
// into pieces: a writer that cuts events as pieces arrive sees the same
// events, and keeps the same pending bytes, as one that gets the stream at
// once. Every event is free of blank lines, and Fields reads any of them.
func FuzzCut(f *testing.F) {
	f.Add([]byte("event: a\ndata: 1\n\ndata: 2\ndata: 3\n\n: c\n\n"), []byte{3, 1, 7})
	f.Add([]byte("data: x\n\n\n\ndata: y\n\n"), []byte{1})
	f.Add([]byte("data: a\r\n\r\ndata: b\r\rdata: c\n\r\ndata: d\r\r\ndata: e\r"), []byte{0})
	f.Add([]byte("data: a\r\r\ndata: b\n\r\rdata: c\r\n\n"), []byte{0, 1, 2})
	f.Add([]byte("\r\n\r\n\r\r\n\n\r"), []byte{0})
	f.Fuzz(func(t *testing.T, stream, sizes []byte) {
		whole := feed(stream, nil)
		pieces := feed(stream, sizes)
		if fmt.Sprintf("%q", pieces.events) != fmt.Sprintf("%q", whole.events) {
			t.Fatalf("in pieces %q\nat once   %q", pieces.events, whole.events)
		}
		if !bytes.Equal(pieces.pending, whole.pending) {
			t.Fatalf("pending in pieces %q, at once %q", pieces.pending, whole.pending)
		}
		for _, ev := range whole.events {
			for _, blank := range []string{"\n\n", "\r\r", "\n\r"} {
				if strings.Contains(ev, blank) {
					t.Fatalf("event %q holds a blank line", ev)
				}
			}
			name, data := Fields([]byte(ev))
			if bytes.ContainsAny(name, "\r\n") || bytes.ContainsRune(data, '\r') {
				t.Fatalf("Fields(%q) = %q, %q", ev, name, data)
			}
		}
	})
}

// TestCutData: the one-line events CutData reads, and the others it
// leaves to Cut and Fields.
func TestCutData(t *testing.T) {
	for _, tt := range []struct {
		buf, data, rest string
		ok              bool
	}{
		{"data: {}\n\ndata: x", "{}", "data: x", true},
		{"data: [DONE]\n\n", "[DONE]", "", true},
		{"data: \n\n", "", "", true},
		{"data: x\n", "", "", false},
		{"data: x\ndata: y\n\n", "", "", false},
		{"event: e\ndata: x\n\n", "", "", false},
		{"data: x\r\n\r\n", "", "", false},
		{"data:x\n\n", "", "", false},
		{": comment\n\n", "", "", false},
	} {
		_, data, rest, ok := CutData([]byte(tt.buf))
		if ok != tt.ok || string(data) != tt.data || string(rest) != tt.rest {
			t.Errorf("CutData(%q) = %q, %q, %v; want %q, %q, %v", tt.buf, data, rest, ok, tt.data, tt.rest, tt.ok)
		}
	}
}

func BenchmarkCutFields(b *testing.B) {
	var sb strings.Builder
	for range 200 {
		sb.WriteString("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"word \"}}\n\n")
	}
	stream := []byte(sb.String())
	b.ReportAllocs()
	b.SetBytes(int64(len(stream)))
	for b.Loop() {
		rest := stream
		n := 0
		for {
			ev, r, ok := Cut(rest)
			if !ok {
				break
			}
			if _, data := Fields(ev); len(data) > 0 {
				n++
			}
			rest = r
		}
		if n != 200 {
			b.Fatalf("%d events", n)
		}
	}
}

// cutByByte is Cut as first written, testing each byte for a line end;
// FuzzCutSame holds the vectorised one to it.
func cutByByte(buf []byte) (event, rest []byte, ok bool) {
	for i := 0; i < len(buf); i++ {
		c := buf[i]
		if c != '\n' && c != '\r' {
			continue
		}
		j := i + 1
		if c == '\r' && j < len(buf) && buf[j] == '\n' {
			j++
		}
		if j >= len(buf) {
			return nil, buf, false
		}
		switch buf[j] {
		case '\n':
			return buf[:i], buf[j+1:], true
		case '\r':
			if j+1 < len(buf) && buf[j+1] == '\n' {
				return buf[:i], buf[j+2:], true
			}
			if j+1 == len(buf) {
				return nil, buf, false
			}
			return buf[:i], buf[j+1:], true
		}
		i = j - 1
	}
	return nil, buf, false
}

// FuzzCutSame checks that Cut cuts every input as the byte-by-byte version
// does, and that lineEnd finds what bytes.IndexAny(…, "\r\n") finds (Fields
// used that before lineEnd).
func FuzzCutSame(f *testing.F) {
	for _, s := range []string{"event: a\ndata: 1\n\ndata: 2\ndata: 3\n\n: c\n\n", "data: a\r\n\r\ndata: b\r\rdata: c\n\r\ndata: d\r\r\ndata: e\r",
		"data: a\r\r\ndata: b\n\r\rdata: c\r\n\n", "\r\n\r\n\r\r\n\n\r", "data: x\rdata: y\n\n", "event: e\r\ndata\r\ndata: z\n\r"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, buf []byte) {
		for i := 0; i <= len(buf); i++ {
			want := bytes.IndexAny(buf[i:], "\r\n")
			if want >= 0 {
				want += i
			}
			if got := lineEnd(buf, i); got != want {
				t.Fatalf("lineEnd(%q, %d) = %d, want %d", buf, i, got, want)
			}
		}
		for rest := buf; ; {
			ev, r, ok := Cut(rest)
			wev, wr, wok := cutByByte(rest)
			if ok != wok || !bytes.Equal(ev, wev) || !bytes.Equal(r, wr) {
				t.Fatalf("Cut(%q) = %q, %q, %v; byte by byte %q, %q, %v", rest, ev, r, ok, wev, wr, wok)
			}
			// CutData, when it reads an event, reads what Cut and Fields do.
			if dev, data, dr, dok := CutData(rest); dok {
				name, wdata := Fields(ev)
				if !ok || !bytes.Equal(dev, ev) || !bytes.Equal(dr, r) || name != nil || !bytes.Equal(data, wdata) {
					t.Fatalf("CutData(%q) = %q, %q, %q; Cut and Fields %q, %q, %q, name %q", rest, dev, data, dr, ev, wdata, r, name)
				}
			}
			if !ok {
				break
			}
			rest = r
		}
	})
}

// TestAppendDataLines: data of several lines reads back, through Cut and
// Fields, as it was given.
func TestAppendDataLines(t *testing.T) {
	for _, data := range []string{`{"a":1}`, "{\"a\":\n1}", "a\n\nb\n", ""} {
		ev, rest, ok := Cut(AppendDataLines(nil, []byte(data)))
		if !ok || len(rest) != 0 {
			t.Fatalf("%q: not one event", data)
		}
		if _, got := Fields(ev); string(got) != data {
			t.Errorf("%q read back as %q", data, got)
		}
	}
}

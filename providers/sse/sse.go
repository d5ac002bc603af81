// Package sse frames server-sent events (text/event-stream) as they arrive,
// without waiting for the stream to end.
package sse

import "bytes"

// Cut finds the first complete event in buf: the bytes before the first
// blank line. It returns the event without its terminating blank line and
// the rest of buf after it. ok is false when buf holds no complete event
// yet. Line ends may be "\n", "\r\n" or "\r", as the SSE specification allows.
func Cut(buf []byte) (event, rest []byte, ok bool) {
	for i := lineEnd(buf, 0); i >= 0; i = lineEnd(buf, i) {
		// buf[i] ends a line; see whether the next line is empty.
		c := buf[i]
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
				// "\r" at the end may be the start of "\r\n": wait.
				return nil, buf, false
			}
			return buf[:i], buf[j+1:], true
		}
		i = j // the next line starts there
	}
	return nil, buf, false
}

// lineEnd returns the index of the first '\r' or '\n' in buf at or after
// from, or -1. It looks for '\n' and then for a '\r' before it, two
// vectorised scans of the line, rather than testing each byte for both (a
// stream is read through Cut and Fields on every event, most of its bytes
// in long data lines).
func lineEnd(buf []byte, from int) int {
	end := len(buf)
	lf := bytes.IndexByte(buf[from:], '\n')
	if lf >= 0 {
		end = from + lf
	}
	if cr := bytes.IndexByte(buf[from:end], '\r'); cr >= 0 {
		return from + cr
	}
	if lf < 0 {
		return -1
	}
	return end
}

// CutData is Cut and Fields at once for the most common event, a single
// "data: " line ended by a blank line ("data: x\n\n"): it returns the
// event (without its blank line), its data and the rest of buf. ok is
// false for any other event, which Cut and Fields read.
func CutData(buf []byte) (event, data, rest []byte, ok bool) {
	const prefix = "data: "
	if len(buf) < len(prefix) || string(buf[:len(prefix)]) != prefix {
		return nil, nil, nil, false
	}
	i := bytes.IndexByte(buf, '\n')
	if i < 0 || i+1 >= len(buf) || buf[i+1] != '\n' || bytes.IndexByte(buf[:i], '\r') >= 0 {
		return nil, nil, nil, false
	}
	return buf[:i], buf[len(prefix):i], buf[i+2:], true
}

// Fields returns the event's name (the "event:" field) and its data: the
// "data:" lines joined with "\n", per the SSE specification. Comment lines
// (starting with ':') and unknown fields are ignored.
func Fields(event []byte) (name, data []byte) {
	multi := false
	for len(event) > 0 {
		var line []byte
		if i := lineEnd(event, 0); i >= 0 {
			line = event[:i]
			if event[i] == '\r' && i+1 < len(event) && event[i+1] == '\n' {
				i++
			}
			event = event[i+1:]
		} else {
			line, event = event, nil
		}
		field, value, found := bytes.Cut(line, []byte{':'})
		if !found {
			// A line without a colon is a field with an empty value: a
			// bare "data" line adds an empty line to the data.
			value = line[len(line):]
		}
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
		switch string(field) {
		case "event":
			name = value
		case "data":
			if data == nil {
				data = value
			} else {
				if !multi {
					data = append([]byte(nil), data...)
					multi = true
				}
				data = append(append(data, '\n'), value...)
			}
		}
	}
	return name, data
}

// AppendData appends one event holding data as its single data line.
func AppendData(dst, data []byte) []byte {
	dst = append(dst, "data: "...)
	dst = append(dst, data...)
	return append(dst, "\n\n"...)
}

// AppendDataLines appends one event holding data, each of its lines on a
// data line of its own: data that may hold a line end ("\n", as Fields
// joins a multi-line event's data lines), which AppendData would send on
// as a line that is not data.
func AppendDataLines(dst, data []byte) []byte {
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			return AppendData(dst, data)
		}
		dst = append(append(dst, "data: "...), data[:i+1]...)
		data = data[i+1:]
	}
}

// Done is the event that ends a unified (OpenAI) stream.
var Done = []byte("data: [DONE]\n\n")

package responses

import (
	"github.com/tidwall/gjson"
)

// inputDecoder streams the input of a custom tool call out of the
// arguments of the function it was sent as, {"input":"…"}, as the
// arguments' fragments arrive: it decodes the string's escapes as soon as
// they are complete. Arguments of another shape (another key first, or no
// string) are left to customInput once they are whole.
type inputDecoder struct {
	state   uint8
	matched int    // bytes of argsPrefix matched
	pending []byte // escaped string bytes not yet decoded
	esc     int    // bytes still owed by an escape sequence in pending; -1: after a backslash
	escAt   int    // where in pending that escape starts
	hold    int    // where in pending a high surrogate waits for its pair; -1: none
	scratch []byte
}

// Decoder states.
const (
	decPrefix   = iota // before the string: matching argsPrefix
	decString          // inside the string
	decEnd             // the string has ended
	decFallback        // not {"input":"…": wait for the whole arguments
)

// argsPrefix is what the arguments start with, give or take whitespace
// between the tokens.
const argsPrefix = `{"` + CustomInputParam + `":"`

func newInputDecoder() inputDecoder { return inputDecoder{hold: -1} }

// streaming reports whether the decoder has been streaming the input (or
// still may): otherwise the input comes whole from customInput.
func (d *inputDecoder) streaming() bool { return d.state != decFallback && d.state != decPrefix }

// feed consumes one fragment of the arguments and appends the input text
// that became decodable to text.
func (d *inputDecoder) feed(text []byte, frag string) []byte {
	i := 0
	for d.state == decPrefix && i < len(frag) {
		c := frag[i]
		i++
		if (c == ' ' || c == '\t' || c == '\n' || c == '\r') && wsAllowed(d.matched) {
			continue
		}
		if c != argsPrefix[d.matched] {
			d.state = decFallback
			return text
		}
		if d.matched++; d.matched == len(argsPrefix) {
			d.state = decString
		}
	}
	if d.state != decString {
		return text
	}
	for ; i < len(frag); i++ {
		c := frag[i]
		switch {
		case d.esc == -1: // the character after a backslash
			if c == 'u' {
				d.esc = 4
			} else {
				d.esc = 0
				d.hold = -1
			}
		case d.esc > 0: // a hex digit of \uXXXX
			if d.esc--; d.esc == 0 {
				d.pending = append(d.pending, c)
				d.escapeDone()
				continue
			}
		case c == '\\':
			d.esc, d.escAt = -1, len(d.pending)
		case c == '"':
			d.state = decEnd
			return d.decode(text, len(d.pending))
		default:
			d.hold = -1
		}
		d.pending = append(d.pending, c)
	}
	cut := len(d.pending)
	if d.esc != 0 {
		cut = d.escAt
	}
	if d.hold >= 0 && d.hold < cut {
		cut = d.hold
	}
	return d.decode(text, cut)
}

// escapeDone notes a \uXXXX escape that just completed at the end of
// pending: a high surrogate waits for the low one that should follow it.
func (d *inputDecoder) escapeDone() {
	e := d.pending[d.escAt:]
	if len(e) == 6 && (e[2] == 'd' || e[2] == 'D') && (e[3] >= '8' && e[3] <= '9' || e[3] >= 'a' && e[3] <= 'b' || e[3] >= 'A' && e[3] <= 'B') {
		if d.hold < 0 {
			d.hold = d.escAt
			return
		}
	}
	d.hold = -1
}

// wsAllowed reports whether whitespace may come before argsPrefix[i]: before
// the brace, the key, the colon and the string.
func wsAllowed(i int) bool {
	return i == 0 || i == 1 || i == len(argsPrefix)-2 || i == len(argsPrefix)-1
}

// decode appends the text of pending[:cut] and drops it from pending.
func (d *inputDecoder) decode(text []byte, cut int) []byte {
	if cut == 0 {
		return text
	}
	d.scratch = append(append(append(d.scratch[:0], '"'), d.pending[:cut]...), '"')
	text = append(text, gjson.ParseBytes(d.scratch).Str...)
	n := copy(d.pending, d.pending[cut:])
	d.pending = d.pending[:n]
	if d.esc != 0 {
		d.escAt -= cut
	}
	if d.hold >= 0 {
		d.hold -= cut
	}
	return text
}

// finish appends what is left to decode when the arguments are whole: a
// held high surrogate, alone. An escape cut off by the end is dropped.
func (d *inputDecoder) finish(text []byte) []byte {
	if d.state != decString {
		return text
	}
	cut := len(d.pending)
	if d.esc != 0 {
		cut = d.escAt
	}
	d.hold = -1
	return d.decode(text, cut)
}

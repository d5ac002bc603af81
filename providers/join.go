package providers

import (
	"bufio"
	"io"
)

// JoinLines reads newline-ended lines from r and returns them joined with
// commas, without the last newline: a records file streamed as the
// members of a JSON array.
func JoinLines(r io.Reader) io.Reader { return &commaJoin{r: bufio.NewReaderSize(r, 64<<10)} }

type commaJoin struct {
	r       *bufio.Reader
	pending bool // a newline was read and not yet written as a comma
}

func (c *commaJoin) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		ch, err := c.r.ReadByte()
		if err != nil {
			if n > 0 && err == io.EOF {
				return n, nil
			}
			return n, err
		}
		if ch == '\n' {
			c.pending = true
			continue
		}
		if c.pending {
			p[n] = ','
			n++
			c.pending = false
			if n == len(p) {
				_ = c.r.UnreadByte()
				return n, nil
			}
		}
		p[n] = ch
		n++
	}
	return n, nil
}

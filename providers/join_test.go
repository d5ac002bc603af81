package providers

import (
	"io"
	"strings"
	"testing"
)

// FuzzJoinLines: the lines joined with commas, whatever the reads' sizes.
func FuzzJoinLines(f *testing.F) {
	f.Add("{\"a\":1}\n{\"b\":2}\n", 3)
	f.Add("x\n", 1)
	f.Add("xy\n", -6)
	f.Fuzz(func(t *testing.T, records string, size int) {
		if !strings.HasSuffix(records, "\n") || strings.Contains(records, "\n\n") || strings.HasPrefix(records, "\n") {
			return // records are non-empty lines, each ending in a newline
		}
		size = (size%7+7)%7 + 1
		r := JoinLines(strings.NewReader(records))
		var got []byte
		buf := make([]byte, size)
		for {
			n, err := r.Read(buf)
			got = append(got, buf[:n]...)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		want := strings.Join(strings.Split(strings.TrimSuffix(records, "\n"), "\n"), ",")
		if string(got) != want {
			t.Errorf("joined %q, want %q", got, want)
		}
	})
}

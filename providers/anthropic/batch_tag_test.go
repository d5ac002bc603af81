package anthropic

import (
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// tagRef is what tagIDs should read of records: tag written after the
// opening of each line that starts as Encode writes one.
func tagRef(records, tag string) string {
	lines := strings.SplitAfter(records, "\n")
	for i, l := range lines {
		if rest, ok := strings.CutPrefix(l, idPrefix); ok {
			lines[i] = idPrefix + tag + rest
		}
	}
	return strings.Join(lines, "")
}

// FuzzTagIDs: whatever the records, read at once or a byte at a time,
// tagIDs tags the custom_id of each line Encode wrote and passes every
// other byte as it is.
func FuzzTagIDs(f *testing.F) {
	long := idPrefix + `0","params":{"x":"` + strings.Repeat("a", 70<<10) + `"}}` + "\n"
	f.Add(idPrefix+`0","params":{}}`+"\n"+idPrefix+`1","params":{}}`+"\n", "mg-abc-")
	f.Add(long+idPrefix+`1","params":{}}`+"\n", "mg-abc-")
	f.Add("{\"custom\n"+idPrefix+"2\"}", "t-")
	f.Add("", "mg-")
	f.Fuzz(func(t *testing.T, records, tag string) {
		want := tagRef(records, tag)
		for name, r := range map[string]io.Reader{
			"whole":    tagIDs(strings.NewReader(records), tag),
			"one byte": iotest.OneByteReader(tagIDs(iotest.OneByteReader(strings.NewReader(records)), tag)),
		} {
			got, err := io.ReadAll(r)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if string(got) != want {
				t.Errorf("%s: %d bytes, want %d", name, len(got), len(want))
			}
		}
	})
}

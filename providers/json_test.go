package providers

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestAppendString(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", `""`},
		{"plain", `"plain"`},
		{`a "quote" and \ backslash`, `"a \"quote\" and \\ backslash"`},
		{"line\nbreak\r\ttab", `"line\nbreak\r\ttab"`},
		{"\x00\x1f", `"\u0000\u001f"`},
		{"ünïcødé ✓ 日本", `"ünïcødé ✓ 日本"`},
		{"sep\u2028par\u2029", `"sep\u2028par\u2029"`},
		{"bad \xff utf8", `"bad \ufffd utf8"`},
		{"<html>&", `"<html>&"`},
	} {
		if got := string(AppendString(nil, tc.in)); got != tc.want {
			t.Errorf("AppendString(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "a\"b", "\x00", "\xff\xfe", "\u2028", "日本語", "\\u0000"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := AppendString([]byte("x"), s)[1:]
		if !json.Valid(out) {
			t.Fatalf("invalid JSON %q for %q", out, s)
		}
		var back string
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatal(err)
		}
		if want := replaceInvalid(s); back != want {
			t.Fatalf("round trip %q, want %q", back, want)
		}
	})
}

// replaceInvalid replaces each byte of s that is not part of valid UTF-8
// with U+FFFD, as AppendString does.
func replaceInvalid(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

func BenchmarkAppendString(b *testing.B) {
	s := strings.Repeat("The quick brown fox says \"hi\"\n and jumps — ✓. ", 20)
	buf := make([]byte, 0, 2*len(s))
	b.ReportAllocs()
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		buf = AppendString(buf[:0], s)
	}
}

package providers

import (
	"strings"
	"testing"
	"unicode"
)

// estimateTextTokensRef is EstimateTextTokens as first written, one rune
// at a time: the reference the ASCII shortcut is held to.
func estimateTextTokensRef(s string) int {
	ascii, other, cjk := 0, 0, 0
	for _, r := range s {
		switch {
		case r < 0x80:
			ascii++
		case unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul):
			cjk++
		default:
			other++
		}
	}
	return ceilDiv(ascii, 4) + ceilDiv(other, 2) + cjk
}

func TestEstimateTextTokens(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{
		{"", 0},
		{"a", 1},
		{"abcd", 1},
		{"abcde", 2},
		{"привет", 3},               // 6 Cyrillic letters / 2
		{"日本語", 3},                  // one each
		{"hello мир 日本", 2 + 2 + 2}, // 6 ASCII (with both spaces) / 4 → 2, 3 Cyrillic / 2 → 2, 2 Han
		{"\xff\xfe", 1},             // invalid UTF-8: two replacement runes / 2
	} {
		if got := EstimateTextTokens(tc.in); got != tc.want {
			t.Errorf("EstimateTextTokens(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func FuzzEstimateTextTokens(f *testing.F) {
	for _, s := range []string{"", "plain ascii text", "mixed текст 日本語 text", "\xff\x80abc", "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := EstimateTextTokens(s), estimateTextTokensRef(s); got != want {
			t.Errorf("EstimateTextTokens(%q) = %d, the reference %d", s, got, want)
		}
	})
}

// maxTextTokensRef is MaxTextTokens written plainly, a byte and a switch
// at a time: the reference its tables and its run of non-ASCII bytes
// eight at a time are held to.
func maxTextTokensRef(s string) int64 {
	if s == "" {
		return 0
	}
	class := func(b byte) int {
		switch {
		case b >= 0x80:
			return classHigh
		case 'a' <= b && b <= 'z':
			return classLower
		case 'A' <= b && b <= 'Z':
			return classUpper
		case '0' <= b && b <= '9':
			return classDigit
		case b == ' ':
			return classSpace
		case b == '\n':
			return classNewline
		case b == '\t':
			return classTab
		case b < 0x20 || b == 0x7f:
			return classControl
		}
		return classPunct
	}
	n := 0
	p2, p1 := classEdge, classEdge
	for i := 0; i < len(s); i++ {
		c := class(s[i])
		n += textCost(p2, p1, c)
		p2, p1 = p1, c
	}
	n += textCost(p2, p1, classEdge)
	return int64((n+7)/8 + 2)
}

func TestMaxTextTokens(t *testing.T) {
	// In eighths of a token, rounded up, and two tokens for the edges.
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"", 0},
		{"a", 1 + 2},                       // a letter alone is a token
		{"hello", 3 + 2},                   // 4 for the first letter, 5 for each other: 24
		{"hello world", 6 + 2},             // the space joins "world": 48
		{"HTTP", 4 + 2},                    // 7 for an uppercase letter after one: 25
		{"getValue", 6 + 2},                // 8 for an uppercase letter after a lowercase one: 42
		{"Hello", 4 + 2},                   // 6 for a lowercase letter after an uppercase one: 25
		{"a!b!", 5 + 2},                    // a mark 8; a letter after one 8, alone 4 more: 36
		{"12345", 5 + 2},                   // 8 a digit
		{"x 1", 3 + 2},                     // and 8 for the space before a number: 24
		{"end ", 3 + 2},                    // 8 for a space at the end: 22
		{"a  b", 3 + 2},                    // 8 for a run of spaces: 24
		{strings.Repeat(" ", 100), 14 + 2}, // then 1 a space: 8 + 98
		{strings.Repeat("\n", 5), 2 + 2},   // 8 for a newline, 2 for each after it: 16
		{"\n\t\tx", 3 + 2},                 // 1 a tab after a newline or a tab: 18
		{"日本語", 9 + 2},                     // 8 a byte of a non-ASCII character
		{"привет", 12 + 2},
		{"👍", 4 + 2},
		{"\x00\x01", 2 + 2}, // 8 a control character
	} {
		if got := MaxTextTokens(tc.in); got != tc.want {
			t.Errorf("MaxTextTokens(%q) = %d, want %d", tc.in, got, tc.want)
		}
		if got, want := MaxTextTokens(tc.in), maxTextTokensRef(tc.in); got != want {
			t.Errorf("MaxTextTokens(%q) = %d, the reference %d", tc.in, got, want)
		}
	}
}

func FuzzMaxTextTokens(f *testing.F) {
	for _, s := range []string{"", "plain ascii text", "mixed текст 日本語 text", "\xff\x80abc", "é", "日本語のテキスト。日本語のテキスト。", "a  b\n\n\t\tc 12 x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, want := MaxTextTokens(s), maxTextTokensRef(s)
		if got != want {
			t.Fatalf("MaxTextTokens(%q) = %d, the reference %d", s, got, want)
		}
		// Never more than two tokens a byte, and the edge.
		if got > 2*int64(len(s))+2 {
			t.Fatalf("MaxTextTokens(%q) = %d for %d bytes", s, got, len(s))
		}
	})
}

func BenchmarkEstimateTextTokens(b *testing.B) {
	prose := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 40)
	for _, bc := range []struct{ name, s string }{
		{"ascii", prose},
		{"mixed", prose + "Съешь же ещё этих мягких французских булок. 日本語のテキスト。"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.s)))
			for b.Loop() {
				EstimateTextTokens(bc.s)
			}
		})
	}
}

func BenchmarkMaxTextTokens(b *testing.B) {
	prose := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 40)
	for _, bc := range []struct{ name, s string }{
		{"ascii", prose},
		{"mixed", prose + "Съешь же ещё этих мягких французских булок. 日本語のテキスト。"},
		{"cjk", strings.Repeat("我们今天讨论的是人工智能在教育领域的应用和未来发展趋势。", 60)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.s)))
			for b.Loop() {
				MaxTextTokens(bc.s)
			}
		})
	}
}

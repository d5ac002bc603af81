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

package providers

import "unicode"

// EstimateTextTokens estimates the tokens of a text without a tokenizer
// (each model family has its own, and shipping them would cost megabytes
// of vocabulary): ASCII characters / 4 (the rule of thumb OpenAI and
// Anthropic publish for English prose and code), characters of other
// alphabets (Cyrillic, Greek, accented Latin …, which tokenizers cut
// finer) / 2, and one token per Han, Hiragana, Katakana or Hangul
// character, each rounded up.
func EstimateTextTokens(s string) int {
	// Most text is ASCII: count it eight bytes at a time, then a byte at a
	// time, and decode runes only from the first byte that is not.
	i := 0
	for ; i+8 <= len(s); i += 8 {
		// One load (the compiler combines the eight).
		w := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		if w&0x8080808080808080 != 0 {
			break
		}
	}
	for i < len(s) && s[i] < 0x80 {
		i++
	}
	ascii, other, cjk := i, 0, 0
	for _, r := range s[i:] {
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

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// EstimateTokens estimates the input tokens of the embeddings request:
// exact for token-id inputs, EstimateTextTokens of each text otherwise.
// Providers that report no count (Gemini's API) are accounted with it.
func (r *EmbeddingsRequest) EstimateTokens() int64 {
	var n int64
	for _, t := range r.Texts {
		n += int64(EstimateTextTokens(t))
	}
	for _, t := range r.Tokens {
		n += int64(len(t))
	}
	return n
}

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

// MaxTextTokens bounds from above the tokens a provider counts for a text,
// for the limits and budgets that must not be passed. Tokenizers differ
// (each model family has its own, and shipping them would cost megabytes
// of vocabulary), so it counts what byte-level BPE tokenizers spend at
// worst on each kind of text, reading the bytes once, each by its class
// and the classes of the two bytes before it:
//
//   - every byte of a non-ASCII character costs a token: no such tokenizer
//     spends more than a token a byte, and rare characters of every script
//     (Han, Hangul, emoji, combining marks) cost that much;
//   - a letter costs 1/2 token at the start of a word and a token after a
//     digit or a mark; after a letter, a lowercase one costs 5/8 (random
//     letters merge little), 3/4 after an uppercase one, and an uppercase
//     one 7/8, a whole token after a lowercase one (a new piece, as in
//     camelCase and base64); a letter standing alone between non-letters
//     costs 1/2 more;
//   - a digit costs a token (some tokenizers split numbers digit by digit),
//     and the space before a number another; a mark, a control character
//     and a carriage return cost a token each;
//   - a space costs nothing after a word (it joins the next token) but a
//     token at the end of the text; a run of spaces costs a token, then 1/8
//     a space (runs merge); a newline costs a token, 1/4 after another; a
//     tab a token, 1/8 after a tab or a newline (indentation);
//   - a text that is not empty costs two tokens more, for where it starts
//     and ends: a short text's letters seldom merge.
//
// Prose and code in every script come out at a few times what such
// tokenizers count, and texts drawn at random from any one class of
// characters at least at what they count; only a string of letters crafted
// against one tokenizer's merges can cost it more.
func MaxTextTokens(s string) int64 {
	if s == "" {
		return 0
	}
	return (maxTextEighths(s)+7)/8 + 2
}

// maxTextEighths is MaxTextTokens' sum before rounding, in eighths of a
// token.
func maxTextEighths(s string) int64 {
	var n int64
	p2, p1 := uint(classEdge), uint(classEdge)
	for i := 0; i < len(s); i++ {
		c := uint(byteClasses[s[i]])
		n += int64(textCosts[(p2<<8|p1<<4|c)&0xfff])
		p2, p1 = p1, c
		switch c {
		case classLower:
			// The rest of a word: 5/8 a letter, whatever came before.
			j := i + 1
			for j < len(s) && s[j]-'a' < 26 {
				j++
			}
			if j > i+1 {
				n += int64(j-i-1) * 5
				i = j - 1
				p2 = classLower
			}
		case classHigh:
			// A run of non-ASCII characters costs a token a byte: eight
			// bytes at a time.
			for i+9 <= len(s) && highWord(s[i+1:i+9]) {
				n += 8 * 8
				i += 8
			}
		}
	}
	return n + int64(textCosts[(p2<<8|p1<<4|classEdge)&0xfff])
}

// highWord reports whether the eight bytes of s are all of non-ASCII
// characters.
func highWord(s string) bool {
	w := uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
	return w&0x8080808080808080 == 0x8080808080808080
}

// The classes of bytes MaxTextTokens costs.
const (
	classLower = iota
	classUpper
	classDigit
	classPunct
	classSpace
	classNewline
	classTab
	classControl // other control characters, carriage return included
	classHigh    // a byte of a non-ASCII character
	classEdge    // before the first byte and after the last
	textClasses
)

// byteClasses is the class of each byte.
var byteClasses = func() (t [256]uint8) {
	for b := range len(t) {
		c := classPunct
		switch {
		case b >= 0x80:
			c = classHigh
		case b >= 'a' && b <= 'z':
			c = classLower
		case b >= 'A' && b <= 'Z':
			c = classUpper
		case b >= '0' && b <= '9':
			c = classDigit
		case b == ' ':
			c = classSpace
		case b == '\n':
			c = classNewline
		case b == '\t':
			c = classTab
		case b < 0x20 || b == 0x7f:
			c = classControl
		}
		t[b] = uint8(c)
	}
	return t
}()

// textCosts is textCost of every three classes, indexed by
// p2<<8 | p1<<4 | c.
var textCosts = func() (t [1 << 12]uint8) {
	for p2 := range textClasses {
		for p1 := range textClasses {
			for c := range textClasses {
				t[p2<<8|p1<<4|c] = uint8(textCost(p2, p1, c))
			}
		}
	}
	return t
}()

func isLetter(class int) bool { return class == classLower || class == classUpper }

// textCost is what a byte of class c costs after bytes of classes p2 and
// p1, in eighths of a token (MaxTextTokens says why); classEdge as c is
// the end of the text.
func textCost(p2, p1, c int) int {
	n := 0
	if isLetter(p1) && !isLetter(p2) && !isLetter(c) {
		n += 4 // the letter before stood alone: a token
	}
	switch c {
	case classLower, classUpper:
		switch {
		case p1 == classDigit || p1 == classPunct:
			n += 8
		case !isLetter(p1):
			n += 4
		case c == classLower && p1 == classLower:
			n += 5
		case c == classLower:
			n += 6
		case p1 == classLower:
			n += 8
		default:
			n += 7
		}
	case classDigit:
		n += 8
		if p1 == classSpace {
			n += 8
		}
	case classPunct, classControl, classHigh:
		n += 8
	case classSpace:
		switch p1 {
		case classSpace:
			if p2 == classSpace {
				n++
			} else {
				n += 8
			}
		case classNewline, classTab:
			n++
		case classControl:
			n += 8
		}
	case classNewline:
		if p1 == classNewline {
			n += 2
		} else {
			n += 8
		}
	case classTab:
		if p1 == classTab || p1 == classNewline {
			n++
		} else {
			n += 8
		}
	case classEdge:
		if p1 == classSpace && p2 != classSpace {
			n += 8 // a space at the end is a token
		}
	}
	return n
}

package providers

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tiktoken-go/tokenizer"
)

// The reference MaxTextTokens is held to: OpenAI's tokenizers of today
// and of the models before them (o200k_base, cl100k_base), byte-level
// BPE as most providers' are, from tiktoken-go, which embeds their
// vocabularies and so runs offline. It is a dependency of this test only:
// shipping a tokenizer in the gateway would cost megabytes of vocabulary
// for one model family's counts, and the estimate is made per request.

// naturalTexts are prose and code in several scripts.
var naturalTexts = map[string]string{
	"english": "The committee met on Tuesday to review the proposal. After a long discussion, " +
		"they agreed that the budget should be raised by 12% next year, although two members " +
		"voted against it. \"We can't keep doing more with less,\" the chair said.\n\n" +
		"I'd like to thank everyone who helped: Anna, Bob and the team at the lab.",
	"go": "func (s *Server) handle(w http.ResponseWriter, r *http.Request) {\n" +
		"\tctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)\n\tdefer cancel()\n" +
		"\tif err := s.db.PingContext(ctx); err != nil {\n\t\thttp.Error(w, err.Error(), http.StatusServiceUnavailable)\n\t\treturn\n\t}\n" +
		"\tfmt.Fprintf(w, \"ok %d\\n\", len(s.items))\n}\n",
	"python": "def fib(n: int) -> list[int]:\n    \"\"\"Return the first n Fibonacci numbers.\"\"\"\n" +
		"    a, b = 0, 1\n    out = []\n    for _ in range(n):\n        out.append(a)\n        a, b = b, a + b\n    return out\n",
	"json": `{"id":"chatcmpl-9x8YzQ","object":"chat.completion","created":1718000000,"model":"gpt-4o-2024-08-06",` +
		`"choices":[{"index":0,"message":{"role":"assistant","content":"Hello! How can I help?"},"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":12,"completion_tokens":7,"total_tokens":19},"tags":["a","b"],"price":9.99,"ok":true}`,
	"chinese":    "人工智能正在改变我们的生活方式。从医疗诊断到自动驾驶，从语音助手到机器翻译，这项技术的应用越来越广泛。然而，我们也需要认真思考它带来的伦理问题和社会影响。",
	"japanese":   "吾輩は猫である。名前はまだ無い。どこで生れたかとんと見当がつかぬ。何でも薄暗いじめじめした所でニャーニャー泣いていた事だけは記憶している。",
	"korean":     "오늘은 날씨가 정말 좋네요. 우리는 공원에 가서 산책을 하고 점심을 먹었습니다. 다음 주에는 친구들과 함께 바다에 갈 예정입니다.",
	"russian":    "Съешь же ещё этих мягких французских булок, да выпей чаю. Москва — столица России, крупнейший по численности населения город страны.",
	"arabic":     "اللغة العربية هي إحدى أكثر اللغات انتشارا في العالم، ويتحدث بها أكثر من ثلاثمائة مليون إنسان.",
	"hindi":      "भारत एक विशाल देश है जिसमें अनेक भाषाएँ बोली जाती हैं। हिंदी यहाँ की सबसे अधिक बोली जाने वाली भाषा है।",
	"thai":       "ภาษาไทยเป็นภาษาที่มีวรรณยุกต์ และเขียนโดยไม่มีการเว้นวรรคระหว่างคำ ทำให้การตัดคำเป็นเรื่องยาก",
	"greek":      "Η Ελλάδα είναι χώρα της νοτιοανατολικής Ευρώπης με πλούσια ιστορία και πολιτισμό.",
	"hebrew":     "עברית היא שפה שמית, ששימשה במשך אלפי שנים כשפת הקודש של העם היהודי.",
	"vietnamese": "Tiếng Việt là ngôn ngữ chính thức của Việt Nam, được viết bằng chữ Quốc ngữ dựa trên bảng chữ cái Latinh.",
	"emoji":      "Great job team! 🎉🎉 Let's ship it 🚀 — family: 👨‍👩‍👧‍👦, flags: 🇫🇷🇯🇵, skin tones: 👍🏽👋🏿 ❤️",
}

// randomTexts draws texts from each class of characters: ASCII letters,
// digits, marks, whitespace and control characters alone and mixed,
// base64 and hex, and the letters of many scripts, rare ones included.
func randomTexts(rng *rand.Rand) map[string][]string {
	runes := func(ranges ...rune) []rune {
		var out []rune
		for i := 0; i < len(ranges); i += 2 {
			for r := ranges[i]; r <= ranges[i+1]; r++ {
				if utf8.ValidRune(r) {
					out = append(out, r)
				}
			}
		}
		return out
	}
	ascii := func(s string) []rune { return []rune(s) }
	classes := map[string][]rune{
		"lowercase":        ascii("abcdefghijklmnopqrstuvwxyz"),
		"uppercase":        ascii("ABCDEFGHIJKLMNOPQRSTUVWXYZ"),
		"letters":          ascii("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"),
		"letters+space":    ascii("abcdefghijklmnopqrstuvwxyz "),
		"a and spaces":     ascii("a "),
		"letters+marks":    ascii("ab!?"),
		"digits":           ascii("0123456789"),
		"digits+space":     ascii("0123456789 "),
		"numbers":          ascii("0123456789,. -"),
		"hex":              ascii("0123456789abcdef"),
		"base64":           ascii("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="),
		"punctuation":      ascii("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"),
		"punctuation+sp":   ascii("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~ "),
		"whitespace":       ascii(" \n\t\r"),
		"printable":        runes(0x20, 0x7e),
		"printable+ws":     append(runes(0x20, 0x7e), '\n', '\t', '\r'),
		"control":          runes(0, 0x1f, 0x7f, 0x7f),
		"latin-1":          runes(0xa0, 0xff),
		"latin extended":   runes(0x100, 0x24f),
		"combining marks":  runes(0x300, 0x36f),
		"greek":            runes(0x370, 0x3ff),
		"cyrillic":         runes(0x400, 0x4ff),
		"hebrew":           runes(0x590, 0x5ff),
		"arabic":           runes(0x600, 0x6ff),
		"devanagari":       runes(0x900, 0x97f),
		"thai":             runes(0xe00, 0xe7f),
		"general marks":    runes(0x2000, 0x206f),
		"kana":             runes(0x3040, 0x30ff),
		"han":              runes(0x4e00, 0x9fff),
		"hangul":           runes(0xac00, 0xd7a3),
		"private use":      runes(0xe000, 0xf8ff),
		"emoji":            runes(0x1f300, 0x1faff),
		"han extension b":  runes(0x20000, 0x2a6df),
		"every bmp letter": runes(0x80, 0xd7ff, 0xe000, 0xfffd),
	}
	out := map[string][]string{}
	for name, alphabet := range classes {
		for _, n := range []int{1, 2, 3, 5, 8, 13, 30, 100, 600} {
			for range 8 {
				var b strings.Builder
				for range n {
					b.WriteRune(alphabet[rng.IntN(len(alphabet))])
				}
				out[name] = append(out[name], b.String())
			}
		}
	}
	pick := func(s string) byte { return s[rng.IntN(len(s))] }
	structured := map[string]func(b *strings.Builder){
		"pseudo-words": func(b *strings.Builder) {
			for range 1 + rng.IntN(4) {
				b.WriteByte(pick("bcdfghjklmnpqrstvwxz"))
				b.WriteByte(pick("aeiou"))
			}
			b.WriteByte(' ')
		},
		"identifiers": func(b *strings.Builder) {
			parts := []string{"get", "Set", "value", "HTTP", "json", "Parse", "req", "Handler", "x", "ID", "_", "ctx", "err", "Buf"}
			for range 1 + rng.IntN(4) {
				b.WriteString(parts[rng.IntN(len(parts))])
			}
			b.WriteString([]string{"(", ")", ".", ", ", " := ", "\n\t", "{", "}", "; ", "->", "::"}[rng.IntN(11)])
		},
		"uuids": func(b *strings.Builder) {
			for i, n := range []int{8, 4, 4, 4, 12} {
				if i > 0 {
					b.WriteByte('-')
				}
				for range n {
					b.WriteByte(pick("0123456789abcdef"))
				}
			}
			b.WriteByte(' ')
		},
		"numbers in text": func(b *strings.Builder) {
			fmt.Fprintf(b, "%d%s", rng.Int64N(1<<uint(1+rng.IntN(50))), []string{", ", " ", ".", "\n", ";", "e-", " x "}[rng.IntN(7)])
		},
		"json": func(b *strings.Builder) {
			fmt.Fprintf(b, "%q:", strings.Repeat(string(pick("abcdefghijklmnopqrstuvwxyz_")), 1+rng.IntN(3)))
			switch rng.IntN(4) {
			case 0:
				fmt.Fprintf(b, "%d,", rng.IntN(100000))
			case 1:
				fmt.Fprintf(b, "%q,", []string{"", "ok", "hello there", "a-b_c", "x1"}[rng.IntN(5)])
			case 2:
				b.WriteString("[true,false,null],")
			default:
				fmt.Fprintf(b, "%.3f,", rng.Float64()*1000)
			}
		},
		"urls": func(b *strings.Builder) {
			fmt.Fprintf(b, "https://%c%c%c.example.com/%c%c/%d?q=%c%c%c ", pick("abcdefghijklmnopqrstuvwxyz"), pick("abcdefghijklmnopqrstuvwxyz"),
				pick("abcdefghijklmnopqrstuvwxyz"), pick("abcdefghijklmnopqrstuvwxyz-_"), pick("abcdefghijklmnopqrstuvwxyz"), rng.IntN(1e6),
				pick("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789%"), pick("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789%"), pick("abcdefghijklmnopqrstuvwxyz"))
		},
		"emoji sequences": func(b *strings.Builder) {
			b.WriteRune(rune(0x1f468 + rng.IntN(4)))
			if rng.IntN(2) == 0 {
				b.WriteRune(rune(0x1f3fb + rng.IntN(5)))
			}
			if rng.IntN(2) == 0 {
				b.WriteString("\u200d")
				b.WriteRune(rune(0x1f466 + rng.IntN(4)))
			}
			if rng.IntN(3) == 0 {
				b.WriteString("\ufe0f")
			}
		},
		"indented lines": func(b *strings.Builder) {
			b.WriteString("\n" + strings.Repeat([]string{"\t", "  ", "    "}[rng.IntN(3)], rng.IntN(5)))
			b.WriteString([]string{"x", "return nil", "}", "if err != nil {", "# note", "- item"}[rng.IntN(6)])
		},
	}
	for name, piece := range structured {
		for _, n := range []int{1, 3, 20, 150} {
			for range 6 {
				var b strings.Builder
				for range n {
					piece(&b)
				}
				out[name] = append(out[name], b.String())
			}
		}
	}
	// Mixtures: pieces of natural texts of every script, one after
	// another.
	names := make([]string, 0, len(naturalTexts))
	for name := range naturalTexts {
		names = append(names, name)
	}
	slices.Sort(names)
	for range 40 {
		var b strings.Builder
		for range 2 + rng.IntN(6) {
			s := naturalTexts[names[rng.IntN(len(names))]]
			i, j := rng.IntN(len(s)), rng.IntN(len(s))
			for i > 0 && !utf8.RuneStart(s[i]) {
				i--
			}
			for j < len(s) && !utf8.RuneStart(s[j]) {
				j++
			}
			b.WriteString(s[min(i, j):max(i, j)])
		}
		out["mixed scripts"] = append(out["mixed scripts"], b.String())
	}
	return out
}

// TestMaxTextTokensBoundsTokenizers: MaxTextTokens is at least what
// OpenAI's tokenizers count for prose and code in every script, and for
// texts drawn at random from every class of characters, short and long;
// and it stays within four times their count for prose and code, so that
// limits are not spent on nothing.
func TestMaxTextTokensBoundsTokenizers(t *testing.T) {
	var codecs []tokenizer.Codec
	for _, enc := range []tokenizer.Encoding{tokenizer.O200kBase, tokenizer.Cl100kBase} {
		c, err := tokenizer.Get(enc)
		if err != nil {
			t.Fatal(err)
		}
		codecs = append(codecs, c)
	}
	count := func(s string) int {
		n := 0
		for _, c := range codecs {
			ids, _, err := c.Encode(s)
			if err != nil {
				t.Fatalf("%s: %v", c.GetName(), err)
			}
			n = max(n, len(ids))
		}
		return n
	}
	check := func(class, s string) float64 {
		t.Helper()
		bound, tokens := MaxTextTokens(s), count(s)
		if bound < int64(tokens) {
			t.Errorf("%s: MaxTextTokens %d, the tokenizers count %d: %q", class, bound, tokens, s)
		}
		return float64(bound) / float64(max(tokens, 1))
	}
	for name, s := range naturalTexts {
		for _, text := range []string{s, strings.Repeat(s+"\n", 20)} {
			if r := check(name, text); r > 4 {
				t.Errorf("%s: MaxTextTokens is %.1f times the tokenizers' count", name, r)
			} else {
				t.Logf("%-12s %6d bytes: %.2f times the tokenizers' count", name, len(text), r)
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	classes := randomTexts(rng)
	names := make([]string, 0, len(classes))
	for name := range classes {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		least := 0.0
		for i, s := range classes[name] {
			if r := check(name, s); i == 0 || r < least {
				least = r
			}
		}
		t.Logf("%-16s at least %.2f times the tokenizers' count", name, least)
	}
}

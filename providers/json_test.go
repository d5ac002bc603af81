package providers

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
	"unsafe"

	"github.com/tidwall/gjson"
)

func TestAppendString(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"empty", "", `""`},
		{"plain", "plain", `"plain"`},
		{"quotes and backslash", `a "quote" and \ backslash`, `"a \"quote\" and \\ backslash"`},
		{"short escapes", "line\nbreak\r\ttab", `"line\nbreak\r\ttab"`},
		{"other control chars", "\x00\x01\x08\x0b\x0c\x1b\x1f", `"\u0000\u0001\u0008\u000b\u000c\u001b\u001f"`},
		{"DEL and space pass", "\x7f ~", "\"\x7f ~\""},
		{"slash and html pass", "</script><b>&amp;", `"</script><b>&amp;"`},
		{"unicode", "ünïcødé ✓ 日本 😀", `"ünïcødé ✓ 日本 😀"`},
		{"line and paragraph separators", "sep\u2028par\u2029", `"sep\u2028par\u2029"`},
		{"separators only", "\u2028\u2029\u2028", `"\u2028\u2029\u2028"`},
		{"neighbours of the separators pass", "\u2027\u202a", "\"\u2027\u202a\""},
		{"replacement char passes", "\uFFFD", "\"\uFFFD\""},
		{"invalid byte", "bad \xff utf8", `"bad \ufffd utf8"`},
		{"each invalid byte", "\xff\xfe", `"\ufffd\ufffd"`},
		{"truncated sequence", "\xe6\x97", `"\ufffd\ufffd"`},
		{"truncated at the end", "日\xe6", `"日\ufffd"`},
		{"overlong", "\xc0\xaf", `"\ufffd\ufffd"`},
		{"surrogate half", "\xed\xa0\x80", `"\ufffd\ufffd\ufffd"`},
		{"continuation only", "a\x80b", `"a\ufffdb"`},
		{"escape after invalid", "\xff\"\n", `"\ufffd\"\n"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(AppendString(nil, tc.in)); got != tc.want {
				t.Errorf("AppendString(%q) = %s, want %s", tc.in, got, tc.want)
			}
			// Appending keeps what dst held.
			if got := string(AppendString([]byte("x:"), tc.in)); got != "x:"+tc.want {
				t.Errorf("AppendString(x:, %q) = %s", tc.in, got)
			}
		})
	}
}

func TestAppendInt(t *testing.T) {
	for n, want := range map[int64]string{0: "0", -1: "-1", 1 << 40: "1099511627776"} {
		if got := string(AppendInt([]byte("n="), n)); got != "n="+want {
			t.Errorf("AppendInt(%d) = %s", n, got)
		}
	}
}

// FuzzAppendString checks that the output is always valid JSON that reads
// back as s. Invalid UTF-8 reads back with each invalid byte replaced by
// U+FFFD, as encoding/json writes it and as converting to []rune does.
// (strings.ToValidUTF8(s, "\uFFFD") is not the oracle: it replaces a run of
// invalid bytes with a single U+FFFD.)
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "a\"b", "\x00", "\xff\xfe", "\u2028", "日本語", "\\u0000", "\xed\xa0\x80", "日\xe6", "</script>"} {
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
		want := string([]rune(s))
		if utf8.ValidString(s) {
			want = s
		}
		if back != want {
			t.Fatalf("round trip %q, want %q", back, want)
		}
		// encoding/json agrees.
		std, _ := json.Marshal(s)
		var stdBack string
		if err := json.Unmarshal(std, &stdBack); err != nil || stdBack != back {
			t.Fatalf("encoding/json reads %q, we %q", stdBack, back)
		}
		// Safe for JavaScript: no raw separators, no raw control bytes.
		if bytes.Contains(out, []byte("\u2028")) || bytes.Contains(out, []byte("\u2029")) {
			t.Fatalf("raw U+2028/U+2029 in %q", out)
		}
		if i := bytes.IndexFunc(out, func(r rune) bool { return r < 0x20 }); i >= 0 {
			t.Fatalf("raw control byte in %q", out)
		}
	})
}

func TestValidJSON(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	tests := []struct {
		name, in string
		want     bool
	}{
		{"object", `{"a":[1,{"b":null}]}`, true},
		{"scalar", `1`, true},
		{"invalid", `{"a":}`, false},
		{"empty", ``, false},
		{"max depth", deep(MaxDepth), true},
		{"max depth of objects", strings.Repeat(`{"a":`, MaxDepth-1) + `{}` + strings.Repeat("}", MaxDepth-1), true},
		{"one too deep", deep(MaxDepth + 1), false},
		{"one too deep, mixed", strings.Repeat(`[{"a":`, (MaxDepth+1)/2) + `[]` + strings.Repeat("}]", (MaxDepth+1)/2), false},
		{"brackets in a string", `["` + strings.Repeat("[", 2*MaxDepth) + `"]`, true},
		{"escaped quote in a string", `["\"` + strings.Repeat("{", 2*MaxDepth) + `\\"]`, true},
		{"deep after a string", `["\\",` + deep(MaxDepth) + `]`, false},
		{"many but shallow", "[" + strings.Repeat("[],", 10*MaxDepth) + "[]]", true},
		{"unterminated string", `["` + strings.Repeat("[", 2*MaxDepth), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ValidJSON([]byte(tc.in)); got != tc.want {
				t.Errorf("ValidJSON = %v, want %v", got, tc.want)
			}
		})
	}
}

// FuzzValidJSON checks ValidJSON against encoding/json, and the depth
// guard, with small limits the fuzzer can reach, against the depth that
// encoding/json's tokens reach.
func FuzzValidJSON(f *testing.F) {
	for _, s := range []string{`{"a":[1,"]"]}`, `["\"[", {}]`, `[[[]]]`, `{"a":}`, `"\\"`, `[{"\\\"":[[]]}]`} {
		f.Add([]byte(s), uint8(2))
	}
	f.Fuzz(func(t *testing.T, b []byte, limit uint8) {
		valid := json.Valid(b)
		if got := ValidJSON(b); got != (valid && !tooDeep(b, MaxDepth)) {
			t.Fatalf("ValidJSON(%q) = %v, encoding/json %v", b, got, valid)
		}
		if !valid {
			return
		}
		depth, deepest := 0, 0
		dec := json.NewDecoder(bytes.NewReader(b))
		for {
			tok, err := dec.Token()
			if err != nil {
				break
			}
			switch tok {
			case json.Delim('['), json.Delim('{'):
				depth++
				deepest = max(deepest, depth)
			case json.Delim(']'), json.Delim('}'):
				depth--
			}
		}
		n := int(limit % 8)
		if got := tooDeep(b, n); got != (deepest > n) {
			t.Fatalf("tooDeep(%q, %d) = %v, depth %d", b, n, got, deepest)
		}
	})
}

func BenchmarkAppendString(b *testing.B) {
	for _, bc := range []struct{ name, s string }{
		{"ascii", strings.Repeat("The quick brown fox jumps over the lazy dog. ", 20)},
		{"escapes", strings.Repeat("The quick brown fox says \"hi\"\n\tand jumps. ", 20)},
		{"unicode", strings.Repeat("Le renard brun — rapide ✓ saute 日本語. ", 20)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			buf := make([]byte, 0, 2*len(bc.s))
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.s)))
			for b.Loop() {
				buf = AppendString(buf[:0], bc.s)
			}
		})
	}
}

// BenchmarkTooDeep measures the depth guard that ValidJSON adds to gjson's
// validation.
func BenchmarkTooDeep(b *testing.B) {
	body := []byte(`{"model":"m","messages":[` + strings.Repeat(`{"role":"user","content":"The quick brown fox jumps over the lazy dog, \"twice\"."},`, 20) +
		`{"role":"user","content":"end"}]}`)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if tooDeep(body, MaxDepth) {
			b.Fatal("too deep")
		}
	}
}

func TestCompactJSON(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{}`, `{}`},
		{` { "a" : [ 1 , 2 ] } `, `{"a":[1,2]}`},
		{"{\n\t\"a b\": \"c  d\"\r}", `{"a b":"c  d"}`},
		{`{"q": "say \"hi there\""}`, `{"q":"say \"hi there\""}`},
		{`{"k\\": " v "}`, `{"k\\":" v "}`},
		{`{ "a" : [1, 2,  {"b c":"d \" e\\"} ],` + "\n\t" + `"f": "x y" }`, `{"a":[1,2,{"b c":"d \" e\\"}],"f":"x y"}`},
	}
	for _, tt := range tests {
		if got := CompactJSON(tt.in); got != tt.want {
			t.Errorf("CompactJSON(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if got := string(AppendCompactJSON([]byte("x:"), tt.in)); got != "x:"+tt.want {
			t.Errorf("AppendCompactJSON(%q) = %q, want x:%q", tt.in, got, tt.want)
		}
		// The same in pieces of every size.
		for size := 1; size <= len(tt.in); size++ {
			var c JSONCompactor
			var out []byte
			changed := false
			for i := 0; i < len(tt.in); i += size {
				var ch bool
				out, ch = c.Append(out, tt.in[i:min(i+size, len(tt.in))])
				changed = changed || ch
			}
			if string(out) != tt.want || changed != (tt.in != tt.want) {
				t.Fatalf("%q in pieces of %d: %s (changed %v)", tt.in, size, out, changed)
			}
			// Compact: a piece without whitespace to leave out stands
			// for itself.
			var cc JSONCompactor
			out = out[:0]
			for i := 0; i < len(tt.in); i += size {
				piece := tt.in[i:min(i+size, len(tt.in))]
				compacted, ch := cc.Compact(nil, piece)
				if !ch {
					if len(compacted) != 0 {
						t.Fatalf("Compact(%q) appended %q without a change", piece, compacted)
					}
					compacted = []byte(piece)
				}
				out = append(out, compacted...)
			}
			if string(out) != tt.want {
				t.Fatalf("%q in pieces of %d through Compact: %s", tt.in, size, out)
			}
		}
	}
	// Without whitespace, the same string, not a copy.
	in := `{"a":" b "}`
	if got := CompactJSON(in); unsafe.StringData(got) != unsafe.StringData(in) {
		t.Error("CompactJSON copied a compact text")
	}
	if n := testing.AllocsPerRun(100, func() { CompactJSON(in) }); n != 0 {
		t.Errorf("CompactJSON of a compact text allocates %v times", n)
	}
}

func TestJSONScan(t *testing.T) {
	// o: outside every string, i: inside one (its quotes included).
	tests := []struct{ in, want string }{
		{`{"a\"{":["}",1],"b\\":{}} `, "oiiiiiiooiiiooooiiiiiooooo"},
		{`"\\\""`, "iiiiii"},
		{`[1,"",2]`, "oooiiooo"},
	}
	for _, tt := range tests {
		var s JSONScan
		var got strings.Builder
		for i := 0; i < len(tt.in); i++ {
			if s.Outside(tt.in[i]) {
				got.WriteByte('o')
			} else {
				got.WriteByte('i')
			}
		}
		if got.String() != tt.want {
			t.Errorf("Outside of %s: %s, want %s", tt.in, got.String(), tt.want)
		}
	}
}

func TestIsIntIsBool(t *testing.T) {
	for in, want := range map[string][2]bool{
		`1`: {true, false}, `-12`: {true, false}, `0`: {true, false},
		`1.0`: {false, false}, `1e3`: {false, false}, `2E1`: {false, false},
		`"1"`: {false, false}, `true`: {false, true}, `false`: {false, true}, `null`: {false, false},
	} {
		v := gjson.Parse(in)
		if got := [2]bool{IsInt(v), IsBool(v)}; got != want {
			t.Errorf("IsInt, IsBool(%s) = %v, want %v", in, got, want)
		}
	}
}

// TestTooDeepAtItsLength checks the count's shortcut: an input no longer
// than the limit is never counted, one byte more is.
func TestTooDeepAtItsLength(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{strings.Repeat("[", MaxDepth), false},
		{strings.Repeat("[", MaxDepth+1), true},
		{strings.Repeat("{", MaxDepth+1), true},
		{`"` + strings.Repeat("[", MaxDepth) + `"`, false},
	} {
		if got := tooDeep([]byte(tc.in), MaxDepth); got != tc.want {
			t.Errorf("tooDeep(%d bytes starting %.8q) = %v, want %v", len(tc.in), tc.in, got, tc.want)
		}
	}
}

package responses

import (
	"math/rand/v2"
	"testing"
)

// TestInputDecoder streams the input out of custom tool arguments cut into
// random fragments, and checks that the text equals customInput of the
// whole arguments, as the answer that is not streamed gives it.
func TestInputDecoder(t *testing.T) {
	args := []string{
		`{"input":"*** Begin Patch\n*** End Patch\n"}`,
		`{ "input" : "spaced"}`,
		"{\n  \"input\":\n  \"new\\nlines\"\n}",
		`{"input":"quotes \" and \\ backslashes \\\\ and \/ slash"}`,
		`{"input":"unicode \u00e9\u2713 and a pair \ud83d\ude00 and raw ✓ é"}`,
		`{"input":"a lone high \ud83d then text, a lone low \ude00, two highs \ud83d\ud83d\ude00"}`,
		`{"input":"\t\b\f\r controls"}`,
		`{"input":""}`,
		`{"input":"x","other":1}`,
		`{"other":1,"input":"not first"}`,
		`{"input":42}`,
		`{"patch":"-a\n+b"}`,
		`not json`,
		``,
		`{}`,
		`["input"]`,
	}
	rng := rand.New(rand.NewPCG(7, 7))
	for _, a := range args {
		want := customInput(a)
		for range 200 {
			d := newInputDecoder()
			var text []byte
			for rest := a; len(rest) > 0; {
				n := min(len(rest), 1+rng.IntN(8))
				text = d.feed(text, rest[:n])
				rest = rest[n:]
			}
			if d.streaming() {
				text = d.finish(text)
			} else {
				if len(text) > 0 {
					t.Fatalf("%s: text %q streamed before falling back", a, text)
				}
				text = []byte(customInput(a))
			}
			if string(text) != want {
				t.Fatalf("%s: streamed %q, want %q", a, text, want)
			}
		}
	}
}

// TestInputDecoderStreams checks that the decoder gives text as soon as it
// can, not at the end.
func TestInputDecoderStreams(t *testing.T) {
	d := newInputDecoder()
	var text []byte
	for _, frag := range []string{`{"inp`, `ut": "Hel`, `lo \`, `u00e9`, `\ud83d`, `\ude00 wo`, `rld"`, `}`} {
		n := len(text)
		text = d.feed(text, frag)
		t.Logf("%q → %q", frag, text[n:])
	}
	if string(text) != "Hello é😀 world" {
		t.Fatalf("text %q", text)
	}
	d = newInputDecoder()
	if got := d.feed(nil, `{"input":"abc\`); string(got) != "abc" {
		t.Errorf("the text before an unfinished escape: %q", got)
	}
	if got := d.feed(nil, `ud83d`); len(got) != 0 {
		t.Errorf("a high surrogate is held for its pair, got %q", got)
	}
	if got := d.feed(nil, `\ude00"`); string(got) != "😀" {
		t.Errorf("the pair: %q", got)
	}
}

package guardrails

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// corpusLine is one labelled example of testdata/corpus: the text with
// its markers taken out, and the matches they marked.
type corpusLine struct {
	file string
	line int
	text string
	want []Match
}

// readCorpus reads every testdata/corpus/*.txt. A line is one text;
// ⟦kind|…⟧ marks what the detector of kind must find there, and nothing
// else may be found. Lines starting with '#' and empty lines are skipped.
func readCorpus(t testing.TB) []corpusLine {
	t.Helper()
	files, err := filepath.Glob("testdata/corpus/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus: %v", err)
	}
	var lines []corpusLine
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for n := 1; sc.Scan(); n++ {
			raw := sc.Text()
			if raw == "" || strings.HasPrefix(raw, "#") {
				continue
			}
			cl := corpusLine{file: filepath.Base(name), line: n}
			var b strings.Builder
			for {
				i := strings.Index(raw, "⟦")
				if i < 0 {
					b.WriteString(raw)
					break
				}
				b.WriteString(raw[:i])
				raw = raw[i+len("⟦"):]
				bar, end := strings.IndexByte(raw, '|'), strings.Index(raw, "⟧")
				if bar < 0 || end < bar {
					t.Fatalf("%s:%d: a marker without its end", name, n)
				}
				k, err := ParseKind(raw[:bar])
				if err != nil {
					t.Fatalf("%s:%d: %v", name, n, err)
				}
				start := b.Len()
				b.WriteString(raw[bar+1 : end])
				cl.want = append(cl.want, Match{Start: start, End: b.Len(), Kind: k})
				raw = raw[end+len("⟧"):]
			}
			cl.text = b.String()
			lines = append(lines, cl)
		}
		f.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return lines
}

// TestCorpus runs every detector over the labelled corpus: each marked
// match must be found exactly, and nothing else. It logs each detector's
// precision and recall.
func TestCorpus(t *testing.T) {
	lines := readCorpus(t)
	d := NewDetectors(Kinds()...)
	var tp, fp, fn [numKinds]int
	texts := 0
	for _, cl := range lines {
		texts++
		got := d.Find(cl.text, nil)
		for _, g := range got {
			if containsMatch(cl.want, g) {
				tp[g.Kind]++
				continue
			}
			fp[g.Kind]++
			t.Errorf("%s:%d: false positive %s %q in %q", cl.file, cl.line, g.Kind, cl.text[g.Start:g.End], cl.text)
		}
		for _, w := range cl.want {
			if !containsMatch(got, w) {
				fn[w.Kind]++
				t.Errorf("%s:%d: missed %s %q in %q (found %v)", cl.file, cl.line, w.Kind, cl.text[w.Start:w.End], cl.text, describe(cl.text, got))
			}
		}
	}
	t.Logf("%d texts", texts)
	for k := range numKinds {
		p, r := ratio(tp[k], tp[k]+fp[k]), ratio(tp[k], tp[k]+fn[k])
		t.Logf("%-12s %3d found, %d false, %d missed: precision %.3f, recall %.3f", k, tp[k], fp[k], fn[k], p, r)
	}
}

func containsMatch(ms []Match, m Match) bool {
	for _, x := range ms {
		if x == m {
			return true
		}
	}
	return false
}

func describe(text string, ms []Match) []string {
	var s []string
	for _, m := range ms {
		s = append(s, m.Kind.String()+":"+text[m.Start:m.End])
	}
	return s
}

func ratio(a, b int) float64 {
	if b == 0 {
		return 1
	}
	return float64(a) / float64(b)
}

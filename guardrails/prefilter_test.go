package guardrails

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// scanAlways is a scanner that always looks for matches: a stream
// through it is the stream without the prefilter.
type scanAlways struct{ scanner }

func (scanAlways) mayMatch(string, int) bool { return true }

// countFinds is a scanner that counts its searches.
type countFinds struct {
	scanner
	n *int
}

func (c countFinds) find(text string, dst []Match) []Match {
	*c.n++
	return c.scanner.find(text, dst)
}

// prefilterGuards are guards whose scanners have prefilters: every
// detector (masked), a regex with a literal prefix (masked) and one
// without.
var prefilterGuards = []GuardConfig{
	piiMask,
	{Name: "codename", Type: "regex", Pattern: `Falcon-\d+`, Action: "mask"},
	{Name: "banned", Type: "regex", Pattern: `(?i)project +falcon`, Action: "mask"},
}

// withScanners returns an engine of guards whose scanners wrap is
// applied to.
func withScanners(t testing.TB, wrap func(scanner) scanner, guards ...GuardConfig) *Engine {
	e := newEngine(t, Options{}, guards...)
	for _, g := range e.guards {
		if g.local != nil {
			g.local = wrap(g.local)
		}
	}
	return e
}

// streamBoth streams ps through e and through slow (e's guards without
// the prefilter) and fails when they release or decide differently.
func streamBoth(t *testing.T, e, slow *Engine, ps []string) {
	t.Helper()
	got, gd := streamText(t, e, ps)
	want, wd := streamText(t, slow, ps)
	if got != want || (gd == nil) != (wd == nil) || gd != nil && (gd.Guard != wd.Guard || !slices.Equal(gd.Found, wd.Found)) {
		t.Fatalf("%q: with the prefilter %q (%+v), without %q (%+v)", ps, got, gd, want, wd)
	}
}

// TestHolds: every match a detector finds in the corpus holds the bytes
// its kind needs, which the prefilter relies on.
func TestHolds(t *testing.T) {
	d := NewDetectors(Kinds()...)
	for _, cl := range readCorpus(t) {
		checkNeeds(t, &d, "before "+cl.text+" after")
	}
}

// checkNeeds fails when a match in text has not the bytes its kind
// needs.
func checkNeeds(t *testing.T, d *Detectors, text string) {
	t.Helper()
	for _, m := range d.Find(text, nil) {
		if c := countBytes(text[m.Start:m.End]); held(&c)&(1<<m.Kind) == 0 {
			t.Fatalf("%s %q in %q has not the bytes it needs (%+v)", m.Kind, text[m.Start:m.End], text, c)
		}
	}
}

// TestPrefilterCorpus: the corpus streamed in pieces of every size is
// released alike with and without the prefilter.
func TestPrefilterCorpus(t *testing.T) {
	e := newEngine(t, Options{}, prefilterGuards...)
	slow := withScanners(t, func(s scanner) scanner { return scanAlways{s} }, prefilterGuards...)
	r := rand.New(rand.NewPCG(5, 6))
	for _, cl := range readCorpus(t) {
		text := "before " + cl.text + " after Falcon-7 and project  falcon"
		for _, maxLen := range []int{1, 2, 5, 16, 64} {
			streamBoth(t, e, slow, pieces(r, text, maxLen))
		}
	}
}

// TestPrefilterSkips: a stream of prose without the bytes a match needs
// is released without a search; one that may hold a number is searched.
func TestPrefilterSkips(t *testing.T) {
	n := 0
	e := withScanners(t, func(s scanner) scanner { return countFinds{s, &n} }, piiMask,
		GuardConfig{Name: "codename", Type: "regex", Pattern: `Falcon-\d+`})
	got, d := streamText(t, e, []string{"The weather ", "today is mild, ", "with a light ", "breeze from the west."})
	if d != nil || got != "The weather today is mild, with a light breeze from the west." {
		t.Fatalf("released %q (%+v)", got, d)
	}
	if n != 0 {
		t.Errorf("%d searches in prose without a byte a match needs", n)
	}
	if _, d = streamText(t, e, []string{"room 4", "2 on floor 3, at 10 past"}); d != nil || n != 0 {
		t.Errorf("%d searches in a text with too few digits for a number (%+v)", n, d)
	}
	got, d = streamText(t, e, []string{"call 202 ", "555 01", "73 today"})
	if d != nil || n == 0 || got != "call [PHONE] today" {
		t.Errorf("released %q after %d searches (%+v)", got, n, d)
	}
}

// FuzzPrefilter: a text streamed in pieces is released alike with and
// without the prefilter, and every match holds the bytes its kind needs.
func FuzzPrefilter(f *testing.F) {
	f.Add("write to bob@example.com or +1 202 555 0173.", uint64(1))
	f.Add("key sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789AbCdEfGhIjAA ok", uint64(2))
	f.Add("AKIAIOSFODNN7EXAMPLE wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY9 Falcon-12", uint64(3))
	f.Add("-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\\n-----END PRIVATE KEY-----", uint64(4))
	e := newEngine(f, Options{}, prefilterGuards...)
	slow := withScanners(f, func(s scanner) scanner { return scanAlways{s} }, prefilterGuards...)
	d := NewDetectors(Kinds()...)
	f.Fuzz(func(t *testing.T, text string, seed uint64) {
		checkNeeds(t, &d, text)
		r := rand.New(rand.NewPCG(seed, 7))
		streamBoth(t, e, slow, pieces(r, text, 1+int(seed%32)))
	})
}

// countByCase is countBytes as first written, a case for each byte;
// TestCountBytes holds the table-driven one to it.
func countByCase(text string) counts {
	c := counts{n: len(text)}
	for i := 0; i < len(text); i++ {
		b := text[i]
		switch b {
		case '.':
			c.dots++
		case '@':
			c.at = true
		case ':':
			c.colon = true
		case '-', '_', 'A', 'J':
			c.secret = true
		default:
			if isDigit(b) {
				c.digits++
			}
		}
		if isUpper(b) {
			c.upper++
		}
	}
	return c
}

// TestCountBytes: countBytes counts every byte as countByCase does, alone
// and in the corpus's texts.
func TestCountBytes(t *testing.T) {
	texts := []string{"", benchProse, "Mail A.J. at a_b-c@x.io:443, 4111 1111"}
	for b := range 256 {
		texts = append(texts, string([]byte{byte(b)}), "x"+string([]byte{byte(b), byte(b)}))
	}
	for _, cl := range readCorpus(t) {
		texts = append(texts, cl.text)
	}
	for _, s := range texts {
		if got, want := countBytes(s), countByCase(s); got != want {
			t.Errorf("countBytes(%q) = %+v, want %+v", s, got, want)
		}
	}
}

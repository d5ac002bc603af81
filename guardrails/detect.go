package guardrails

import (
	"math/bits"
	"slices"
	"strings"
)

// A Match is a piece of a text that a detector or a pattern found: the
// bytes text[Start:End].
type Match struct {
	Start, End int
	Kind       Kind
}

// Detectors is a set of built-in detectors run together over a text: one
// pass for each family (an '@' search for e-mail addresses, one digit scan
// for phone, card, IBAN, IPv4 and SSN numbers, a ':' search for IPv6, a
// search for the few bytes every secret format contains), no regular
// expressions. Its zero value finds nothing.
type Detectors struct {
	kinds   uint8 // bit k for each kind k on
	numeric bool  // a detector of the digit scan is on
	span    int   // the longest match any of them finds
	runs    uint8 // the runs hold follows
}

// NewDetectors returns the set of the detectors of kinds.
func NewDetectors(kinds ...Kind) Detectors {
	var d Detectors
	for _, k := range kinds {
		if k < numKinds {
			d.span = max(d.span, maxSpans[k])
			d.kinds |= 1 << k
		}
	}
	d.numeric = d.On(Phone) || d.On(CreditCard) || d.On(IBAN) || d.On(IPAddress) || d.On(USSSN)
	d.runs = runsOf(&d)
	return d
}

// counts are what a text holds of the bytes the detectors' matches are
// made of.
type counts struct {
	n, digits, dots int
	upper           int  // capitals
	at, colon       bool // '@', ':'
	secret          bool // '-', '_', 'A' or 'J'
}

// countBytes counts text's bytes.
func countBytes(text string) counts {
	// Without a branch for each byte: the classes are bits, each count
	// adds its bit.
	var seen uint8
	var dots, digits, upper int
	for i := 0; i < len(text); i++ {
		m := byteClasses[text[i]]
		seen |= m
		dots += int(m >> dotShift & 1)
		digits += int(m >> digitShift & 1)
		upper += int(m >> upperShift & 1)
	}
	return counts{n: len(text), dots: dots, digits: digits, upper: upper,
		at: seen&classAt != 0, colon: seen&classColon != 0, secret: seen&classSecret != 0}
}

// The classes of the bytes countBytes counts, each a bit, and each
// byte's.
const (
	dotShift = iota
	atShift
	colonShift
	secretShift
	digitShift
	upperShift
)

const (
	classDot    = 1 << dotShift
	classAt     = 1 << atShift
	classColon  = 1 << colonShift
	classSecret = 1 << secretShift // '-', '_', 'A' or 'J'
	classDigit  = 1 << digitShift
	classUpper  = 1 << upperShift
)

var byteClasses = func() (t [256]uint8) {
	t['.'], t['@'], t[':'] = classDot, classAt, classColon
	for _, b := range []byte("-_AJ") {
		t[b] |= classSecret
	}
	for b := range 256 {
		switch {
		case isDigit(byte(b)):
			t[b] |= classDigit
		case isUpper(byte(b)):
			t[b] |= classUpper
		}
	}
	return t
}()

// held returns the kinds (bit k for kind k) of which a text that counts
// c may hold a match: the '@' of an address; the digits of a phone number
// ("+" and 8, or 10), a card (13), an SSN (9), an IBAN (its country's two
// capitals and two check digits, in 15 bytes or more); an IPv6 address's
// ':', or an IPv4 address's 4 digits and 3 dots; the byte a secret format
// is found from ('-', '_', 'A' of "AKIA", "ASIA", "AIza", 'J' of "eyJ"),
// or the 40 bytes of an AWS secret key found from its key id or label, a
// digit among them. A text that holds more of each holds as much: so a
// text without a match's counts has none of its matches. TestHolds holds
// every match of the corpus to them.
func held(c *counts) uint8 {
	var m uint8
	set := func(k Kind, ok bool) {
		if ok {
			m |= 1 << k
		}
	}
	set(Email, c.at)
	set(Phone, c.digits >= 8)
	set(CreditCard, c.digits >= 13)
	set(IBAN, c.digits >= 2 && c.upper >= 2 && c.n >= 15)
	set(IPAddress, c.colon || c.digits >= 4 && c.dots >= 3)
	set(USSSN, c.digits >= 9)
	set(Secret, c.secret || c.digits >= 1 && c.n >= 40)
	return m
}

// mayMatch reports whether text may hold a match of the set: false when
// it has too few of the bytes each detector's matches are made of.
func (d *Detectors) mayMatch(text string) bool {
	c := countBytes(text)
	return held(&c)&d.kinds != 0
}

// On reports whether the detector of k is in the set.
func (d *Detectors) On(k Kind) bool { return k < numKinds && d.kinds&(1<<k) != 0 }

// MaxSpan is the longest match a detector of the set finds, in bytes.
func (d *Detectors) MaxSpan() int { return d.span }

// maxSpans bound each detector's matches, in bytes: how much of a stream
// may be held back while a match is still possible.
var maxSpans = [numKinds]int{
	Email:      254, // RFC 5321's longest path
	Phone:      32,  // "+" and 15 digits, a separator after each, a parenthesis
	CreditCard: 26,  // 19 digits and their separators
	IBAN:       42,  // 34 characters in groups of four
	IPAddress:  45,  // IPv6 with an IPv4 tail
	USSSN:      11,
	Secret:     maxSecretSpan,
}

// Find appends the matches of the set in text to dst, in order, none
// overlapping another (of two that overlap, the one that starts first,
// or the longer, is kept).
func (d *Detectors) Find(text string, dst []Match) []Match {
	start := len(dst)
	if d.On(Email) {
		dst = findEmails(text, dst)
	}
	if d.numeric {
		dst = d.findNumbers(text, dst)
	}
	if d.On(IPAddress) {
		dst = findIPv6(text, dst)
	}
	if d.On(Secret) {
		dst = findSecrets(text, dst)
	}
	return resolve(dst, start)
}

// resolve sorts dst[start:] and drops the matches that overlap one kept.
func resolve(dst []Match, start int) []Match {
	found := dst[start:]
	if len(found) < 2 {
		return dst
	}
	slices.SortFunc(found, func(a, b Match) int {
		if a.Start != b.Start {
			return a.Start - b.Start
		}
		return b.End - a.End
	})
	kept := found[:1]
	for _, m := range found[1:] {
		if m.Start >= kept[len(kept)-1].End {
			kept = append(kept, m)
		}
	}
	return dst[:start+len(kept)]
}

// hold returns how many bytes at the end of text may still be part of a
// match that more text would complete: the bytes a stream holds back.
// text[from:] is what the stream added since its last call, whose runs
// are t's: a run of the bytes a match may be made of is followed as it
// grows, and only the new bytes are read.
func (d *Detectors) hold(text string, from int, t *runs) int {
	t.add(text[from:], d.runs)
	h := 0
	for r := d.runs; r != 0; r &= r - 1 {
		c := bits.TrailingZeros8(r)
		h = max(h, min(t.n[c], runLimits[c]))
	}
	if d.On(Secret) && t.dashIn(min(len(text), maxSecretSpan)) {
		// A PEM line starts with '-'.
		h = max(h, pemHold(text))
	}
	return min(h, len(text))
}

// reach is how far text must go on past m, a match of the set in it, for
// m to be certain (see scanner): for the kinds classify finds in a number
// token, to the token's end (an IBAN's end is its own, ibanEnd's).
func (d *Detectors) reach(text string, m Match) int {
	switch m.Kind {
	case Phone, CreditCard, USSSN, IPAddress:
		return numberReach(text, m)
	}
	return m.End
}

// The runs hold follows: of the bytes an e-mail address, a number
// (phone, card, SSN), an IBAN, an IP address or a secret token may be
// made of.
const (
	runEmail = iota
	runNumber
	runIBAN
	runIP
	runSecret
	numRuns
)

// runsOf are the runs the detectors of d need.
func runsOf(d *Detectors) uint8 {
	var r uint8
	for k, need := range [numKinds]uint8{
		Email: 1 << runEmail, Phone: 1 << runNumber, CreditCard: 1 << runNumber, USSSN: 1 << runNumber,
		IBAN: 1 << runIBAN, IPAddress: 1 << runIP, Secret: 1 << runSecret,
	} {
		if d.On(Kind(k)) {
			r |= need
		}
	}
	return r
}

// runLimits bound each run: a match is no longer.
var runLimits = [numRuns]int{runEmail: maxSpans[Email], runNumber: maxSpans[Phone], runIBAN: maxSpans[IBAN],
	runIP: maxSpans[IPAddress], runSecret: maxTokenSpan}

// runClasses marks, for each byte, the runs it may be part of.
var runClasses = func() (t [256]uint8) {
	for i, set := range [numRuns]string{
		runEmail:  "._%+-@" + alnum,
		runNumber: "0123456789 +()-./",
		runIBAN:   "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ ",
		runIP:     "0123456789abcdefABCDEF:.[]/",
		runSecret: "_-+/=." + alnum,
	} {
		for j := 0; j < len(set); j++ {
			t[set[j]] |= 1 << i
		}
	}
	return t
}()

const alnum = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"

// runs are the lengths of the runs that end a stream's text, one for
// each of the runs hold follows, and where its last '-' is, for the PEM
// lines of secrets.
type runs struct {
	n     [numRuns]int
	total int // the bytes of the text so far
	dash  int // the bytes up to its last '-', that one included (0: none)
}

// dashIn reports whether the last n bytes of the text have a '-'.
func (t *runs) dashIn(n int) bool { return t.dash > 0 && t.total-t.dash < n }

// add follows the runs of want as delta is added to the text: a run that
// delta breaks starts again after the break, one that goes through it
// grows. It reads delta from its end, and only until every run broke.
func (t *runs) add(delta string, want uint8) {
	t.total += len(delta)
	if i := strings.LastIndexByte(delta, '-'); i >= 0 {
		t.dash = t.total - len(delta) + i + 1
	}
	alive := want
	for i := len(delta) - 1; i >= 0 && alive != 0; i-- {
		m := runClasses[delta[i]]
		for broke := alive &^ m; broke != 0; broke &= broke - 1 {
			t.n[bits.TrailingZeros8(broke)] = len(delta) - 1 - i
		}
		alive &= m
	}
	for ; alive != 0; alive &= alive - 1 {
		t.n[bits.TrailingZeros8(alive)] += len(delta)
	}
}

// classOf returns the table of the bytes in set, and the ASCII letters
// and digits when alnum.
func classOf(set string, alnum bool) (t [256]bool) {
	for i := 0; i < len(set); i++ {
		t[set[i]] = true
	}
	if alnum {
		for c := '0'; c <= '9'; c++ {
			t[c] = true
		}
		for c := 'a'; c <= 'z'; c++ {
			t[c], t[c-'a'+'A'] = true, true
		}
	}
	return t
}

func isDigit(c byte) bool { return c-'0' < 10 }
func isUpper(c byte) bool { return c-'A' < 26 }
func isLower(c byte) bool { return c-'a' < 26 }
func isAlpha(c byte) bool { return isUpper(c) || isLower(c) }
func isAlnum(c byte) bool { return isDigit(c) || isAlpha(c) }

// escapeBefore reports whether the letter at text[i-1] is the end of a
// backslash escape (\n, \t, \r, \b, \f) written out in the text, as in the
// JSON source of tool-call arguments: such a letter separates words.
func escapeBefore(text string, i int) bool {
	if i < 2 || text[i-2] != '\\' {
		return false
	}
	switch text[i-1] {
	case 'n', 't', 'r', 'b', 'f':
		return true
	}
	return false
}

// wordBefore reports whether the byte before text[i] belongs to a word
// (a letter, a digit or '_'), so that a match cannot start at i.
func wordBefore(text string, i int) bool {
	if i == 0 {
		return false
	}
	c := text[i-1]
	return (isAlnum(c) || c == '_') && !escapeBefore(text, i)
}

// wordAt reports whether text[i] exists and belongs to a word.
func wordAt(text string, i int) bool {
	return i < len(text) && (isAlnum(text[i]) || text[i] == '_')
}

// nextDigit returns the index of the first ASCII digit in text at or after
// i, or -1. It reads eight bytes at a time: prose has few digits.
func nextDigit(text string, i int) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for ; i+8 <= len(text); i += 8 {
		x := load64(text, i)
		// High bit of each byte: b+0x50 ≥ 0x80 (b ≥ '0'), b+0x46 < 0x80
		// (b ≤ '9'), b < 0x80. A carry out of a byte ≥ 0xB0 may mark the
		// next byte wrongly: the candidates are checked one by one.
		m := (x + ones*0x50) &^ (x + ones*0x46) &^ x & highs
		for m != 0 {
			j := i + bits.TrailingZeros64(m)>>3
			if isDigit(text[j]) {
				return j
			}
			m &= m - 1
		}
	}
	for ; i < len(text); i++ {
		if isDigit(text[i]) {
			return i
		}
	}
	return -1
}

// lowerHasSuffix reports whether text[:i] ends with word, ASCII
// case-insensitively, as a whole word.
func lowerHasSuffix(text string, i int, word string) bool {
	j := i - len(word)
	return j >= 0 && strings.EqualFold(text[j:i], word) && !wordBefore(text, j)
}

// load64 reads text[i:i+8] as a little-endian word (the compiler makes it
// one load).
func load64(text string, i int) uint64 {
	_ = text[i+7]
	return uint64(text[i]) | uint64(text[i+1])<<8 | uint64(text[i+2])<<16 | uint64(text[i+3])<<24 |
		uint64(text[i+4])<<32 | uint64(text[i+5])<<40 | uint64(text[i+6])<<48 | uint64(text[i+7])<<56
}

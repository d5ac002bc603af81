package guardrails

import "strings"

// maxGroups bounds the digit groups of one numeric token; a longer token
// is no number the detectors know.
const maxGroups = 12

// numToken is a run of digit groups joined by single separators (space,
// '-', '.', '/'), with an optional leading '+' and groups in parentheses:
// "+1 (202) 555-0173", "4111 1111 1111 1111", "192.168.0.1", "2024-01-15".
type numToken struct {
	start, end int // text[start:end]
	plus       bool
	n          int
	groups     [maxGroups]group
}

// group is one group of digits: text[start:end], the separator before it
// (0 for the first) and whether it stood in parentheses.
type group struct {
	start, end int
	sep        byte
	paren      bool
}

func (g group) len() int { return g.end - g.start }

// findNumbers appends the numbers in text that the set's numeric detectors
// find: it visits each run of digits once, reads the token around it, and
// asks the detectors in turn (IBAN, IPv4, SSN, card, phone) whether the
// token, or a part of it cut at spaces, is theirs.
func (d *Detectors) findNumbers(text string, dst []Match) []Match {
	var t numToken
	for i := 0; ; {
		p := nextDigit(text, i)
		if p < 0 {
			return dst
		}
		if p > 0 && isDigit(text[p-1]) {
			i = skipDigits(text, p)
			continue
		}
		if d.On(IBAN) && p >= 2 && isUpper(text[p-2]) && isUpper(text[p-1]) && !wordBefore(text, p-2) {
			if end := ibanEnd(text, p-2); end > 0 {
				dst = append(dst, Match{Start: p - 2, End: end, Kind: IBAN})
				i = end
				continue
			}
		}
		if p > 0 && isAlpha(text[p-1]) && !numLeftOK(text, p) {
			// Glued to a word ("v2", "word12"): no number of its own, as
			// readToken would find, without reading it.
			i = skipDigits(text, p)
			continue
		}
		if !readToken(text, p, &t) {
			i = max(t.end, skipDigits(text, p))
			continue
		}
		dst = d.classify(text, &t, dst)
		i = t.end
	}
}

// numberReach is where the number that match m of a number detector is
// part of ends. Whether the match stands depends on that end: a number
// glued to more digits is none ("0000 0000000 0000,0" has no phone in
// it, "0000 0000000 0000," has one), so a stream reads that far before
// it is certain of m. The number is read from m's first digit on, which
// ends it no sooner than when it is read from its start.
func numberReach(text string, m Match) int {
	p := nextDigit(text, m.Start)
	if p < 0 || p >= m.End {
		return m.End
	}
	var t numToken
	readToken(text, p, &t)
	return max(m.End, t.end)
}

// skipDigits returns the index past the digits that start at text[i].
func skipDigits(text string, i int) int {
	for i < len(text) && isDigit(text[i]) {
		i++
	}
	return i
}

// readToken reads the numeric token whose first digit is text[p] into t.
// It is false when the token cannot be a number of its own: glued to a
// word or a longer number before it ("v1.2", "x=3-4", "1,234"), or
// followed by one ("…@", ",5", a letter), or longer than maxGroups.
func readToken(text string, p int, t *numToken) bool {
	t.start, t.plus, t.n = p, false, 0
	paren := false
	if p > 0 && text[p-1] == '(' {
		t.start, paren = p-1, true
	}
	if t.start > 0 && text[t.start-1] == '+' {
		t.start--
		t.plus = true
	}
	if !numLeftOK(text, t.start) {
		t.end = skipDigits(text, p)
		return false
	}
	i := p
	var sep byte
	for {
		g := group{start: i, sep: sep, paren: paren}
		i = skipDigits(text, i)
		g.end = i
		if t.n == maxGroups {
			t.end = i
			return false
		}
		t.groups[t.n] = g
		t.n++
		if paren {
			if i == len(text) || text[i] != ')' {
				t.end = i
				return false
			}
			i++
			paren = false
		}
		// What follows: a separator and a digit (or a parenthesis), or
		// after ')' a digit at once.
		sep = 0
		if i < len(text) && g.paren && isDigit(text[i]) {
			continue
		}
		if i+1 < len(text) && (text[i] == ' ' || text[i] == '-' || text[i] == '.' || text[i] == '/') {
			c := text[i+1]
			if isDigit(c) {
				sep, i = text[i], i+1
				continue
			}
			if c == '(' && i+2 < len(text) && isDigit(text[i+2]) && text[i] == ' ' {
				sep, i, paren = text[i], i+2, true
				continue
			}
		}
		break
	}
	t.end = i
	return numRightOK(text, i)
}

// numLeftOK reports whether a number may start at text[i]: not glued to
// a word, a path, an address or a version before it.
func numLeftOK(text string, i int) bool {
	if i == 0 {
		return true
	}
	switch c := text[i-1]; {
	case isAlnum(c):
		return escapeBefore(text, i)
	case c == '.' || c == '_' || c == '-' || c == '/' || c == '@' || c == '\\' || c == '+':
		return false
	case c == ',' || c == ':':
		return i < 2 || !isDigit(text[i-2])
	}
	return true
}

// numRightOK reports whether a number may end at text[i].
func numRightOK(text string, i int) bool {
	if i == len(text) {
		return true
	}
	switch c := text[i]; {
	case isAlnum(c) || c == '_' || c == '@':
		return false
	case c == ',' || c == '.':
		return i+1 == len(text) || !isDigit(text[i+1])
	}
	return true
}

// classify appends what the numeric detectors find in t: the whole token,
// or else its longest part up to a space that is a number, and so on
// from there ("202-555-0173 202-555-0199" is two phone numbers).
func (d *Detectors) classify(text string, t *numToken, dst []Match) []Match {
	for from := 0; from < t.n; {
		matched := false
		for to := t.n; to > from; to-- {
			if to < t.n && t.groups[to].sep != ' ' {
				continue
			}
			if k, end, ok := d.number(text, t, from, to); ok {
				start := t.groups[from].start
				if from == 0 {
					start = t.start
				} else if t.groups[from].paren {
					start--
				}
				dst = append(dst, Match{Start: start, End: end, Kind: k})
				from, matched = to, true
				break
			}
		}
		if !matched {
			// Past the next space, if any.
			from++
			for from < t.n && t.groups[from].sep != ' ' {
				from++
			}
		}
	}
	return dst
}

// number says which detector's number t.groups[from:to] is, and where it
// ends.
func (d *Detectors) number(text string, t *numToken, from, to int) (Kind, int, bool) {
	gs := t.groups[from:to]
	plus := t.plus && from == 0
	end := gs[len(gs)-1].end
	if gs[len(gs)-1].paren {
		end++ // the ')'
	}
	start := gs[0].start
	if d.On(IPAddress) && !plus && isIPv4(text, gs) && !versionBefore(text, start) {
		return IPAddress, end, true // with its prefix length, if any
	}
	if d.On(USSSN) && !plus && isSSN(text, gs) {
		return USSSN, end, true
	}
	if d.On(CreditCard) && !plus && isCard(text, gs) {
		return CreditCard, end, true
	}
	if d.On(Phone) && isPhone(text, gs, plus) {
		return Phone, end, true
	}
	return 0, 0, false
}

// digitsOf appends the digits of gs to dst.
func digitsOf(text string, gs []group, dst []byte) []byte {
	for _, g := range gs {
		dst = append(dst, text[g.start:g.end]...)
	}
	return dst
}

// countDigits is how many digits gs hold.
func countDigits(gs []group) int {
	n := 0
	for _, g := range gs {
		n += g.len()
	}
	return n
}

// sameSeps reports whether every group of gs after the first follows the
// separator sep, outside parentheses.
func sameSeps(gs []group, sep byte) bool {
	for _, g := range gs[1:] {
		if g.sep != sep || g.paren {
			return false
		}
	}
	return !gs[0].paren
}

// versionBefore reports whether the word before text[i] names a version
// ("version 1.2.3.4", "v 10.0.0.1", "release 2.0.0.1"): such dotted
// numbers are not addresses.
func versionBefore(text string, i int) bool {
	j := i
	for j > 0 && text[j-1] == ' ' && i-j < 2 {
		j--
	}
	return lowerHasSuffix(text, j, "version") || lowerHasSuffix(text, j, "ver") ||
		lowerHasSuffix(text, j, "v") || lowerHasSuffix(text, j, "release")
}

// isIPv4 reports whether gs are a dotted IPv4 address (four groups of 0 to
// 255 without leading zeros), optionally with a /prefix of 0 to 32.
func isIPv4(text string, gs []group) bool {
	if len(gs) != 4 && len(gs) != 5 {
		return false
	}
	for i, g := range gs[:4] {
		if i > 0 && g.sep != '.' || g.paren {
			return false
		}
		s := text[g.start:g.end]
		if len(s) > 3 || len(s) > 1 && s[0] == '0' || atoi(s) > 255 {
			return false
		}
	}
	if len(gs) == 5 {
		p := text[gs[4].start:gs[4].end]
		return gs[4].sep == '/' && len(p) <= 2 && atoi(p) <= 32
	}
	return true
}

// atoi is the value of a short run of digits.
func atoi(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		n = n*10 + int(s[i]-'0')
	}
	return n
}

// isSSN reports whether gs are a US social security number written with
// separators, "AAA-GG-SSSS" or "AAA GG SSSS": area not 000, 666 or 9xx,
// group not 00, serial not 0000, and not the numbers published as
// examples that were never issued to anyone.
func isSSN(text string, gs []group) bool {
	if len(gs) != 3 || gs[0].len() != 3 || gs[1].len() != 2 || gs[2].len() != 4 {
		return false
	}
	if sep := gs[1].sep; sep != '-' && sep != ' ' || !sameSeps(gs, sep) {
		return false
	}
	area, grp, serial := text[gs[0].start:gs[0].end], text[gs[1].start:gs[1].end], text[gs[2].start:gs[2].end]
	if area == "000" || area == "666" || area[0] == '9' || grp == "00" || serial == "0000" {
		return false
	}
	s := area + grp + serial
	return s != "078051120" && s != "219099999" && s != "123456789"
}

// isCard reports whether gs are a payment card number: 13 to 19 digits,
// together or in the groups cards print (fours; 4-6-5 and 4-6-4), one
// separator throughout, an issuer's prefix, and a valid Luhn check digit.
func isCard(text string, gs []group) bool {
	n := countDigits(gs)
	if n < 13 || n > 19 {
		return false
	}
	if len(gs) > 1 {
		sep := gs[1].sep
		if sep != ' ' && sep != '-' || !sameSeps(gs, sep) || !cardGroups(gs) {
			return false
		}
	}
	var buf [19]byte
	digits := digitsOf(text, gs, buf[:0])
	return issuer(digits) && luhn(digits)
}

// cardGroups reports whether the lengths of gs are a card's: fours with a
// shorter last group, or 4-6-5 (American Express), or 4-6-4 (Diners).
func cardGroups(gs []group) bool {
	if len(gs) == 3 && gs[0].len() == 4 && gs[1].len() == 6 && (gs[2].len() == 5 || gs[2].len() == 4) {
		return true
	}
	for i, g := range gs {
		if i < len(gs)-1 && g.len() != 4 || i == len(gs)-1 && (g.len() < 1 || g.len() > 4) {
			return false
		}
	}
	return len(gs) >= 4
}

// issuer reports whether digits start with a payment network's prefix:
// Visa 4, Mastercard 51–55 and 2221–2720, American Express 34 and 37,
// Discover 6011, 644–649 and 65, Diners Club 300–305, 36, 38 and 39, JCB
// 3528–3589, UnionPay 62, Maestro 50 and 56–69.
func issuer(d []byte) bool {
	p2 := int(d[0]-'0')*10 + int(d[1]-'0')
	p4 := p2*100 + int(d[2]-'0')*10 + int(d[3]-'0')
	switch {
	case d[0] == '4', d[0] == '5' && (p2 == 50 || p2 >= 51 && p2 <= 55),
		p4 >= 2221 && p4 <= 2720,
		p2 == 34 || p2 == 37 || p2 == 36 || p2 == 38 || p2 == 39,
		p4 >= 3000 && p4 <= 3059, p4 >= 3528 && p4 <= 3589,
		d[0] == '6':
		return true
	}
	return false
}

// luhn reports whether digits end with a valid Luhn check digit.
func luhn(digits []byte) bool {
	sum, double := 0, false
	for i := len(digits) - 1; i >= 0; i-- {
		v := int(digits[i] - '0')
		if double {
			if v *= 2; v > 9 {
				v -= 9
			}
		}
		sum += v
		double = !double
	}
	return sum%10 == 0
}

// isPhone reports whether gs (after a '+' when plus) are a phone number:
//   - international, "+" then 8 to 15 digits in any grouping ("+1 202 555
//     0173", "+44 (0)20 7946 0958", "+14155552671");
//   - North American, 3-3-4 digits with one separator or the area code in
//     parentheses, optionally after a 1 ("(202) 555-0173", "1-800-555-0199"),
//     the area code and exchange not starting with 0 or 1;
//   - national with a trunk 0, 10 or 11 digits in 2 or more groups of 2 to 8
//     with one separator throughout ("020 7946 0958", "06 12 34 56 78").
//
// Numbers without a separator are not phones unless international: order
// numbers and timestamps look the same.
func isPhone(text string, gs []group, plus bool) bool {
	n := countDigits(gs)
	if plus {
		return n >= 8 && n <= 15 && text[gs[0].start] != '0'
	}
	if len(gs) < 2 || n < 10 || n > 11 {
		return false
	}
	if nanp(text, gs) || len(gs) == 4 && gs[0].len() == 1 && text[gs[0].start] == '1' && gs[1].sep == gs[2].sep && nanp(text, gs[1:]) {
		return true
	}
	if text[gs[0].start] != '0' || gs[0].paren {
		return false
	}
	sep := gs[1].sep
	if !sameSeps(gs, sep) || strings.IndexByte(" -./", sep) < 0 {
		return false
	}
	// Groups of two throughout ("06 12 34 56 78"), or of three or more
	// after the first ("020 7946 0958", "06-12345678"): not a date's
	// "0022-11-2020" nor a part number's "0123-4567-89".
	pairs := true
	for i, g := range gs {
		if g.len() < 2 || g.len() > 8 {
			return false
		}
		pairs = pairs && g.len() == 2
		if i > 0 && g.len() < 3 && !pairs {
			return false
		}
	}
	return !pairs || len(gs) == 5
}

// nanp reports whether gs are a North American number: 3-3-4 digits, area
// code and exchange starting with 2 to 9, one separator throughout (or the
// area code in parentheses, then a space, a hyphen or nothing, and a
// hyphen, dot or space).
func nanp(text string, gs []group) bool {
	if len(gs) != 3 || gs[0].len() != 3 || gs[1].len() != 3 || gs[2].len() != 4 {
		return false
	}
	if text[gs[0].start] < '2' || text[gs[1].start] < '2' {
		return false
	}
	if gs[0].paren {
		return gs[2].sep == '-' || gs[2].sep == ' ' || gs[2].sep == '.'
	}
	return gs[1].sep != '/' && gs[1].sep == gs[2].sep && !gs[1].paren && !gs[2].paren
}

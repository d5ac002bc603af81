package guardrails

// ibanLengths are the lengths of each country's IBANs (the IBAN registry).
var ibanLengths = map[string]int{
	"AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22,
	"BI": 27, "BR": 29, "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DJ": 27,
	"DK": 18, "DO": 28, "EE": 20, "EG": 29, "ES": 24, "FI": 18, "FK": 18, "FO": 18, "FR": 27,
	"GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27, "GT": 28, "HN": 28, "HR": 21, "HU": 28,
	"IE": 22, "IL": 23, "IQ": 23, "IS": 26, "IT": 27, "JO": 30, "KW": 30, "KZ": 20, "LB": 28,
	"LC": 32, "LI": 21, "LT": 20, "LU": 20, "LV": 21, "LY": 25, "MC": 27, "MD": 24, "ME": 22,
	"MK": 19, "MN": 20, "MR": 27, "MT": 31, "MU": 30, "NI": 28, "NL": 18, "NO": 15, "OM": 23,
	"PK": 24, "PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "RU": 33, "SA": 24,
	"SC": 31, "SD": 18, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "SO": 23, "ST": 25, "SV": 28,
	"TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20, "YE": 30,
}

// ibanEnd returns where the IBAN that starts at text[q] ends, or -1: a
// country's code, two check digits and the rest, of the country's length
// in all, written together or in groups of four separated by single
// spaces; capital letters and digits; mod 97 of the rearranged number is
// 1 (ISO 13616).
func ibanEnd(text string, q int) int {
	if q+4 > len(text) {
		return -1
	}
	n, known := ibanLengths[text[q:q+2]]
	if !known || !isDigit(text[q+2]) || !isDigit(text[q+3]) {
		return -1
	}
	var buf [34]byte
	got, i := 0, q
	spaced := q+4 < len(text) && text[q+4] == ' '
	for got < n && i < len(text) {
		c := text[i]
		switch {
		case isDigit(c) || isUpper(c):
			buf[got] = c
			got++
			i++
			if spaced && got%4 == 0 && got < n {
				if i >= len(text) || text[i] != ' ' {
					return -1
				}
				i++
			}
		default:
			return -1
		}
	}
	if got < n || wordAt(text, i) {
		return -1
	}
	if !mod97(buf[:n]) {
		return -1
	}
	return i
}

// mod97 reports whether the IBAN s, moved 4 characters to the left and
// its letters made numbers (A=10 … Z=35), is 1 modulo 97.
func mod97(s []byte) bool {
	r := 0
	for k := range s {
		c := s[(k+4)%len(s)]
		if isDigit(c) {
			r = (r*10 + int(c-'0')) % 97
		} else {
			r = (r*100 + int(c-'A') + 10) % 97
		}
	}
	return r == 1
}

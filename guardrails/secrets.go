package guardrails

import (
	"strings"

	"github.com/modelgate/modelgate/keys"
)

// maxSecretSpan bounds a secret match: a PEM private key block (an RSA key
// of 8192 bits is about 6.5 KiB). Tokens (keys, JWTs) are at most
// maxTokenSpan long.
const (
	maxSecretSpan = 16 << 10
	maxTokenSpan  = 4 << 10
)

// tokenClass is the bytes of a token: letters, digits, '_' and '-'.
var tokenClass = classOf("_-", true)

// findSecrets appends the credentials in text. Each format is found from
// a byte it always contains, searched many bytes at a time:
//   - '-': OpenAI keys ("sk-…", "sk-proj-…", "sk-svcacct-…", "sk-admin-…"),
//     Anthropic keys ("sk-ant-…"), Slack tokens ("xoxb-…", "xoxp-…", …), and
//     PEM private key blocks ("-----BEGIN … PRIVATE KEY-----");
//   - '_': GitHub tokens ("ghp_", "gho_", "ghu_", "ghs_", "ghr_",
//     "github_pat_"), Stripe secret keys ("sk_live_", "rk_live_", and
//     their _test_ forms), and modelgate's own keys ("mgk_", checksum
//     checked);
//   - "AKIA", "ASIA": AWS access key ids, and the 40-character secret key
//     that follows one (or a secret_access_key label) closely;
//   - "AIza": Google API keys;
//   - "eyJ": JSON Web Tokens (three base64url parts, the first two JSON
//     objects).
//
// Tokens must stand alone (no word byte glued before or after) and look
// random where the format leaves room (digits and letters of both cases),
// so that "sk-learn" or "ghp_example" in prose are not secrets.
func findSecrets(text string, dst []Match) []Match {
	start := len(dst)
	dst = eachByte(text, '-', dst, dashSecret)
	dst = eachByte(text, '_', dst, underscoreSecret)
	n := len(dst)
	dst = eachByte(text, 'A', dst, capitalASecret)
	// The secret access key close after a key id is the pair's other half:
	// a match of its own, so that a stream that released the id still
	// holds the secret.
	for _, id := range dst[n:] {
		if id.End-id.Start == 20 && (text[id.Start+1] == 'K' || text[id.Start+1] == 'S') {
			if end := awsSecretNear(text, id.End, 64); end > 0 {
				dst = append(dst, Match{Start: end - 40, End: end, Kind: Secret})
			}
		}
	}
	dst = eachByte(text, 'J', dst, jwtSecret)
	return resolve(dst, start)
}

// eachByte calls find at each c in text; find returns the secret's end
// at that place, or -1.
func eachByte(text string, c byte, dst []Match, find func(text string, i int) (start, end int)) []Match {
	for from := 0; ; {
		j := strings.IndexByte(text[from:], c)
		if j < 0 {
			return dst
		}
		i := from + j
		from = i + 1
		if start, end := find(text, i); end > 0 {
			dst = append(dst, Match{Start: start, End: end, Kind: Secret})
			from = end
		}
	}
}

// tokenEnd returns the end of the run of class bytes from text[i].
func tokenEnd(text string, i int, class *[256]bool) int {
	for i < len(text) && class[text[i]] {
		i++
	}
	return i
}

// startsToken reports whether a token may start at text[i]: no token byte
// before it.
func startsToken(text string, i int) bool {
	return i == 0 || !tokenClass[text[i-1]] || escapeBefore(text, i)
}

// random reports whether s has a digit, a capital and a small letter, as
// generated keys nearly always do and words and placeholders do not.
func random(s string) bool {
	var d, u, l bool
	for i := 0; i < len(s); i++ {
		c := s[i]
		d, u, l = d || isDigit(c), u || isUpper(c), l || isLower(c)
	}
	return d && u && l
}

// dashSecret finds the secret whose format has a '-' at text[i]: "sk-",
// "xox?-" or a PEM block.
func dashSecret(text string, i int) (int, int) {
	switch {
	case i >= 2 && text[i-2:i] == "sk" && startsToken(text, i-2):
		end := tokenEnd(text, i+1, &tokenClass)
		body := text[i+1 : end]
		if strings.HasPrefix(body, "ant-") {
			if len(body) >= 40 && random(body) {
				return i - 2, end
			}
			return -1, -1
		}
		if len(body) >= 32 && random(body) {
			return i - 2, end
		}
	case i >= 4 && text[i-4:i-1] == "xox" && strings.IndexByte("abposre", text[i-1]) >= 0 && startsToken(text, i-4):
		end := tokenEnd(text, i+1, &tokenClass)
		if body := text[i+1 : end]; len(body) >= 20 && strings.ContainsAny(body, "0123456789") {
			return i - 4, end
		}
	case strings.HasPrefix(text[i:], "-----BEGIN "):
		if end := pemEnd(text, i); end > 0 {
			return i, end
		}
	}
	return -1, -1
}

// pemEnd returns the end of the PEM private key block that starts at
// text[i], or -1 when the header names no private key. A block without
// its END line ends where its base64 body does.
func pemEnd(text string, i int) int {
	h := i + len("-----BEGIN ")
	close := strings.Index(text[h:min(len(text), h+64)], "-----")
	if close < 0 || !strings.HasSuffix(text[h:h+close], "PRIVATE KEY") && !strings.HasSuffix(text[h:h+close], "PRIVATE KEY BLOCK") {
		return -1
	}
	body := h + close + 5
	limit := min(len(text), i+maxSecretSpan)
	if e := strings.Index(text[body:limit], "-----END "); e >= 0 {
		if c := strings.Index(text[body+e+9:min(limit, body+e+9+64)], "-----"); c >= 0 {
			return body + e + 9 + c + 5
		}
	}
	end := body
	for end < limit && pemBody[text[end]] {
		end++
	}
	return end
}

// pemBody is the bytes of a PEM block's body: base64, line breaks, and
// the escapes of line breaks in JSON source.
var pemBody = classOf("+/=\r\n\t \\:-,", true)

// underscoreSecret finds the secret whose format has a '_' at text[i].
func underscoreSecret(text string, i int) (int, int) {
	switch {
	case i >= 3 && text[i-3:i-1] == "gh" && strings.IndexByte("pousr", text[i-1]) >= 0 && startsToken(text, i-3):
		end := tokenEnd(text, i+1, &alnumClass)
		if end-(i+1) == 36 && !tokenClass[byteAt(text, end)] && random(text[i+1:end]) {
			return i - 3, end
		}
	case i >= 6 && text[i-6:i] == "github" && strings.HasPrefix(text[i:], "_pat_") && startsToken(text, i-6):
		end := tokenEnd(text, i+5, &wordClass)
		if end-(i+5) >= 70 && random(text[i+5:end]) {
			return i - 6, end
		}
	case i >= 2 && (text[i-2:i] == "sk" || text[i-2:i] == "rk") && startsToken(text, i-2) &&
		(strings.HasPrefix(text[i:], "_live_") || strings.HasPrefix(text[i:], "_test_")):
		end := tokenEnd(text, i+6, &alnumClass)
		if end-(i+6) >= 20 && !tokenClass[byteAt(text, end)] && random(text[i+6:end]) {
			return i - 2, end
		}
	case i >= 6 && (text[i-6:i] == "secret" || text[i-6:i] == "SECRET") &&
		(strings.HasPrefix(text[i:], "_access_key") || strings.HasPrefix(text[i:], "_ACCESS_KEY")):
		if end := awsSecretNear(text, i+11, 16); end > 0 {
			return end - 40, end
		}
	case i >= 3 && text[i-3:i] == "mgk" && startsToken(text, i-3):
		start, end := i-3, i-3+keys.Length
		if end <= len(text) && !wordAt(text, end) && keys.WellFormed(text[start:end]) {
			return start, end
		}
	}
	return -1, -1
}

// The classes of letters and digits, and of those and '_'.
var (
	alnumClass = classOf("", true)
	wordClass  = classOf("_", true)
)

// byteAt is text[i], or 0 past its end.
func byteAt(text string, i int) byte {
	if i < len(text) {
		return text[i]
	}
	return 0
}

// awsKeyID finds an AWS access key id at text[i]: "AKIA" or "ASIA" and 16
// capitals or digits.
func awsKeyID(text string, i int) int {
	end := i + 20
	if end > len(text) || tokenClass[byteAt(text, end)] {
		return -1
	}
	for k := i + 4; k < end; k++ {
		if !isUpper(text[k]) && !isDigit(text[k]) {
			return -1
		}
	}
	return end
}

// capitalASecret finds the secret whose format has an 'A' at text[i]:
// an AWS access key id ("AKIA…", "ASIA…"), a Google API key ("AIza…"), or
// the secret after a SecretAccessKey label.
func capitalASecret(text string, i int) (int, int) {
	rest := text[i:]
	switch {
	case strings.HasPrefix(rest, "AKIA") || strings.HasPrefix(rest, "ASIA"):
		if startsToken(text, i) {
			return i, awsKeyID(text, i)
		}
	case strings.HasPrefix(rest, "AIza"):
		if startsToken(text, i) {
			return i, googleKey(text, i)
		}
	case strings.HasPrefix(rest, "AccessKey") && i >= 6 && text[i-6:i] == "Secret":
		if end := awsSecretNear(text, i+9, 16); end > 0 {
			return end - 40, end
		}
	}
	return -1, -1
}

// jwtSecret finds a JSON Web Token whose "eyJ" ends at text[i].
func jwtSecret(text string, i int) (int, int) {
	if i < 2 || text[i-2:i] != "ey" || !startsToken(text, i-2) || i > 2 && text[i-3] == '.' {
		return -1, -1
	}
	return i - 2, jwt(text, i-2)
}

// awsSecretNear returns the end of a 40-character AWS secret access key
// that starts within limit bytes of text[i], past quotes, '=', ':',
// ',' and spaces, or -1.
func awsSecretNear(text string, i, limit int) int {
	k := i
	for k < len(text) && k-i < limit && strings.IndexByte(" \t\r\n\"':=,\\ntr", text[k]) >= 0 {
		if text[k] >= 'a' && text[k] <= 'z' && !escapeBefore(text, k+1) {
			return -1
		}
		k++
	}
	end := tokenEnd(text, k, &awsSecretClass)
	if end-k != 40 || wordAt(text, end) || !random(text[k:end]) {
		return -1
	}
	return end
}

// awsSecretClass is the bytes of an AWS secret access key.
var awsSecretClass = classOf("+/", true)

// googleKey finds a Google API key at text[i]: "AIza" and 35 letters,
// digits, '_' or '-'.
func googleKey(text string, i int) int {
	end := i + 39
	if end > len(text) || tokenClass[byteAt(text, end)] || tokenEnd(text, i, &tokenClass) != end {
		return -1
	}
	return end
}

// jwtClass is base64url's bytes.
var jwtClass = classOf("_-", true)

// jwt finds a JSON Web Token at text[i]: three base64url parts joined by
// dots, the first two starting "eyJ" (a JSON object's '{"'), the
// signature at least 16 bytes.
func jwt(text string, i int) int {
	h := tokenEnd(text, i, &jwtClass)
	if h-i < 10 || h >= len(text) || text[h] != '.' || !strings.HasPrefix(text[h+1:], "eyJ") {
		return -1
	}
	p := tokenEnd(text, h+1, &jwtClass)
	if p-h-1 < 10 || p >= len(text) || text[p] != '.' {
		return -1
	}
	s := tokenEnd(text, p+1, &jwtClass)
	if s-p-1 < 16 || s-i > maxTokenSpan || byteAt(text, s) == '.' {
		return -1
	}
	return s
}

// pemHold is how many bytes at the end of text may still be part of a
// PEM block: an unfinished one, or the start of its first line.
func pemHold(text string) int {
	tail := text[max(0, len(text)-maxSecretSpan):]
	if !strings.Contains(tail, "-----BEGIN ") {
		return pemSuffix(text) // a search forward, faster than LastIndex's
	}
	b := strings.LastIndex(tail, "-----BEGIN ")
	if !strings.Contains(tail[b:], "-----END ") {
		return len(tail) - b
	}
	// The END line may not be whole yet.
	if e := strings.LastIndex(tail, "-----END "); !strings.Contains(tail[e+9:], "-----") {
		return len(tail) - b
	}
	return pemSuffix(text)
}

// pemSuffix is the length of the start of "-----BEGIN " that ends text.
func pemSuffix(text string) int {
	if text == "" || strings.IndexByte(pemBegin, text[len(text)-1]) < 0 {
		return 0
	}
	last := text[len(text)-1]
	for k := min(len(pemBegin), len(text)); k > 0; k-- {
		if pemBegin[k-1] == last && strings.HasSuffix(text, pemBegin[:k]) {
			return k
		}
	}
	return 0
}

const pemBegin = "-----BEGIN "

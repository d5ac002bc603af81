package guardrails

import "strings"

// emailLocal and emailDomain are the bytes of an address's local part (the
// common ones: letters, digits, ._%+-) and of its domain.
var (
	emailLocal  = classOf("._%+-", true)
	emailDomain = classOf(".-", true)
)

// fileExtensions are endings that make "name@2x.png" a file, not an
// address: none is a top-level domain in use for mail.
var fileExtensions = map[string]bool{
	"png": true, "jpg": true, "jpeg": true, "gif": true, "svg": true, "webp": true, "ico": true,
	"bmp": true, "css": true, "js": true, "ts": true, "json": true, "yaml": true, "yml": true,
	"lock": true, "txt": true, "html": true, "go": true, "java": true,
}

// findEmails appends the e-mail addresses in text: a local part of up to
// 64 bytes that neither starts nor ends with a dot nor has two in a row,
// '@', and a domain of at least two labels (letters, digits, inner
// hyphens) whose last is two or more letters and not a file extension.
// "git@github.com:org/repo" (an SSH remote) is not an address.
func findEmails(text string, dst []Match) []Match {
	from := 0
	for {
		j := strings.IndexByte(text[from:], '@')
		if j < 0 {
			return dst
		}
		at := from + j
		from = at + 1
		start := at
		for start > 0 && at-start < 64 && emailLocal[text[start-1]] {
			start--
		}
		if start > 0 && (emailLocal[text[start-1]] || text[start-1] == '@') {
			continue // a local part too long, or "a@b@c.org"
		}
		// "\njohn@x.org" in JSON source: the escape's letter is not the
		// address's.
		if start > 0 && text[start-1] == '\\' && start+1 < at && strings.IndexByte("ntrbf", text[start]) >= 0 {
			start++
		}
		// A dot may not start the local part: "…see.me@x.org" keeps "me".
		for start < at && text[start] == '.' {
			start++
		}
		local := text[start:at]
		if local == "" || local[len(local)-1] == '.' || strings.Contains(local, "..") {
			continue
		}
		end := domainEnd(text, at+1)
		if end < 0 {
			continue
		}
		dst = append(dst, Match{Start: start, End: end, Kind: Email})
		from = end
	}
}

// domainEnd returns where the domain of an address that starts at text[i]
// ends, or -1 when there is none.
func domainEnd(text string, i int) int {
	end := i
	for end < len(text) && end-i < 253 && emailDomain[text[end]] {
		end++
	}
	if end < len(text) && (emailDomain[text[end]] || text[end] == '@') {
		return -1 // too long, or another '@'
	}
	// A sentence's full stop or a hyphen after the address is not part of it.
	for end > i && (text[end-1] == '.' || text[end-1] == '-') {
		end--
	}
	if end < len(text) && text[end] == ':' && end+1 < len(text) && emailLocal[text[end+1]] {
		return -1 // user@host:path, an SSH remote
	}
	domain := text[i:end]
	labels := 0
	for label := range strings.SplitSeq(domain, ".") {
		if label == "" || label[0] == '-' || label[len(label)-1] == '-' || len(label) > 63 {
			return -1
		}
		labels++
	}
	if labels < 2 {
		return -1
	}
	tld := domain[strings.LastIndexByte(domain, '.')+1:]
	if len(tld) < 2 {
		return -1
	}
	for k := 0; k < len(tld); k++ {
		if !isAlpha(tld[k]) {
			return -1
		}
	}
	if fileExtensions[strings.ToLower(tld)] {
		return -1
	}
	return end
}

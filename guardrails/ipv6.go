package guardrails

import (
	"net/netip"
	"strings"
)

// ip6Class is the bytes of an IPv6 address as written: hex digits, colons
// and the dots of an IPv4 tail.
var ip6Class = classOf("0123456789abcdefABCDEF:.", false)

// findIPv6 appends the IPv6 addresses in text: runs of hex digits and
// colons (and an IPv4 tail) that net/netip parses as IPv6, with at least
// two colons and a digit, and not glued to a word. Times ("12:30:45"),
// MAC addresses and "std::string" are not addresses.
func findIPv6(text string, dst []Match) []Match {
	from := 0
	for {
		j := strings.IndexByte(text[from:], ':')
		if j < 0 {
			return dst
		}
		c := from + j
		start, end := c, c+1
		for start > 0 && c-start < 45 && ip6Class[text[start-1]] {
			start--
		}
		for end < len(text) && end-start < 46 && ip6Class[text[end]] {
			end++
		}
		from = end
		// A sentence's full stop after it, or a port's colon, is not part of it.
		for end > c+1 && text[end-1] == '.' {
			end--
		}
		if end > c+1 && text[end-1] == ':' && text[end-2] != ':' {
			end--
		}
		if end-start < 3 || end-start > 45 || wordBefore(text, start) || wordAt(text, end) ||
			start > 0 && (ip6Class[text[start-1]] || text[start-1] == '.') {
			continue
		}
		s := text[start:end]
		if strings.Count(s, ":") < 2 || !strings.ContainsAny(s, "0123456789") {
			continue
		}
		if a, err := netip.ParseAddr(s); err != nil || !a.Is6() {
			continue
		}
		dst = append(dst, Match{Start: start, End: end, Kind: IPAddress})
	}
}

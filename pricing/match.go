package pricing

import (
	"errors"
	"strings"
)

// Name patterns (ProviderPrices.Prefixes and Suffixes): '#' matches one
// ASCII digit, '*' (prefixes only, and followed by '/') one or more
// characters up to the next '/', any other character itself. They are
// deliberately this small: a pattern can only cut a version or a routing
// prefix off a name, never make two different models look alike, and
// matching never backtracks, so a client's model name cannot make a lookup
// slow.

// checkPattern validates a prefix or suffix pattern.
func checkPattern(pat string, prefix bool) error {
	if err := checkName(pat); err != nil {
		return err
	}
	if strings.Contains(pat, "**") {
		return errors.New(`"**" means nothing more than "*"`)
	}
	if !prefix && strings.Contains(pat, "*") {
		return errors.New(`'*' is only allowed in prefixes; use '#' for a digit`)
	}
	for i := 0; i < len(pat); i++ {
		if pat[i] == '*' && (i+1 == len(pat) || pat[i+1] != '/') {
			return errors.New(`'*' must be followed by '/': it matches a whole path segment`)
		}
	}
	if strings.Trim(pat, "#*") == "" {
		return errors.New("a pattern needs at least one literal character")
	}
	return nil
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// matchPrefix reports how many bytes at the start of s the pattern matches.
// '*' matches the rest of a path segment (at least one character); the
// '/' that checkPattern requires after it then matches the separator.
func matchPrefix(pat, s string) (int, bool) {
	j := 0
	for i := 0; i < len(pat); i++ {
		switch c := pat[i]; c {
		case '#':
			if j >= len(s) || !isDigit(s[j]) {
				return 0, false
			}
			j++
		case '*':
			k := j
			for k < len(s) && s[k] != '/' {
				k++
			}
			if k == j {
				return 0, false
			}
			j = k
		default:
			if j >= len(s) || s[j] != c {
				return 0, false
			}
			j++
		}
	}
	return j, true
}

// matchSuffix reports whether the pattern matches the end of s.
func matchSuffix(pat, s string) bool {
	if len(pat) > len(s) {
		return false
	}
	off := len(s) - len(pat)
	for i := 0; i < len(pat); i++ {
		c, x := pat[i], s[off+i]
		if c == '#' {
			if !isDigit(x) {
				return false
			}
		} else if c != x {
			return false
		}
	}
	return true
}

// cutPrefix cuts the first matching prefix pattern off name, leaving a
// name that is not empty.
func cutPrefix(patterns []string, name string) (string, bool) {
	for _, p := range patterns {
		if n, ok := matchPrefix(p, name); ok && n < len(name) {
			return name[n:], true
		}
	}
	return name, false
}

// cutSuffix cuts the first matching suffix pattern off name, leaving a
// name that is not empty.
func cutSuffix(patterns []string, name string) (string, bool) {
	for _, p := range patterns {
		if len(p) < len(name) && matchSuffix(p, name) {
			return name[:len(name)-len(p)], true
		}
	}
	return name, false
}

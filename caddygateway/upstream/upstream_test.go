package upstream

import (
	"net/url"
	"testing"
)

// TestSetPath: a plain path is set as the general case (unescape, then
// Go's escaping) sets it, and paths with escapes, reserved and
// non-ASCII bytes still go the general way.
func TestSetPath(t *testing.T) {
	general := func(raw string) url.URL {
		var u url.URL
		u.RawPath = raw
		if p, err := url.PathUnescape(raw); err == nil {
			u.Path = p
		} else {
			u.Path = raw
		}
		if u.EscapedPath() != u.RawPath {
			u.RawPath = ""
		}
		return u
	}
	paths := []string{"", "/", "/v1/chat/completions", "/openai/deployments/gpt-4o_mini.v2/chat/completions",
		"/v1beta/models/gemini-2.5-pro:streamGenerateContent", "/model/anthropic.claude-3-5:0/converse-stream",
		"/a~b$c&d+e,f;g=h@i", "/a%2Fb", "/a%zz", "/a b", "/é", "/a?b", "/a#b", "/a!b", "/a'b(c)*", "/a%20b"}
	for c := 0; c < 256; c++ {
		paths = append(paths, "/x"+string(rune(c))+"y", "/x"+string([]byte{byte(c)}))
	}
	for _, raw := range paths {
		var got url.URL
		setPath(&got, raw)
		if want := general(raw); got != want {
			t.Errorf("%q: %+v, want %+v", raw, got, want)
		}
		if plainPath(raw) && got.EscapedPath() != raw {
			t.Errorf("%q, plain, is sent as %q", raw, got.EscapedPath())
		}
	}
}

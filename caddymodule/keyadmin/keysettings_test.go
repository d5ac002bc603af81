package keyadmin

import "testing"

func TestIsKeyPath(t *testing.T) {
	for _, tc := range []struct {
		rest string
		want bool
	}{
		{"keys", true},
		{"keys/key_06h0f3dmbnbda28kaqnrfi69", true},
		{"keys/", true}, // an empty id: the manager answers 404
		{"keys/a/b", false},
		{"keysx", false},
		{"", false},
		{"index.html", false},
		{"api/keys", false},
	} {
		if got := isKeyPath(tc.rest); got != tc.want {
			t.Errorf("isKeyPath(%q) = %v, want %v", tc.rest, got, tc.want)
		}
	}
}

func TestPageFile(t *testing.T) {
	for _, tc := range []struct{ path, want string }{
		{"/account/keys/", "index.html"},
		{"/", "index.html"},
		{"", "index.html"},
		{"/account/keys/app.js", "app.js"},
		{"/account/keys/style.css", "style.css"},
		{"/account/keys/../../etc/passwd", "passwd"},
		{"/account/keys/..", ".."},
	} {
		if got := pageFile(tc.path); got != tc.want {
			t.Errorf("pageFile(%q) = %q, want %q", tc.path, got, tc.want)
		}
	}
}

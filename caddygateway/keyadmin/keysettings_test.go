package keyadmin

import "testing"

func TestParseAPIPath(t *testing.T) {
	for _, tc := range []struct {
		rest string
		want apiPath
		ok   bool
	}{
		{"keys", apiPath{kind: keysPath}, true},
		{"keys/key_06h0f3dmbnbda28kaqnrfi69", apiPath{kind: keyPath, id: "key_06h0f3dmbnbda28kaqnrfi69"}, true},
		{"keys/", apiPath{kind: keyPath}, true}, // an empty id: the manager answers 404
		{"keys/key_06h0f3dmbnbda28kaqnrfi69/usage", apiPath{kind: keyUsagePath, id: "key_06h0f3dmbnbda28kaqnrfi69"}, true},
		{"keys//usage", apiPath{kind: keyUsagePath}, true},
		{"usage", apiPath{kind: usagePath}, true},
		{"usage/", apiPath{}, false},
		{"keys/a/b", apiPath{}, false},
		{"keys/a/usage/x", apiPath{}, false},
		{"keys/a/usagex", apiPath{}, false},
		{"keysx", apiPath{}, false},
		{"", apiPath{}, false},
		{"index.html", apiPath{}, false},
		{"api/keys", apiPath{}, false},
	} {
		got, ok := parseAPIPath(tc.rest)
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseAPIPath(%q) = %+v, %v; want %+v, %v", tc.rest, got, ok, tc.want, tc.ok)
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

package pricing

import "testing"

func TestMatchPrefix(t *testing.T) {
	tests := []struct {
		pat, s string
		n      int
		ok     bool
	}{
		{"models/", "models/gemini-2.5-pro", 7, true},
		{"models/", "gemini-2.5-pro", 0, false},
		{"us.", "us.anthropic.claude", 3, true},
		{"us.", "us-gov.anthropic.claude", 0, false},
		{"arn:*/", "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-x", len("arn:aws:bedrock:us-east-1:123456789012:inference-profile/"), true},
		{"arn:*/", "arn:/x", 0, false}, // '*' needs at least one character
		{"publishers/*/models/", "publishers/google/models/gemini-2.5-pro", len("publishers/google/models/"), true},
		{"publishers/*/models/", "publishers/google/other/models/x", 0, false}, // '*' stops at '/'
		{"projects/*/locations/*/publishers/*/models/", "projects/p-1/locations/us-central1/publishers/google/models/gemini-2.0-flash", len("projects/p-1/locations/us-central1/publishers/google/models/"), true},
		{"v#.", "v2.x", 3, true},
		{"v#.", "vx.x", 0, false},
	}
	for _, tt := range tests {
		n, ok := matchPrefix(tt.pat, tt.s)
		if n != tt.n || ok != tt.ok {
			t.Errorf("matchPrefix(%q, %q) = %d, %v; want %d, %v", tt.pat, tt.s, n, ok, tt.n, tt.ok)
		}
	}
}

func TestMatchSuffix(t *testing.T) {
	tests := []struct {
		pat, s string
		ok     bool
	}{
		{"-####-##-##", "gpt-4o-2024-08-06", true},
		{"-####-##-##", "gpt-4o-2024-08-0x", false},
		{"-####-##-##", "gpt-4o-20240806", false},
		{"-########", "claude-sonnet-4-5-20250929", true},
		{"-########", "claude-sonnet-4-5", false},
		{":#", "amazon.titan-embed-text-v2:0", true},
		{"-v#", "amazon.nova-pro-v1", true},
		{"@########", "claude-sonnet-4-5@20250929", true},
		{"-latest", "claude-3-5-haiku-latest", true},
		{"-####", "x", false},
	}
	for _, tt := range tests {
		if ok := matchSuffix(tt.pat, tt.s); ok != tt.ok {
			t.Errorf("matchSuffix(%q, %q) = %v, want %v", tt.pat, tt.s, ok, tt.ok)
		}
	}
}

func TestCutLeavesAName(t *testing.T) {
	// A pattern that would consume the whole name does not cut it.
	if s, ok := cutSuffix([]string{"-####"}, "-2024"); ok {
		t.Errorf("cutSuffix cut the whole name: %q", s)
	}
	if s, ok := cutPrefix([]string{"models/"}, "models/"); ok {
		t.Errorf("cutPrefix cut the whole name: %q", s)
	}
	if s, ok := cutSuffix([]string{"-v#", ":#"}, "x-v1:0"); !ok || s != "x-v1" {
		t.Errorf("cutSuffix = %q, %v; want the first matching pattern cut", s, ok)
	}
}

func TestCheckPattern(t *testing.T) {
	tests := []struct {
		pat    string
		prefix bool
		ok     bool
	}{
		{"models/", true, true},
		{"arn:*/", true, true},
		{"-####-##-##", false, true},
		{"-*", false, false},
		{"a**/", true, false},
		{"a*b/", true, false},
		{"a*", true, false},
		{"###", false, false},
		{"*", true, false},
		{"*/", true, true}, // cuts any first path segment: explicit, if broad
		{"", true, false},
		{"a b", true, false},
	}
	for _, tt := range tests {
		err := checkPattern(tt.pat, tt.prefix)
		if (err == nil) != tt.ok {
			t.Errorf("checkPattern(%q, prefix=%v) = %v, want ok=%v", tt.pat, tt.prefix, err, tt.ok)
		}
	}
}

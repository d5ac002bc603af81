package gateway

import "testing"

func TestKeyAllows(t *testing.T) {
	for _, tc := range []struct {
		models []string
		model  string
		want   bool
	}{
		{nil, "anything", true},
		{[]string{}, "oa/gpt-4o", true},
		{[]string{"oa/gpt-4o-mini"}, "oa/gpt-4o-mini", true},
		{[]string{"oa/gpt-4o-mini"}, "oa/gpt-4o", false},
		{[]string{"oa/gpt-4o-mini"}, "gpt-4o-mini", false}, // the name the client sends counts
		{[]string{"smart"}, "smart", true},
		{[]string{"smart"}, "claude/claude-sonnet-4-5", false},
		{[]string{"oa/*"}, "oa/gpt-4o", true},
		{[]string{"oa/*"}, "oa/org/model", true},
		{[]string{"oa/*"}, "oa", false},
		{[]string{"oa/*"}, "oax/gpt-4o", false},
		{[]string{"oa/*"}, "oa/*", true},
		{[]string{"a", "b"}, "b", true},
		{[]string{"a", "b"}, "", false},
	} {
		k := &Key{Models: tc.models}
		if got := k.Allows(tc.model); got != tc.want {
			t.Errorf("%v allows %q = %v, want %v", tc.models, tc.model, got, tc.want)
		}
	}
	var none *Key
	if !none.Allows("x") {
		t.Error("a request without a key is not limited here (modelgate_auth refuses it)")
	}
}

package providers

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// walk lists what Members or Elements gives of s: "key=value" pairs, or
// values.
func walk(s string) (got []string, ok bool) {
	b := []byte(s)
	if t := strings.TrimLeft(s, " \t\r\n"); strings.HasPrefix(t, "[") {
		ok = Elements(b, func(v []byte) bool { got = append(got, string(v)); return true })
	} else {
		ok = Members(b, func(k, v []byte) bool { got = append(got, string(k)+"="+string(v)); return true })
	}
	return got, ok
}

// walkOnePass lists the same as walk from WalkMembers or WalkElements:
// with read, fn reads each value (SkipValue); without, it has each one
// skipped and only keys are listed. ok is false unless s is one object
// or array and spaces.
func walkOnePass(s string, read bool) (got []string, ok bool) {
	b := []byte(strings.TrimLeft(s, " \t\r\n"))
	value := func(prefix string, v []byte) int {
		if !read {
			got = append(got, prefix)
			return 0
		}
		n := SkipValue(v, 0)
		if n > 0 {
			got = append(got, prefix+string(v[:n]))
		}
		return n
	}
	var n int
	if len(b) > 0 && b[0] == '[' {
		n = WalkElements(b, func(v []byte) int { return value("", v) })
	} else {
		n = WalkMembers(b, func(k, v []byte) int { return value(string(k)+"=", v) })
	}
	return got, n > 0 && strings.Trim(string(b[n:]), " \t\r\n") == ""
}

// sameWalks checks that the one-pass walks of s agree with walk: the
// same members or elements, and the same keys when values are skipped.
func sameWalks(t *testing.T, s string) {
	t.Helper()
	want, wantOK := walk(s)
	got, ok := walkOnePass(s, true)
	if ok != wantOK || ok && strings.Join(got, "\x00") != strings.Join(want, "\x00") {
		t.Fatalf("%q read in one pass:\n got %q %v\nwant %q %v", s, got, ok, want, wantOK)
	}
	keys, ok := walkOnePass(s, false)
	if ok && !wantOK {
		t.Fatalf("%q walked in one pass, skipping: accepted %q", s, keys)
	}
	if ok {
		for i := range keys {
			if !strings.HasPrefix(want[i], keys[i]) {
				t.Fatalf("%q walked in one pass, skipping:\n got %q\nwant %q", s, keys, want)
			}
		}
	}
}

// gjsonWalk is the same from gjson, the reference.
func gjsonWalk(s string) (got []string) {
	root := gjson.Parse(s)
	root.ForEach(func(k, v gjson.Result) bool {
		if root.IsArray() {
			got = append(got, v.Raw)
		} else {
			got = append(got, k.Str+"="+v.Raw)
		}
		return true
	})
	return got
}

func TestMembersElements(t *testing.T) {
	for _, s := range []string{
		`{}`, ` { } `, `[]`, `[ ]`,
		`{"a":1,"b":"x\"y\\","c":[1,{"d":"]}"}],"e":{"f":null},"g":true}`,
		`{"k\u0065y":"v","":""}`,
		`[1,"two",[3],{"four":4},null,false,-5.5e3]`,
		"\n{\t\"data\" : [ {\"index\":0,\"embedding\":\"AAAAPw==\"} ] , \"usage\":{\"prompt_tokens\":3}}\n",
	} {
		got, ok := walk(s)
		want := gjsonWalk(s)
		if !ok || strings.Join(got, "\x00") != strings.Join(want, "\x00") {
			t.Errorf("%s:\n got %q %v\nwant %q", s, got, ok, want)
		}
		sameWalks(t, s)
		if _, ok := walkOnePass(s, false); !ok {
			t.Errorf("%s: refused when its values are skipped", s)
		}
	}
	for _, s := range []string{
		``, `x`, `{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{"a":1 "b":2}`, `{"a":1}}`, `{"a":1} x`, `{a:1}`,
		`{"a":"unterminated}`, `{"a":[1,2}`, `{"a":"\"}`, "{\"a\x01\":1}", `[1,]`, `[,]`, `[1 2]`, `[1]]`, `["x\\"]x"]`,
	} {
		if got, ok := walk(s); ok {
			t.Errorf("%q accepted: %q", s, got)
		}
		sameWalks(t, s)
	}
	// Skipped, a value must be a well-formed literal: a quote glued to a
	// number would start a string for any parser that sees it.
	for _, s := range []string{`{"a":0"}`, `{"a":0"b":"c"}`, `[tru]`, `[nul]`, `[-]`, `[01]`, `[1.]`, `[1e]`, `[.5]`, `{"a":+1}`} {
		if got, ok := walkOnePass(s, false); ok {
			t.Errorf("%q accepted when skipped: %q", s, got)
		}
	}
	for _, s := range []string{`[0,-0,1.5,-2.5e10,3E+2,4e-3,true,false,null]`, `{"a":-12.25E-1}`} {
		if _, ok := walkOnePass(s, false); !ok {
			t.Errorf("%q refused when skipped", s)
		}
	}
}

// FuzzMembersElements: on any valid JSON object or array, the walk gives
// gjson's members or elements; on anything, it does not panic, and the
// one-pass walks agree with it.
func FuzzMembersElements(f *testing.F) {
	f.Add(`{"a":1,"b":"x\"y\\","c":[1,{"d":"]}"}]}`)
	f.Add(`[1,"two",[3],{"four":4}]`)
	f.Fuzz(func(t *testing.T, s string) {
		sameWalks(t, s)
		got, ok := walk(s)
		root := gjson.Parse(s)
		if !ValidJSON([]byte(s)) || !root.IsObject() && !root.IsArray() {
			return
		}
		if want := gjsonWalk(s); !ok || strings.Join(got, "\x00") != strings.Join(want, "\x00") {
			t.Fatalf("%s:\n got %q %v\nwant %q", s, got, ok, want)
		}
	})
}

// fieldsWalk lists the members Fields gives of s as "key=value".
func fieldsWalk(s string) (got []string) {
	for k, v := range Fields(s) {
		got = append(got, k+"="+v)
	}
	return got
}

func TestFields(t *testing.T) {
	for _, s := range []string{
		`{}`, ` { } `,
		`{"a":1,"b":"x\"y\\","c":[1,{"d":"]}"}],"e":{"f":null},"g":true}`,
		`{"k\u0065y":"v","":""}`,
		"\n{\t\"data\" : [ {\"index\":0} ] , \"usage\":{\"prompt_tokens\":3}}\n",
		`{"prompt_tokens":14,"completion_tokens":10,"prompt_tokens_details":{"cached_tokens":0},"n":-1.5e3}`,
	} {
		got, want := fieldsWalk(s), gjsonWalk(s)
		if strings.Join(got, "\x00") != strings.Join(want, "\x00") {
			t.Errorf("%s:\n got %q\nwant %q", s, got, want)
		}
	}
	// Broken objects: some members, then the end, and no panic.
	for s, want := range map[string]string{
		``: ``, `{`: ``, `{"a":1`: `a=1`, `{"a":"unterminated}`: ``, `{"a":`: ``, `{"a":[1,2}`: `a=[1,2}`, // brackets are counted, not matched
		`{"a":1}}`: `a=1`, `{"a":"\`: ``, `{"a":1,"b"`: `a=1`,
		`null`: ``, `[{"a":1}]`: ``, `"{\"a\":1}"`: ``, ` {"a":1}`: `a=1`,
	} {
		if got := strings.Join(fieldsWalk(s), ","); got != want {
			t.Errorf("%q: %q, want %q", s, got, want)
		}
	}
}

// FuzzFields: on any valid JSON object, Fields gives gjson's members; on
// anything, it ends without a panic.
func FuzzFields(f *testing.F) {
	f.Add(`{"a":1,"b":"x\"y\\","c":[1,{"d":"]}"}]}`)
	f.Add(`{"prompt_tokens":14,"prompt_tokens_details":{"cached_tokens":0}}`)
	f.Fuzz(func(t *testing.T, s string) {
		got := fieldsWalk(s)
		if !ValidJSON([]byte(s)) || !gjson.Parse(s).IsObject() {
			return
		}
		if want := gjsonWalk(s); strings.Join(got, "\x00") != strings.Join(want, "\x00") {
			t.Fatalf("%s:\n got %q\nwant %q", s, got, want)
		}
	})
}

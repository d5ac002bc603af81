package respcache

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"testing"
	"unicode/utf8"
)

// FuzzKey checks the canonical form every key is the hash of, on any
// input: no panic; a valid JSON object has a key, and a key whatever its
// whitespace; the canonical form is valid JSON, its own canonical form,
// and means what the input means; and, for input encoding/json reads the
// same (no duplicate keys, valid UTF-8, no lone surrogates), the form of
// encoding/json's re-encoding — keys sorted, its own escaping — is the
// same form.
func FuzzKey(f *testing.F) {
	for _, s := range []string{
		`{"model":"gpt-4o","messages":[{"role":"user","content":"Hi"}],"temperature":0.2}`,
		`{"b":{"d":[1,2,{"f":null,"e":true}],"c":"x"},"a":-0.5e10}`,
		`{"a":"\u00e9\ud83d\ude00\n\"\\\/","\u0061":1}`,
		`{"stream":true,"stream_options":{"include_usage":true},"user":"u","model":"m"}`,
		`{"x":"\ud800","y":"\\u0041"}`,
		`{"a":1,"a":2}`,
		` { "a" : [ ] , "b" : { } } `,
		`{"a":"` + "\xff\xfe" + `"}`,
		`[1,2]`, `{`, `{"a":01}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		form, err := canonicalForm(in)
		isObject := json.Valid(in) && bytes.HasPrefix(bytes.TrimLeft(in, " \t\r\n"), []byte("{"))
		if err != nil {
			if isObject && depth(in) <= maxDepth {
				t.Fatalf("a valid JSON object has no key: %v\n%q", err, in)
			}
			return
		}
		if !isObject {
			t.Fatalf("invalid input has a key: %q", in)
		}
		if !json.Valid(form) {
			t.Fatalf("the canonical form is not JSON: %q", form)
		}
		if again, err := canonicalForm(form); err != nil || !bytes.Equal(again, form) {
			t.Fatalf("the canonical form is not its own: %q → %q (%v)", form, again, err)
		}
		var indented bytes.Buffer
		if err := json.Indent(&indented, in, " ", "\t"); err != nil {
			t.Fatal(err)
		}
		if f2, err := canonicalForm(indented.Bytes()); err != nil || !bytes.Equal(f2, form) {
			t.Fatalf("whitespace changes the form:\n%q\n%q", form, f2)
		}
		if !plain(in) {
			return
		}
		a, b := decode(t, in), decode(t, form)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("the canonical form means something else:\n%q\n%q", in, form)
		}
		var re bytes.Buffer
		enc := json.NewEncoder(&re)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(a); err != nil {
			t.Fatal(err)
		}
		if f3, err := canonicalForm(re.Bytes()); err != nil || !bytes.Equal(f3, form) {
			t.Fatalf("encoding/json's re-encoding has another form:\n%q\n%q\n%q", in, form, f3)
		}
	})
}

// canonicalForm is the canonical form KeyOf hashes, for a chat body.
func canonicalForm(b []byte) ([]byte, error) {
	c := new(canon)
	if err := c.document(b); err != nil {
		return nil, err
	}
	return c.out, nil
}

func decode(t *testing.T, b []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("%v: %q", err, b)
	}
	return v
}

// plain reports whether encoding/json reads b as it is: valid UTF-8, no
// surrogate escapes (it would turn lone ones into U+FFFD), no object with
// a key twice (it would keep the last).
func plain(b []byte) bool {
	if !utf8.Valid(b) || bytes.Contains(bytes.ToLower(b), []byte(`\ud`)) {
		return false
	}
	return !duplicateKeys(json.NewDecoder(bytes.NewReader(b)))
}

func duplicateKeys(d *json.Decoder) bool {
	tok, err := d.Token()
	if err != nil {
		return !errors.Is(err, io.EOF)
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]bool{}
		for d.More() {
			k, _ := d.Token()
			if s, _ := k.(string); seen[s] {
				return true
			} else {
				seen[s] = true
			}
			if duplicateKeys(d) {
				return true
			}
		}
		_, _ = d.Token()
	case json.Delim('['):
		for d.More() {
			if duplicateKeys(d) {
				return true
			}
		}
		_, _ = d.Token()
	}
	return false
}

// depth is how deeply b's arrays and objects nest.
func depth(b []byte) int {
	d, most, inString := 0, 0, false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case inString:
		case c == '{' || c == '[':
			d++
			most = max(most, d)
		case c == '}' || c == ']':
			d--
		}
	}
	return most
}

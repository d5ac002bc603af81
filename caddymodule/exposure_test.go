package caddymodule

import (
	"bytes"
	"strings"
	"testing"

	"github.com/modelgate/modelgate/keys"
)

func TestFindKeys(t *testing.T) {
	k1, _ := keys.Generate()
	k2, _ := keys.Generate()
	last := byte('0')
	if k1[len(k1)-1] == '0' {
		last = '1'
	}
	bad := k1[:len(k1)-1] + string(last) // another checksum digit: a look-alike
	if keys.WellFormed(bad) {
		t.Fatal("the look-alike passes the checksum")
	}
	for _, tc := range []struct {
		name, in string
		want     []string
	}{
		{"none", `{"messages":[{"role":"user","content":"hello"}]}`, nil},
		{"in a prompt", `{"content":"my key is ` + k1 + `, keep it"}`, []string{k1}},
		{"two, in JSON strings", `["` + k1 + `","x` + `y",{"k":"` + k2 + `"}]`, []string{k1, k2}},
		{"at the very start and end", k1 + " " + k2, []string{k1, k2}},
		{"checksum wrong: a look-alike", `"` + bad + `"`, nil},
		{"cut short", `"` + k1[:30] + `"`, nil},
		{"inside a longer token", `"x` + k1 + `"`, nil},
		{"followed by more base62", `"` + k1 + `A"`, nil},
		{"prefix alone, many times", strings.Repeat("mgk_", 100), nil},
		{"in a URL query", "key=" + k1 + "&x=1", []string{k1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := findKeys([]byte(tc.in))
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("found %v, want %v", got, tc.want)
			}
		})
	}
}

func FuzzFindKeys(f *testing.F) {
	k, _ := keys.Generate()
	f.Add([]byte("a " + k + " b mgk_ mgk_x"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, s := range findKeys(b) {
			if !keys.WellFormed(s) || !bytes.Contains(b, []byte(s)) {
				t.Fatalf("found %q in %q", s, b)
			}
		}
	})
}

// BenchmarkExposureScan is what looking for managed keys costs a request
// that holds none — nearly all of them: one search for "mgk_" over a 16 KiB
// chat body.
func BenchmarkExposureScan(b *testing.B) {
	body := []byte(`{"model":"gpt-4o","messages":[{"role":"user","content":"` + strings.Repeat("the quick brown fox jumps over the lazy dog ", 16384/44) + `"}]}`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if findKeys(body) != nil {
			b.Fatal("found a key")
		}
	}
}

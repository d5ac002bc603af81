package keys

import (
	"crypto/sha256"
	"hash/crc32"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

var anchored = regexp.MustCompile(`^` + Pattern + `$`)

// refChecksum encodes crc32.ChecksumIEEE of body as 6 base62 digits,
// most significant first, the way the format is specified.
func refChecksum(body string) string {
	const digits = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	sum := crc32.ChecksumIEEE([]byte(body))
	out := make([]byte, 6)
	for i := 5; i >= 0; i-- {
		out[i] = digits[sum%62]
		sum /= 62
	}
	return string(out)
}

func TestGenerate(t *testing.T) {
	const n = 2000
	seen := make(map[string]bool, n)
	counts := make(map[byte]int)
	for i := 0; i < n; i++ {
		k, err := Generate()
		if err != nil {
			t.Fatal(err)
		}
		if !WellFormed(k) {
			t.Fatalf("Generate() = %q, not well formed", k)
		}
		if !anchored.MatchString(k) {
			t.Fatalf("Generate() = %q does not match %s", k, Pattern)
		}
		if got, want := k[34:], refChecksum(k[4:34]); got != want {
			t.Fatalf("Generate() = %q: checksum %s, want %s", k, got, want)
		}
		if seen[k] {
			t.Fatalf("Generate() returned %q twice", k)
		}
		seen[k] = true
		for j := 4; j < 34; j++ {
			counts[k[j]]++
		}
	}
	// 60,000 characters, about 968 of each: every one appears, none
	// strays far (a broken modulo or a missing rejection would show).
	if len(counts) != 62 {
		t.Fatalf("%d distinct characters in the random parts, want 62", len(counts))
	}
	for c, got := range counts {
		if got < 700 || got > 1250 {
			t.Errorf("character %q appears %d times in %d, want about %d", c, got, n*30, n*30/62)
		}
	}
}

func TestChecksumVector(t *testing.T) {
	body := strings.Repeat("0", 30)
	key := Prefix + body + refChecksum(body)
	if !WellFormed(key) {
		t.Fatalf("WellFormed(%q) = false", key)
	}
	if got, want := checksum(body), crc32.ChecksumIEEE([]byte(body)); got != want {
		t.Fatalf("checksum(%q) = %#x, crc32.ChecksumIEEE gives %#x", body, got, want)
	}
	// And on random bodies of every length.
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 1000; i++ {
		b := make([]byte, r.IntN(64))
		for j := range b {
			b[j] = byte(r.UintN(256))
		}
		if got, want := checksum(string(b)), crc32.ChecksumIEEE(b); got != want {
			t.Fatalf("checksum(%q) = %#x, crc32.ChecksumIEEE gives %#x", b, got, want)
		}
	}
}

func TestWellFormedRefuses(t *testing.T) {
	good, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		s    string
	}{
		{"empty", ""},
		{"prefix only", Prefix},
		{"no prefix", good[4:]},
		{"other prefix", "ghp_" + good[4:]},
		{"upper-case prefix", "MGK_" + good[4:]},
		{"prefix without underscore", "mgk-" + good[4:]},
		{"one short", good[:39]},
		{"one long", good + "0"},
		{"space appended", good + " "},
		{"leading space", " " + good[:39]},
		{"underscore in body", good[:10] + "_" + good[11:]},
		{"dash in body", good[:10] + "-" + good[11:]},
		{"non-ASCII", good[:10] + "é" + good[12:]},
		{"NUL", good[:10] + "\x00" + good[11:]},
		{"high byte", good[:39] + "\xff"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if WellFormed(tt.s) {
				t.Errorf("WellFormed(%q) = true", tt.s)
			}
		})
	}
}

// A CRC32 catches any one changed character: every position, every other
// character of the alphabet.
func TestWellFormedChangedCharacter(t *testing.T) {
	good, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	for i := 4; i < len(good); i++ {
		for j := 0; j < len(alphabet); j++ {
			c := alphabet[j]
			if c == good[i] {
				continue
			}
			bad := good[:i] + string(c) + good[i+1:]
			if WellFormed(bad) {
				t.Fatalf("WellFormed(%q) = true (%q with position %d changed)", bad, good, i)
			}
			if !anchored.MatchString(bad) {
				t.Fatalf("%q does not match the pattern; a look-alike should", bad)
			}
		}
	}
}

func TestDigestAndHint(t *testing.T) {
	k, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	if Digest(k) != sha256.Sum256([]byte(k)) {
		t.Error("Digest is not the SHA-256 of the secret")
	}
	if got, want := Hint(k), "mgk_..."+k[36:]; got != want {
		t.Errorf("Hint = %q, want %q", got, want)
	}
	if strings.Contains(Hint(k), k[4:34]) || len(Hint(k)) != len("mgk_...")+4 {
		t.Errorf("Hint %q shows too much", Hint(k))
	}
	if got := Hint("short"); got != "mgk_..." {
		t.Errorf("Hint(%q) = %q, shows a short secret", "short", got)
	}
}

func TestFormatAllocs(t *testing.T) {
	k, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	var ok bool
	var d [32]byte
	if n := testing.AllocsPerRun(100, func() { ok = WellFormed(k) }); n != 0 || !ok {
		t.Errorf("WellFormed: %v allocations, result %v", n, ok)
	}
	if n := testing.AllocsPerRun(100, func() { d = Digest(k) }); n != 0 {
		t.Errorf("Digest: %v allocations", n)
	}
	_ = d
}

func FuzzWellFormed(f *testing.F) {
	body := strings.Repeat("0", 30)
	f.Add(Prefix + body + refChecksum(body))
	for i := 0; i < 4; i++ {
		k, err := Generate()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(k)
		f.Add(k[:39] + "x")
	}
	f.Add("")
	f.Add(Prefix)
	f.Add("mgk_" + strings.Repeat("\xff", 36))
	f.Fuzz(func(t *testing.T, s string) {
		ok := WellFormed(s)
		if !ok {
			if anchored.MatchString(s) && s[34:] == refChecksum(s[4:34]) {
				t.Fatalf("WellFormed(%q) = false for a key with a good checksum", s)
			}
			return
		}
		if !anchored.MatchString(s) {
			t.Fatalf("WellFormed(%q) = true but %s does not match", s, Pattern)
		}
		if s[34:] != refChecksum(s[4:34]) {
			t.Fatalf("WellFormed(%q) = true with a bad checksum", s)
		}
		if Digest(s) != sha256.Sum256([]byte(s)) {
			t.Fatal("Digest is wrong")
		}
		if h := Hint(s); h != "mgk_..."+s[36:] {
			t.Fatalf("Hint(%q) = %q", s, h)
		}
	})
}

func BenchmarkWellFormed(b *testing.B) {
	k, err := Generate()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if !WellFormed(k) {
			b.Fatal("not well formed")
		}
	}
}

func BenchmarkGenerate(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Generate(); err != nil {
			b.Fatal(err)
		}
	}
}

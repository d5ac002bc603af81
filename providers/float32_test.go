package providers

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"regexp"
	"strconv"
	"testing"
)

// jsonNumber is the JSON number at the start of a string; begun is what
// the parser takes for one: a '.' or an exponent marker begins a part that
// must then have digits.
var (
	jsonNumber = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`)
	begun      = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]*)?([eE][+-]?[0-9]*)?`)
)

// checkParseFloat32 compares ParseFloat32 of s with strconv.ParseFloat(·,
// 32) of the JSON number s starts with.
func checkParseFloat32(t *testing.T, s string) {
	t.Helper()
	f, n, ok := ParseFloat32(s)
	num := jsonNumber.FindString(s)
	if num == "" || begun.FindString(s) != num {
		if ok {
			t.Fatalf("%q: read %v from no JSON number", s, f)
		}
		return
	}
	want, err := strconv.ParseFloat(num, 32)
	if err != nil {
		if ok {
			t.Fatalf("%q: read %v, strconv: %v", s, f, err)
		}
		return
	}
	if !ok || n != len(num) || math.Float32bits(f) != math.Float32bits(float32(want)) {
		t.Fatalf("%q: %v (%#x) over %d bytes, ok %v; want %v (%#x) over %d", s, f, math.Float32bits(f), n, ok,
			float32(want), math.Float32bits(float32(want)), len(num))
	}
}

// TestParseFloat32 compares the parser with strconv on float32s printed
// as providers print them (shortest, as float64, fixed precisions), on
// random decimals of every length and exponent, on the midpoints between
// float32s (where rounding through float64 could go wrong) and on what is
// not a JSON number.
func TestParseFloat32(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 30000 {
		f := math.Float32frombits(rng.Uint32())
		if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
			continue
		}
		for _, s := range []string{
			strconv.FormatFloat(float64(f), 'g', -1, 32),
			strconv.FormatFloat(float64(f), 'g', -1, 64),
			strconv.FormatFloat(float64(f), 'e', rng.IntN(12), 32),
			strconv.FormatFloat(float64(f), 'f', rng.IntN(30), 64),
			strconv.FormatFloat(float64(f), 'E', 8, 64),
		} {
			checkParseFloat32(t, s)
		}
		// Halfway between f and the next float32 up, exactly.
		next := math.Nextafter32(f, float32(math.Inf(1)))
		if !math.IsInf(float64(next), 0) {
			mid := (float64(f) + float64(next)) / 2
			checkParseFloat32(t, strconv.FormatFloat(mid, 'g', -1, 64))
			checkParseFloat32(t, strconv.FormatFloat(mid, 'e', 20, 64))
		}
	}
	for range 30000 {
		b := []byte{}
		if rng.IntN(2) == 0 {
			b = append(b, '-')
		}
		digits := 1 + rng.IntN(25)
		for i := range digits {
			if i == 0 && digits > 1 {
				b = append(b, byte('1'+rng.IntN(9)))
			} else {
				b = append(b, byte('0'+rng.IntN(10)))
			}
		}
		if rng.IntN(2) == 0 {
			b = append(b, '.')
			for range 1 + rng.IntN(20) {
				b = append(b, byte('0'+rng.IntN(10)))
			}
		}
		if rng.IntN(2) == 0 {
			b = append(b, "eE"[rng.IntN(2)])
			if rng.IntN(2) == 0 {
				b = append(b, "+-"[rng.IntN(2)])
			}
			b = strconv.AppendInt(b, int64(rng.IntN(60)), 10)
		}
		checkParseFloat32(t, string(b))
	}
	for _, s := range []string{
		"0", "-0", "0.0", "-0.0e5", "1", "1e22", "1e23", "1e-22", "1e-23", "9007199254740993", "9007199254740993e-5",
		"3.4028235e38", "3.4028236e38", "3.5e38", "1e39", "-1e39", "1.4e-45", "7e-46", "7.1e-46", "1e-46", "1e-400", "1e400",
		"1e99999999999", "123456789012345678901234567890", "0.000000000000000000000000000001",
		"1.00000005960464477539062", "1.000000059604644775390625", "1.0000000596046447753906251",
		"", "-", "+1", ".5", "1.", "1e", "1e+", "01", "-01", "00", "0x10", "inf", "NaN", "1_000", " 1", "1 ", "1,2", "1]",
	} {
		checkParseFloat32(t, s)
	}
}

func TestAppendFloat32s(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want []float32
		ok   bool
	}{
		{`[]`, nil, true},
		{` [ ] `, nil, true},
		{`[0.5,-1e-45,3.4028235e38,1]`, []float32{0.5, -math.Float32frombits(1), math.MaxFloat32, 1}, true},
		{"[ 1 ,\n2\t,3 ]", []float32{1, 2, 3}, true},
		{`[1,]`, nil, false},
		{`[,1]`, nil, false},
		{`[1 2]`, nil, false},
		{`[1,"2"]`, nil, false},
		{`[1e39]`, nil, false},
		{`[1]x`, nil, false},
		{`[[1]]`, nil, false},
		{`[1`, nil, false},
		{`{}`, nil, false},
		{``, nil, false},
	} {
		got, ok := AppendFloat32s(nil, tc.raw)
		if ok != tc.ok || ok && len(got) != len(tc.want) {
			t.Errorf("%q: %v %v", tc.raw, got, ok)
			continue
		}
		for i := range tc.want {
			if ok && math.Float32bits(got[i]) != math.Float32bits(tc.want[i]) {
				t.Errorf("%q: %v", tc.raw, got)
			}
		}
	}
}

// FuzzParseFloat32 holds the parser to strconv's results and to JSON's
// grammar on any input.
func FuzzParseFloat32(f *testing.F) {
	for _, s := range []string{"0.0072897403", "-1.4e-45", "3.4028235e38", "1e23", "0.1", "123456789012345678901", "01", "1."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkParseFloat32(t, s)
		if vec, ok := AppendFloat32s(nil, "["+s+"]"); ok {
			var want []float64
			if err := json.Unmarshal([]byte("["+s+"]"), &want); err != nil || len(want) != len(vec) {
				t.Fatalf("%q read as %v; encoding/json: %v %v", s, vec, want, err)
			}
		}
	})
}

// BenchmarkAppendFloat32s reads a vector of 1,536 values as a provider
// prints them.
func BenchmarkAppendFloat32s(b *testing.B) {
	raw := []byte{'['}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 1536 {
		if i > 0 {
			raw = append(raw, ',')
		}
		raw = strconv.AppendFloat(raw, float64(float32(rng.NormFloat64()/40)), 'g', -1, 32)
	}
	raw = append(raw, ']')
	vec := make([]float32, 0, 1536)
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := AppendFloat32s(vec[:0], raw); !ok {
			b.Fatal("not read")
		}
	}
}

package providers

import (
	"math"
	"strconv"
)

// This file reads embedding vectors: JSON arrays of decimal numbers, a
// provider's float32 values printed as text. An answer of 64 vectors of
// 1,536 values holds ~100,000 numbers, so they are read here by hand rather
// than through gjson and strconv one at a time, with exactly
// strconv.ParseFloat(s, 32)'s results (FuzzParseFloat32 compares the two).

// text is what the scanners read: a body's bytes, or gjson's Raw strings.
type text interface{ ~string | ~[]byte }

// pow10 are the powers of ten that float64 holds exactly.
var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// ParseFloat32 reads the JSON number at the start of s as a float32, the
// value strconv.ParseFloat(number, 32) returns, and how many bytes it took.
// ok is false when s does not start with a JSON number (-?(0|[1-9]\d*)
// (\.\d+)?([eE][+-]?\d+)?), when a '.' or an exponent marker after its
// digits has no digits of its own ("1.", "1e+"), or when the number is
// beyond float32's range (strconv's ErrRange); what follows the number is
// not looked at.
//
// Most numbers take the fast path: up to 19 significant digits m and a
// decimal exponent e with m <= 2^53 and |e| <= 22 make m·10^e in float64
// with one correctly rounded multiplication or division (Clinger's fast
// path), and rounding that float64 d to float32 gives the float32 nearest
// the decimal itself unless d is exactly halfway between two float32s: the
// midpoints are float64s, so the decimal and d lie strictly on the same
// side of every midpoint that d is not. That case, and every other number,
// is strconv's. In the fast path's range (1e-22 <= d < 2^53·1e22) d is a
// normal float32 magnitude, so neither overflow nor subnormals arise.
func ParseFloat32[T text](s T) (f float32, n int, ok bool) {
	i := 0
	neg := false
	if i < len(s) && s[i] == '-' {
		neg = true
		i++
	}
	var mant uint64
	digits := 0      // significant digits in mant
	exp := 0         // mant·10^exp is the number
	dropped := false // nonzero digits beyond the 19 that mant holds
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
			if digits < 19 {
				mant = mant*10 + uint64(s[i]-'0')
				digits++
			} else {
				exp++
				dropped = dropped || s[i] != '0'
			}
		}
	default:
		return 0, 0, false
	}
	if i < len(s) && s[i] == '.' {
		i++
		start := i
		for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
			if digits < 19 {
				mant = mant*10 + uint64(s[i]-'0')
				exp--
				if mant != 0 {
					digits++
				}
			} else {
				dropped = dropped || s[i] != '0'
			}
		}
		if i == start {
			return 0, 0, false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		esign := 1
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			if s[i] == '-' {
				esign = -1
			}
			i++
		}
		start := i
		e := 0
		for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
			if e < 100000 { // far beyond any float32; keeps e from overflowing
				e = e*10 + int(s[i]-'0')
			}
		}
		if i == start {
			return 0, 0, false
		}
		exp += esign * e
	}
	if mant == 0 && !dropped {
		if neg {
			return float32(math.Copysign(0, -1)), i, true
		}
		return 0, i, true
	}
	if !dropped && mant <= 1<<53 && exp >= -22 && exp <= 22 {
		d := float64(mant)
		if exp < 0 {
			d /= pow10[-exp]
		} else {
			d *= pow10[exp]
		}
		// The low 29 of float64's 52 fraction bits are what float32 does not
		// keep: exactly half of their range is a float32 midpoint.
		if math.Float64bits(d)&(1<<29-1) != 1<<28 {
			f = float32(d)
			if neg {
				f = -f
			}
			return f, i, true
		}
	}
	v, err := strconv.ParseFloat(string(s[:i]), 32)
	if err != nil {
		return 0, 0, false
	}
	return float32(v), i, true
}

// AppendFloat32s reads raw, a JSON array of numbers (whitespace around the
// tokens allowed), appending its values to vec. ok is false when raw is
// anything else or a number is beyond float32's range.
func AppendFloat32s[T text](vec []float32, raw T) (out []float32, ok bool) {
	i := skipSpace(raw, 0)
	if i == len(raw) || raw[i] != '[' {
		return vec, false
	}
	if i = skipSpace(raw, i+1); i < len(raw) && raw[i] == ']' {
		return vec, skipSpace(raw, i+1) == len(raw)
	}
	for {
		f, n, ok := ParseFloat32(raw[i:])
		if !ok {
			return vec, false
		}
		vec = append(vec, f)
		if i = skipSpace(raw, i+n); i == len(raw) {
			return vec, false
		}
		switch raw[i] {
		case ',':
			i = skipSpace(raw, i+1)
		case ']':
			return vec, skipSpace(raw, i+1) == len(raw)
		default:
			return vec, false
		}
	}
}

// skipSpace returns the index of the first byte at or after i that is not
// JSON whitespace.
func skipSpace[T text](s T, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\n' || s[i] == '\r' || s[i] == '\t') {
		i++
	}
	return i
}

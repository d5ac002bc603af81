package pricing

import (
	"errors"
	"fmt"
	"math"
	"strconv"
)

// Money is an amount of US dollars, exact, in nano-dollars (1e-9 USD).
//
// Why nano-dollars: one token of the cheapest models costs a few hundredths
// of a micro-dollar ($0.02 per million tokens is 20 nano-dollars a token), so
// micro-dollars would round most embedding requests to zero, while an int64
// of nano-dollars still holds $9.2 billion, far beyond any budget or usage
// total. A request's cost is computed exactly from the rates and rounded to
// the nearest nano-dollar once, so sums of Money are exact sums of what each
// request was charged; float64 never takes part.
type Money int64

// Units of Money.
const (
	Nanodollar  Money = 1
	Microdollar Money = 1_000
	Cent        Money = 10_000_000
	Dollar      Money = 1_000_000_000
)

// moneyDecimals is the number of decimal places of a dollar amount that
// Money keeps.
const moneyDecimals = 9

// String writes m as an exact decimal number of dollars without trailing
// zeros: "0.00000125", "12.5", "-3".
func (m Money) String() string { return string(appendFixed(nil, int64(m), moneyDecimals)) }

// Dollars returns m in dollars as a float64, for displays and metrics
// (Prometheus counters take floats). Sum Money, never these floats.
func (m Money) Dollars() float64 { return float64(m) / float64(Dollar) }

// ParseMoney reads a decimal number of dollars such as "12.50" or "0.000001"
// (at most 9 decimal places; a leading '-' is allowed) exactly.
func ParseMoney(s string) (Money, error) {
	v, err := parseFixed(s, moneyDecimals, true)
	if err != nil {
		return 0, fmt.Errorf("%q is not an amount of dollars such as 12.50: %w", s, err)
	}
	return Money(v), nil
}

// Rate is a price in USD per million tokens, or per 1,000 searches for the
// search rate, exact to the micro-dollar: Rate(2_500_000) is $2.50 per
// million tokens. In JSON and in the Caddyfile a Rate is written in dollars
// (2.5); at most 6 decimal places are allowed.
//
// One Rate unit per million tokens is one pico-dollar per token, and one
// Rate unit per 1,000 searches is one nano-dollar per search, so costs are
// integer products with no rounding until the request's total.
type Rate int64

// rateDecimals is the number of decimal places of a dollar amount that Rate
// keeps.
const rateDecimals = 6

// MaxRate is the highest rate accepted: $100,000 per million tokens (or per
// 1,000 searches). No list price comes near it; it keeps the arithmetic of
// every cost far from overflow and catches a price typed in the wrong unit.
const MaxRate Rate = 100_000 * 1_000_000

// String writes r in dollars without trailing zeros: "2.5", "0.0375".
func (r Rate) String() string { return string(appendFixed(nil, int64(r), rateDecimals)) }

// MarshalJSON writes r as a JSON number of dollars.
func (r Rate) MarshalJSON() ([]byte, error) { return appendFixed(nil, int64(r), rateDecimals), nil }

// UnmarshalJSON reads a JSON number of dollars exactly (no float64 on the
// way). It refuses strings, negative numbers, more than 6 decimal places and
// rates above MaxRate.
func (r *Rate) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		return fmt.Errorf("price %s: write the price as a JSON number of dollars, not a string", b)
	}
	v, err := ParseRate(string(b))
	if err != nil {
		return err
	}
	*r = v
	return nil
}

// ParseRate reads a price in dollars such as "2.50" or "0.0375": a decimal
// number (an exponent such as 1.5e-7 is accepted as JSON writes it) that is
// not negative, has at most 6 decimal places and is at most MaxRate.
func ParseRate(s string) (Rate, error) {
	v, err := parseFixed(s, rateDecimals, false)
	if err != nil {
		return 0, fmt.Errorf("price %q: %w", s, err)
	}
	if Rate(v) > MaxRate {
		return 0, fmt.Errorf("price %q is above the limit of %s dollars (prices are per million tokens or per 1,000 searches)", s, MaxRate)
	}
	return Rate(v), nil
}

var (
	errNotNumber = errors.New("not a decimal number")
	errNegative  = errors.New("negative")
	errTooLarge  = errors.New("too large")
)

// parseFixed reads a decimal number (optional sign, digits, optional
// fraction, optional exponent: JSON's number grammar, plus a leading '+'
// refused) into an integer count of 10^-decimals units, exactly. It fails
// when the number has more decimal places than that, when it is negative
// and negative is false, or when it does not fit an int64.
func parseFixed(s string, decimals int, negative bool) (int64, error) {
	i := 0
	neg := false
	if i < len(s) && s[i] == '-' {
		neg = true
		i++
	}
	// Mantissa digits, and where the decimal point was.
	digitsStart := i
	var mant []byte
	var buf [40]byte
	mant = buf[:0]
	intDigits := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		mant = append(mant, s[i])
		i++
		intDigits++
	}
	if intDigits == 0 {
		return 0, errNotNumber
	}
	// JSON forbids leading zeros ("01"); so do we, to catch typos.
	if intDigits > 1 && s[digitsStart] == '0' {
		return 0, errNotNumber
	}
	if i < len(s) && s[i] == '.' {
		i++
		n := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			mant = append(mant, s[i])
			i++
			n++
		}
		if n == 0 {
			return 0, errNotNumber
		}
	}
	fracDigits := len(mant) - intDigits
	exp := 0
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		expNeg := false
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			expNeg = s[i] == '-'
			i++
		}
		n := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			if exp < 10_000 {
				exp = exp*10 + int(s[i]-'0')
			}
			i++
			n++
		}
		if n == 0 {
			return 0, errNotNumber
		}
		if expNeg {
			exp = -exp
		}
	}
	if i != len(s) {
		return 0, errNotNumber
	}
	// The value is mant * 10^(exp - fracDigits); we want it in units of
	// 10^-decimals, that is mant * 10^(exp - fracDigits + decimals).
	shift := exp - fracDigits + decimals
	// Drop trailing zeros of the mantissa while the shift is negative.
	for shift < 0 && len(mant) > 0 && mant[len(mant)-1] == '0' {
		mant = mant[:len(mant)-1]
		shift++
	}
	// Leading zeros carry no value.
	for len(mant) > 1 && mant[0] == '0' {
		mant = mant[1:]
	}
	if len(mant) == 1 && mant[0] == '0' || len(mant) == 0 {
		return 0, nil
	}
	if shift < 0 {
		return 0, fmt.Errorf("more than %d decimal places", decimals)
	}
	if neg && !negative {
		return 0, errNegative
	}
	if len(mant)+shift > 19 {
		return 0, errTooLarge
	}
	var v uint64
	for _, c := range mant {
		v = v*10 + uint64(c-'0')
	}
	for range shift {
		v *= 10
	}
	if v > math.MaxInt64 {
		return 0, errTooLarge
	}
	if neg {
		return -int64(v), nil
	}
	return int64(v), nil
}

// appendFixed writes v, a count of 10^-decimals units, as a decimal number
// without trailing zeros.
func appendFixed(dst []byte, v int64, decimals int) []byte {
	u := uint64(v)
	if v < 0 {
		dst = append(dst, '-')
		u = uint64(-v) // also right for math.MinInt64
	}
	var scale uint64 = 1
	for range decimals {
		scale *= 10
	}
	dst = strconv.AppendUint(dst, u/scale, 10)
	frac := u % scale
	if frac == 0 {
		return dst
	}
	var digits [20]byte
	n := decimals
	for i := n - 1; i >= 0; i-- {
		digits[i] = byte('0' + frac%10)
		frac /= 10
	}
	for n > 0 && digits[n-1] == '0' {
		n--
	}
	dst = append(dst, '.')
	return append(dst, digits[:n]...)
}

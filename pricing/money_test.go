package pricing

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func TestParseRate(t *testing.T) {
	tests := []struct {
		in   string
		want Rate
		err  string
	}{
		{in: "0", want: 0},
		{in: "2.50", want: 2_500_000},
		{in: "2.5", want: 2_500_000},
		{in: "10", want: 10_000_000},
		{in: "0.0375", want: 37_500},
		{in: "0.01875", want: 18_750},
		{in: "0.000001", want: 1},
		{in: "1.500000000", want: 1_500_000}, // trailing zeros beyond 6 places are fine
		{in: "2.5e-7", err: "more than 6 decimal places"},
		{in: "2.5e-6", err: "more than 6 decimal places"},
		{in: "2.5e-1", want: 250_000},
		{in: "1E2", want: 100_000_000},
		{in: "1e+2", want: 100_000_000},
		{in: "0e-30", want: 0},
		{in: "100000", want: MaxRate},
		{in: "100000.000001", err: "above the limit"},
		{in: "1e30", err: "too large"},
		{in: "0.0000001", err: "more than 6 decimal places"},
		{in: "-1", err: "negative"},
		{in: "-0", want: 0},
		{in: "", err: "not a decimal number"},
		{in: "1.", err: "not a decimal number"},
		{in: ".5", err: "not a decimal number"},
		{in: "01", err: "not a decimal number"},
		{in: "+1", err: "not a decimal number"},
		{in: "1e", err: "not a decimal number"},
		{in: "1,5", err: "not a decimal number"},
		{in: "$2", err: "not a decimal number"},
		{in: " 2", err: "not a decimal number"},
		{in: "NaN", err: "not a decimal number"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseRate(tt.in)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("ParseRate(%q) = %d, %v; want an error with %q", tt.in, got, err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseRate(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestParseMoney(t *testing.T) {
	tests := []struct {
		in   string
		want Money
		err  bool
	}{
		{in: "12.50", want: 12*Dollar + 50*Cent},
		{in: "0.000000001", want: 1},
		{in: "-3", want: -3 * Dollar},
		{in: "9223372036.854775807", want: math.MaxInt64},
		{in: "9223372036.854775808", err: true},
		{in: "0.0000000001", err: true},
		{in: "abc", err: true},
	}
	for _, tt := range tests {
		got, err := ParseMoney(tt.in)
		if tt.err {
			if err == nil {
				t.Errorf("ParseMoney(%q) = %d, want an error", tt.in, got)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseMoney(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
}

func TestMoneyString(t *testing.T) {
	tests := []struct {
		m    Money
		want string
	}{
		{0, "0"},
		{1, "0.000000001"},
		{Dollar, "1"},
		{12*Dollar + 50*Cent, "12.5"},
		{-1250, "-0.00000125"},
		{math.MaxInt64, "9223372036.854775807"},
		{math.MinInt64, "-9223372036.854775808"},
	}
	for _, tt := range tests {
		if got := tt.m.String(); got != tt.want {
			t.Errorf("Money(%d).String() = %q, want %q", int64(tt.m), got, tt.want)
		}
		if tt.m == math.MinInt64 {
			continue
		}
		back, err := ParseMoney(tt.want)
		if err != nil || back != tt.m {
			t.Errorf("ParseMoney(%q) = %d, %v; want %d", tt.want, back, err, tt.m)
		}
	}
	if got := (1500 * Microdollar).Dollars(); got != 0.0015 {
		t.Errorf("Dollars() = %v, want 0.0015", got)
	}
}

func TestRateJSON(t *testing.T) {
	for _, s := range []string{"0", "2.5", "0.0375", "100000", "0.000001"} {
		var r Rate
		if err := json.Unmarshal([]byte(s), &r); err != nil {
			t.Fatalf("Unmarshal(%s): %v", s, err)
		}
		out, err := json.Marshal(r)
		if err != nil || string(out) != s {
			t.Errorf("Marshal(Unmarshal(%s)) = %s, %v", s, out, err)
		}
	}
	var r Rate
	for _, bad := range []string{`"2.5"`, `-1`, `0.0000001`, `true`, `null`} {
		err := json.Unmarshal([]byte(bad), &r)
		if bad == "null" {
			// encoding/json leaves the value alone for null; a *Rate field
			// stays nil, which means "not priced", checked by Validate.
			continue
		}
		if err == nil {
			t.Errorf("Unmarshal(%s) = %d, want an error", bad, r)
		}
	}
}

package ids

import (
	"sort"
	"strings"
	"testing"
	"time"
)

func TestNewSortsByTime(t *testing.T) {
	t0 := time.UnixMilli(1_700_000_000_000)
	var made []string
	for i := range 2000 {
		// Several IDs per millisecond are not ordered among themselves,
		// so each gets its own.
		id := New("file-", t0.Add(time.Duration(i*i)*time.Millisecond))
		if len(id) != len("file-")+Len || !Valid(id, "file-") {
			t.Fatalf("New made %q, which Valid refuses", id)
		}
		made = append(made, id)
	}
	if !sort.StringsAreSorted(made) {
		t.Error("IDs made later do not sort after earlier ones")
	}
	// IDs a millisecond apart sort by time whatever their random bits.
	for i := range 500 {
		at := t0.Add(time.Duration(i) * time.Millisecond)
		if a, b := New("", at), New("", at.Add(time.Millisecond)); a >= b {
			t.Fatalf("IDs a millisecond apart: %s, then %s", a, b)
		}
	}
}

// IDs of one millisecond differ in their 72 random bits.
func TestNewUnique(t *testing.T) {
	t0 := time.UnixMilli(1_700_000_000_000)
	seen := make(map[string]bool)
	for range 10000 {
		id := New("key_", t0)
		if seen[id] {
			t.Fatalf("%s made twice", id)
		}
		seen[id] = true
	}
}

// The first 9 characters (45 of the 48 bits of time) are the time alone:
// the same for one millisecond, whatever the prefix.
func TestNewTimePart(t *testing.T) {
	at := time.UnixMilli(1_700_000_000_123)
	a, b := New("batch_", at), New("key_", at)
	if a[len("batch_"):len("batch_")+9] != b[len("key_"):len("key_")+9] {
		t.Errorf("%s and %s differ in their time part", a, b)
	}
	if !strings.HasPrefix(New("", time.UnixMilli(0)), "000000000") {
		t.Error("the epoch does not start with zeros")
	}
}

// Time reads back the millisecond New made an id at, and nothing from an
// id New did not make.
func TestTime(t *testing.T) {
	for _, ms := range []int64{0, 1, 1_700_000_000_123, 1<<48 - 1} {
		at := time.UnixMilli(ms)
		for range 20 { // whatever the random bits
			if got, ok := Time(New("file-", at), "file-"); !ok || !got.Equal(at) {
				t.Fatalf("Time of an id made at %d ms = %v, %v", ms, got.UnixMilli(), ok)
			}
		}
	}
	for _, id := range []string{"", "file-", "file-0123456789abcdefghijklm", "resp_" + strings.Repeat("ab", 24), New("batch_", time.Now())} {
		if _, ok := Time(id, "file-"); ok {
			t.Errorf("Time(%q) ok", id)
		}
	}
}

func TestValid(t *testing.T) {
	good := New("file-", time.Now())
	for _, tc := range []struct {
		id, prefix string
		want       bool
	}{
		{good, "file-", true},
		{"file-0123456789abcdefghijklmn", "file-", true},
		{"file-000000000000000000000000", "file-", true},
		{"key_0123456789abcdefghijklmn", "key_", true},
		{good, "batch_", false},
		{"batch_" + good[len("file-"):], "file-", false},
		{"../x", "file-", false},
		{"file-../../../../../../../x", "file-", false},
		{"file-0123456789abcdefghijklm", "file-", false},   // 23
		{"file-0123456789abcdefghijklmno", "file-", false}, // 25
		{"file-", "file-", false},
		{"", "file-", false},
		{"file-0123456789ABCDEFGHIJKLMN", "file-", false},
		{"file-0123456789abcdefghijklmw", "file-", false}, // w is not base32hex
		{"file-0123456789abcdefghijkl/n", "file-", false},
		{"file-0123456789abcdefghijkl.n", "file-", false},
		{"File-0123456789abcdefghijklmn", "file-", false},
		{"key_0123456789abcdefghijklmn", "", false}, // the prefix is not the alphabet's
	} {
		if got := Valid(tc.id, tc.prefix); got != tc.want {
			t.Errorf("Valid(%q, %q) = %v, want %v", tc.id, tc.prefix, got, tc.want)
		}
	}
}

func BenchmarkNew(b *testing.B) {
	now := time.Now()
	for b.Loop() {
		_ = New("key_", now)
	}
}

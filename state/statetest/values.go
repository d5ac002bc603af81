package statetest

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/modelgate/modelgate/state"
)

// ValuesInstances opens fresh Values for one test, empty and apart from
// every other test's, and returns n handles on them as n instances of a
// gateway would hold them. It closes them when t ends.
type ValuesInstances func(t *testing.T, n int) []state.Values

// RunValues runs the conformance suite of state.Values against the
// implementation open makes:
//
//	func TestValuesConformance(t *testing.T) {
//		statetest.RunValues(t, func(t *testing.T, n int) []state.Values { … })
//	}
func RunValues(t *testing.T, open ValuesInstances) {
	tests := []struct {
		name string
		f    func(t *testing.T, open ValuesInstances)
	}{
		{"SetAndGet", testValueSetGet},
		{"Missing", testValueMissing},
		{"Replace", testValueReplace},
		{"Delete", testValueDelete},
		{"Expiry", testValueExpiry},
		{"NoExpiry", testValueNoExpiry},
		{"ReplaceResetsExpiry", testValueReplaceExpiry},
		{"BinaryAndEmpty", testValueBinary},
		{"Large", testValueLarge},
		{"KeysApart", testValueKeysApart},
		{"Copies", testValueCopies},
		{"Concurrent", testValueConcurrent},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.f(t, open) })
	}
}

// getValue returns the value of key or fails t.
func getValue(t *testing.T, ctx context.Context, v state.Values, key string) ([]byte, bool) {
	t.Helper()
	b, ok, err := v.GetValue(ctx, key)
	if err != nil {
		t.Fatalf("GetValue %q: %v", key, err)
	}
	return b, ok
}

func testValueSetGet(t *testing.T, open ValuesInstances) {
	vs, ctx := open(t, 2), ctxT(t)
	noErr(t, vs[0].SetValue(ctx, "k", []byte("hello"), time.Minute))
	for i, v := range vs {
		b, ok := getValue(t, ctx, v, "k")
		if !ok || string(b) != "hello" {
			t.Fatalf("instance %d: GetValue = %q, %v; want hello", i, b, ok)
		}
	}
}

func testValueMissing(t *testing.T, open ValuesInstances) {
	v, ctx := open(t, 1)[0], ctxT(t)
	if b, ok := getValue(t, ctx, v, "never-set"); ok || b != nil {
		t.Fatalf("GetValue of a missing key = %q, %v; want nothing", b, ok)
	}
}

func testValueReplace(t *testing.T, open ValuesInstances) {
	vs, ctx := open(t, 2), ctxT(t)
	noErr(t, vs[0].SetValue(ctx, "k", []byte("a long first value"), time.Minute))
	noErr(t, vs[1].SetValue(ctx, "k", []byte("b"), time.Minute))
	if b, ok := getValue(t, ctx, vs[0], "k"); !ok || string(b) != "b" {
		t.Fatalf("after a replace, GetValue = %q, %v; want b", b, ok)
	}
}

func testValueDelete(t *testing.T, open ValuesInstances) {
	vs, ctx := open(t, 2), ctxT(t)
	noErr(t, vs[0].SetValue(ctx, "k", []byte("v"), time.Minute))
	noErr(t, vs[1].DeleteValue(ctx, "k"))
	if _, ok := getValue(t, ctx, vs[0], "k"); ok {
		t.Fatal("a deleted value is still there")
	}
	noErr(t, vs[1].DeleteValue(ctx, "k")) // deleting none is no error
	noErr(t, vs[0].DeleteValue(ctx, "never-set"))
}

func testValueExpiry(t *testing.T, open ValuesInstances) {
	v, ctx := open(t, 1)[0], ctxT(t)
	noErr(t, v.SetValue(ctx, "short", []byte("v"), 300*time.Millisecond))
	noErr(t, v.SetValue(ctx, "long", []byte("w"), time.Minute))
	if _, ok := getValue(t, ctx, v, "short"); !ok {
		t.Fatal("a value is gone before its ttl")
	}
	time.Sleep(450 * time.Millisecond)
	if b, ok := getValue(t, ctx, v, "short"); ok {
		t.Fatalf("after its ttl, GetValue = %q; want nothing", b)
	}
	if _, ok := getValue(t, ctx, v, "long"); !ok {
		t.Fatal("a value with a longer ttl expired with another")
	}
}

func testValueNoExpiry(t *testing.T, open ValuesInstances) {
	v, ctx := open(t, 1)[0], ctxT(t)
	noErr(t, v.SetValue(ctx, "k", []byte("v"), 0))
	time.Sleep(50 * time.Millisecond)
	if _, ok := getValue(t, ctx, v, "k"); !ok {
		t.Fatal("a value without a ttl expired")
	}
}

func testValueReplaceExpiry(t *testing.T, open ValuesInstances) {
	v, ctx := open(t, 1)[0], ctxT(t)
	noErr(t, v.SetValue(ctx, "k", []byte("v"), 300*time.Millisecond))
	noErr(t, v.SetValue(ctx, "k", []byte("w"), time.Minute))
	time.Sleep(450 * time.Millisecond)
	if b, ok := getValue(t, ctx, v, "k"); !ok || string(b) != "w" {
		t.Fatalf("a replaced value kept the old ttl: GetValue = %q, %v", b, ok)
	}
	noErr(t, v.SetValue(ctx, "k", []byte("x"), 300*time.Millisecond))
	time.Sleep(450 * time.Millisecond)
	if _, ok := getValue(t, ctx, v, "k"); ok {
		t.Fatal("a value replaced with a shorter ttl kept the longer one")
	}
}

func testValueBinary(t *testing.T, open ValuesInstances) {
	vs, ctx := open(t, 2), ctxT(t)
	all := make([]byte, 512)
	for i := range all {
		all[i] = byte(i)
	}
	noErr(t, vs[0].SetValue(ctx, "bin", all, time.Minute))
	if b, ok := getValue(t, ctx, vs[1], "bin"); !ok || !bytes.Equal(b, all) {
		t.Fatalf("binary value changed: %v, %x", ok, b)
	}
	noErr(t, vs[0].SetValue(ctx, "empty", nil, time.Minute))
	if b, ok := getValue(t, ctx, vs[1], "empty"); !ok || len(b) != 0 {
		t.Fatalf("empty value: GetValue = %q, %v; want an empty value", b, ok)
	}
}

func testValueLarge(t *testing.T, open ValuesInstances) {
	vs, ctx := open(t, 2), ctxT(t)
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	noErr(t, vs[0].SetValue(ctx, "big", big, time.Minute))
	if b, ok := getValue(t, ctx, vs[1], "big"); !ok || !bytes.Equal(b, big) {
		t.Fatalf("a 1 MiB value came back as %d bytes (%v)", len(b), ok)
	}
}

func testValueKeysApart(t *testing.T, open ValuesInstances) {
	v, ctx := open(t, 1)[0], ctxT(t)
	keys := []string{"a", "A", "a ", "{a}", "a}", "{", "}", "ü:ключ", "a:b:c", ""}
	for i, k := range keys {
		noErr(t, v.SetValue(ctx, k, []byte(fmt.Sprint(i)), time.Minute))
	}
	for i, k := range keys {
		if b, ok := getValue(t, ctx, v, k); !ok || string(b) != fmt.Sprint(i) {
			t.Errorf("key %q = %q, %v; want %d", k, b, ok, i)
		}
	}
}

func testValueCopies(t *testing.T, open ValuesInstances) {
	v, ctx := open(t, 1)[0], ctxT(t)
	in := []byte("original")
	noErr(t, v.SetValue(ctx, "k", in, time.Minute))
	copy(in, "CHANGED!")
	b, _ := getValue(t, ctx, v, "k")
	if string(b) != "original" {
		t.Fatalf("changing the set bytes changed the value: %q", b)
	}
	copy(b, "CHANGED!")
	if b2, _ := getValue(t, ctx, v, "k"); string(b2) != "original" {
		t.Fatalf("changing the got bytes changed the value: %q", b2)
	}
}

func testValueConcurrent(t *testing.T, open ValuesInstances) {
	vs, ctx := open(t, 3), ctxT(t)
	const workers, each = 6, 40
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			v := vs[w%len(vs)]
			for i := range each {
				k := fmt.Sprintf("w%d:%d", w, i)
				want := []byte(fmt.Sprintf("value %d of %d", i, w))
				if err := v.SetValue(ctx, k, want, time.Minute); err != nil {
					errs <- err
					return
				}
				// Another instance reads what this one wrote.
				got, ok, err := vs[(w+1)%len(vs)].GetValue(ctx, k)
				if err != nil {
					errs <- fmt.Errorf("%s: %w", k, err)
					return
				}
				if !ok || !bytes.Equal(got, want) {
					errs <- fmt.Errorf("%s: got %q, %v", k, got, ok)
					return
				}
				// All write one shared key: any whole value may win.
				if err := v.SetValue(ctx, "shared", want, time.Minute); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	b, ok := getValue(t, ctx, vs[0], "shared")
	if !ok || !bytes.HasPrefix(b, []byte("value ")) {
		t.Fatalf("the shared key holds %q, %v: not one whole value", b, ok)
	}
}

package state_test

import (
	"context"
	"testing"
	"time"

	"github.com/modelgate/modelgate/state"
	"github.com/modelgate/modelgate/state/statetest"
)

func TestLocalValuesConformance(t *testing.T) {
	statetest.RunValues(t, func(t *testing.T, n int) []state.Values {
		v := state.NewLocalValues()
		out := make([]state.Values, n)
		for i := range out {
			out[i] = v // one machine: every "instance" is this process
		}
		return out
	})
}

// Expired values are dropped by the sweep even when nobody reads them
// again, so memory holds what is live.
func TestLocalValuesSweep(t *testing.T) {
	v, ctx := state.NewLocalValues(), context.Background()
	for i := range 1000 {
		if err := v.SetValue(ctx, string(rune('a'+i%26))+string(rune(i)), []byte("x"), time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(5 * time.Millisecond)
	for i := range 1100 {
		if err := v.SetValue(ctx, "live"+string(rune(i)), []byte("x"), time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	if n := v.Len(); n > 1100 {
		t.Fatalf("%d values held, want the 1100 live ones once swept", n)
	}
}

func TestLocalValuesCancelled(t *testing.T) {
	v := state.NewLocalValues()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := v.SetValue(ctx, "k", nil, 0); err == nil {
		t.Fatal("SetValue with a cancelled context succeeded")
	}
	if _, _, err := v.GetValue(ctx, "k"); err == nil {
		t.Fatal("GetValue with a cancelled context succeeded")
	}
}

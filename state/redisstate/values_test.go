package redisstate_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/modelgate/modelgate/internal/redistest"
	"github.com/modelgate/modelgate/state"
	"github.com/modelgate/modelgate/state/redisstate"
	"github.com/modelgate/modelgate/state/statetest"
)

func TestValuesConformance(t *testing.T) {
	srv := redistest.Start(t)
	statetest.RunValues(t, func(t *testing.T, n int) []state.Values {
		var out []state.Values
		for _, s := range open(t, srv, n, redisstate.Options{}) {
			out = append(out, s)
		}
		return out
	})
}

// Values of one prefix are apart from those of another: several gateways
// share a server.
func TestValuesPrefixes(t *testing.T) {
	srv := redistest.Start(t)
	a := open(t, srv, 1, redisstate.Options{KeyPrefix: "a:"})[0]
	b := open(t, srv, 1, redisstate.Options{KeyPrefix: "b:"})[0]
	c := ctx(t)
	if err := a.SetValue(c, "k", []byte("of a"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := b.GetValue(c, "k"); err != nil || ok {
		t.Fatalf("another prefix reads %q, %v, %v", v, ok, err)
	}
	// Values and counters of one name are apart too.
	if _, err := a.Add(c, "k", 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := a.GetValue(c, "k"); err != nil || !ok || string(v) != "of a" {
		t.Fatalf("the counter k changed the value k: %q, %v, %v", v, ok, err)
	}
}

// With Redis down, the operations fail with state.ErrUnavailable within
// the timeout, rather than hang.
func TestValuesUnavailable(t *testing.T) {
	srv := redistest.Start(t)
	s := open(t, srv, 1, redisstate.Options{Timeout: 300 * time.Millisecond})[0]
	srv.Stop()
	c := ctx(t)
	start := time.Now()
	if _, _, err := s.GetValue(c, "k"); !errors.Is(err, state.ErrUnavailable) {
		t.Fatalf("GetValue with Redis down: %v, want ErrUnavailable", err)
	}
	if err := s.SetValue(context.Background(), "k", []byte("v"), time.Minute); !errors.Is(err, state.ErrUnavailable) {
		t.Fatalf("SetValue with Redis down: %v, want ErrUnavailable", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("two operations with Redis down took %v", d)
	}
}

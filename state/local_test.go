package state_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/modelgate/modelgate/state"
	"github.com/modelgate/modelgate/state/statetest"
)

func TestLocalConformance(t *testing.T) {
	statetest.Run(t, func(t *testing.T, n int) []state.State {
		l := state.NewLocal()
		t.Cleanup(func() { _ = l.Close() })
		out := make([]state.State, n)
		for i := range out {
			out[i] = l // one machine: every "instance" is this process
		}
		return out
	})
}

// A receiver that falls far behind loses messages but is told: a Resync
// follows what was queued, and later messages arrive after it.
func TestLocalSlowReceiverResync(t *testing.T) {
	l := state.NewLocal()
	defer l.Close()
	ctx := context.Background()
	sub, err := l.Subscribe(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10000 {
		if err := l.Publish(ctx, "c", []byte(strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	var got, resyncs int
	last := -1
	timeout := time.After(10 * time.Second)
	for resyncs == 0 || got < 100 {
		select {
		case m := <-sub.Messages():
			if m.Resync {
				resyncs++
				if err := l.Publish(ctx, "c", []byte("after")); err != nil {
					t.Fatal(err)
				}
				continue
			}
			if string(m.Payload) == "after" {
				if resyncs != 1 {
					t.Fatal("a message published after the resync came before it")
				}
				return
			}
			n, _ := strconv.Atoi(string(m.Payload))
			if n <= last {
				t.Fatalf("message %d after %d", n, last)
			}
			last = n
			got++
		case <-timeout:
			t.Fatalf("got %d messages, %d resyncs", got, resyncs)
		}
	}
}

func TestLocalClosed(t *testing.T) {
	l := state.NewLocal()
	sub, _ := l.Subscribe(context.Background(), "c")
	_ = l.Close()
	if _, ok := <-sub.Messages(); ok {
		t.Fatal("subscription open after Close")
	}
	if _, err := l.Add(context.Background(), "k", 1, 0); !errors.Is(err, state.ErrClosed) {
		t.Fatalf("Add after Close: %v", err)
	}
}

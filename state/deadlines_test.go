package state_test

import (
	"testing"

	"github.com/modelgate/modelgate/state"
	"github.com/modelgate/modelgate/state/statetest"
)

func TestLocalDeadlinesConformance(t *testing.T) {
	statetest.RunDeadlines(t, func(t *testing.T, n int) []state.Deadlines {
		d := state.NewLocalDeadlines()
		out := make([]state.Deadlines, n)
		for i := range out {
			out[i] = d // one process: every "instance" shares it
		}
		return out
	})
}

package redisstate_test

import (
	"testing"

	"github.com/modelgate/modelgate/internal/redistest"
	"github.com/modelgate/modelgate/state"
	"github.com/modelgate/modelgate/state/redisstate"
	"github.com/modelgate/modelgate/state/statetest"
)

func TestDeadlinesConformance(t *testing.T) {
	srv := redistest.Start(t)
	statetest.RunDeadlines(t, func(t *testing.T, n int) []state.Deadlines {
		var out []state.Deadlines
		for _, s := range open(t, srv, n, redisstate.Options{}) {
			out = append(out, s)
		}
		return out
	})
}

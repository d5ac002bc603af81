package redisstate_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/modelgate/modelgate/internal/redistest"
	"github.com/modelgate/modelgate/state"
	"github.com/modelgate/modelgate/state/redisclient"
	"github.com/modelgate/modelgate/state/redisstate"
	"github.com/modelgate/modelgate/state/statetest"
)

// The conformance suite on a Redis Cluster of three masters, through the
// cluster client: every script's keys share a slot (hash tags), and
// publish/subscribe reaches subscribers connected to other nodes.
func TestConformanceCluster(t *testing.T) {
	nodes := redistest.StartCluster(t, 3)
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = n.Addr
	}
	statetest.Run(t, func(t *testing.T, n int) []state.State {
		prefix := fmt.Sprintf("c%d:", prefixes.Add(1))
		out := make([]state.State, n)
		for i := range out {
			rdb, err := redisclient.New(redisclient.Options{Addresses: addrs, Timeout: redisclient.Duration(time.Second)})
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprintf("%T", rdb); got != "*redis.ClusterClient" {
				t.Fatalf("client %s, want a cluster client", got)
			}
			st, err := redisstate.New(rdb, redisstate.Options{KeyPrefix: prefix})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close(); _ = rdb.Close() })
			out[i] = st
		}
		return out
	})
}

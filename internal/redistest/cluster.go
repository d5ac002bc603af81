package redistest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// StartCluster starts n redis-servers (n >= 1) as a Redis Cluster of n
// masters without replicas, the 16384 hash slots split evenly, and waits
// until every node reports the cluster ok. Each node is a Server: a test
// may Kill and Restart one.
func StartCluster(t testing.TB, n int, opts ...Options) []*Server {
	t.Helper()
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	o.Config = append(append([]string(nil), o.Config...),
		"cluster-enabled yes",
		"cluster-config-file nodes.conf",
		"cluster-node-timeout 2000",
		"cluster-require-full-coverage yes",
	)
	nodes := make([]*Server, n)
	for i := range nodes {
		nodes[i] = Start(t, o)
	}
	const slots = 16384
	for i, s := range nodes {
		lo, hi := i*slots/n, (i+1)*slots/n-1
		if r, err := command(s.Addr, o.Password, "CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(lo), strconv.Itoa(hi)); err != nil || r != "+OK" {
			t.Fatalf("CLUSTER ADDSLOTSRANGE on %s: %q %v", s.Addr, r, err)
		}
	}
	for _, s := range nodes[1:] {
		if r, err := command(s.Addr, o.Password, "CLUSTER", "MEET", "127.0.0.1", strconv.Itoa(nodes[0].Port)); err != nil || r != "+OK" {
			t.Fatalf("CLUSTER MEET from %s: %q %v", s.Addr, r, err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, s := range nodes {
		for {
			info, err := command(s.Addr, o.Password, "CLUSTER", "INFO")
			if err == nil && strings.Contains(info, "cluster_state:ok") &&
				strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(n)) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("cluster not ok within 30s; %s says: %s %v", s.Addr, info, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nodes
}

// command sends one command and returns the reply's first line, or the
// whole value of a bulk string reply.
func command(addr, password string, args ...string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(c)
	send := func(args ...string) (string, error) {
		fmt.Fprintf(c, "*%d\r\n", len(args))
		for _, a := range args {
			fmt.Fprintf(c, "$%d\r\n%s\r\n", len(a), a)
		}
		line, err := br.ReadString('\n')
		if err != nil {
			return "", err
		}
		line = strings.TrimRight(line, "\r\n")
		if strings.HasPrefix(line, "$") {
			n, _ := strconv.Atoi(line[1:])
			if n < 0 {
				return "", nil
			}
			buf := make([]byte, n+2)
			if _, err := io.ReadFull(br, buf); err != nil {
				return "", err
			}
			return string(buf[:n]), nil
		}
		return line, nil
	}
	if password != "" {
		r, err := send("AUTH", password)
		if err != nil {
			return r, fmt.Errorf("AUTH: %w", err)
		}
		if r != "+OK" {
			return r, fmt.Errorf("AUTH: %q", r)
		}
	}
	return send(args...)
}

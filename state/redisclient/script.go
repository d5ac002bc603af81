package redisclient

import (
	"context"
	"crypto/sha1"
	"encoding/hex"

	"github.com/redis/go-redis/v9"
)

// Scripts are sent once.
//
// go-redis sends a command again when its answer does not come within the
// read timeout (once more with MaxRetries 1; in a Cluster, again on the same
// node and then on others, up to MaxRedirects), although Redis may have
// taken the first one and only be late: hung for longer than the timeout,
// it runs both once it goes on. That is harmless for a read. A script that
// counts, reserves or locks then counts twice, or finds the lock it took
// itself and reports it held by another. So every script here is sent at
// most once a call, and a failed call is what its caller must take it for:
// an answer lost, of a script Redis may or may not have run.

// Script is a Lua script run by its SHA1 (EVALSHA), by its source when Redis
// lacks it, and never sent again after a failure (see above).
type Script struct {
	src, hash string
}

// NewScript returns the script of src.
func NewScript(src string) *Script {
	h := sha1.Sum([]byte(src))
	return &Script{src: src, hash: hex.EncodeToString(h[:])}
}

// Hash is the script's SHA1, in hex.
func (s *Script) Hash() string { return s.hash }

// Processor sends commands: a client or a pipeline.
type Processor interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

// Run runs the script with keys and args, as (*redis.Script).Run does, but
// sends each command once: EVALSHA, then EVAL only when Redis answered
// NOSCRIPT (it ran nothing). Unlike go-redis's, it sends args as they are:
// a single slice is one argument, not spread into several.
func (s *Script) Run(ctx context.Context, c Processor, keys []string, args ...any) *redis.Cmd {
	cmd := s.cmd(ctx, "evalsha", s.hash, keys, args)
	_ = c.Process(ctx, Once{cmd})
	if NoScript(cmd.Err()) {
		cmd = s.cmd(ctx, "eval", s.src, keys, args)
		_ = c.Process(ctx, Once{cmd})
	}
	return cmd
}

func (s *Script) cmd(ctx context.Context, name, payload string, keys []string, args []any) *redis.Cmd {
	a := make([]any, 0, 3+len(keys)+len(args))
	a = append(a, name, payload, len(keys))
	for _, k := range keys {
		a = append(a, k)
	}
	a = append(a, args...)
	cmd := redis.NewCmd(ctx, a...)
	if len(keys) > 0 {
		cmd.SetFirstKeyPos(3) // a Cluster routes it by its first key
	}
	return cmd
}

// NoScript reports whether err is Redis's NOSCRIPT: it lost its script
// cache (a restart, a failover, SCRIPT FLUSH) and ran nothing.
// (redis.HasErrorPrefix allocates, even for no error.)
func NoScript(err error) bool { return err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") }

// Once is a command that go-redis sends at most once: neither a timeout nor
// a broken connection makes it send it again (see above).
type Once struct{ *redis.Cmd }

// NoRetry tells go-redis not to send the command again.
func (Once) NoRetry() bool { return true }

// OnceInts is Once for a command read into an []int64.
type OnceInts struct{ *redis.IntSliceCmd }

// NoRetry tells go-redis not to send the command again.
func (OnceInts) NoRetry() bool { return true }

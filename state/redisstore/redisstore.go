// Package redisstore is a certmagic.Storage on Redis (or a Redis-protocol
// server such as Valkey): what Caddy keeps in its storage (certificates,
// ACME accounts, locks) and what modelgate keeps there (files, batches,
// keys) shared by every instance that points at the same Redis and key
// prefix. It implements certmagic's Storage, TryLocker and
// LockLeaseRenewer, and imports nothing of Caddy; the Caddy module
// caddy.storage.modelgate_redis wraps it.
//
// Layout, under the key prefix P (default "caddy"), all in the Redis
// Cluster hash slot of "{P}" so that each operation is one atomic script:
//
//	{P}:f:<key>    a file: hash of v (the value) and m (modified, Unix ms)
//	{P}:d:<dir>    a directory: set of the names of its children ({P}:d: is the root)
//	{P}:l:<name>   a lock: "<fencing token>:<holder id>", expiring
//	{P}:fence      the fencing token counter
//
// A directory exists while it has children (Redis deletes an empty set),
// as in certmagic's FileStorage, where directories are only implied by
// the files under them. Store adds a file and its name to every ancestor
// directory at once; Delete removes a file or a whole tree and the
// directories it leaves empty at once; no crash leaves the index and the
// files apart.
//
// Locks expire LockTTL after their last renewal; the holder renews them
// every LockTTL/3 while it holds them, and Unlock releases them. A holder
// that dies stops renewing, so its locks expire. Every lock carries a
// fencing token, greater than every token before it: renewal and Unlock
// act only while the token still holds the lock, so a holder that stalled
// past its lock cannot extend or release its successor's. A lock an attempt
// took while its answer was lost, or one whose Unlock failed, is taken over
// by the Storage's next attempt (TryLock).
package redisstore

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelgate/modelgate/state"
	"github.com/modelgate/modelgate/state/redisclient"
	"github.com/modelgate/modelgate/state/redisstate"

	"github.com/caddyserver/certmagic"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

// Options tune a Storage.
type Options struct {
	// KeyPrefix separates gateways sharing one Redis. Default: "caddy".
	// It must not contain '{' or '}'.
	KeyPrefix string
	// LockTTL is how long a lock outlives its holder's last renewal.
	// Default: 10s, as long as certmagic's FileStorage takes to call a
	// lock stale.
	LockTTL time.Duration
	// Logger receives lock renewal failures. Default: none.
	Logger *zap.Logger
}

// Storage is certmagic.Storage on a go-redis client.
type Storage struct {
	rdb     redis.UniversalClient
	base    string // "{prefix}"
	prefix  string
	lockTTL time.Duration
	id      string // this Storage's holder id in lock values
	log     *zap.Logger

	mu    sync.Mutex
	locks map[string]*heldLock
	// lost are, by lock name, the holders of this Storage's TryLocks and
	// Unlocks that failed without an answer (a timeout while Redis hung
	// with the script in its socket, or no connection to send it on), the
	// last maxLost: Redis may hold the lock for one of them, and so for
	// nobody. The next TryLock of the name takes it over.
	lost    map[string][]string
	attempt atomic.Uint64
}

// maxLost bounds the lost holders kept by lock name.
const maxLost = 8

type heldLock struct {
	token      string // the lock key's value
	holder     string // the attempt's, in token
	fence      int64
	leaseUntil time.Time // RenewLockLease's promise; renewals keep at least this
	stop       chan struct{}
	done       chan struct{}
	lost       bool
}

// New returns a Storage on rdb. The client is the caller's to close.
func New(rdb redis.UniversalClient, opt Options) (*Storage, error) {
	if opt.KeyPrefix == "" {
		opt.KeyPrefix = "caddy"
	}
	if strings.ContainsAny(opt.KeyPrefix, "{}") {
		return nil, fmt.Errorf("redis storage key prefix %q contains a brace", opt.KeyPrefix)
	}
	if opt.LockTTL <= 0 {
		opt.LockTTL = 10 * time.Second
	}
	if opt.LockTTL < 300*time.Millisecond {
		return nil, fmt.Errorf("redis storage lock TTL %v is under 300ms", opt.LockTTL)
	}
	if opt.Logger == nil {
		opt.Logger = zap.NewNop()
	}
	var id [8]byte
	_, _ = crand.Read(id[:])
	return &Storage{rdb: rdb, base: "{" + opt.KeyPrefix + "}", prefix: opt.KeyPrefix, lockTTL: opt.LockTTL,
		id: hex.EncodeToString(id[:]), log: opt.Logger, locks: make(map[string]*heldLock), lost: make(map[string][]string)}, nil
}

// String names the storage for logs, with no secret.
func (s *Storage) String() string { return "RedisStorage:" + s.prefix }

// clean normalises a key: no leading or trailing slash, no empty or "."
// elements; "" is the root.
func clean(key string) string {
	key = path.Clean("/" + key)
	return strings.TrimPrefix(key, "/")
}

func (s *Storage) fileKey(key string) string { return s.base + ":f:" + key }
func (s *Storage) dirKey(dir string) string  { return s.base + ":d:" + dir }
func (s *Storage) lockKey(name string) string {
	return s.base + ":l:" + name
}
func (s *Storage) fenceKey() string { return s.base + ":fence" }

// ancestors returns the keys of the directories holding key, innermost
// first, and the name key has in each.
func (s *Storage) ancestors(key string) (dirs, names []string) {
	for key != "" {
		dir, name := path.Split(key)
		dir = strings.TrimSuffix(dir, "/")
		dirs = append(dirs, s.dirKey(dir))
		names = append(names, name)
		key = dir
	}
	return dirs, names
}

func notExist(key string) error {
	return fmt.Errorf("%s: %w", key, fs.ErrNotExist)
}

// storeScript: KEYS[1] the file, KEYS[2] the directory of the same name,
// KEYS[3..2+n] the n directories up to the root, KEYS[3+n..2+2n] the same
// n paths as files; ARGV[1] value, ARGV[2] modified ms, ARGV[3..2+n] the
// names in the directories. As on a file system, a value is not stored
// over a directory nor under a value.
var storeScript = redisclient.NewScript(`
local n = (#KEYS - 2) / 2
if redis.call('EXISTS', KEYS[2]) == 1 then
	return redis.error_reply('ERR is a directory')
end
for i = 1, n do
	if redis.call('EXISTS', KEYS[2 + n + i]) == 1 then
		return redis.error_reply('ERR a parent is a file')
	end
end
redis.call('HSET', KEYS[1], 'v', ARGV[1], 'm', ARGV[2])
for i = 1, n do
	redis.call('SADD', KEYS[2 + i], ARGV[2 + i])
end
return 1
`)

// Store implements certmagic.Storage.
func (s *Storage) Store(ctx context.Context, key string, value []byte) error {
	key = clean(key)
	if key == "" {
		return errors.New("redis storage: Store needs a key")
	}
	dirs, names := s.ancestors(key)
	keys := make([]string, 0, 2+2*len(dirs))
	keys = append(keys, s.fileKey(key), s.dirKey(key))
	keys = append(keys, dirs...)
	for i := range dirs {
		keys = append(keys, s.fileKey(strings.TrimPrefix(dirs[i], s.dirKey(""))))
	}
	args := make([]any, 0, 2+len(names))
	args = append(args, value, time.Now().UnixMilli())
	for _, n := range names {
		args = append(args, n)
	}
	if err := storeScript.Run(ctx, s.rdb, keys, args...).Err(); err != nil {
		return fmt.Errorf("redis storage: storing %s: %w", key, err)
	}
	return nil
}

// Load implements certmagic.Storage. A missing key is an error wrapping
// fs.ErrNotExist.
func (s *Storage) Load(ctx context.Context, key string) ([]byte, error) {
	key = clean(key)
	b, err := s.rdb.HGet(ctx, s.fileKey(key), "v").Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, notExist(key)
	}
	if err != nil {
		return nil, fmt.Errorf("redis storage: loading %s: %w", key, err)
	}
	return b, nil
}

// deleteScript: KEYS[1] file, KEYS[2] the directory of the same name,
// KEYS[3..] the directories up to the root; ARGV[1] the key prefix
// "{P}", ARGV[2] the key, ARGV[3..] its names in KEYS[3..]. It deletes
// the file, the tree under the directory, and then its name from each
// directory it leaves empty, upwards. Returns the number of files
// deleted.
var deleteScript = redisclient.NewScript(`
local base = ARGV[1]
local deleted = redis.call('DEL', KEYS[1])
local function walk(dir)
	local dkey = base .. ':d:' .. dir
	for _, name in ipairs(redis.call('SMEMBERS', dkey)) do
		local child = name
		if dir ~= '' then child = dir .. '/' .. name end
		deleted = deleted + redis.call('UNLINK', base .. ':f:' .. child)
		walk(child)
	end
	redis.call('UNLINK', dkey)
end
walk(ARGV[2])
local gone = ARGV[2]
for i = 3, #KEYS do
	if redis.call('EXISTS', base .. ':f:' .. gone, base .. ':d:' .. gone) > 0 then break end
	redis.call('SREM', KEYS[i], ARGV[i])
	local parent = string.sub(KEYS[i], string.len(base) + 4)
	gone = parent
end
return deleted
`)

// Delete implements certmagic.Storage: a file, or a directory with
// everything under it. A missing key is not an error.
func (s *Storage) Delete(ctx context.Context, key string) error {
	key = clean(key)
	dirs, names := s.ancestors(key)
	keys := append([]string{s.fileKey(key), s.dirKey(key)}, dirs...)
	args := make([]any, 0, 2+len(names))
	args = append(args, s.base, key)
	for _, n := range names {
		args = append(args, n)
	}
	if err := deleteScript.Run(ctx, s.rdb, keys, args...).Err(); err != nil {
		return fmt.Errorf("redis storage: deleting %s: %w", key, err)
	}
	return nil
}

// Exists implements certmagic.Storage: true for a file or a directory.
func (s *Storage) Exists(ctx context.Context, key string) bool {
	key = clean(key)
	n, err := s.rdb.Exists(ctx, s.fileKey(key), s.dirKey(key)).Result()
	return err == nil && n > 0
}

// statScript: KEYS[1] file, KEYS[2] directory. Returns {1, modified ms,
// size} for a file, {0} for a directory, nil for neither.
var statScript = redisclient.NewScript(`
local m = redis.call('HGET', KEYS[1], 'm')
if m then return {1, tonumber(m), redis.call('HSTRLEN', KEYS[1], 'v')} end
if redis.call('EXISTS', KEYS[2]) == 1 then return {0} end
return false
`)

// Stat implements certmagic.Storage. A directory is a KeyInfo with
// IsTerminal false.
func (s *Storage) Stat(ctx context.Context, key string) (certmagic.KeyInfo, error) {
	key = clean(key)
	r, err := statScript.Run(ctx, s.rdb, []string{s.fileKey(key), s.dirKey(key)}).Int64Slice()
	if errors.Is(err, redis.Nil) {
		return certmagic.KeyInfo{}, notExist(key)
	}
	if err != nil {
		return certmagic.KeyInfo{}, fmt.Errorf("redis storage: stat %s: %w", key, err)
	}
	if r[0] == 0 {
		return certmagic.KeyInfo{Key: key}, nil
	}
	return certmagic.KeyInfo{Key: key, Modified: time.UnixMilli(r[1]), Size: r[2], IsTerminal: true}, nil
}

// List implements certmagic.Storage as FileStorage does: the keys
// directly under prefix (files and directories), or with recursive every
// key below it, directories included; sorted. A prefix that is a file
// lists nothing; a prefix that does not exist is an error wrapping
// fs.ErrNotExist.
func (s *Storage) List(ctx context.Context, prefix string, recursive bool) ([]string, error) {
	prefix = clean(prefix)
	if prefix == "" && s.rdb.Exists(ctx, s.dirKey("")).Val() == 0 {
		return nil, nil // an empty storage is an empty root, as an empty folder is
	}
	var out []string
	level := []string{prefix}
	for len(level) > 0 {
		cmds := make([]*redis.StringSliceCmd, len(level))
		_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, dir := range level {
				cmds[i] = p.SMembers(ctx, s.dirKey(dir))
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("redis storage: listing %s: %w", prefix, err)
		}
		var next []string
		for i, dir := range level {
			for _, name := range cmds[i].Val() {
				child := name
				if dir != "" {
					child = dir + "/" + name
				}
				out = append(out, child)
				if recursive {
					next = append(next, child)
				}
			}
		}
		if len(out) == 0 && len(level) == 1 && level[0] == prefix {
			// Nothing under prefix: a file lists nothing, else it does
			// not exist.
			if prefix != "" && s.rdb.Exists(ctx, s.fileKey(prefix)).Val() == 1 {
				return nil, nil
			}
			return nil, notExist(prefix)
		}
		level = next
	}
	sort.Strings(out)
	return out, nil
}

// ErrLockLost is returned by Unlock and RenewLockLease when the lock
// expired and may have been taken by another holder.
var ErrLockLost = errors.New("redis storage: lock lost (it expired; another holder may have it)")

// tryLockScript: KEYS[1] lock, KEYS[2] fence; ARGV holder, ttl ms, then
// the holders of this Storage's attempts whose answers were lost. Returns
// the fencing token, or 0 when the lock is held (by a holder not among the
// lost ones).
var tryLockScript = redisclient.NewScript(`
local v = redis.call('GET', KEYS[1])
if v then
	local orphan = false
	for i = 3, #ARGV do
		local h = ':' .. ARGV[i]
		if string.sub(v, -#h) == h then orphan = true end
	end
	if not orphan then return 0 end
end
local token = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], token .. ':' .. ARGV[1], 'PX', ARGV[2])
return token
`)

// renewLockScript: KEYS[1] lock; ARGV value, ttl ms. 1 when renewed.
var renewLockScript = redisclient.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
	return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
`)

// unlockScript: KEYS[1] lock; ARGV value. 1 when released.
var unlockScript = redisclient.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
	return redis.call('DEL', KEYS[1])
end
return 0
`)

// TryLock implements certmagic.TryLocker: it takes the lock if it is
// free, without waiting.
//
// Each attempt holds the lock under a holder of its own (the Storage's id
// and the attempt's number). One that fails without an answer may still
// have taken it: the next attempt of this Storage takes such a lock over
// rather than wait for it to expire (a Redis that hung, then went on).
func (s *Storage) TryLock(ctx context.Context, name string) (bool, error) {
	holder := s.id + "/" + strconv.FormatUint(s.attempt.Add(1), 36)
	s.mu.Lock()
	lost := s.lost[name]
	s.mu.Unlock()
	args := make([]any, 0, 2+len(lost))
	args = append(args, holder, s.lockTTL.Milliseconds())
	for _, h := range lost {
		args = append(args, h)
	}
	fence, err := tryLockScript.Run(ctx, s.rdb, []string{s.lockKey(name), s.fenceKey()}, args...).Int64()
	if err != nil {
		s.lose(name, holder)
		return false, fmt.Errorf("redis storage: locking %s: %w", name, err)
	}
	// Answered: a lost holder is now ours, or not there.
	s.mu.Lock()
	delete(s.lost, name)
	s.mu.Unlock()
	if fence == 0 {
		return false, nil
	}
	l := &heldLock{token: strconv.FormatInt(fence, 10) + ":" + holder, holder: holder, fence: fence,
		stop: make(chan struct{}), done: make(chan struct{})}
	s.mu.Lock()
	s.locks[name] = l
	s.mu.Unlock()
	go s.keepLock(name, l)
	return true, nil
}

// lose records holder, whose TryLock or Unlock of name failed without an
// answer, for the next TryLock to take over.
func (s *Storage) lose(name, holder string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ls := append(s.lost[name], holder)
	if len(ls) > maxLost {
		ls = ls[len(ls)-maxLost:]
	}
	s.lost[name] = ls
}

// Lock implements certmagic.Locker: it waits until the lock is free (or
// its holder's lease ran out) and takes it, or ctx ends.
func (s *Storage) Lock(ctx context.Context, name string) error {
	wait := 20 * time.Millisecond
	for {
		ok, err := s.TryLock(ctx, name)
		if ok {
			return nil
		}
		if err != nil {
			return err // Redis unreachable: say so now rather than hang
		}
		d := wait/2 + rand.N(wait)
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return fmt.Errorf("redis storage: waiting for lock %s: %w", name, ctx.Err())
		}
		wait = min(2*wait, time.Second)
	}
}

// keepLock renews l every LockTTL/3 until Unlock, or until the lock turns
// out lost.
func (s *Storage) keepLock(name string, l *heldLock) {
	defer close(l.done)
	t := time.NewTicker(s.lockTTL / 3)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		ok, err := s.renew(context.Background(), name, l)
		if errors.Is(err, redis.ErrClosed) {
			return // the client is gone (the config that made it is unloaded): the lock expires
		}
		if err != nil {
			// Redis unreachable: the lock may still be ours when it
			// comes back within LockTTL.
			s.log.Warn("renewing a storage lock failed", zap.String("lock", name), zap.Error(err))
			continue
		}
		if !ok {
			s.log.Error("storage lock lost: it expired before its renewal; another instance may hold it now",
				zap.String("lock", name))
			s.mu.Lock()
			l.lost = true
			s.mu.Unlock()
			return
		}
	}
}

func (s *Storage) renew(ctx context.Context, name string, l *heldLock) (bool, error) {
	s.mu.Lock()
	ttl := max(s.lockTTL, time.Until(l.leaseUntil))
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, s.lockTTL/3)
	defer cancel()
	n, err := renewLockScript.Run(ctx, s.rdb, []string{s.lockKey(name)}, l.token, ttl.Milliseconds()).Int64()
	return n == 1, err
}

// RenewLockLease implements certmagic.LockLeaseRenewer: the lock, held by
// this Storage, is kept for at least leaseDuration from now even should
// the holder stop renewing it.
func (s *Storage) RenewLockLease(ctx context.Context, name string, leaseDuration time.Duration) error {
	s.mu.Lock()
	l := s.locks[name]
	if l != nil {
		l.leaseUntil = time.Now().Add(leaseDuration)
	}
	s.mu.Unlock()
	if l == nil {
		return fmt.Errorf("redis storage: lock %s is not held here", name)
	}
	ok, err := s.renew(ctx, name, l)
	if err != nil {
		return fmt.Errorf("redis storage: renewing lock %s: %w", name, err)
	}
	if !ok {
		return fmt.Errorf("%w: %s", ErrLockLost, name)
	}
	return nil
}

// Unlock implements certmagic.Locker. It releases the lock only while
// this holder's token still holds it; a lock lost meanwhile is reported
// with ErrLockLost and left to its new holder.
func (s *Storage) Unlock(ctx context.Context, name string) error {
	s.mu.Lock()
	l := s.locks[name]
	delete(s.locks, name)
	s.mu.Unlock()
	if l == nil {
		return fmt.Errorf("redis storage: lock %s is not held here", name)
	}
	close(l.stop)
	<-l.done
	n, err := unlockScript.Run(ctx, s.rdb, []string{s.lockKey(name)}, l.token).Int64()
	if err != nil {
		// The lock may still be held, until it expires: this Storage's
		// next attempt need not wait for that.
		s.lose(name, l.holder)
		return fmt.Errorf("redis storage: unlocking %s: %w", name, err)
	}
	if n != 1 {
		return fmt.Errorf("%w: %s", ErrLockLost, name)
	}
	return nil
}

// LockToken returns the fencing token of a lock this Storage holds.
func (s *Storage) LockToken(name string) (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.locks[name]
	if l == nil || l.lost {
		return 0, false
	}
	return l.fence, true
}

// Close stops renewing the locks still held (they expire LockTTL later)
// without releasing them, as a crash would; it does not close the client.
// Use Unlock to release.
func (s *Storage) Close() {
	s.mu.Lock()
	locks := s.locks
	s.locks = make(map[string]*heldLock)
	s.mu.Unlock()
	for _, l := range locks {
		close(l.stop)
		<-l.done
	}
}

// Interface guards.
var (
	_ certmagic.Storage          = (*Storage)(nil)
	_ certmagic.TryLocker        = (*Storage)(nil)
	_ certmagic.LockLeaseRenewer = (*Storage)(nil)
)

// SharedState returns the shared state (state.State) on the same Redis, its
// keys and channels under the storage's prefix: instances that share this
// storage share their counters, leases and messages too. Closing the State
// leaves the client open.
func (s *Storage) SharedState(logger *zap.Logger) (state.State, error) {
	return redisstate.New(s.rdb, redisstate.Options{KeyPrefix: s.prefix + ":state:", Logger: logger})
}

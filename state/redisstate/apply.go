package redisstate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/modelgate/modelgate/state"
)

// Keys of Apply, all under the hash tag of the scope so that one script
// may touch them on a Cluster:
//
//	<prefix>a:{<scope>}:c:<name>                        a counter
//	<prefix>a:{<scope>}:w:<name>:<f|s><size ms>:<index> a rate window's count
//	<prefix>a:{<scope>}:s:<name>                        a slot set
//
// A scope with a brace in it is replaced by "#" and the hex of the first 8
// bytes of its SHA-256, so that the hash tag is always the whole scope.

func scopeTag(scope string) string {
	if !strings.ContainsAny(scope, "{}") {
		return scope
	}
	sum := sha256.Sum256([]byte(scope))
	return "#" + hex.EncodeToString(sum[:8])
}

// Op codes of applyScript, and how many ARGV each takes after its code
// and its key count.
const (
	codeAdd = iota + 1
	codeInit
	codeExists
	codeGet
	codeReserve
	codeTake
	codeAcquire
	codeRelease
)

// applyScript runs Apply's ops in two passes. The first evaluates every op
// in order on a simulation (values read once, then changed in a Lua
// table), so each sees the effect of those before it, and decides
// whether all fit; the second, only then, writes them, in the same order.
// Counts are compared as Lua numbers (exact to 2^53); writes go through
// INCRBY with the caller's integers, exact. Slots compare expiries with
// Redis's TIME.
//
// ARGV[1] is the number of ops; then each op is its code, its key count
// and its arguments (NARGS of them). The reply is {applied, then for each
// op: fit, missing, v1, v2, pttl} where v1, v2 are value and total for
// counters, cur and prev for windows, the slots taken for slot sets.
var applyScript = redis.NewScript(`
local NARGS = {3, 2, 0, 0, 3, 5, 3, 1}
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ops, ai, ki = {}, 2, 1
for i = 1, tonumber(ARGV[1]) do
	local op = {kind = tonumber(ARGV[ai]), keys = {}, a = {}}
	local nk = tonumber(ARGV[ai + 1])
	ai = ai + 2
	for j = 1, nk do op.keys[j] = KEYS[ki]; ki = ki + 1 end
	for j = 1, NARGS[op.kind] do op.a[j] = ARGV[ai]; ai = ai + 1 end
	ops[i] = op
end

local vals, sets = {}, {}
local function val(k)
	local v = vals[k]
	if v == nil then
		v = redis.call('GET', k)
		if v then v = tonumber(v) else v = false end
		vals[k] = v
	end
	return v
end
local function slotset(k)
	local s = sets[k]
	if not s then
		redis.call('ZREMRANGEBYSCORE', k, '-inf', now)
		s = {n = redis.call('ZCARD', k), m = {}}
		sets[k] = s
	end
	return s
end
local function member(s, k, h)
	if s.m[h] == nil then s.m[h] = redis.call('ZSCORE', k, h) ~= false end
	return s.m[h]
end

local out, ok = {}, true
for i, op in ipairs(ops) do
	local k, a, kind = op.keys[1], op.a, op.kind
	local fit, missing, v1, v2 = 1, 0, 0, 0
	if kind == 1 then
		local v = val(k)
		if v == false and a[3] == '1' then
			missing = 1
		else
			v = (v or 0) + tonumber(a[1])
			vals[k] = v
		end
		v1 = v or 0
	elseif kind == 2 then
		local v = val(k)
		if v == false then
			v = tonumber(a[1])
			vals[k] = v
			missing = 1
		end
		v1 = v
	elseif kind == 3 then
		local v = val(k)
		if v == false then fit, missing = 0, 1 else v1 = v end
	elseif kind == 4 or kind == 5 then
		local v = val(k) or 0
		local total = v
		for j = 2, #op.keys do total = total + (val(op.keys[j]) or 0) end
		if kind == 5 then
			local n = tonumber(a[1])
			if total + n <= tonumber(a[2]) then
				v, total = v + n, total + n
				vals[k] = v
			else
				fit = 0
			end
		end
		v1, v2 = v, total
	elseif kind == 6 then
		local cur, prev = val(k) or 0, 0
		if op.keys[2] then prev = val(op.keys[2]) or 0 end
		local n, limit, size, elapsed = tonumber(a[1]), tonumber(a[2]), tonumber(a[3]), tonumber(a[4])
		if n > 0 and limit >= 0 then
			local count = cur
			if op.keys[2] then count = count + math.floor(prev * (size - elapsed) / size) end
			if count + n > limit then fit = 0 end
		end
		if fit == 1 and n ~= 0 then
			cur = cur + n
			vals[k] = cur
		end
		v1, v2 = cur, prev
	elseif kind == 7 then
		local s = slotset(k)
		local has = member(s, k, a[1])
		if has or s.n < tonumber(a[2]) then
			if not has then
				s.n = s.n + 1
				s.m[a[1]] = true
			end
		else
			fit = 0
		end
		v1 = s.n
	else
		local s = slotset(k)
		if member(s, k, a[1]) then
			s.n = s.n - 1
			s.m[a[1]] = false
		end
		v1 = s.n
	end
	if fit == 0 then ok = false end
	out[i] = {fit, missing, v1, v2}
end

local function create(k, n, ttl)
	redis.call('SET', k, n)
	if tonumber(ttl) > 0 then redis.call('PEXPIRE', k, ttl) end
end
if ok then
	for _, op in ipairs(ops) do
		local k, a, kind = op.keys[1], op.a, op.kind
		if kind == 1 or kind == 5 then
			if redis.call('EXISTS', k) == 1 then
				redis.call('INCRBY', k, a[1])
			elseif kind == 5 or a[3] ~= '1' then
				create(k, a[1], kind == 1 and a[2] or a[3])
			end
		elseif kind == 2 then
			if redis.call('EXISTS', k) == 0 then create(k, a[1], a[2]) end
		elseif kind == 6 then
			if tonumber(a[1]) ~= 0 then
				redis.call('INCRBY', k, a[1])
				redis.call('PEXPIRE', k, a[5])
			end
		elseif kind == 7 then
			redis.call('ZADD', k, now + tonumber(a[3]), a[1])
			local last = redis.call('ZRANGE', k, -1, -1, 'WITHSCORES')
			redis.call('PEXPIREAT', k, last[2])
		elseif kind == 8 then
			redis.call('ZREM', k, a[1])
		end
	end
end

local reply = {ok and 1 or 0}
for i, op in ipairs(ops) do
	local pttl = -1
	if op.kind <= 5 then pttl = redis.call('PTTL', op.keys[1]) end
	local r = out[i]
	table.insert(reply, r[1])
	table.insert(reply, r[2])
	table.insert(reply, r[3])
	table.insert(reply, r[4])
	table.insert(reply, pttl)
end
return reply
`)

// Apply implements state.Atomic with one script (one round trip).
func (s *State) Apply(ctx context.Context, scope string, ops []state.Op, results []state.Result) (bool, error) {
	if err := state.CheckOps(scope, ops, results); err != nil {
		return false, err
	}
	base := s.prefix + "a:{" + scopeTag(scope) + "}:"
	keys := make([]string, 0, len(ops)+2)
	args := make([]any, 1, 1+6*len(ops))
	args[0] = len(ops)
	for i := range ops {
		op := &ops[i]
		counter := base + "c:" + op.Name
		switch op.Kind {
		case state.OpAdd:
			keys = append(keys, counter)
			args = append(args, codeAdd, 1, op.N, ms(op.TTL), b01(op.IfExists))
		case state.OpInit:
			keys = append(keys, counter)
			args = append(args, codeInit, 1, op.N, ms(op.TTL))
		case state.OpExists:
			keys = append(keys, counter)
			args = append(args, codeExists, 1)
		case state.OpGet, state.OpReserve:
			keys = append(keys, counter)
			for _, w := range op.With {
				keys = append(keys, base+"c:"+w)
			}
			if op.Kind == state.OpGet {
				args = append(args, codeGet, 1+len(op.With))
			} else {
				args = append(args, codeReserve, 1+len(op.With), op.N, op.Limit, ms(op.TTL))
			}
		case state.OpTake:
			index, size, elapsed, _ := state.WindowSpan(op.Window, op.At)
			keys = append(keys, s.applyWindowKey(base, op.Name, op.Window.Sliding, size, index))
			nk := 1
			if op.Window.Sliding {
				keys = append(keys, s.applyWindowKey(base, op.Name, true, size, index-1))
				nk = 2
			}
			args = append(args, codeTake, nk, op.N, op.Limit, size, elapsed, state.WindowTTL(op.Window, size, elapsed))
		case state.OpAcquireSlot:
			keys = append(keys, base+"s:"+op.Name)
			args = append(args, codeAcquire, 1, op.Holder, op.Limit, max(1, ms(op.TTL)))
		case state.OpReleaseSlot:
			keys = append(keys, base+"s:"+op.Name)
			args = append(args, codeRelease, 1, op.Holder)
		}
	}
	ctx, cancel := s.op(ctx)
	defer cancel()
	r, err := applyScript.Run(ctx, s.rdb, keys, args...).Int64Slice()
	if err != nil {
		return false, s.wrap(err)
	}
	if len(r) != 1+5*len(ops) {
		return false, fmt.Errorf("redis state: apply: %d values in the reply for %d ops", len(r), len(ops))
	}
	for i := range ops {
		op, v := &ops[i], r[1+5*i:6+5*i]
		res := state.Result{OK: v[0] == 1, Missing: v[1] == 1}
		switch op.Kind {
		case state.OpTake:
			res.Taken = state.NewTaken(op.Window, res.OK, v[2], v[3], op.N, op.Limit, op.At)
		case state.OpAcquireSlot, state.OpReleaseSlot:
			res.Slots = v[2]
		default:
			res.Value, res.Total, res.TTL = v[2], v[3], ttlOf(v[4])
			if op.Kind != state.OpGet && op.Kind != state.OpReserve {
				res.Total = 0
			}
		}
		results[i] = res
	}
	return r[0] == 1, nil
}

func (s *State) applyWindowKey(base, name string, sliding bool, size, index int64) string {
	kind := "f"
	if sliding {
		kind = "s"
	}
	return base + "w:" + name + ":" + kind + strconv.FormatInt(size, 10) + ":" + strconv.FormatInt(index, 10)
}

func b01(b bool) int {
	if b {
		return 1
	}
	return 0
}

var _ state.Atomic = (*State)(nil)

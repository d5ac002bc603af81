package redisstate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/modelgate/modelgate/state"
	"github.com/modelgate/modelgate/state/redisclient"
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

// Op codes of applyScript.
const (
	codeAdd = iota + 1
	codeInit
	codeExists
	codeGet
	codeReserve
	codeTake
	codeAcquire
	codeRelease
	codeReserveUpTo
	codeTakeUpTo
	codeAdvance
	codeLeaseSlots
	codeFreeSlots
	codeDelete
)

// applyScript runs Apply's ops in two passes. The first evaluates every op
// in order on a simulation (values read once, then changed in a Lua
// table), so each sees the effect of those before it, and decides
// whether all fit; the second, only then, writes them, in the same order.
// Counts are compared as Lua numbers (exact to 2^53); writes go through
// INCRBY with the caller's integers, exact, or with what an UpTo op
// granted (an integer the script computed, under 2^53). Slots compare
// expiries with Redis's TIME.
//
// ARGV[1] holds two bytes for each op, its code and its key count; then
// come the ops' arguments, NARGS of them for each. The reply is {applied,
// then for each op: flags, v1, v2} where flags is 1 if the op fits plus 2
// if its counter was missing plus 4 times what it granted (UpTo ops,
// lease-slots), and v1, v2 are value and total for counters, cur and prev
// for windows, the slots taken for slot sets.
//
// What Redis spends on a script is mostly the interpreter's, not the
// commands': each redis.call, each tonumber of an argument and each value
// of the reply costs more than a GET itself. So the counters and windows
// are read with one MGET before the first pass, and the ops' codes and key
// counts come as bytes of one argument.
//
// A window or a counter gets its expiry when the script creates it, as
// Take and Add do; a slot set lives until its last holder's expiry.
var applyScript = redisclient.NewScript(applySource)

const applySource = `
local NARGS = {3, 2, 0, 0, 3, 5, 3, 1, 4, 6, 2, 6, 3, 0}
local SETS = {[7] = true, [8] = true, [12] = true, [13] = true}
-- Each op's code, its first key and key count, its first argument.
local head = ARGV[1]
local nops = #head / 2
local kinds, kis, nks, ais = {}, {}, {}, {}
local ki, ai = 1, 2
for i = 1, nops do
	local kind, nk = string.byte(head, 2 * i - 1, 2 * i)
	kinds[i], kis[i], nks[i], ais[i] = kind, ki, nk, ai
	ki = ki + nk
	ai = ai + NARGS[kind]
end

-- vals: the simulated value of each counter and window (false: missing),
-- read at once; fresh: those missing before the script, to create (with
-- an expiry) rather than increment.
local vals, fresh, sets = {}, {}, {}
local want = {}
for i = 1, nops do
	if not SETS[kinds[i]] then
		for j = kis[i], kis[i] + nks[i] - 1 do want[#want + 1] = KEYS[j] end
	end
end
if #want > 0 then
	local got = redis.call('MGET', unpack(want))
	for j, k in ipairs(want) do
		local v = got[j]
		if v then vals[k] = tonumber(v) else vals[k], fresh[k] = false, true end
	end
end
-- now: Redis's clock in milliseconds, read for the first slot set.
local now
local function slotset(k)
	local s = sets[k]
	if not s then
		if not now then
			local t = redis.call('TIME')
			now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
		end
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

-- grants: what each UpTo op counts; members: the slots each lease-slots
-- or free-slots op holds (true) or frees (false), in order.
local grants, members = {}, {}
local reply, ok = {0}, true
for i = 1, nops do
	local kind, k, a = kinds[i], KEYS[kis[i]], ais[i]
	local fit, missing, granted, v1, v2 = 1, 0, 0, 0, 0
	if kind == 1 then
		local v = vals[k]
		if v == false and ARGV[a + 2] == '1' then
			missing = 1
		else
			v = (v or 0) + tonumber(ARGV[a])
			vals[k] = v
		end
		v1 = v or 0
	elseif kind == 2 then
		local v = vals[k]
		if v == false then
			v = tonumber(ARGV[a])
			vals[k] = v
			missing = 1
		end
		v1 = v
	elseif kind == 3 then
		local v = vals[k]
		if v == false then fit, missing = 0, 1 else v1 = v end
	elseif kind == 4 or kind == 5 or kind == 9 then
		local v = vals[k] or 0
		local total = v
		for j = 1, nks[i] - 1 do total = total + (vals[KEYS[kis[i] + j]] or 0) end
		if kind == 5 then
			local n = tonumber(ARGV[a])
			if total + n <= tonumber(ARGV[a + 1]) then
				v, total = v + n, total + n
				vals[k] = v
			else
				fit = 0
			end
		elseif kind == 9 then
			local g = math.max(0, math.min(tonumber(ARGV[a]), tonumber(ARGV[a + 2]) - total))
			granted = g
			if g < tonumber(ARGV[a + 1]) then
				fit = 0
			else
				grants[i] = g
				v, total = v + g, total + g
				vals[k] = v
			end
		end
		v1, v2 = v, total
	elseif kind == 6 or kind == 10 then
		local cur, prev = vals[k] or 0, 0
		if nks[i] == 2 then prev = vals[KEYS[kis[i] + 1]] or 0 end
		local b = a
		if kind == 10 then b = a + 1 end -- past min
		local n, limit = tonumber(ARGV[a]), tonumber(ARGV[b + 1])
		local size, elapsed = tonumber(ARGV[b + 2]), tonumber(ARGV[b + 3])
		local count = cur
		if nks[i] == 2 then count = count + math.floor(prev * (size - elapsed) / size) end
		if kind == 10 then
			local g = n
			if limit >= 0 then g = math.max(0, math.min(n, limit - count)) end
			granted = g
			if g < tonumber(ARGV[a + 1]) then fit = 0 else n = g end
			grants[i] = n
		elseif n > 0 and limit >= 0 and count + n > limit then
			fit = 0
		end
		if fit == 1 and n ~= 0 then
			cur = cur + n
			vals[k] = cur
		end
		v1, v2 = cur, prev
	elseif kind == 11 then
		local v = vals[k]
		if v and v >= tonumber(ARGV[a]) then
			fit, v1 = 0, v
		else
			if v == false then missing = 1 end
			v1 = v or 0
			vals[k] = tonumber(ARGV[a])
		end
	elseif kind == 14 then
		local v = vals[k]
		if v == false then missing = 1 else v1 = v end
		vals[k] = false
	elseif kind == 7 then
		local s, h = slotset(k), ARGV[a]
		local has = member(s, k, h)
		if has or s.n < tonumber(ARGV[a + 1]) then
			if not has then
				s.n = s.n + 1
				s.m[h] = true
			end
		else
			fit = 0
		end
		v1 = s.n
	elseif kind == 8 then
		local s, h = slotset(k), ARGV[a]
		if member(s, k, h) then
			s.n = s.n - 1
			s.m[h] = false
		end
		v1 = s.n
	else -- 12 lease-slots, 13 free-slots
		local s, holder = slotset(k), ARGV[a]
		local from, n = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
		local holding, limit = kind == 12, 0
		if holding then limit = tonumber(ARGV[a + 4]) end
		local ms = {}
		for j = from, from + n - 1 do
			local h = holder .. '#' .. j
			local has = member(s, k, h)
			if holding and (has or s.n < limit) then
				if not has then
					s.n = s.n + 1
					s.m[h] = true
				end
				granted = granted + 1
				ms[#ms + 1] = {h, true}
			else
				holding = false
				if has then
					s.n = s.n - 1
					s.m[h] = false
					ms[#ms + 1] = {h, false}
				end
			end
		end
		members[i] = ms
		if kind == 12 and granted < tonumber(ARGV[a + 3]) then fit = 0 end
		v1 = s.n
	end
	if fit == 0 then ok = false end
	local r = #reply
	reply[r + 1], reply[r + 2], reply[r + 3] = fit + 2 * missing + 4 * granted, v1, v2
end
if not ok then return reply end
reply[1] = 1

-- Write, in order: increment what exists, create what does not.
local function add(k, n, ttl)
	if fresh[k] then
		fresh[k] = nil
		if tonumber(ttl) > 0 then redis.call('SET', k, n, 'PX', ttl) else redis.call('SET', k, n) end
	else
		redis.call('INCRBY', k, n)
	end
end
local function hold(k, ttl, h)
	redis.call('ZADD', k, now + ttl, h)
	if redis.call('PTTL', k) < ttl then redis.call('PEXPIRE', k, ttl) end
end
for i = 1, nops do
	local kind, k, a = kinds[i], KEYS[kis[i]], ais[i]
	if kind == 1 then
		if not fresh[k] or ARGV[a + 2] ~= '1' then add(k, ARGV[a], ARGV[a + 1]) end
	elseif kind == 2 then
		if fresh[k] then add(k, ARGV[a], ARGV[a + 1]) end
	elseif kind == 5 then
		add(k, ARGV[a], ARGV[a + 2])
	elseif kind == 6 then
		if ARGV[a] ~= '0' then add(k, ARGV[a], ARGV[a + 4]) end
	elseif kind == 9 then
		if grants[i] ~= 0 then add(k, string.format('%d', grants[i]), ARGV[a + 3]) end
	elseif kind == 10 then
		if grants[i] ~= 0 then add(k, string.format('%d', grants[i]), ARGV[a + 5]) end
	elseif kind == 11 then
		fresh[k] = nil
		if tonumber(ARGV[a + 1]) > 0 then
			redis.call('SET', k, ARGV[a], 'PX', ARGV[a + 1])
		else
			redis.call('SET', k, ARGV[a])
		end
	elseif kind == 14 then
		redis.call('DEL', k)
	elseif kind == 7 then
		hold(k, tonumber(ARGV[a + 2]), ARGV[a])
	elseif kind == 8 then
		redis.call('ZREM', k, ARGV[a])
	elseif kind == 12 or kind == 13 then
		for _, m in ipairs(members[i]) do
			if m[2] then hold(k, tonumber(ARGV[a + 5]), m[1]) else redis.call('ZREM', k, m[1]) end
		end
	end
end
return reply
`

// Apply implements state.Atomic with one script: one round trip, or a
// part of one shared with other Applies under load (batch.go).
func (s *State) Apply(ctx context.Context, scope string, ops []state.Op, results []state.Result) (bool, error) {
	if err := state.CheckOps(scope, ops, results); err != nil {
		return false, err
	}
	base := s.prefix + "a:{" + scopeTag(scope) + "}:"
	// The command's arguments (see applyCmd): its name and the script's
	// SHA1, the key count, the keys, then ARGV: the ops' codes and key
	// counts, then their arguments. Keys are written into their places as
	// the ops are read, ARGV appended.
	nk := 0
	head := make([]byte, 2*len(ops))
	for i := range ops {
		k := opKeys(&ops[i])
		if k > 255 {
			return false, fmt.Errorf("%w: op %d touches %d keys, more than 255", state.ErrBadOp, i, k)
		}
		head[2*i+1] = byte(k)
		nk += k
	}
	args := make([]any, 3+nk, 3+nk+1+5*len(ops))
	args[2] = nk
	args = append(args, head)
	ki := 3
	key := func(k string) {
		args[ki] = k
		ki++
	}
	counter := func(name string) { key(base + "c:" + name) }
	for i := range ops {
		op := &ops[i]
		var code byte
		switch op.Kind {
		case state.OpAdd:
			code = codeAdd
			counter(op.Name)
			args = append(args, op.N, ms(op.TTL), b01(op.IfExists))
		case state.OpInit:
			code = codeInit
			counter(op.Name)
			args = append(args, op.N, ms(op.TTL))
		case state.OpExists:
			code = codeExists
			counter(op.Name)
		case state.OpGet, state.OpReserve:
			counter(op.Name)
			for _, w := range op.With {
				counter(w)
			}
			switch {
			case op.Kind == state.OpGet:
				code = codeGet
			case op.UpTo:
				code = codeReserveUpTo
				args = append(args, op.N, op.Min, op.Limit, ms(op.TTL))
			default:
				code = codeReserve
				args = append(args, op.N, op.Limit, ms(op.TTL))
			}
		case state.OpTake:
			code = codeTake
			index, size, elapsed, _ := state.WindowSpan(op.Window, op.At)
			key(s.applyWindowKey(base, op.Name, op.Window.Sliding, size, index))
			if op.Window.Sliding {
				key(s.applyWindowKey(base, op.Name, true, size, index-1))
			}
			args = append(args, op.N)
			if op.UpTo {
				code = codeTakeUpTo
				args = append(args, op.Min)
			}
			args = append(args, op.Limit, size, elapsed, state.WindowTTL(op.Window, size, elapsed))
		case state.OpAcquireSlot:
			code = codeAcquire
			key(base + "s:" + op.Name)
			args = append(args, op.Holder, op.Limit, max(1, ms(op.TTL)))
		case state.OpReleaseSlot:
			code = codeRelease
			key(base + "s:" + op.Name)
			args = append(args, op.Holder)
		case state.OpAdvance:
			code = codeAdvance
			counter(op.Name)
			args = append(args, op.N, ms(op.TTL))
		case state.OpDelete:
			code = codeDelete
			counter(op.Name)
		case state.OpLeaseSlots:
			code = codeLeaseSlots
			key(base + "s:" + op.Name)
			args = append(args, op.Holder, op.From, op.N, op.Min, op.Limit, max(1, ms(op.TTL)))
		case state.OpFreeSlots:
			code = codeFreeSlots
			key(base + "s:" + op.Name)
			args = append(args, op.Holder, op.From, op.N)
		}
		head[2*i] = code
	}
	r, err := s.runApply(ctx, args)
	if err != nil {
		return false, s.wrap(err)
	}
	if len(r) != 1+3*len(ops) {
		return false, fmt.Errorf("redis state: apply: %d values in the reply for %d ops", len(r), len(ops))
	}
	for i := range ops {
		op, v := &ops[i], r[1+3*i:4+3*i]
		res := state.Result{OK: v[0]&1 != 0, Missing: v[0]&2 != 0, Granted: v[0] >> 2}
		switch op.Kind {
		case state.OpTake:
			n := op.N
			if op.UpTo {
				n = op.Min // what a refusal tells about
				if res.OK {
					n = res.Granted
				}
			}
			res.Taken = state.NewTaken(op.Window, res.OK, v[1], v[2], n, op.Limit, op.At)
		case state.OpAcquireSlot, state.OpReleaseSlot, state.OpLeaseSlots, state.OpFreeSlots:
			res.Slots = v[1]
		default:
			res.Value, res.Total = v[1], v[2]
			if op.Kind != state.OpGet && op.Kind != state.OpReserve {
				res.Total = 0
			}
		}
		results[i] = res
	}
	return r[0] == 1, nil
}

// opKeys is how many keys op touches: its counter, window or slot set,
// the counters it adds up (With), the previous window of a sliding one.
func opKeys(op *state.Op) int {
	switch op.Kind {
	case state.OpGet, state.OpReserve:
		return 1 + len(op.With)
	case state.OpTake:
		if op.Window.Sliding {
			return 2
		}
	}
	return 1
}

// applyWindowKey is the key of a window's count, built in one allocation.
func (s *State) applyWindowKey(base, name string, sliding bool, size, index int64) string {
	var buf [128]byte
	b := append(append(append(buf[:0], base...), "w:"...), name...)
	if sliding {
		b = append(b, ":s"...)
	} else {
		b = append(b, ":f"...)
	}
	b = strconv.AppendInt(b, size, 10)
	b = append(b, ':')
	return string(strconv.AppendInt(b, index, 10))
}

func b01(b bool) int {
	if b {
		return 1
	}
	return 0
}

var _ state.Atomic = (*State)(nil)

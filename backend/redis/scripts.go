package redis

import (
	"crypto/sha1"
	"encoding/hex"
	"strconv"
	"strings"
)

// script is a Lua script with its SHA1, run as a function of the library
// (FCALL; see library) or, on servers without functions, by EVALSHA (EVAL
// when the server does not have it yet).
type script struct {
	name string
	src  string
	sha  string
	// body is src without luaCommon, for the library (newLibrary).
	body string
	// slots, when set, are the only positions of queueKeys.all the
	// script touches, in order: its calls pass just those keys, and the
	// script puts each back at its position in KEYS (keysTable).
	slots []int
}

// newScript builds a per-queue script: luaCommon followed by body.
func newScript(name, body string) *script {
	sc := rawScript(name, luaCommon+body)
	sc.body = body
	return sc
}

// newSlotScript builds a per-queue script that takes only the keys at
// slots (1-based positions of queueKeys.all, ascending): a call passes
// fewer keys, and each key costs Redis its parsing and a Lua string.
func newSlotScript(name, body string, slots ...int) *script {
	sc := rawScript(name, "local KEYS = "+keysTable("KEYS", slots)+"\n"+luaCommon+body)
	sc.body, sc.slots = body, slots
	return sc
}

// keysTable is a Lua table constructor that puts the keys of the list
// named v, which holds the keys at slots, back at their positions
// (positions not in slots are nil).
func keysTable(v string, slots []int) string {
	var b strings.Builder
	b.WriteString("{")
	k := 0
	for pos := 1; pos <= slots[len(slots)-1]; pos++ {
		if pos > 1 {
			b.WriteString(", ")
		}
		if slots[k] == pos {
			k++
			b.WriteString(v + "[" + strconv.Itoa(k) + "]")
		} else {
			b.WriteString("nil")
		}
	}
	b.WriteString("}")
	return b.String()
}

// slotKeys picks the keys of a script with slots from the queue's whole
// list (queueKeys.all).
func slotKeys(all []string, slots []int) []string {
	out := make([]string, len(slots))
	for i, pos := range slots {
		out[i] = all[pos-1]
	}
	return out
}

// rawScript builds a script from its whole source.
func rawScript(name, src string) *script {
	sum := sha1.Sum([]byte(src))
	return &script{name: name, src: src, sha: hex.EncodeToString(sum[:]), body: src}
}

// library is the scripts as one Redis Functions library (FUNCTION LOAD,
// then FCALL). Its functions skip what every EVALSHA of a script pays:
// running luaCommon's definitions, some thirty closures and tables, on
// every call. The library and its function names carry the SHA1 of its
// source, so builds with different scripts share a server without
// replacing each other's functions.
type library struct {
	name string
	src  string
	fn   map[*script]string
}

// newLibrary builds the library of scripts: luaCommon once, with memoize
// set (see parsedActive), then one function per script that sets KEYS and
// ARGV (upvalues here, not globals), starts a fresh run (reset) and runs
// the script's body.
func newLibrary(scripts ...*script) *library {
	const common = luaCommon + "memoize = true\n"
	var b strings.Builder
	b.WriteString("local KEYS, ARGV\n")
	b.WriteString(common)
	sum := sha1.New()
	sum.Write([]byte(common))
	for _, sc := range scripts {
		sum.Write([]byte(sc.src))
	}
	tag := hex.EncodeToString(sum.Sum(nil))[:16]
	l := &library{name: "kyu_" + tag, fn: make(map[*script]string, len(scripts))}
	for _, sc := range scripts {
		fn := "kyu_" + strings.ReplaceAll(sc.name, " ", "_") + "_" + tag
		l.fn[sc] = fn
		ks := "keys"
		if sc.slots != nil {
			ks = keysTable("keys", sc.slots)
		}
		b.WriteString("\nredis.register_function('" + fn + "', function(keys, args)\nKEYS, ARGV = " + ks + ", args\nreset()\n")
		b.WriteString(sc.body)
		b.WriteString("\nend)\n")
	}
	l.src = "#!lua name=" + l.name + "\n" + b.String()
	return l
}

// luaCommon is the start of every per-queue script. Such a script takes
// the keys of one queue as KEYS[1..19] (queueKeys.all):
//
//	1 jobs  2 errors  3 results  4 ready  5 waiting  6 leases
//	7 deadlines  8 final  9 unique  10 unique-ends  11 queue name
//	12-16 the in sets of s, r, c, f, x  17 settings  18 minutes  19 reports
//
// Times are Unix milliseconds, passed as decimal strings. A record (see
// record.go) is loaded into a table {h = header fields, rec = the record
// as read, at = where its tail (unique key and body) starts, uk = the
// unique key}; load returns nil for a missing job and false for a record
// that does not parse, which no script rewrites.
//
// Every script that changes jobs ends with finalize: it writes what was
// gathered (records, lease and final entries, in-set moves, per-minute
// counts) and announces the jobs that became final or were deleted on
// the queue's done channel ({P:N}:done, derived from KEYS[1]).
const luaCommon = `
-- headerPattern reads a header and checks it as it goes: the number
-- fields must be decimal integers (times may be empty), so load needs no
-- tonumber to tell a record that parses; () is where the tail starts.
local headerPattern = '^(%a)|(%-?%d+)|(%-?%d+)|(%-?%d+)|(%-?%d+)|(%-?%d+)|(%-?%d*)|(%-?%d*)|(%-?%d*)|(%-?%d*)|([^|\n]*)|([^|\n]*)|(%d+)|([^|\n]*)\n()'
local inKey = {s = 12, r = 13, c = 14, f = 15, x = 16}
local leaseAnchor = '` + leaseAnchor + `' -- see keys.go

-- Writes to the jobs hash and the leases and final sets are gathered and
-- sent as one command each by flush (at the end of every script, and
-- before remove); cache holds the records this run read or wrote (false:
-- no such job), so a job named twice in one call sees its own change.
-- movedFrom and movedTo hold, per job whose state changed, the state
-- before and the state now (false: no job), so flush moves it between in
-- sets by the net change.
local cache = {}
local pending = {sets = {}, leaseAdds = {}, leaseRems = {}, finalAdds = {}}
local movedFrom, movedTo = {}, {}
local finished = {}
local tally = {p = 0, f = 0}
local overrides -- the queue's settings, read once a run (queueRetention)
local nums = {} -- formatted numbers (num)
local parsed = {} -- numbers read from text (ms)
-- smallNums and succs keep the text of small whole numbers (attempts,
-- tokens) and of their successors from run to run: a library's locals
-- outlive a call, a script's do not.
local smallNums, succs = {}, {}

-- reset starts a run afresh: a function library keeps its locals between
-- calls, while a script starts with them new.
local function reset()
  -- Only what the last run left filled is replaced: a table costs an
  -- allocation, and a run of one job (a single enqueue) fills few.
  if next(cache) then cache = {} end
  if #pending.sets > 0 or #pending.leaseAdds > 0 or #pending.leaseRems > 0 or #pending.finalAdds > 0 then
    pending = {sets = {}, leaseAdds = {}, leaseRems = {}, finalAdds = {}}
  end
  if next(movedFrom) or next(movedTo) then movedFrom, movedTo = {}, {} end
  if next(finished) then finished = {} end
  tally.p, tally.f = 0, 0
  if next(nums) then nums = {} end
  if next(parsed) then parsed = {} end
  overrides = nil
end

local function flushIn()
  if next(movedFrom) == nil then return end
  local rems, adds = {}, {}
  for id, from in pairs(movedFrom) do
    local to = movedTo[id]
    if from ~= to then
      if from and inKey[from] then
        local l = rems[from] or {}
        l[#l + 1] = id
        rems[from] = l
      end
      if to and inKey[to] then
        local l = adds[to] or {}
        l[#l + 1] = '0'
        l[#l + 1] = id
        adds[to] = l
      end
    end
  end
  movedFrom, movedTo = {}, {}
  for code, l in pairs(rems) do
    for i = 1, #l, 2000 do redis.call('ZREM', KEYS[inKey[code]], unpack(l, i, math.min(i + 1999, #l))) end
  end
  for code, l in pairs(adds) do
    for i = 1, #l, 4000 do redis.call('ZADD', KEYS[inKey[code]], unpack(l, i, math.min(i + 3999, #l))) end
  end
end

-- flush sends what was gathered; every ZADD to the leases set carries
-- leaseAnchor too (keys.go), so the set is a skiplist from the start.
local function flush()
  local p = pending
  if #p.sets > 0 then
    redis.call('HSET', KEYS[1], unpack(p.sets))
    p.sets = {}
  end
  if #p.leaseAdds > 0 then
    redis.call('ZADD', KEYS[6], 'inf', leaseAnchor, unpack(p.leaseAdds))
    p.leaseAdds = {}
  end
  if #p.leaseRems > 0 then
    redis.call('ZREM', KEYS[6], unpack(p.leaseRems))
    p.leaseRems = {}
  end
  if #p.finalAdds > 0 then
    redis.call('ZADD', KEYS[8], unpack(p.finalAdds))
    p.finalAdds = {}
  end
  flushIn()
end

-- move records that a job went from state from to state to (letters;
-- false for no job). Only moves that touch an in set are kept.
local function move(id, from, to)
  if movedFrom[id] ~= nil then
    movedTo[id] = to
  elseif (from and inKey[from]) or (to and inKey[to]) then
    movedFrom[id], movedTo[id] = from, to
  end
end

-- num formats an integer without an exponent. Formatting is dear next
-- to the rest of a job's work, and the values of one run repeat (attempt
-- counts, the deletion time of jobs finished together), so a run keeps
-- what it formatted in nums (small whole numbers in smallNums, for good).
local function num(x)
  if x >= 0 and x < 4096 and x % 1 == 0 then
    local s = smallNums[x]
    if not s then
      s = string.format('%d', x)
      smallNums[x] = s
    end
    return s
  end
  local s = nums[x]
  if not s then
    s = string.format('%.0f', x)
    nums[x] = s
  end
  return s
end

-- ms reads a decimal time; like num it keeps what it read for the run
-- (the jobs of one call share their now, and often their lease expiry).
local function ms(s)
  local x = parsed[s]
  if not x then
    x = tonumber(s)
    parsed[s] = x
  end
  return x
end

-- succ is the text of the whole number after the one s holds.
local function succ(s)
  local v = succs[s]
  if not v then
    local x = tonumber(s) + 1
    v = num(x)
    if x >= 0 and x < 4096 then succs[s] = v end
  end
  return v
end

-- count adds an ended attempt to the per-minute counters: processed, and
-- failed when failed is true.
local function count(failed)
  tally.p = tally.p + 1
  if failed then tally.f = tally.f + 1 end
end

-- finalize ends every script that changes jobs (see luaCommon's doc).
local function finalize(nowS)
  flush()
  if tally.p > 0 then
    local minute = num(math.floor(tonumber(nowS) / 60000) * 60000)
    redis.call('HINCRBY', KEYS[18], 'p:' .. minute, tally.p)
    redis.call('HINCRBY', KEYS[18], 'p', tally.p)
    if tally.f > 0 then
      redis.call('HINCRBY', KEYS[18], 'f:' .. minute, tally.f)
      redis.call('HINCRBY', KEYS[18], 'f', tally.f)
    end
    tally.p, tally.f = 0, 0
  end
  if #finished > 0 then
    redis.call('PUBLISH', string.sub(KEYS[1], 1, -6) .. ':done', table.concat(finished, ' '))
    finished = {}
  end
end

-- defer adds values to one of the pending lists, flushing a long one.
local function defer(list, a, b)
  local n = #list + 1
  list[n] = a
  if b then
    n = n + 1
    list[n] = b
  end
  if n >= 2000 then flush() end
end

-- uvarint reads an unsigned varint of s at i: its value (nil when s ends
-- first) and the index after it.
local function uvarint(s, i)
  local v, mul = 0, 1
  while true do
    local b = string.byte(s, i)
    if not b then return nil, i end
    i = i + 1
    if b < 128 then return v + b * mul, i end
    v = v + (b - 128) * mul
    mul = mul * 128
  end
end
-- payloadLen reads the payload length of a loaded record r: its body
-- (appendBody) is a version byte, the type (length, bytes), then the
-- payload's length.
local function payloadLen(r)
  local tl, i = uvarint(r.rec, r.at + tonumber(r.h[13]) + 1)
  if not tl then return 0 end
  return uvarint(r.rec, i + tl) or 0
end

-- jobType reads the type of a loaded record r: the first field of its
-- body (appendBody), after the version byte.
local function jobType(r)
  local tl, i = uvarint(r.rec, r.at + tonumber(r.h[13]) + 1)
  if not tl then return '' end
  return string.sub(r.rec, i, i + tl - 1)
end

-- prefetch reads the records of many jobs with HMGET.
local function prefetch(ids)
  for i = 1, #ids, 1000 do
    local chunk = {}
    for k = i, math.min(i + 999, #ids) do
      if cache[ids[k]] == nil then chunk[#chunk + 1] = ids[k] end
    end
    if #chunk > 0 then
      local recs = redis.call('HMGET', KEYS[1], unpack(chunk))
      for k = 1, #chunk do cache[chunk[k]] = recs[k] end
    end
  end
end

-- parsedActive holds the parse of each record the library wrote for an
-- active job (a claim or a heartbeat), with the number of jobs it was
-- written for: the completion, heartbeat or failure that follows reads
-- the very same string back and takes the fields from here instead of
-- matching the header again, the dearest part of a completion's Lua
-- (docs/benchmarks.md). The parse is a function of the string alone, so
-- an entry is never stale. An entry leaves when its last job is loaded,
-- and the whole table is dropped past activeBound entries, so records
-- whose jobs end elsewhere (a lease recovered by another build) do not
-- pile up. Only a library keeps its locals between calls, so only the
-- library sets memoize (newLibrary); a script's run would pay for
-- entries it drops when it ends.
local parsedActive, parsedCount = {}, 0
local activeBound = 4096
local memoize = false

-- copyHeader is a fresh table of a parse's header fields.
local function copyHeader(h)
  return {h[1], h[2], h[3], h[4], h[5], h[6], h[7], h[8], h[9], h[10], h[11], h[12], h[13], h[14]}
end

-- remember keeps r's parse for rec, the record save just wrote for it:
-- {header fields, at, unique key, tail, jobs}.
local function remember(rec, r)
  local m = parsedActive[rec]
  if m then
    m[5] = m[5] + 1
    return
  end
  if parsedCount >= activeBound then parsedActive, parsedCount = {}, 0 end
  local tail = r.tail
  parsedActive[rec] = {copyHeader(r.h), #rec - #tail + 1, r.uk, tail, 1}
  parsedCount = parsedCount + 1
end

local function load(id)
  local rec = cache[id]
  if rec == nil then
    rec = redis.call('HGET', KEYS[1], id)
    cache[id] = rec
  end
  if not rec then return nil end
  local m = parsedActive[rec]
  if m then
    local h = m[1]
    if m[5] > 1 then
      m[5] = m[5] - 1
      h = copyHeader(h)
    elseif parsedCount > 1 then
      parsedActive[rec] = nil
      parsedCount = parsedCount - 1
    else
      parsedActive, parsedCount = {}, 0 -- a table keeps its size when emptied
    end
    return {h = h, rec = rec, at = m[2], uk = m[3], tail = m[4]}
  end
  local h = {string.match(rec, headerPattern)}
  local at = h[15]
  if not at then return false end
  h[15] = nil
  if h[1] == 'a' and h[8] == '' then return false end
  local uk = ''
  if h[13] ~= '0' then uk = string.sub(rec, at, at + tonumber(h[13]) - 1) end
  return {h = h, rec = rec, at = at, uk = uk, tail = false}
end

-- encode writes a loaded record back: its header (one concatenation, so
-- one new string) and the tail it was read with (kept in r.tail).
local function encode(r)
  local h = r.h
  local tail = r.tail
  if not tail then
    tail = string.sub(r.rec, r.at)
    r.tail = tail
  end
  return h[1] .. '|' .. h[2] .. '|' .. h[3] .. '|' .. h[4] .. '|' .. h[5] .. '|' .. h[6] .. '|' .. h[7]
    .. '|' .. h[8] .. '|' .. h[9] .. '|' .. h[10] .. '|' .. h[11] .. '|' .. h[12] .. '|' .. h[13]
    .. '|' .. h[14] .. '\n' .. tail
end

local function save(id, r)
  local rec = encode(r)
  cache[id] = rec
  defer(pending.sets, id, rec)
  -- Only records load would accept: an active one has a lease expiry.
  if memoize and r.h[1] == 'a' and r.h[8] ~= '' then remember(rec, r) end
  return rec
end

-- setState changes a job's state letter, noting the move.
local function setState(id, r, code)
  move(id, r.h[1], code)
  r.h[1] = code
end

-- checkQueue makes sure the keys belong to the named queue: it returns an
-- error reply, KYUSTALE when they are marked as another queue's, and, when
-- needMark is set, KYUUNMARKED when they are not marked at all (the
-- process then asks the registry again, which marks them).
local function checkQueue(name, needMark)
  local have = redis.call('GET', KEYS[11])
  if not have then
    if needMark then return redis.error_reply('KYUUNMARKED queue keys are not marked') end
  elseif have ~= name then
    return redis.error_reply('KYUSTALE queue number now belongs to queue ' .. have)
  end
  return nil
end

-- sameJob reports whether two records are of one job: the header changes
-- as the job moves, what follows it (unique key and body) is written once.
local function sameJob(a, b)
  local i, j = string.find(a, '\n', 1, true), string.find(b, '\n', 1, true)
  return i ~= nil and j ~= nil and string.sub(a, i) == string.sub(b, j)
end

-- readyScore orders pending jobs: priority (higher first), then run-at.
local function readyScore(r)
  return num((100 - tonumber(r.h[5])) * 17592186044416 + tonumber(r.h[6]))
end

local function isFinal(code)
  return code == 'c' or code == 'f' or code == 'x'
end

-- touchUnique records the job's new state in its unique key's entry, and
-- frees a key held until the job is final once it is.
local function touchUnique(id, r)
  if r.uk == '' then return end
  local e = redis.call('HGET', KEYS[9], r.uk)
  if not e then return end
  local hid, untilms = string.match(e, '^([^|]*)|([^|]*)|')
  if hid ~= id then return end
  if untilms == '0' and isFinal(r.h[1]) then
    redis.call('HDEL', KEYS[9], r.uk)
  else
    redis.call('HSET', KEYS[9], r.uk, hid .. '|' .. untilms .. '|' .. r.h[1])
  end
end

-- remove deletes a job and its index entries (r is false or nil for a
-- record that does not parse). A unique key held for a period stays held
-- (with the state the job had); one held until the job is final is freed.
local function remove(id, r)
  flush()
  cache[id] = false
  redis.call('HDEL', KEYS[1], id)
  redis.call('HDEL', KEYS[2], id)
  redis.call('HDEL', KEYS[3], id)
  redis.call('HDEL', KEYS[19], id .. ':p', id .. ':l', id .. ':n')
  for k = 4, 8 do redis.call('ZREM', KEYS[k], id) end
  if r then
    if inKey[r.h[1]] then redis.call('ZREM', KEYS[inKey[r.h[1]]], id) end
  else
    for k = 12, 16 do redis.call('ZREM', KEYS[k], id) end
  end
  finished[#finished + 1] = id
  if r and r.uk ~= '' then
    local e = redis.call('HGET', KEYS[9], r.uk)
    if e then
      local hid, untilms = string.match(e, '^([^|]*)|([^|]*)|')
      if hid == id and untilms == '0' then redis.call('HDEL', KEYS[9], r.uk) end
    end
  end
end

-- queueRetention is the queue's retention override for a final state
-- letter, as retentionField writes it ('' for none).
local function queueRetention(code)
  if not overrides then
    overrides = {}
    local kv = redis.call('HGETALL', KEYS[17])
    for i = 1, #kv, 2 do
      if string.sub(kv[i], 1, 1) == 'r' then overrides[string.sub(kv[i], 2)] = kv[i + 1] end
    end
  end
  return overrides[code] or ''
end

-- finish makes a job final at now (a string) and applies retention as
-- backend.Expiry does: the job's own retention, else the queue's
-- override for the state, else the state's default. RetainNone deletes
-- the job at once, except a completed job with a result (hasResult),
-- which is kept backend.ResultGrace (one minute). A job whose deletion
-- time is at or past backend.MaxTime is kept forever.
local function finish(id, r, code, now, hasResult)
  setState(id, r, code)
  local h = r.h
  h[10] = now
  h[8] = ''
  h[11] = ''
  if h[7] ~= '' then redis.call('ZREM', KEYS[7], id) end
  defer(pending.leaseRems, id)
  if r.uk ~= '' then touchUnique(id, r) end
  local ret = h[14]
  if ret == '' then ret = queueRetention(code) end
  local keep
  if ret == 'n' then
    if code == 'c' and hasResult then
      keep = 60000
    else
      remove(id, r)
      return
    end
  elseif ret == 'f' then
    save(id, r)
    finished[#finished + 1] = id
    return
  elseif ret == '' then
    if code == 'f' then keep = 2592000000 elseif code == 'x' then keep = 604800000 else keep = 86400000 end
  else
    keep = ms(ret)
  end
  save(id, r)
  finished[#finished + 1] = id
  local at = ms(now) + keep
  if at < 9214646400000 then defer(pending.finalAdds, num(at), id) end
end

-- requeue puts a job back among the waiting ones: pending (ready) or, when
-- code is retry and its run-at is after now, in retry. With code 'p' (a
-- recovered lease) the job is pending whatever its run-at: a claimer
-- whose clock was behind may have taken it before its run-at.
local function requeue(id, r, code, now)
  if code ~= 'p' and tonumber(r.h[6]) > now then
    setState(id, r, code)
    redis.call('ZADD', KEYS[5], r.h[6], id)
  else
    setState(id, r, 'p')
    redis.call('ZADD', KEYS[4], readyScore(r), id)
  end
  if r.h[7] ~= '' then redis.call('ZADD', KEYS[7], r.h[7], id) end
  save(id, r)
  touchUnique(id, r)
  return r.h[1] == 'p'
end

-- addError appends one attempt error to the job's errors.
local function addError(id, attempt, now, kind, msg, stack)
  local e = cjson.encode({a = tonumber(attempt), t = tonumber(now), k = kind, m = msg, s = stack})
  local old = redis.call('HGET', KEYS[2], id)
  if old and string.len(old) > 2 then
    redis.call('HSET', KEYS[2], id, string.sub(old, 1, -2) .. ',' .. e .. ']')
  else
    redis.call('HSET', KEYS[2], id, '[' .. e .. ']')
  end
end

-- live returns the job a lease names if the lease is live at now, else
-- nil and 1 (lease lost) or 2 (no such job).
local function live(id, tok, now)
  local r = load(id)
  if r == nil then return nil, 2 end
  if r == false then return nil, 1 end
  if r.h[1] ~= 'a' or r.h[4] ~= tok or now >= ms(r.h[8]) then return nil, 1 end
  return r, 0
end

-- endCancelled ends an active job whose cancel was requested (cancel
-- code 'q'): cancelled, reason requested.
local function endCancelled(id, r, nowS, hasResult)
  r.h[12] = 'R'
  finish(id, r, 'x', nowS, hasResult)
end

-- cancelDue cancels (reason deadline) up to limit waiting jobs whose
-- deadline is not after now, returning how many.
local function cancelDue(now, nowS, limit)
  local ids = redis.call('ZRANGEBYSCORE', KEYS[7], '-inf', nowS, 'LIMIT', 0, limit)
  local n = 0
  for _, id in ipairs(ids) do
    local r = load(id)
    redis.call('ZREM', KEYS[7], id)
    if r and (r.h[1] == 's' or r.h[1] == 'p' or r.h[1] == 'r') then
      redis.call('ZREM', KEYS[4], id)
      redis.call('ZREM', KEYS[5], id)
      r.h[12] = 'd'
      finish(id, r, 'x', nowS, false)
      n = n + 1
    end
  end
  return n
end

-- promoteDue makes up to limit scheduled and retry jobs whose run-at is
-- not after now pending, returning how many.
local function promoteDue(nowS, limit)
  local ids = redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', nowS, 'LIMIT', 0, limit)
  local n = 0
  for _, id in ipairs(ids) do
    local r = load(id)
    redis.call('ZREM', KEYS[5], id)
    if r and (r.h[1] == 's' or r.h[1] == 'r') then
      setState(id, r, 'p')
      save(id, r)
      redis.call('ZADD', KEYS[4], readyScore(r), id)
      touchUnique(id, r)
      n = n + 1
    end
  end
  return n
end

-- extras reads what a job keeps beside its record: {errors, result,
-- progress, log lines, log counts}, false for each one missing.
local function extras(id)
  local rp = redis.call('HMGET', KEYS[19], id .. ':p', id .. ':l', id .. ':n')
  return {redis.call('HGET', KEYS[2], id), redis.call('HGET', KEYS[3], id), rp[1], rp[2], rp[3]}
end

-- view is the reply that describes a job (see viewFields in get.go):
-- {code, record, errors, result, progress, logs, log counts, deletion
-- time}; ex comes from extras, read before the job may have been deleted.
local function view(code, id, r, ex)
  return {code, encode(r), ex[1], ex[2], ex[3], ex[4], ex[5], redis.call('ZSCORE', KEYS[8], id)}
end

-- hasUniqueFor reports whether the job was enqueued with a UniqueFor
-- period, reading its body (see appendBody in record.go): the version
-- byte, three length-prefixed strings, the timeout and then UniqueFor as
-- varints; a zero UniqueFor is the single byte 0.
local function hasUniqueFor(r)
  local s = r.rec
  local pos = r.at + string.len(r.uk) + 1
  local function uvarint()
    local v, mul = 0, 1
    while true do
      local b = string.byte(s, pos)
      if not b then return nil end
      pos = pos + 1
      v = v + (b % 128) * mul
      if b < 128 then return v end
      mul = mul * 128
    end
  end
  for _ = 1, 3 do
    local n = uvarint()
    if not n then return false end
    pos = pos + n
  end
  if not uvarint() then return false end
  local b = string.byte(s, pos)
  return b ~= nil and b ~= 0
end

-- retryJob sends a failed or cancelled job back to pending at now (see
-- backend.RetryParams). It returns 0 when done, or 5 and the holder's id
-- when another job holds the job's unique key (nothing changed).
local function retryJob(id, r, now, nowS)
  local take = false
  if r.uk ~= '' and not hasUniqueFor(r) then
    local e = redis.call('HGET', KEYS[9], r.uk)
    if e then
      local hid, hu, hs = string.match(e, '^([^|]*)|([^|]*)|(.*)$')
      if hid and hid ~= id then
        local held
        if hu == '0' then held = not isFinal(hs) else held = now < tonumber(hu) end
        if held then return 5, hid end
      end
    end
    take = true
  end
  r.h[6] = nowS
  if tonumber(r.h[3]) <= tonumber(r.h[2]) then r.h[3] = num(tonumber(r.h[2]) + 1) end
  r.h[10] = ''
  r.h[12] = ''
  if r.h[7] ~= '' and tonumber(r.h[7]) <= now then r.h[7] = '' end
  redis.call('ZREM', KEYS[8], id)
  redis.call('HDEL', KEYS[3], id)
  setState(id, r, 'p')
  redis.call('ZADD', KEYS[4], readyScore(r), id)
  if r.h[7] ~= '' then redis.call('ZADD', KEYS[7], r.h[7], id) end
  save(id, r)
  if take then
    redis.call('HSET', KEYS[9], r.uk, id .. '|0|p')
    redis.call('ZREM', KEYS[10], r.uk)
  else
    touchUnique(id, r)
  end
  return 0
end
`

// enqueueScript writes new jobs of one queue.
//
// ARGV: 1 now, 2 wake channel, 3 count, 4 queue name, then per job 7
// values: id, state letter (p or s), score (ready score for p, run-at for
// s), deadline ("" for none), unique key ("" for none), unique until ("0":
// until final), record.
//
// Returns 0 when every job was written as asked (an id already holding
// this very job, whatever state it has reached since, was written by an
// earlier try of the same call, and counts as written; see sameJob).
// Otherwise it returns a list with per job 0 (written as asked), 2 when
// the id is another job's (two ids collided; nothing was written for this
// job), or {1, id, state letter} for a duplicate:
// the id and state are the unique key's holder's. Bare numbers, not
// tables, wherever they suffice: Redis converts every table of a reply to
// an array, at a cost above a job's own writes (about 4,000 instructions
// for the one-element list a single enqueue used to get).
// Publishes on the wake channel when a job is pending. Fails with
// KYUSTALE or KYUUNMARKED (see checkQueue), writing nothing, unless the
// keys are marked as this queue's.
//
// KEYS: only the 8 of enqueueSlots (a single enqueue is a call of its
// own, and the other 11 keys would cost it about a tenth of its time).
var enqueueScript = newSlotScript("enqueue", `
local stale = checkQueue(ARGV[4], true)
if stale then return stale end
local now = tonumber(ARGV[1])
local n = tonumber(ARGV[3])
local out = {}
local woke, asked = false, true
for i = 0, n - 1 do
  local b = 5 + i * 7
  local id, st, score, dl, uk, untilms, rec = ARGV[b], ARGV[b + 1], ARGV[b + 2], ARGV[b + 3], ARGV[b + 4], ARGV[b + 5], ARGV[b + 6]
  local dupId, dupState
  if uk ~= '' then
    local e = redis.call('HGET', KEYS[9], uk)
    if e then
      local hid, hu, hs = string.match(e, '^([^|]*)|([^|]*)|(.*)$')
      if hid and hid ~= id then
        local held
        if hu == '0' then held = not isFinal(hs) else held = now < tonumber(hu) end
        if held then dupId, dupState = hid, hs end
      end
    end
  end
  if dupId then
    out[#out + 1] = {1, dupId, dupState}
    asked = false
  elseif redis.call('HSETNX', KEYS[1], id, rec) == 0 then
    if sameJob(redis.call('HGET', KEYS[1], id), rec) then
      out[#out + 1] = 0
    else
      out[#out + 1] = 2
      asked = false
    end
  else
    if st == 'p' then
      redis.call('ZADD', KEYS[4], score, id)
      woke = true
    else
      redis.call('ZADD', KEYS[5], score, id)
      move(id, false, st)
    end
    if dl ~= '' then redis.call('ZADD', KEYS[7], dl, id) end
    if uk ~= '' then
      redis.call('HSET', KEYS[9], uk, id .. '|' .. untilms .. '|' .. st)
      if untilms ~= '0' then redis.call('ZADD', KEYS[10], untilms, uk) else redis.call('ZREM', KEYS[10], uk) end
    end
    out[#out + 1] = 0
  end
end
finalize(ARGV[1])
if woke then redis.call('PUBLISH', ARGV[2], '1') end
if asked then return 0 end
return out
`, enqueueSlots...)

// enqueueSlots are the keys the enqueue script touches (positions of
// queueKeys.all): jobs, ready, waiting, deadlines, unique, unique-ends,
// the queue's name and the scheduled jobs' in set.
var enqueueSlots = []int{1, 4, 5, 7, 9, 10, 11, 12}

// claimScript leases up to max jobs of one queue. A paused queue hands
// out nothing (and the script changes nothing). Otherwise it first
// cancels the waiting jobs whose deadline has come and promotes the due
// scheduled and retry jobs (up to promoteBound of each), then pops the
// best pending jobs.
//
// With a byte budget it counts each job's payload length (read from the
// record's body, see appendBody) and stops before the first job whose
// payload would take the bytes taken over the budget, unless no job of
// the claim was taken yet (ARGV 8): that job and the ones after it stay
// in the ready set, untouched.
//
// With types (ARGV 10 on) it takes only jobs of those types: it walks the
// ready set from its head in chunks, passing over the jobs of other types
// (left in place), until it has max jobs or has passed over more than
// ARGV 9 of them, and removes from the ready set only the ids it took.
//
// ARGV: 1 now, 2 max, 3 lease expiry, 4 worker id (hex), 5 promote bound,
// 6 queue name, 7 payload bytes left in the claim's budget ("" for no
// bound), 8 "1" when earlier queues of the claim took a job already;
// with a type filter 9 how many jobs of other types to pass over at most,
// 10... the types.
//
// Returns {stopped, bytes} (stopped "1" when it stopped for the budget,
// bytes the payload bytes taken) followed by a flat list of {id, record,
// errors} per claimed job, best first; a record that does not parse is
// dropped from the ready set and returned with an empty record. Fails
// with KYUSTALE or KYUUNMARKED (see checkQueue), changing nothing, unless
// the keys are marked as this queue's.
var claimScript = newScript("claim", `
local stale = checkQueue(ARGV[6], true)
if stale then return stale end
if redis.call('HGET', KEYS[17], 'paused') == '1' then return {'0', '0'} end
local now, nowS = tonumber(ARGV[1]), ARGV[1]
local bound = tonumber(ARGV[5])
cancelDue(now, nowS, bound)
promoteDue(nowS, bound)
-- ZRANGE and ZREMRANGEBYRANK rather than ZPOPMIN, whose reply would
-- carry every score as text for nothing.
local max = tonumber(ARGV[2])
local ids, loaded
if #ARGV > 8 then
  -- The ids to take, in order, with their loaded records (a missing or
  -- corrupt record is taken too, to be dropped as below).
  local want = {}
  for i = 10, #ARGV do want[ARGV[i]] = true end
  local scan, matched, others, from = tonumber(ARGV[9]), 0, 0, 0
  ids, loaded = {}, {}
  local chunk = math.min(max + 100, 1000)
  while matched < max and others <= scan do
    local part = redis.call('ZRANGE', KEYS[4], from, from + chunk - 1)
    if #part == 0 then break end
    from = from + #part
    prefetch(part)
    for _, id in ipairs(part) do
      local r = load(id)
      if not r or want[jobType(r)] then
        ids[#ids + 1] = id
        loaded[#ids] = r
        if r then matched = matched + 1 end
        if matched >= max then break end
      else
        others = others + 1
        if others > scan then break end
      end
    end
  end
else
  ids = redis.call('ZRANGE', KEYS[4], 0, max - 1)
  prefetch(ids)
end
local out, n = {'0', '0'}, 2
local exp, worker = ARGV[3], ARGV[4]
local budget, took = tonumber(ARGV[7]), ARGV[8] == '1'
local used, done = 0, 0
for k, id in ipairs(ids) do
  local r
  if loaded then r = loaded[k] else r = load(id) end
  if r and budget then
    local size = payloadLen(r)
    if took and used + size > budget then
      out[1] = '1'
      break
    end
    used = used + size
  end
  done = done + 1
  if r then
    took = true
    local h = r.h
    local errs = ''
    if h[4] ~= '0' then errs = redis.call('HGET', KEYS[2], id) or '' end
    setState(id, r, 'a')
    h[2] = succ(h[2])
    h[4] = succ(h[4])
    h[8] = exp
    h[9] = nowS
    h[11] = worker
    local rec = save(id, r)
    defer(pending.leaseAdds, exp, id)
    if h[7] ~= '' then redis.call('ZREM', KEYS[7], id) end
    if r.uk ~= '' then touchUnique(id, r) end
    out[n + 1], out[n + 2], out[n + 3] = id, rec, errs
    n = n + 3
  elseif r == false then
    out[n + 1], out[n + 2], out[n + 3] = id, '', ''
    n = n + 3
  end
end
-- Nothing in the loop touches the ready set: without a type filter the
-- first done ids are still its first.
if loaded then
  for i = 1, done, 500 do redis.call('ZREM', KEYS[4], unpack(ids, i, math.min(i + 499, done))) end
elseif done > 0 then
  redis.call('ZREMRANGEBYRANK', KEYS[4], 0, done - 1)
end
out[2] = num(used)
finalize(nowS)
return out
`)

// heartbeatScript extends live leases of one queue.
//
// ARGV: 1 now, 2 new expiry, then pairs of id, token.
//
// Returns per lease 0 (extended), 1 (lost), 2 (no such job) or 3
// (extended, and a cancel of the job was requested).
var heartbeatScript = newScript("heartbeat", `
local now = tonumber(ARGV[1])
local ids = {}
for i = 3, #ARGV, 2 do ids[#ids + 1] = ARGV[i] end
prefetch(ids)
local out = {}
for i = 3, #ARGV, 2 do
  local id = ARGV[i]
  local r, code = live(id, ARGV[i + 1], now)
  if r then
    r.h[8] = ARGV[2]
    save(id, r)
    defer(pending.leaseAdds, ARGV[2], id)
    if r.h[12] == 'q' then code = 3 end
  end
  out[#out + 1] = code
end
flush()
return out
`)

// completeScript finishes jobs of one queue: completed, or cancelled
// when a cancel was requested (the result is stored either way). Each
// completion counts as processed in the minute of now.
//
// ARGV: 1 now, 2 retried ("1" when an earlier try of this call may have
// run), then triples of id, token, result. On a retried call a job already
// completed (or cancelled) under the same token counts as completed by
// this call.
//
// Returns per item 0 (completed), 1 (lease lost) or 2 (no such job).
var completeScript = newScript("complete", `
local now, nowS = tonumber(ARGV[1]), ARGV[1]
local ids = {}
for i = 3, #ARGV, 3 do ids[#ids + 1] = ARGV[i] end
prefetch(ids)
local out = {}
for i = 3, #ARGV, 3 do
  local id, tok, res = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local r, code = live(id, tok, now)
  if r then
    if res ~= '' then redis.call('HSET', KEYS[3], id, res) end
    count(false)
    if r.h[12] == 'q' then
      endCancelled(id, r, nowS, res ~= '')
    else
      finish(id, r, 'c', nowS, res ~= '')
    end
  elseif code == 1 and ARGV[2] == '1' then
    local o = load(id)
    if o and (o.h[1] == 'c' or o.h[1] == 'x') and o.h[4] == tok then code = 0 end
  end
  out[#out + 1] = code
end
finalize(nowS)
return out
`)

// failScript ends attempts of one queue's jobs with an error. Each counts
// as processed and failed in the minute of now.
//
// ARGV: 1 now, 2 wake channel, then per item 7 values: id, token,
// message, stack, retry-at ("" for at once), final ("1" or "0"), cancel
// ("1": the handler cancelled its job, FailItem.Cancel).
//
// Returns per item 0 (done), 1 (lease lost) or 2 (no such job).
var failScript = newScript("fail", `
local now, nowS = tonumber(ARGV[1]), ARGV[1]
local ids = {}
for i = 3, #ARGV, 7 do ids[#ids + 1] = ARGV[i] end
prefetch(ids)
local out = {}
local woke = false
for i = 3, #ARGV, 7 do
  local id, tok = ARGV[i], ARGV[i + 1]
  local r, code = live(id, tok, now)
  if r then
    local cancel = ARGV[i + 6] == '1'
    local kind = 'failed'
    if cancel then kind = 'cancelled' end
    addError(id, r.h[2], nowS, kind, ARGV[i + 2], ARGV[i + 3])
    count(true)
    redis.call('ZREM', KEYS[6], id)
    r.h[8] = ''
    r.h[11] = ''
    if r.h[12] == 'q' then
      endCancelled(id, r, nowS, false)
    elseif cancel then
      r.h[12] = 'h'
      finish(id, r, 'x', nowS, false)
    elseif ARGV[i + 5] == '1' or tonumber(r.h[2]) >= tonumber(r.h[3]) then
      finish(id, r, 'f', nowS, false)
    else
      local at = ARGV[i + 4]
      if at ~= '' and tonumber(at) > now then r.h[6] = at else r.h[6] = nowS end
      if requeue(id, r, 'r', now) then woke = true end
    end
  end
  out[#out + 1] = code
end
finalize(nowS)
if woke then redis.call('PUBLISH', ARGV[2], '1') end
return out
`)

// releaseScript hands active jobs of one queue back to pending, or ends
// them cancelled when a cancel was requested.
//
// ARGV: 1 now, 2 wake channel, then pairs of id, token.
//
// Returns per item 0 (released), 1 (lease lost) or 2 (no such job).
var releaseScript = newScript("release", `
local now, nowS = tonumber(ARGV[1]), ARGV[1]
local ids = {}
for i = 3, #ARGV, 2 do ids[#ids + 1] = ARGV[i] end
prefetch(ids)
local out = {}
local woke = false
for i = 3, #ARGV, 2 do
  local id = ARGV[i]
  local r, code = live(id, ARGV[i + 1], now)
  if r then
    addError(id, r.h[2], nowS, 'interrupted', 'released', '')
    redis.call('ZREM', KEYS[6], id)
    r.h[2] = num(tonumber(r.h[2]) - 1)
    r.h[8] = ''
    r.h[11] = ''
    if r.h[12] == 'q' then
      endCancelled(id, r, nowS, false)
    else
      setState(id, r, 'p')
      redis.call('ZADD', KEYS[4], readyScore(r), id)
      if r.h[7] ~= '' then redis.call('ZADD', KEYS[7], r.h[7], id) end
      save(id, r)
      touchUnique(id, r)
      woke = true
    end
  end
  out[#out + 1] = code
end
finalize(nowS)
if woke then redis.call('PUBLISH', ARGV[2], '1') end
return out
`)

// getScript reads one job.
//
// ARGV: 1 id. Returns a view (see view in luaCommon), or {false} when
// there is no such job.
var getScript = newScript("get", `
local id = ARGV[1]
local rec = redis.call('HGET', KEYS[1], id)
if not rec then return {false} end
local ex = extras(id)
return {0, rec, ex[1], ex[2], ex[3], ex[4], ex[5], redis.call('ZSCORE', KEYS[8], id)}
`)

// listScript reads the jobs a listing shows, without payloads' other
// companions: no result and no log lines.
//
// ARGV: ids. Returns per id 8 values as a view does (see view in
// luaCommon), with result and log lines false; a missing job has a false
// record.
var listScript = newScript("list", `
local recs = redis.call('HMGET', KEYS[1], unpack(ARGV))
local out = {}
for i, id in ipairs(ARGV) do
  local b = #out
  out[b + 1] = 0
  out[b + 2] = recs[i]
  if recs[i] then
    local rp = redis.call('HMGET', KEYS[19], id .. ':p', id .. ':n')
    out[b + 3] = redis.call('HGET', KEYS[2], id)
    out[b + 4] = false
    out[b + 5] = rp[1]
    out[b + 6] = false
    out[b + 7] = rp[2]
    out[b + 8] = redis.call('ZSCORE', KEYS[8], id)
  else
    for k = 3, 8 do out[b + k] = false end
  end
end
return out
`)

// deleteScript removes a job that is not active.
//
// ARGV: 1 id. Returns 0 (deleted), 1 (active, nothing changed) or 2 (no
// such job). A record that does not parse is deleted.
var deleteScript = newScript("delete", `
local id = ARGV[1]
local r = load(id)
if r == nil then return 2 end
if r and r.h[1] == 'a' then return 1 end
remove(id, r or nil)
finalize('0')
return 0
`)

// cancelScript cancels one job: a scheduled, pending or retry job at
// once (reason requested); an active one is marked (cancel code q) and
// ends cancelled when its attempt ends.
//
// ARGV: 1 id, 2 now. Returns a view (see view in luaCommon) with code 0
// (done; the view is the job after the call, even when retention deleted
// it), or {2} (no such job), {3, state letter} (final: refused) or {4}
// (the record does not parse).
var cancelScript = newScript("cancel", `
local id, nowS = ARGV[1], ARGV[2]
local r = load(id)
if r == nil then return {2} end
if r == false then return {4} end
local c = r.h[1]
if c == 's' or c == 'p' or c == 'r' then
  local ex = extras(id)
  redis.call('ZREM', KEYS[4], id)
  redis.call('ZREM', KEYS[5], id)
  r.h[12] = 'r'
  finish(id, r, 'x', nowS, false)
  finalize(nowS)
  return view(0, id, r, ex)
elseif c == 'a' then
  if r.h[12] ~= 'q' then
    r.h[12] = 'q'
    save(id, r)
    flush()
  end
  return view(0, id, r, extras(id))
end
return {3, c}
`)

// retryScript sends one failed or cancelled job back to pending (see
// backend.RetryParams), and publishes on the wake channel.
//
// ARGV: 1 id, 2 now, 3 wake channel. Returns a view (see view in
// luaCommon) with code 0, or {2} (no such job), {3, state letter} (not
// failed or cancelled), {4} (the record does not parse) or {5, holder id}
// (another job holds the unique key; nothing changed).
var retryScript = newScript("retry", `
local id, nowS = ARGV[1], ARGV[2]
local r = load(id)
if r == nil then return {2} end
if r == false then return {4} end
if r.h[1] ~= 'f' and r.h[1] ~= 'x' then return {3, r.h[1]} end
local code, holder = retryJob(id, r, tonumber(nowS), nowS)
if code ~= 0 then return {code, holder} end
finalize(nowS)
redis.call('PUBLISH', ARGV[3], '1')
return view(0, id, r, extras(id))
`)

// runNowScript makes one scheduled or retry job pending at once (RunAt =
// now), and publishes on the wake channel.
//
// ARGV: 1 id, 2 now, 3 wake channel. Returns a view (see view in
// luaCommon) with code 0, or {2} (no such job), {3, state letter} (not
// scheduled or retry) or {4} (the record does not parse).
var runNowScript = newScript("run now", `
local id, nowS = ARGV[1], ARGV[2]
local r = load(id)
if r == nil then return {2} end
if r == false then return {4} end
if r.h[1] ~= 's' and r.h[1] ~= 'r' then return {3, r.h[1]} end
redis.call('ZREM', KEYS[5], id)
r.h[6] = nowS
setState(id, r, 'p')
redis.call('ZADD', KEYS[4], readyScore(r), id)
save(id, r)
touchUnique(id, r)
finalize(nowS)
redis.call('PUBLISH', ARGV[3], '1')
return view(0, id, r, extras(id))
`)

// retryQueueScript retries up to limit jobs of one queue in one state
// (failed or cancelled), oldest (by id) first, as retryScript does; a job
// whose unique key another job holds is skipped.
//
// ARGV: 1 now, 2 wake channel, 3 state letter (f or x), 4 limit.
// Returns the number of jobs retried.
var retryQueueScript = newScript("retry queue", `
local nowS = ARGV[1]
local now = tonumber(nowS)
local code, limit = ARGV[3], tonumber(ARGV[4])
local key = KEYS[inKey[code]]
local n = 0
local after = '-'
while n < limit do
  local ids = redis.call('ZRANGE', key, after, '+', 'BYLEX', 'LIMIT', 0, 500)
  if #ids == 0 then break end
  for _, id in ipairs(ids) do
    if n >= limit then break end
    local r = load(id)
    if r and r.h[1] == code and retryJob(id, r, now, nowS) == 0 then n = n + 1 end
  end
  after = '(' .. ids[#ids]
end
finalize(nowS)
if n > 0 then redis.call('PUBLISH', ARGV[2], '1') end
return n
`)

// purgeScript deletes up to limit jobs of one queue in one state (never
// active), oldest (by id) first. For scheduled, retry and final jobs it
// takes them from the state's in set; pending jobs have none, so the
// caller passes their ids, oldest first, and the script deletes those
// still pending.
//
// ARGV: 1 now, 2 state letter, 3 limit, then the ids for pending jobs
// (oldest first; more than limit may be given). Returns the number of
// jobs deleted.
var purgeScript = newScript("purge", `
local code, limit = ARGV[2], tonumber(ARGV[3])
local ids = {}
if inKey[code] then
  ids = redis.call('ZRANGE', KEYS[inKey[code]], '-', '+', 'BYLEX', 'LIMIT', 0, limit)
else
  for i = 4, #ARGV do ids[#ids + 1] = ARGV[i] end
end
local n = 0
for _, id in ipairs(ids) do
  if n >= limit then break end
  local r = load(id)
  if r and r.h[1] == code then
    remove(id, r)
    n = n + 1
  end
end
finalize(ARGV[1])
return n
`)

// reportScript records progress and log lines of active jobs under live
// leases.
//
// ARGV: 1 now, 2 the cap on a job's lines, then per item: id, token,
// progress (JSON, "" for none), the number of lines k, then k lines
// (each a JSON object {"t": ms, "l": line}).
//
// Returns per item 0 (recorded), 1 (lease lost) or 2 (no such job).
var reportScript = newScript("report", `
local now = tonumber(ARGV[1])
local cap = tonumber(ARGV[2])
local out = {}
local i = 3
while i <= #ARGV do
  local id, tok, prog, k = ARGV[i], ARGV[i + 1], ARGV[i + 2], tonumber(ARGV[i + 3])
  local first = i + 4
  i = first + k
  local r, code = live(id, tok, now)
  if r then
    if prog ~= '' then redis.call('HSET', KEYS[19], id .. ':p', prog) end
    if k > 0 then
      local meta = redis.call('HGET', KEYS[19], id .. ':n')
      local kept, dropped = 0, 0
      if meta then
        local a, b = string.match(meta, '^(%d+)|(%d+)$')
        kept, dropped = tonumber(a) or 0, tonumber(b) or 0
      end
      local take = math.max(0, math.min(cap - kept, k))
      if take > 0 then
        local frag = table.concat(ARGV, ',', first, first + take - 1)
        local old = redis.call('HGET', KEYS[19], id .. ':l')
        if old and string.len(old) > 2 then
          redis.call('HSET', KEYS[19], id .. ':l', string.sub(old, 1, -2) .. ',' .. frag .. ']')
        else
          redis.call('HSET', KEYS[19], id .. ':l', '[' .. frag .. ']')
        end
      end
      redis.call('HSET', KEYS[19], id .. ':n', num(kept + take) .. '|' .. num(dropped + k - take))
    end
  end
  out[#out + 1] = code
end
return out
`)

// updateQueueScript changes a queue's settings and returns them.
//
// ARGV: 1 queue name, 2 paused ("1" pause, "0" resume, "" keep), 3 "1" to
// replace the retention overrides with 4..9: rc, tc, rf, tf, rx, tx (see
// keys.go), 10 now, 11 wake channel.
//
// Returns {paused, tc, tf, tx} ("" for unset). Resuming a paused queue
// that holds pending (or due) jobs publishes on the wake channel. Fails
// with KYUSTALE or KYUUNMARKED (see checkQueue) unless the keys are
// marked as this queue's.
var updateQueueScript = newScript("update queue", `
local stale = checkQueue(ARGV[1], true)
if stale then return stale end
local was = redis.call('HGET', KEYS[17], 'paused') == '1'
if ARGV[2] == '1' then
  redis.call('HSET', KEYS[17], 'paused', '1')
elseif ARGV[2] == '0' then
  redis.call('HDEL', KEYS[17], 'paused')
  if was and (redis.call('ZCARD', KEYS[4]) > 0 or #redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', ARGV[10], 'LIMIT', 0, 1) > 0) then
    redis.call('PUBLISH', ARGV[11], '1')
  end
end
if ARGV[3] == '1' then
  local names = {'rc', 'tc', 'rf', 'tf', 'rx', 'tx'}
  for k = 1, 6 do
    if ARGV[3 + k] == '' then
      redis.call('HDEL', KEYS[17], names[k])
    else
      redis.call('HSET', KEYS[17], names[k], ARGV[3 + k])
    end
  end
end
local v = redis.call('HMGET', KEYS[17], 'paused', 'tc', 'tf', 'tx')
for k = 1, 4 do v[k] = v[k] or '' end
return v
`)

// statsScript reads one queue's statistics.
//
// ARGV: 1 the first minute (ms), 2 the number of minutes n.
//
// Returns {pending, active (leaseAnchor not counted), scheduled, retry,
// completed, failed, cancelled, oldest pending run-at ("" for none),
// paused, tc, tf, tx, processed total, failed total, then n pairs
// processed, failed per minute}; missing counters are "".
var statsScript = newScript("stats", `
local active = redis.call('ZCARD', KEYS[6])
if redis.call('ZSCORE', KEYS[6], leaseAnchor) then active = active - 1 end
local out = {redis.call('ZCARD', KEYS[4]), active}
for k = 12, 16 do out[#out + 1] = redis.call('ZCARD', KEYS[k]) end
-- The ready score is band * 2^44 + run-at, one band per priority: the
-- first job of each band has the band's earliest run-at.
local best
local lo = '-inf'
while true do
  local e = redis.call('ZRANGEBYSCORE', KEYS[4], lo, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  if #e == 0 then break end
  local sc = tonumber(e[2])
  local band = math.floor(sc / 17592186044416)
  local runAt = sc - band * 17592186044416
  if not best or runAt < best then best = runAt end
  lo = num((band + 1) * 17592186044416)
end
if best then out[#out + 1] = num(best) else out[#out + 1] = '' end
local v = redis.call('HMGET', KEYS[17], 'paused', 'tc', 'tf', 'tx')
for k = 1, 4 do out[#out + 1] = v[k] or '' end
local fields = {'p', 'f'}
local first, n = tonumber(ARGV[1]), tonumber(ARGV[2])
for m = 0, n - 1 do
  local minute = num(first + m * 60000)
  fields[#fields + 1] = 'p:' .. minute
  fields[#fields + 1] = 'f:' .. minute
end
local c = redis.call('HMGET', KEYS[18], unpack(fields))
for k = 1, #fields do out[#out + 1] = c[k] or '' end
return out
`)

// promoteScript is one Promote step on one queue.
//
// ARGV: 1 now, 2 limit, 3 wake channel. Returns {promoted, cancelled};
// together at most limit.
var promoteScript = newScript("promote", `
local now, nowS = tonumber(ARGV[1]), ARGV[1]
local limit = tonumber(ARGV[2])
local cancelled = cancelDue(now, nowS, limit)
local moved = 0
if limit - cancelled > 0 then moved = promoteDue(nowS, limit - cancelled) end
finalize(nowS)
if moved > 0 then redis.call('PUBLISH', ARGV[3], '1') end
return {moved, cancelled}
`)

// recoverScript ends up to limit expired leases of one queue: the job
// goes back to pending, or to failed when its attempts are used up, or
// ends cancelled when a cancel was requested. Each counts as processed
// and failed in the minute of now.
//
// ARGV: 1 now, 2 limit, 3 wake channel. Returns {recovered, failed}.
var recoverScript = newScript("recover", `
local now, nowS = tonumber(ARGV[1]), ARGV[1]
local ids = redis.call('ZRANGEBYSCORE', KEYS[6], '-inf', nowS, 'LIMIT', 0, tonumber(ARGV[2]))
local moved, failed = 0, 0
local woke = false
prefetch(ids)
for _, id in ipairs(ids) do
  local r = load(id)
  redis.call('ZREM', KEYS[6], id)
  if r and r.h[1] == 'a' then
    addError(id, r.h[2], nowS, 'lease_expired', 'lease expired', '')
    count(true)
    r.h[8] = ''
    r.h[11] = ''
    moved = moved + 1
    if r.h[12] == 'q' then
      endCancelled(id, r, nowS, false)
    elseif tonumber(r.h[2]) >= tonumber(r.h[3]) then
      failed = failed + 1
      finish(id, r, 'f', nowS, false)
    else
      if requeue(id, r, 'p', now) then woke = true end
    end
  end
end
finalize(nowS)
if woke then redis.call('PUBLISH', ARGV[3], '1') end
return {moved, failed}
`)

// retentionScript deletes up to limit final jobs of one queue whose
// retention has run out, forgets up to limit unique keys whose period
// has ended, and drops per-minute counters older than the history kept.
//
// ARGV: 1 now, 2 limit, 3 the oldest minute to keep (ms). Returns the
// number of jobs deleted.
var retentionScript = newScript("retention", `
local nowS = ARGV[1]
local now = tonumber(nowS)
local limit = tonumber(ARGV[2])
local ids = redis.call('ZRANGEBYSCORE', KEYS[8], '-inf', nowS, 'LIMIT', 0, limit)
for _, id in ipairs(ids) do
  local r = load(id)
  remove(id, r or nil)
end
local ends = redis.call('ZRANGEBYSCORE', KEYS[10], '-inf', nowS, 'LIMIT', 0, limit)
for _, uk in ipairs(ends) do
  redis.call('ZREM', KEYS[10], uk)
  local e = redis.call('HGET', KEYS[9], uk)
  if e then
    local hu = string.match(e, '^[^|]*|([^|]*)|')
    if hu ~= '0' and tonumber(hu) and now >= tonumber(hu) then redis.call('HDEL', KEYS[9], uk) end
  end
end
local keep = tonumber(ARGV[3])
local old = {}
for _, f in ipairs(redis.call('HKEYS', KEYS[18])) do
  local m = tonumber(string.match(f, '^[pf]:(%d+)$'))
  if m and m < keep then old[#old + 1] = f end
end
for i = 1, #old, 1000 do redis.call('HDEL', KEYS[18], unpack(old, i, math.min(i + 999, #old))) end
finalize(nowS)
return #ids
`)

// registerWorkerScript records a worker's entry.
//
// KEYS: 1 workers, 2 worker-ends. ARGV: 1 id, 2 entry (JSON), 3 expiry ms.
var registerWorkerScript = rawScript("register worker", `
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
return 0
`)

// deregisterWorkerScript removes a worker's entry (an unknown id is no
// error), or, with ARGV[1] = "", the entries expired at ARGV[2] (ms).
//
// KEYS: 1 workers, 2 worker-ends. Returns the number removed.
var deregisterWorkerScript = rawScript("deregister worker", `
local ids = {ARGV[1]}
if ARGV[1] == '' then ids = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[2], 'LIMIT', 0, 1000) end
if #ids == 0 then return 0 end
redis.call('ZREM', KEYS[2], unpack(ids))
return redis.call('HDEL', KEYS[1], unpack(ids))
`)

// registerScript returns the number of a queue, giving it the next free
// number when it has none.
//
// KEYS: 1 queues, 2 queue-names, 3 meta. ARGV: 1 queue name, 2 the
// largest number allowed. Returns the number, or an error reply when the
// numbers are used up.
var registerScript = rawScript("register", `
local n = redis.call('HGET', KEYS[1], ARGV[1])
if n then return tonumber(n) end
n = redis.call('HINCRBY', KEYS[3], 'queues', 1)
if n > tonumber(ARGV[2]) then return redis.error_reply('KYU too many queues') end
redis.call('HSET', KEYS[1], ARGV[1], n)
redis.call('HSET', KEYS[2], n, ARGV[1])
return n
`)

// markerScript claims a key prefix for kyu or checks that kyu holds it.
//
// KEYS: 1 meta. ARGV: 1 format version. Returns "new" when the prefix was
// free and is now marked, "v:<version>" when kyu already holds it, or
// "foreign:<what>" when the marker key holds something else.
var markerScript = rawScript("marker", `
local t = redis.call('TYPE', KEYS[1])
if type(t) == 'table' then t = t.ok end
if t == 'none' then
  redis.call('HSET', KEYS[1], 'kyu', ARGV[1])
  return 'new'
end
if t ~= 'hash' then return 'foreign:a ' .. t .. ' key' end
local v = redis.call('HGET', KEYS[1], 'kyu')
if not v then return 'foreign:a hash without the kyu marker' end
return 'v:' .. v
`)

// functions is the library of every script above (see library).
var functions = newLibrary(enqueueScript, claimScript, heartbeatScript, completeScript,
	failScript, releaseScript, getScript, listScript, deleteScript, cancelScript,
	retryScript, runNowScript, retryQueueScript, purgeScript, reportScript,
	updateQueueScript, statsScript, promoteScript, recoverScript, retentionScript,
	registerWorkerScript, deregisterWorkerScript, registerScript, markerScript)

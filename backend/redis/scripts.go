package redis

import (
	"crypto/sha1"
	"encoding/hex"
)

// script is a Lua script with its SHA1, run by EVALSHA (EVAL when the
// server does not have it yet).
type script struct {
	name string
	src  string
	sha  string
}

// newScript builds a per-queue script: luaCommon followed by body.
func newScript(name, body string) *script { return rawScript(name, luaCommon+body) }

// rawScript builds a script from its whole source.
func rawScript(name, src string) *script {
	sum := sha1.Sum([]byte(src))
	return &script{name: name, src: src, sha: hex.EncodeToString(sum[:])}
}

// luaCommon is the start of every per-queue script. Such a script takes
// the keys of one queue as KEYS[1..11] (queueKeys.all):
//
//	1 jobs  2 errors  3 results  4 ready  5 waiting  6 leases
//	7 deadlines  8 final  9 unique  10 unique-ends  11 queue name
//
// Times are Unix milliseconds, passed as decimal strings. A record (see
// record.go) is loaded into a table {h = header fields, tail = the rest,
// uk = the unique key}; load returns nil for a missing job and false for
// a record that does not parse, which no script rewrites.
const luaCommon = `
local headerPattern = '^([^|\n]*)|([^|\n]*)|([^|\n]*)|([^|\n]*)|([^|\n]*)|([^|\n]*)|([^|\n]*)|([^|\n]*)|([^|\n]*)|([^|\n]*)|([^|\n]*)|([^|\n]*)|([^|\n]*)|([^|\n]*)\n()'

-- Writes to the jobs hash and the leases and final sets are gathered and
-- sent as one command each by flush (at the end of every script, and
-- before remove); cache holds the records this run read or wrote (false:
-- no such job), so a job named twice in one call sees its own change.
local cache = {}
local pending = {sets = {}, leaseAdds = {}, leaseRems = {}, finalAdds = {}}

local function flush()
  if #pending.sets > 0 then redis.call('HSET', KEYS[1], unpack(pending.sets)) end
  if #pending.leaseAdds > 0 then redis.call('ZADD', KEYS[6], unpack(pending.leaseAdds)) end
  if #pending.leaseRems > 0 then redis.call('ZREM', KEYS[6], unpack(pending.leaseRems)) end
  if #pending.finalAdds > 0 then redis.call('ZADD', KEYS[8], unpack(pending.finalAdds)) end
  pending = {sets = {}, leaseAdds = {}, leaseRems = {}, finalAdds = {}}
end

-- defer adds values to one of the pending lists, flushing a long one.
local function defer(list, a, b)
  list[#list + 1] = a
  if b then list[#list + 1] = b end
  if #list >= 2000 then flush() end
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

local function load(id)
  local rec = cache[id]
  if rec == nil then
    rec = redis.call('HGET', KEYS[1], id)
    cache[id] = rec
  end
  if not rec then return nil end
  local h = {string.match(rec, headerPattern)}
  local at = h[15]
  h[15] = nil
  if not at or string.len(h[1]) ~= 1 or not (tonumber(h[2]) and tonumber(h[3]) and tonumber(h[4])
      and tonumber(h[5]) and tonumber(h[6]) and tonumber(h[13])) then
    return false
  end
  if h[1] == 'a' and not tonumber(h[8]) then return false end
  local tail = string.sub(rec, at)
  return {h = h, tail = tail, uk = string.sub(tail, 1, tonumber(h[13]))}
end

local function encode(r)
  return table.concat(r.h, '|') .. '\n' .. r.tail
end

local function save(id, r)
  local rec = encode(r)
  cache[id] = rec
  defer(pending.sets, id, rec)
  return rec
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

local function num(x)
  return string.format('%.0f', x)
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

-- remove deletes a job and its index entries. A unique key held for a
-- period stays held (with the state the job had); one held until the job
-- is final is freed.
local function remove(id, r)
  flush()
  cache[id] = false
  redis.call('HDEL', KEYS[1], id)
  redis.call('HDEL', KEYS[2], id)
  redis.call('HDEL', KEYS[3], id)
  for k = 4, 8 do redis.call('ZREM', KEYS[k], id) end
  if r and r.uk ~= '' then
    local e = redis.call('HGET', KEYS[9], r.uk)
    if e then
      local hid, untilms = string.match(e, '^([^|]*)|([^|]*)|')
      if hid == id and untilms == '0' then redis.call('HDEL', KEYS[9], r.uk) end
    end
  end
end

-- finish makes a job final at now (a string) and schedules its deletion,
-- or deletes it at once under RetainNone.
local function finish(id, r, code, now)
  r.h[1] = code
  r.h[10] = now
  r.h[8] = ''
  r.h[11] = ''
  if r.h[7] ~= '' then redis.call('ZREM', KEYS[7], id) end
  defer(pending.leaseRems, id)
  touchUnique(id, r)
  local ret = r.h[14]
  if ret == 'n' then remove(id, r); return end
  save(id, r)
  if ret == 'f' then return end
  local keep
  if ret == '' then
    if code == 'f' then keep = 2592000000 elseif code == 'x' then keep = 604800000 else keep = 86400000 end
  else
    keep = tonumber(ret)
  end
  local at = tonumber(now) + keep
  if at < 9214646400000 then defer(pending.finalAdds, num(at), id) end
end

-- wait puts a job back among the waiting ones: pending (ready) or, when
-- its run-at is after now, in state code (scheduled or retry).
local function requeue(id, r, code, now)
  if tonumber(r.h[6]) > now then
    r.h[1] = code
    redis.call('ZADD', KEYS[5], r.h[6], id)
  else
    r.h[1] = 'p'
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
  if r.h[1] ~= 'a' or r.h[4] ~= tok or now >= tonumber(r.h[8]) then return nil, 1 end
  return r, 0
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
      finish(id, r, 'x', nowS)
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
      r.h[1] = 'p'
      save(id, r)
      redis.call('ZADD', KEYS[4], readyScore(r), id)
      touchUnique(id, r)
      n = n + 1
    end
  end
  return n
end
`

// enqueueScript writes new jobs of one queue.
//
// ARGV: 1 now, 2 wake channel, 3 count, 4 queue name, then per job 7
// values: id, state letter (p or s), score (ready score for p, run-at for
// s), deadline ("" for none), unique key ("" for none), unique until ("0":
// until final), record.
//
// Returns per job {outcome, id, state letter}: outcome 0 written, 1
// duplicate (id and state are the holder's), 2 the id is another job's
// (two ids collided; nothing was written for this job). An id already
// holding this very record was written by an earlier try of the same call
// and is reported as written again. Publishes on the wake channel when a job is
// pending. Fails with KYUSTALE or KYUUNMARKED (see checkQueue), writing
// nothing, unless the keys are marked as this queue's.
var enqueueScript = newScript("enqueue", `
local stale = checkQueue(ARGV[4], true)
if stale then return stale end
local now = tonumber(ARGV[1])
local n = tonumber(ARGV[3])
local out = {}
local woke = false
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
  elseif redis.call('HSETNX', KEYS[1], id, rec) == 0 then
    if redis.call('HGET', KEYS[1], id) == rec then
      out[#out + 1] = {0, id, st}
    else
      out[#out + 1] = {2, id, st}
    end
  else
    if st == 'p' then
      redis.call('ZADD', KEYS[4], score, id)
      woke = true
    else
      redis.call('ZADD', KEYS[5], score, id)
    end
    if dl ~= '' then redis.call('ZADD', KEYS[7], dl, id) end
    if uk ~= '' then
      redis.call('HSET', KEYS[9], uk, id .. '|' .. untilms .. '|' .. st)
      if untilms ~= '0' then redis.call('ZADD', KEYS[10], untilms, uk) else redis.call('ZREM', KEYS[10], uk) end
    end
    out[#out + 1] = {0, id, st}
  end
end
flush()
if woke then redis.call('PUBLISH', ARGV[2], '1') end
return out
`)

// claimScript leases up to max jobs of one queue. It first cancels the
// waiting jobs whose deadline has come and promotes the due scheduled and
// retry jobs (up to promoteBound of each), then pops the best pending jobs.
//
// ARGV: 1 now, 2 max, 3 lease expiry, 4 worker id (hex), 5 promote bound,
// 6 queue name.
//
// Returns a flat list of {id, record, errors} per claimed job, best first;
// a record that does not parse is dropped from the ready set and returned
// with an empty record. Fails with KYUSTALE or KYUUNMARKED (see
// checkQueue), changing nothing, unless the keys are marked as this
// queue's.
var claimScript = newScript("claim", `
local stale = checkQueue(ARGV[6], true)
if stale then return stale end
local now, nowS = tonumber(ARGV[1]), ARGV[1]
local bound = tonumber(ARGV[5])
cancelDue(now, nowS, bound)
promoteDue(nowS, bound)
local got = redis.call('ZPOPMIN', KEYS[4], tonumber(ARGV[2]))
local ids = {}
for i = 1, #got, 2 do ids[#ids + 1] = got[i] end
prefetch(ids)
local out = {}
for i = 1, #got, 2 do
  local id = got[i]
  local r = load(id)
  if r then
    local errs = ''
    if r.h[4] ~= '0' then errs = redis.call('HGET', KEYS[2], id) or '' end
    r.h[1] = 'a'
    r.h[2] = num(tonumber(r.h[2]) + 1)
    r.h[4] = num(tonumber(r.h[4]) + 1)
    r.h[8] = ARGV[3]
    r.h[9] = nowS
    r.h[11] = ARGV[4]
    local rec = save(id, r)
    defer(pending.leaseAdds, ARGV[3], id)
    if r.h[7] ~= '' then redis.call('ZREM', KEYS[7], id) end
    touchUnique(id, r)
    out[#out + 1] = id
    out[#out + 1] = rec
    out[#out + 1] = errs
  elseif r == false then
    out[#out + 1] = id
    out[#out + 1] = ''
    out[#out + 1] = ''
  end
end
flush()
return out
`)

// heartbeatScript extends live leases of one queue.
//
// ARGV: 1 now, 2 new expiry, then pairs of id, token.
//
// Returns per lease 0 (extended), 1 (lost) or 2 (no such job).
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
  end
  out[#out + 1] = code
end
flush()
return out
`)

// completeScript finishes jobs of one queue.
//
// ARGV: 1 now, 2 retried ("1" when an earlier try of this call may have
// run), then triples of id, token, result. On a retried call a job already
// completed under the same token counts as completed by this call.
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
    finish(id, r, 'c', nowS)
  elseif code == 1 and ARGV[2] == '1' then
    local o = load(id)
    if o and o.h[1] == 'c' and o.h[4] == tok then code = 0 end
  end
  out[#out + 1] = code
end
flush()
return out
`)

// failScript ends attempts of one queue's jobs with an error.
//
// ARGV: 1 now, 2 wake channel, then per item 6 values: id, token, message,
// stack, retry-at ("" for at once), final ("1" or "0").
//
// Returns per item 0 (done), 1 (lease lost) or 2 (no such job).
var failScript = newScript("fail", `
local now, nowS = tonumber(ARGV[1]), ARGV[1]
local ids = {}
for i = 3, #ARGV, 6 do ids[#ids + 1] = ARGV[i] end
prefetch(ids)
local out = {}
local woke = false
for i = 3, #ARGV, 6 do
  local id, tok = ARGV[i], ARGV[i + 1]
  local r, code = live(id, tok, now)
  if r then
    addError(id, r.h[2], nowS, 'failed', ARGV[i + 2], ARGV[i + 3])
    redis.call('ZREM', KEYS[6], id)
    r.h[8] = ''
    r.h[11] = ''
    if ARGV[i + 5] == '1' or tonumber(r.h[2]) >= tonumber(r.h[3]) then
      finish(id, r, 'f', nowS)
    else
      local at = ARGV[i + 4]
      if at ~= '' and tonumber(at) > now then r.h[6] = at else r.h[6] = nowS end
      if requeue(id, r, 'r', now) then woke = true end
    end
  end
  out[#out + 1] = code
end
flush()
if woke then redis.call('PUBLISH', ARGV[2], '1') end
return out
`)

// releaseScript hands active jobs of one queue back to pending.
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
    r.h[1] = 'p'
    redis.call('ZADD', KEYS[4], readyScore(r), id)
    if r.h[7] ~= '' then redis.call('ZADD', KEYS[7], r.h[7], id) end
    save(id, r)
    touchUnique(id, r)
    woke = true
  end
  out[#out + 1] = code
end
flush()
if woke then redis.call('PUBLISH', ARGV[2], '1') end
return out
`)

// getScript reads one job.
//
// ARGV: 1 id. Returns {record, errors, result}, with false for a missing
// value (a missing record: no such job).
var getScript = newScript("get", `
local id = ARGV[1]
return {redis.call('HGET', KEYS[1], id), redis.call('HGET', KEYS[2], id), redis.call('HGET', KEYS[3], id)}
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
return 0
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
flush()
if moved > 0 then redis.call('PUBLISH', ARGV[3], '1') end
return {moved, cancelled}
`)

// recoverScript ends up to limit expired leases of one queue.
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
    r.h[8] = ''
    r.h[11] = ''
    moved = moved + 1
    if tonumber(r.h[2]) >= tonumber(r.h[3]) then
      failed = failed + 1
      finish(id, r, 'f', nowS)
    else
      if requeue(id, r, 'p', now) then woke = true end
    end
  end
end
flush()
if woke then redis.call('PUBLISH', ARGV[3], '1') end
return {moved, failed}
`)

// retentionScript deletes up to limit final jobs of one queue whose
// retention has run out, and forgets up to limit unique keys whose period
// has ended.
//
// ARGV: 1 now, 2 limit. Returns the number of jobs deleted.
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
return #ids
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

-- common.lua is the start of every per-queue script. Such a script takes
-- the keys of one queue (queueKeyNames in keys.go), written here by
-- name: KEY_jobs is the jobs hash, KEYPOS_in_s the position of the
-- scheduled jobs' in set in KEYS, and h[F_state] the state field of a
-- record's header (the h* constants of record.go). The store replaces
-- these names with KEYS[n] and numbers when it opens (loadScripts).
--
-- Times are Unix milliseconds, passed as decimal strings. A record (see
-- record.go) is loaded into a table {h = header fields, rec = the record
-- as read, at = where its tail (unique key and body) starts, uk = the
-- unique key, head = the header's text with its newline when other
-- records share it (the header load read before, see lastHeader, or the
-- claim's, see remember), else false or nil}; load
-- returns nil for a missing job and false for a record that does not
-- parse, which no script rewrites.
--
-- Every script that changes jobs ends with finalize: it writes what was
-- gathered (records, lease and final entries, in-set moves, per-minute
-- counts) and announces the jobs that became final or were deleted on
-- the queue's done channel ({P:N}:done, derived from KEY_jobs).

-- headerPattern reads a header and checks it as it goes: the number
-- fields must be decimal integers (times may be empty: a run-at of ''
-- is the job's creation time, see runAtOf), so load needs no tonumber
-- to tell a record that parses; () is where the tail starts.
-- shortPattern reads the short header of a pending job (record.go):
-- "p", its max attempts, the newline. A bare record (isBare in
-- record.go) has no header: it starts with its body's version byte, 1
-- to BODY_LAST_VERSION, and stands for a pending job of
-- BARE_MAX_ATTEMPTS max attempts.
local headerPattern = '^(%a)|(%-?%d+)|(%-?%d+)|(%-?%d+)|(%-?%d+)|(%-?%d*)|(%-?%d*)|(%-?%d*)|(%-?%d*)|(%-?%d*)|([^|\n]*)|([^|\n]*)|(%d+)|([^|\n]*)\n()'
-- inKey is the position in KEYS of each state's in set.
local shortPattern = '^p(%d+)\n()'
local inKey = {s = KEYPOS_in_s, r = KEYPOS_in_r, c = KEYPOS_in_c, f = KEYPOS_in_f, x = KEYPOS_in_x}
local leaseAnchor = LEASE_ANCHOR -- leaseAnchor of keys.go, quoted

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
    redis.call('HSET', KEY_jobs, unpack(p.sets))
    p.sets = {}
  end
  if #p.leaseAdds > 0 then
    redis.call('ZADD', KEY_leases, 'inf', leaseAnchor, unpack(p.leaseAdds))
    p.leaseAdds = {}
  end
  if #p.leaseRems > 0 then
    redis.call('ZREM', KEY_leases, unpack(p.leaseRems))
    p.leaseRems = {}
  end
  if #p.finalAdds > 0 then
    redis.call('ZADD', KEY_final, unpack(p.finalAdds))
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
-- A whole number within 2^53 is formatted as an integer ('%d'), which
-- costs C's printf a fifth of what '%.0f' does.
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
    if x % 1 == 0 and x > -9007199254740992 and x < 9007199254740992 then
      s = string.format('%d', x)
    else
      s = string.format('%.0f', x)
    end
    nums[x] = s
  end
  return s
end

-- minuteOf is the text of the minute of the time nowS (ms, text), kept
-- from run to run while the minute lasts.
local lastMinute, lastMinuteS
local function minuteOf(nowS)
  local m = math.floor(tonumber(nowS) / 60000) * 60000
  if m ~= lastMinute then lastMinute, lastMinuteS = m, num(m) end
  return lastMinuteS
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

-- finalize ends every script that changes jobs (see the top of this file).
local function finalize(nowS)
  flush()
  if tally.p > 0 then
    -- Numbers as text (num): Redis formats a number argument with
    -- printf's '%.17g', which costs more than the command.
    local minute, p = minuteOf(nowS), num(tally.p)
    redis.call('HINCRBY', KEY_minutes, 'p:' .. minute, p)
    redis.call('HINCRBY', KEY_minutes, 'p', p)
    if tally.f > 0 then
      local f = num(tally.f)
      redis.call('HINCRBY', KEY_minutes, 'f:' .. minute, f)
      redis.call('HINCRBY', KEY_minutes, 'f', f)
    end
    tally.p, tally.f = 0, 0
  end
  if #finished > 0 then
    redis.call('PUBLISH', string.sub(KEY_jobs, 1, -6) .. ':done', table.concat(finished, ' '))
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
  local tl, i = uvarint(r.rec, r.at + tonumber(r.h[F_unique_len]) + 1)
  if not tl then return 0 end
  return uvarint(r.rec, i + tl) or 0
end

-- jobType reads the type of a loaded record r: the first field of its
-- body (appendBody), after the version byte.
local function jobType(r)
  local tl, i = uvarint(r.rec, r.at + tonumber(r.h[F_unique_len]) + 1)
  if not tl then return '' end
  return string.sub(r.rec, i, i + tl - 1)
end

-- prefetch reads the records of many jobs with HMGET.
local function prefetch(ids)
  for i = 1, #ids, 1000 do
    local chunk, n = {}, 0
    for k = i, math.min(i + 999, #ids) do
      local id = ids[k]
      if cache[id] == nil then
        n = n + 1
        chunk[n] = id
      end
    end
    if n > 0 then
      local recs = redis.call('HMGET', KEY_jobs, unpack(chunk, 1, n))
      for k = 1, n do cache[chunk[k]] = recs[k] end
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

-- copyHeader is a fresh table of a parse's header fields (all of them,
-- in order: F_state is 1).
local function copyHeader(h)
  return {h[1], h[2], h[3], h[4], h[5], h[6], h[7], h[8], h[9], h[10], h[11], h[12], h[13], h[14]}
end

-- keep keeps the parse of rec, a record just written for an active job
-- that parsedActive has no entry for: {header fields, at, unique key,
-- tail, jobs, head, plain, lease expiry}; head, when set, is rec's
-- header text with its newline, shared with other records (see the
-- claim); plain is whether the job has no cancel request, deadline,
-- unique key or retention of its own (what complete.lua's short way
-- asks); the lease expiry is a number. The fields h are kept as they
-- are, no copy: no one may change them after (load hands out copies), so
-- the records of one claimed header share them.
local function keep(rec, h, uk, tail, head, plain, exp)
  if parsedCount >= activeBound then parsedActive, parsedCount = {}, 0 end
  parsedActive[rec] = {h, #rec - #tail + 1, uk, tail, 1, head, plain, exp}
  parsedCount = parsedCount + 1
end

-- plainJob is keep's plain for the fields h and unique key uk.
local function plainJob(h, uk)
  return h[F_cancel] == '' and h[F_deadline] == '' and uk == '' and h[F_retention] == ''
end

-- remember keeps r's parse for rec, the record save just wrote for it
-- (see keep).
local function remember(rec, r, head)
  local m = parsedActive[rec]
  if m then
    m[5] = m[5] + 1
  else
    local h = r.h
    keep(rec, copyHeader(h), r.uk, r.tail, head, plainJob(h, r.uk), ms(h[F_lease_exp]))
  end
end

-- forget counts off one job of the entry m of rec, a job loaded (or
-- completed, see complete.lua) from it.
local function forget(rec, m)
  if m[5] > 1 then
    m[5] = m[5] - 1
  elseif parsedCount > 1 then
    parsedActive[rec] = nil
    parsedCount = parsedCount - 1
  else
    parsedActive, parsedCount = {}, 0 -- a table keeps its size when emptied
  end
end

-- lastHeader is the last header load matched, with its newline, and
-- lastFields its fields once a second record had it too (nil before).
-- Jobs enqueued together mostly share their header (the run-at is the
-- enqueue's time) and lie side by side in the ready set, so a claim
-- mostly loads the header it loaded just before: telling that the record
-- starts with it costs a tenth of matching the header. Fields are a
-- function of the text, so they are never stale. They are kept from the
-- second sighting on: copying them for every header would cost a job
-- whose header is its own more than the lookup saves it. Only headers
-- that load accepts are kept.
local lastHeader, lastFields

-- isBare reports whether rec is a bare record, one with no header: its
-- first byte is its body's version, 1 to BODY_LAST_VERSION (isBare in
-- record.go), where a header starts with a letter.
local function isBare(rec)
  local b = string.byte(rec)
  return b ~= nil and b >= 1 and b <= BODY_LAST_VERSION
end

local function load(id)
  local rec = cache[id]
  if rec == nil then
    rec = redis.call('HGET', KEY_jobs, id)
    cache[id] = rec
  end
  if not rec then return nil end
  local m = parsedActive[rec]
  if m then
    -- The fields are copied: an entry's may be shared by other entries
    -- (the claim's, see claimedFields in claim.lua), and the caller may
    -- change its copy.
    local h = copyHeader(m[1])
    forget(rec, m)
    return {h = h, rec = rec, at = m[2], uk = m[3], tail = m[4], head = m[6]}
  end
  local h, at
  local same = lastHeader and string.find(rec, lastHeader, 1, true) == 1
  if same and lastFields then
    h, at = copyHeader(lastFields), #lastHeader + 1
  else
    if isBare(rec) then
      -- A bare record: the fields it stands for, its tail all of it,
      -- and '' for its header (which every bare record shares, see
      -- claim.lua; lastHeader is left alone, since every record starts
      -- with '').
      return {h = {'p', '0', BARE_MAX_ATTEMPTS, '0', '0', '', '', '', '', '', '', '', '0', ''}, rec = rec, at = 1, uk = '', tail = rec, head = ''}
    end
    if string.byte(rec, 2) == 124 then -- '|': the long form
      h = {string.match(rec, headerPattern)}
      at = h[15] -- the capture after the header's fields
      if not at then return false end
      h[15] = nil
      if h[F_state] == 'a' and h[F_lease_exp] == '' then return false end
    else
      local max
      max, at = string.match(rec, shortPattern)
      if not at then return false end
      -- The fields the short form stands for, in order (F_state first).
      h = {'p', '0', max, '0', '0', '', '', '', '', '', '', '', '0', ''}
    end
    if same then
      lastFields = copyHeader(h)
    else
      lastHeader, lastFields = string.sub(rec, 1, at - 1), nil
    end
  end
  local uk = ''
  if h[F_unique_len] ~= '0' then uk = string.sub(rec, at, at + tonumber(h[F_unique_len]) - 1) end
  return {h = h, rec = rec, at = at, uk = uk, tail = false, head = same and lastHeader}
end

-- encode writes a loaded record back: its header fields in order (one
-- concatenation, so one new string) and the tail it was read with (kept in r.tail).
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

-- encodeFinished is the record of the fields h and the tail made final
-- (state code, finished at nowS, no lease, no worker), as encode writes
-- it after finish, with h left as it is (the fields of a parsedActive
-- entry, which other entries may share).
local function encodeFinished(h, code, nowS, tail)
  return code .. '|' .. h[2] .. '|' .. h[3] .. '|' .. h[4] .. '|' .. h[5] .. '|' .. h[6] .. '|' .. h[7]
    .. '||' .. h[9] .. '|' .. nowS .. '||' .. h[12] .. '|' .. h[13] .. '|' .. h[14] .. '\n' .. tail
end

local function save(id, r)
  local rec = encode(r)
  cache[id] = rec
  defer(pending.sets, id, rec)
  -- Only records load would accept: an active one has a lease expiry.
  if memoize and r.h[F_state] == 'a' and r.h[F_lease_exp] ~= '' then remember(rec, r) end
  return rec
end

-- setState changes a job's state letter, noting the move.
local function setState(id, r, code)
  move(id, r.h[F_state], code)
  r.h[F_state] = code
end

-- checkQueue makes sure the keys belong to the named queue: it returns an
-- error reply, KYUSTALE when they are marked as another queue's, and, when
-- needMark is set, KYUUNMARKED when they are not marked at all (the
-- process then asks the registry again, which marks them).
local function checkQueue(name, needMark)
  local have = redis.call('GET', KEY_queue_name)
  if not have then
    if needMark then return redis.error_reply('KYUUNMARKED queue keys are not marked') end
  elseif have ~= name then
    return redis.error_reply('KYUSTALE queue number now belongs to queue ' .. have)
  end
  return nil
end

-- tailOf is what follows a record's header (its unique key and body):
-- all of a bare record; nil for a record with no header.
local function tailOf(rec)
  if isBare(rec) then return rec end
  local i = string.find(rec, '\n', 1, true)
  return i and string.sub(rec, i + 1)
end

-- sameJob reports whether two records are of one job: the header changes
-- as the job moves, what follows it (unique key and body) is written once.
local function sameJob(a, b)
  local ta = tailOf(a)
  return ta ~= nil and ta == tailOf(b)
end

-- stateOf is the state letter of a record as read (a bare one is
-- pending).
local function stateOf(rec)
  if isBare(rec) then return 'p' end
  return string.sub(rec, 1, 1)
end

-- bodyField reads field k of a loaded record r's body (appendBody in
-- record.go) among those after the payload: 1 the title's length, 2
-- the timeout, 3 UniqueFor, 4 the retention, 5 the created time (ms
-- before the id's), each as its unsigned varint; nil when the body
-- leaves it out (a compact body: of version 3 or 4, whose flags byte
-- after the payload names the fields that follow, or of version 5 on,
-- which leaves them all out and holds the created time, 0 to 29 ms, in
-- its version: see bodyCompactDefaults in record.go; the field is its
-- default) or ends first.
local function bodyField(r, k)
  local s = r.rec
  local pos = r.at + #r.uk
  local v = string.byte(s, pos)
  if not v then return nil end
  if v >= 5 then
    if k ~= 5 then return nil end
    return v - 5 - (v - 5) % 2 -- the created ms as the varint holds them
  end
  pos = pos + 1
  for _ = 1, 2 do -- the type and the payload
    local n
    n, pos = uvarint(s, pos)
    if not n then return nil end
    pos = pos + n
  end
  local flags = 31 -- every field of k's
  if v >= 3 then
    flags = string.byte(s, pos)
    if not flags then return nil end
    pos = pos + 1
  end
  local bit = 1
  for i = 1, k do
    if flags % (bit * 2) >= bit then
      local n
      n, pos = uvarint(s, pos)
      if not n or i == k then return n end
      if i == 1 then pos = pos + n end
    elseif i == k then
      return nil
    end
    bit = bit * 2
  end
end

-- runAtOf is the run-at of job id's loaded record r as a number: its
-- header's, or when that is '' the job's creation time, which the body
-- holds as ms before the time in the id (a UUIDv7, whose first 12 hex
-- digits are Unix ms; a compact body leaves out a 0); the field stays
-- ''.
local function runAtOf(id, r)
  local s = r.h[F_run_at]
  if s ~= '' then return tonumber(s) end
  local u = bodyField(r, 5) or 0
  local delta
  if u % 2 == 0 then delta = u / 2 else delta = -(u + 1) / 2 end
  return tonumber(string.sub(id, 1, 8) .. string.sub(id, 10, 13), 16) - delta
end

-- readyScore orders pending jobs: priority (higher first), then run-at.
local function readyScore(id, r)
  return num((100 - tonumber(r.h[F_priority])) * 17592186044416 + runAtOf(id, r))
end

local function isFinal(code)
  return code == 'c' or code == 'f' or code == 'x'
end

-- touchUnique records the job's new state in its unique key's entry, and
-- frees a key held until the job is final once it is.
local function touchUnique(id, r)
  if r.uk == '' then return end
  local e = redis.call('HGET', KEY_unique, r.uk)
  if not e then return end
  local hid, untilms = string.match(e, '^([^|]*)|([^|]*)|')
  if hid ~= id then return end
  if untilms == '0' and isFinal(r.h[F_state]) then
    redis.call('HDEL', KEY_unique, r.uk)
  else
    redis.call('HSET', KEY_unique, r.uk, hid .. '|' .. untilms .. '|' .. r.h[F_state])
  end
end

-- jobJID reads the JID of a loaded record r, nil for none: a body of an
-- even version (bodyVersionJID, bodyCompactJID and the others, see
-- record.go) ends with the JID and its length in two bytes.
local function jobJID(r)
  local s = r.rec
  local v = string.byte(s, r.at + #r.uk)
  if not v or v % 2 == 1 then return nil end
  local a, b = string.byte(s, -2, -1)
  local n = a * 256 + b
  return string.sub(s, -2 - n, -3)
end

-- trailerJID reads what would be the JID of a record that does not
-- parse (raw, its text): the body's trailer (see jobJID), whatever its
-- version byte, which the header hides; nil when the text is too short
-- to hold one. The guess frees an entry only if it names the job.
local function trailerJID(raw)
  if type(raw) ~= 'string' or #raw < 3 then return nil end
  local a, b = string.byte(raw, -2, -1)
  local n = a * 256 + b
  if n == 0 or n > #raw - 2 then return nil end
  return string.sub(raw, -2 - n, -3)
end

-- remove deletes a job and its index entries (r is false or nil for a
-- record that does not parse). A unique key held for a period stays held
-- (with the state the job had); one held until the job is final is freed.
-- The job's JID is freed: for a record that does not parse, the JID its
-- trailer would hold, if the index gives it to this very job.
local function remove(id, r)
  flush()
  local raw = not r and cache[id]
  cache[id] = false
  redis.call('HDEL', KEY_jobs, id)
  redis.call('HDEL', KEY_errors, id)
  redis.call('HDEL', KEY_results, id)
  redis.call('HDEL', KEY_reports, id .. ':p', id .. ':l', id .. ':n')
  redis.call('ZREM', KEY_ready, id)
  redis.call('ZREM', KEY_waiting, id)
  redis.call('ZREM', KEY_leases, id)
  redis.call('ZREM', KEY_deadlines, id)
  redis.call('ZREM', KEY_final, id)
  if r then
    if inKey[r.h[F_state]] then redis.call('ZREM', KEYS[inKey[r.h[F_state]]], id) end
  else
    redis.call('ZREM', KEY_in_s, id)
    redis.call('ZREM', KEY_in_r, id)
    redis.call('ZREM', KEY_in_c, id)
    redis.call('ZREM', KEY_in_f, id)
    redis.call('ZREM', KEY_in_x, id)
  end
  finished[#finished + 1] = id
  if r and r.uk ~= '' then
    local e = redis.call('HGET', KEY_unique, r.uk)
    if e then
      local hid, untilms = string.match(e, '^([^|]*)|([^|]*)|')
      if hid == id and untilms == '0' then redis.call('HDEL', KEY_unique, r.uk) end
    end
  end
  local jid
  if r then jid = jobJID(r) else jid = trailerJID(raw) end
  if jid and redis.call('HGET', KEY_jids, jid) == id then redis.call('HDEL', KEY_jids, jid) end
end

-- queueRetention is the queue's retention override for a final state
-- letter, as retentionField writes it ('' for none).
local function queueRetention(code)
  if not overrides then
    overrides = {}
    local kv = redis.call('HGETALL', KEY_settings)
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
  h[F_finished] = now
  h[F_lease_exp] = ''
  h[F_worker] = ''
  if h[F_deadline] ~= '' then redis.call('ZREM', KEY_deadlines, id) end
  defer(pending.leaseRems, id)
  if r.uk ~= '' then touchUnique(id, r) end
  local ret = h[F_retention]
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
  if code ~= 'p' and runAtOf(id, r) > now then
    setState(id, r, code)
    redis.call('ZADD', KEY_waiting, r.h[F_run_at], id)
  else
    setState(id, r, 'p')
    redis.call('ZADD', KEY_ready, readyScore(id, r), id)
  end
  if r.h[F_deadline] ~= '' then redis.call('ZADD', KEY_deadlines, r.h[F_deadline], id) end
  save(id, r)
  touchUnique(id, r)
  return r.h[F_state] == 'p'
end

-- addError appends one attempt error to the job's errors.
local function addError(id, attempt, now, kind, msg, stack)
  local e = cjson.encode({a = tonumber(attempt), t = tonumber(now), k = kind, m = msg, s = stack})
  local old = redis.call('HGET', KEY_errors, id)
  if old and string.len(old) > 2 then
    redis.call('HSET', KEY_errors, id, string.sub(old, 1, -2) .. ',' .. e .. ']')
  else
    redis.call('HSET', KEY_errors, id, '[' .. e .. ']')
  end
end

-- live returns the job a lease names if the lease is live at now, else
-- nil and 1 (lease lost) or 2 (no such job).
local function live(id, tok, now)
  local r = load(id)
  if r == nil then return nil, 2 end
  if r == false then return nil, 1 end
  if r.h[F_state] ~= 'a' or r.h[F_token] ~= tok or now >= ms(r.h[F_lease_exp]) then return nil, 1 end
  return r, 0
end

-- endCancelled ends an active job whose cancel was requested (cancel
-- code 'q'): cancelled, reason requested.
local function endCancelled(id, r, nowS, hasResult)
  r.h[F_cancel] = 'R'
  finish(id, r, 'x', nowS, hasResult)
end

-- cancelDue cancels (reason deadline) up to limit waiting jobs whose
-- deadline is not after now, returning how many.
local function cancelDue(now, nowS, limit)
  local ids = redis.call('ZRANGEBYSCORE', KEY_deadlines, '-inf', nowS, 'LIMIT', 0, limit)
  local n = 0
  for _, id in ipairs(ids) do
    local r = load(id)
    redis.call('ZREM', KEY_deadlines, id)
    if r and (r.h[F_state] == 's' or r.h[F_state] == 'p' or r.h[F_state] == 'r') then
      redis.call('ZREM', KEY_ready, id)
      redis.call('ZREM', KEY_waiting, id)
      r.h[F_cancel] = 'd'
      finish(id, r, 'x', nowS, false)
      n = n + 1
    end
  end
  return n
end

-- promoteDue makes up to limit scheduled and retry jobs whose run-at is
-- not after now pending, returning how many.
local function promoteDue(nowS, limit)
  local ids = redis.call('ZRANGEBYSCORE', KEY_waiting, '-inf', nowS, 'LIMIT', 0, limit)
  local n = 0
  for _, id in ipairs(ids) do
    local r = load(id)
    redis.call('ZREM', KEY_waiting, id)
    if r and (r.h[F_state] == 's' or r.h[F_state] == 'r') then
      setState(id, r, 'p')
      save(id, r)
      redis.call('ZADD', KEY_ready, readyScore(id, r), id)
      touchUnique(id, r)
      n = n + 1
    end
  end
  return n
end

-- extras reads what a job keeps beside its record: {errors, result,
-- progress, log lines, log counts}, false for each one missing.
local function extras(id)
  local rp = redis.call('HMGET', KEY_reports, id .. ':p', id .. ':l', id .. ':n')
  return {redis.call('HGET', KEY_errors, id), redis.call('HGET', KEY_results, id), rp[1], rp[2], rp[3]}
end

-- view is the reply that describes a job (see viewFields in get.go):
-- {code, record, errors, result, progress, logs, log counts, deletion
-- time}; ex comes from extras, read before the job may have been deleted.
local function view(code, id, r, ex)
  return {code, encode(r), ex[1], ex[2], ex[3], ex[4], ex[5], redis.call('ZSCORE', KEY_final, id)}
end

-- hasUniqueFor reports whether the job was enqueued with a UniqueFor
-- period (bodyField 3; a zero UniqueFor is the varint 0, or left out).
local function hasUniqueFor(r)
  local u = bodyField(r, 3)
  return u ~= nil and u ~= 0
end

-- retryJob sends a failed or cancelled job back to pending at now (see
-- backend.RetryParams). It returns 0 when done, or 5 and the holder's id
-- when another job holds the job's unique key (nothing changed).
local function retryJob(id, r, now, nowS)
  local take = false
  if r.uk ~= '' and not hasUniqueFor(r) then
    local e = redis.call('HGET', KEY_unique, r.uk)
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
  r.h[F_run_at] = nowS
  if tonumber(r.h[F_max_attempts]) <= tonumber(r.h[F_attempt]) then r.h[F_max_attempts] = num(tonumber(r.h[F_attempt]) + 1) end
  r.h[F_finished] = ''
  r.h[F_cancel] = ''
  if r.h[F_deadline] ~= '' and tonumber(r.h[F_deadline]) <= now then r.h[F_deadline] = '' end
  redis.call('ZREM', KEY_final, id)
  redis.call('HDEL', KEY_results, id)
  setState(id, r, 'p')
  redis.call('ZADD', KEY_ready, readyScore(id, r), id)
  if r.h[F_deadline] ~= '' then redis.call('ZADD', KEY_deadlines, r.h[F_deadline], id) end
  save(id, r)
  if take then
    redis.call('HSET', KEY_unique, r.uk, id .. '|0|p')
    redis.call('ZREM', KEY_unique_ends, r.uk)
  else
    touchUnique(id, r)
  end
  return 0
end

-- enqueueJobs is the enqueue scripts' run (see lua/enqueue.lua for its
-- ARGV and reply): enqueue.lua's calls pass no JIDs and no KEY_jids,
-- enqueue_jid.lua's both.
local function enqueueJobs()
  local stale = checkQueue(ARGV[4], true)
  if stale then return stale end
  local now = tonumber(ARGV[1])
  local n = tonumber(ARGV[3])
  local out = {}
  local woke, asked = false, true
  local jidAt = 0
  if #ARGV > 4 + n * 7 then jidAt = 5 + n * 7 end
  for i = 0, n - 1 do
    local b = 5 + i * 7
    local id, st, score, dl, uk, untilms, rec = ARGV[b], ARGV[b + 1], ARGV[b + 2], ARGV[b + 3], ARGV[b + 4], ARGV[b + 5], ARGV[b + 6]
    local dupId, dupState, elsewhere
    local jid = ''
    if jidAt > 0 then jid = ARGV[jidAt + i] end
    if jid ~= '' then
      local hid = redis.call('HGET', KEY_jids, jid)
      if hid and hid ~= id then
        local hrec = redis.call('HGET', KEY_jobs, hid)
        if hrec then dupId, dupState = hid, stateOf(hrec) else elsewhere = hid end
      end
    end
    if dupId or elsewhere then
    elseif uk ~= '' then
      local e = redis.call('HGET', KEY_unique, uk)
      if e then
        local hid, hu, hs = string.match(e, '^([^|]*)|([^|]*)|(.*)$')
        if hid and hid ~= id then
          local held
          if hu == '0' then held = not isFinal(hs) else held = now < tonumber(hu) end
          if held then dupId, dupState = hid, hs end
        end
      end
    end
    if elsewhere then
      out[#out + 1] = {3, elsewhere}
      asked = false
    elseif dupId then
      out[#out + 1] = {1, dupId, dupState}
      asked = false
    elseif redis.call('HSETNX', KEY_jobs, id, rec) == 0 then
      if sameJob(redis.call('HGET', KEY_jobs, id), rec) then
        out[#out + 1] = 0
      else
        out[#out + 1] = 2
        asked = false
      end
    else
      if st == 'p' then
        redis.call('ZADD', KEY_ready, score, id)
        woke = true
      else
        redis.call('ZADD', KEY_waiting, score, id)
        move(id, false, st)
      end
      if dl ~= '' then redis.call('ZADD', KEY_deadlines, dl, id) end
      if uk ~= '' then
        redis.call('HSET', KEY_unique, uk, id .. '|' .. untilms .. '|' .. st)
        if untilms ~= '0' then redis.call('ZADD', KEY_unique_ends, untilms, uk) else redis.call('ZREM', KEY_unique_ends, uk) end
      end
      if jid ~= '' then redis.call('HSET', KEY_jids, jid, id) end
      out[#out + 1] = 0
    end
  end
  finalize(ARGV[1])
  if woke then redis.call('PUBLISH', ARGV[2], '1') end
  if asked then return 0 end
  return out
end

-- leanClear reports whether the queue has no settings (so it is not
-- paused), no scheduled or retry job and no job with a deadline, as
-- most queues of idle workers: one command tells, where the checks it
-- spares take three.
local function leanClear()
  return redis.call('EXISTS', KEY_deadlines, KEY_waiting, KEY_settings) == 0
end

-- queueIdle reports whether the queue has no pending job besides what
-- leanClear asks: one command tells a claim that it has nothing to take
-- and nothing to do, as at an idle worker's queue.
local function queueIdle()
  return redis.call('EXISTS', KEY_ready, KEY_deadlines, KEY_waiting, KEY_settings) == 0
end

-- markClaimed makes the loaded record r of job id active under a new
-- claim (attempt and lease token counted up, lease until exp, started at
-- nowS, by worker), as every claim does before it writes the record, and
-- returns the job's attempt errors so far ('' before its first retry).
local function markClaimed(id, r, exp, nowS, worker)
  local h = r.h
  local errs = ''
  if h[F_token] ~= '0' then errs = redis.call('HGET', KEY_errors, id) or '' end
  setState(id, r, 'a')
  h[F_attempt] = succ(h[F_attempt])
  h[F_token] = succ(h[F_token])
  h[F_lease_exp] = exp
  h[F_started] = nowS
  h[F_worker] = worker
  return errs
end

-- claimLean is claim.lua's claim of one queue for a claim with no type
-- filter and no byte budget, in a script that passes only the keys it
-- touches (lua/enqueue_claim.lua): jobs, errors, ready, waiting, leases,
-- deadlines, unique and settings. It leases up to max jobs from the head
-- of the ready set as claim.lua does, and returns {stopped, bytes} then
-- {id, record, errors} per job (claim.lua's reply before it left out
-- the empty errors, see claimedFlat in claim.go), or nil, having
-- changed nothing, when the queue has due work that only claim.lua does
-- (a waiting job whose deadline has come, a scheduled or retry job
-- due): the caller then runs claim.lua. The queue's mark is the
-- caller's to check.
local function claimLean(max, exp, worker, nowS)
  if not leanClear() then
    if redis.call('HGET', KEY_settings, 'paused') == '1' then return {'0', '0'} end
    if #redis.call('ZRANGEBYSCORE', KEY_deadlines, '-inf', nowS, 'LIMIT', 0, 1) > 0
      or #redis.call('ZRANGEBYSCORE', KEY_waiting, '-inf', nowS, 'LIMIT', 0, 1) > 0 then
      return nil
    end
  end
  local ids = redis.call('ZRANGE', KEY_ready, '0', num(max - 1))
  prefetch(ids)
  local out, n = {'0', '0'}, 2
  for _, id in ipairs(ids) do
    local r = load(id)
    if r then
      local h = r.h
      local errs = markClaimed(id, r, exp, nowS, worker)
      local rec = save(id, r)
      defer(pending.leaseAdds, exp, id)
      if h[F_deadline] ~= '' then redis.call('ZREM', KEY_deadlines, id) end
      if r.uk ~= '' then touchUnique(id, r) end
      out[n + 1], out[n + 2], out[n + 3] = id, rec, errs
      n = n + 3
    elseif r == false then
      out[n + 1], out[n + 2], out[n + 3] = id, '', ''
      n = n + 3
    end
  end
  if #ids > 0 then redis.call('ZREMRANGEBYRANK', KEY_ready, '0', num(#ids - 1)) end
  finalize(nowS)
  return out
end

-- complete.lua: finishes jobs of one queue: completed, or cancelled
-- when a cancel was requested (the result is stored either way). Each
-- completion counts as processed in the minute of now.
--
-- ARGV: 1 now, 2 retried ("1" when an earlier try of this call may have
-- run), 3 "1" when the call stores results, 4 "1" when no job is named
-- twice, then per job its id, token and, when the call stores results,
-- its result ('' for none): most calls store none, and an argument costs
-- Redis about 500 instructions.
-- On a retried call a job already completed (or cancelled) under the
-- same token counts as completed by this call.
--
-- Returns per item 0 (completed), 1 (lease lost) or 2 (no such job);
-- or 0 alone when every item was completed (as most calls are: the
-- list of zeros costs Redis its making and sending).
--
-- Most completions take a short way: a job without a deadline, unique
-- key, cancel request or retention of its own, in a queue without a
-- retention override for completed jobs, kept the default day. Its
-- writes go straight onto the pending lists (and the completed jobs' in
-- set onto a list of this script's), which is what finish would gather
-- for it, without finish's branches, move's tables and defer's calls,
-- which cost about a sixth of a completion's instructions in Redis.
--
-- In the form "complete plain" (scripts.go) it has the keys of the
-- short way only (jobs, leases, final, in_c, settings and minutes; the
-- others nil), for calls that store no results: it takes at most 1,000
-- jobs, so it writes nothing before the last one's turn, and replies -1,
-- having changed nothing, at a job that needs more than the short way
-- (or -2 when the queue overrides the retention of completed jobs, so
-- that every job does): the caller then runs complete.lua.
--
-- KEYS: the queue's keys (see common.lua).

local now, nowS = tonumber(ARGV[1]), ARGV[1]
-- step is how many arguments a job takes; the k-th job's id is
-- ARGV[5 + (k - 1) * step]. recs holds the records as read, the k-th
-- job's at k: cache takes each one only when its job's turn comes, so a
-- job named twice sees its own change; the short ways leave cache alone
-- when no job is (distinct), which saves Redis about 650 instructions per
-- job. A long call reads them in chunks (prefetch) into cache.
local step = 2
if ARGV[3] == '1' then step = 3 end
local distinct = ARGV[4] == '1'
local nIds = (#ARGV - 4) / step
local plainForm = KEY_errors == nil
if plainForm and (step == 3 or nIds > 1000) then return -1 end
local recs = {}
if nIds > 1000 then
  local ids = {}
  for k = 1, nIds do ids[k] = ARGV[5 + (k - 1) * step] end
  prefetch(ids)
elseif nIds > 0 then
  local ids = {}
  for k = 1, nIds do ids[k] = ARGV[5 + (k - 1) * step] end
  recs = redis.call('HMGET', KEY_jobs, unpack(ids, 1, nIds))
end
-- out is filled from the first item that was not completed on (the
-- items before it take 0 then): until then nOut only counts.
local out, nOut, all = {}, 0, true
-- The deletion time of a job that takes the short way, or nil when no
-- job does (the queue overrides the retention, or the time is past
-- backend.MaxTime).
local keepUntil
if queueRetention('c') == '' and now + 86400000 < 9214646400000 then keepUntil = num(now + 86400000) end
if plainForm and not keepUntil then return -2 end
-- The pending lists and how long they are. finish, and a flush, may
-- replace them (flush sends a list and starts a new one): after either
-- the short way takes them afresh.
local sets, rems, finals, nSets, nRems, nFinals, nFinished
local function lists()
  sets, rems, finals = pending.sets, pending.leaseRems, pending.finalAdds
  nSets, nRems, nFinals, nFinished = #sets, #rems, #finals, #finished
end
lists()
local inC, nInC = {}, 0 -- ZADD arguments for the completed jobs' in set
-- The completed header (with its newline) made from each shared claimed
-- header (r.head, see remember): jobs claimed together and completed
-- together share both, so they take it with their own tail in one
-- concatenation instead of encoding the header again.
local completedHeads = {}
local nShort = 0 -- jobs completed the short way from parsedActive (for tally)
for i = 5, #ARGV, step do
  local id, tok = ARGV[i], ARGV[i + 1]
  local res = ''
  if step == 3 then res = ARGV[i + 2] end
  local old = cache[id]
  if old == nil then old = recs[(i - 5) / step + 1] end
  local m = old and parsedActive[old]
  local r, code
  if m and m[7] and keepUntil and m[1][F_token] == tok and now < m[8] and movedFrom[id] == nil then
    -- The short way from the record's parsedActive entry (its fields
    -- read, not copied; an entry is of an active job with a lease): what
    -- live and the short way below do. The writes onto the pending lists
    -- are the short way's below, line for line, on purpose: a local
    -- function for both cost Redis about 1,500 instructions more per
    -- completion (TestCallgrindPhases, 3 % of a drained job).
    local h = m[1]
    forget(old, m)
    if res ~= '' then redis.call('HSET', KEY_results, id, res) end
    nShort = nShort + 1
    local tail, from = m[4], m[6]
    local head = from and completedHeads[from]
    local rec
    if head then
      rec = head .. tail
    else
      rec = encodeFinished(h, 'c', nowS, tail)
      if from then completedHeads[from] = string.sub(rec, 1, #rec - #tail) end
    end
    if not distinct then cache[id] = rec end
    sets[nSets + 1], sets[nSets + 2] = id, rec
    nSets = nSets + 2
    rems[nRems + 1] = id
    nRems = nRems + 1
    finals[nFinals + 1], finals[nFinals + 2] = keepUntil, id
    nFinals = nFinals + 2
    finished[nFinished + 1] = id
    nFinished = nFinished + 1
    inC[nInC + 1], inC[nInC + 2] = '0', id
    nInC = nInC + 2
    if nSets >= 2000 then
      flush()
      lists()
    end
    if nInC >= 4000 then
      redis.call('ZADD', KEY_in_c, unpack(inC))
      inC, nInC = {}, 0
    end
    code = 0
  else
    if cache[id] == nil then cache[id] = old end
    r, code = live(id, tok, now)
  end
  if r then
    local h = r.h
    if res ~= '' then redis.call('HSET', KEY_results, id, res) end
    count(false)
    if keepUntil and h[F_cancel] == '' and h[F_deadline] == '' and r.uk == '' and h[F_retention] == '' and movedFrom[id] == nil then
      h[F_state], h[F_finished], h[F_lease_exp], h[F_worker] = 'c', nowS, '', ''
      local rec
      local head = r.head and completedHeads[r.head]
      if head and r.tail then
        rec = head .. r.tail
      else
        rec = encode(r)
        if r.head then completedHeads[r.head] = string.sub(rec, 1, #rec - #r.tail) end
      end
      if not distinct then cache[id] = rec end
      sets[nSets + 1], sets[nSets + 2] = id, rec
      nSets = nSets + 2
      rems[nRems + 1] = id
      nRems = nRems + 1
      finals[nFinals + 1], finals[nFinals + 2] = keepUntil, id
      nFinals = nFinals + 2
      finished[nFinished + 1] = id
      nFinished = nFinished + 1
      inC[nInC + 1], inC[nInC + 2] = '0', id
      nInC = nInC + 2
      if nSets >= 2000 then
        flush()
        lists()
      end
      if nInC >= 4000 then
        redis.call('ZADD', KEY_in_c, unpack(inC))
        inC, nInC = {}, 0
      end
    else
      if plainForm then return -1 end
      if h[F_cancel] == 'q' then
        endCancelled(id, r, nowS, res ~= '')
      else
        finish(id, r, 'c', nowS, res ~= '')
      end
      lists()
    end
  elseif code == 1 and ARGV[2] == '1' then
    local o = load(id)
    if o and (o.h[F_state] == 'c' or o.h[F_state] == 'x') and o.h[F_token] == tok then code = 0 end
  end
  nOut = nOut + 1
  if code ~= 0 and all then
    all = false
    for k = 1, nOut - 1 do out[k] = 0 end
  end
  if not all then out[nOut] = code end
end
if nInC > 0 then redis.call('ZADD', KEY_in_c, unpack(inC)) end
tally.p = tally.p + nShort
finalize(nowS)
if all then return 0 end
return out

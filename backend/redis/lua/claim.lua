-- claim.lua: leases up to max jobs of one queue. A paused queue hands
-- out nothing (and the script changes nothing). Otherwise it first
-- cancels the waiting jobs whose deadline has come and promotes the due
-- scheduled and retry jobs (up to promoteBound of each), then pops the
-- best pending jobs.
--
-- With a byte budget it counts each job's payload length (read from the
-- record's body, see appendBody) and stops before the first job whose
-- payload would take the bytes taken over the budget, unless no job of
-- the claim was taken yet (ARGV 8): that job and the ones after it stay
-- in the ready set, untouched.
--
-- With types (ARGV 10 on) it takes only jobs of those types: it walks the
-- ready set from its head in chunks, passing over the jobs of other types
-- (left in place), until it has max jobs or has passed over more than
-- ARGV 9 of them, and removes from the ready set only the ids it took.
--
-- ARGV: 1 now, 2 max, 3 lease expiry, 4 worker id (hex), 5 promote bound,
-- 6 queue name, 7 payload bytes left in the claim's budget ("" for no
-- bound), 8 "1" when earlier queues of the claim took a job already;
-- with a type filter 9 how many jobs of other types to pass over at most,
-- 10... the types.
--
-- Returns {stopped, bytes, n} (stopped "1" when it stopped for the
-- budget, bytes the payload bytes taken, n how many claimed jobs have
-- attempt errors) followed by a flat list of {id, record} per claimed
-- job, best first, then {position, errors} for those n jobs (position
-- from 1 in that list, ascending): most jobs have none. A record that
-- does not parse is dropped from the ready set and returned empty; in the
-- form "claim plain", the empty list when it left the claim to claim.lua
-- (see below). Fails
-- with KYUSTALE or KYUUNMARKED (see checkQueue), changing nothing, unless
-- the keys are marked as this queue's.
--
-- KEYS: the queue's keys (see common.lua); in the form "claim plain"
-- (for a claim with no type filter and no byte budget) those of "claim
-- lean", the others nil.

local stale = checkQueue(ARGV[6], true)
if stale then return stale end
local now, nowS = tonumber(ARGV[1]), ARGV[1]
-- A queue with no settings (so not paused), no waiting job and no job
-- with a deadline, as a queue being drained mostly is, has nothing to
-- cancel or promote: one command (leanClear) tells, for three.
if not leanClear() then
  if redis.call('HGET', KEY_settings, 'paused') == '1' then return {'0', '0', '0'} end
  if KEY_final == nil then
    -- "claim plain" (scripts.go) has no keys for cancelDue and
    -- promoteDue: with a job due for either it replies with the empty
    -- list, having changed nothing, and the caller runs claim.lua.
    if #redis.call('ZRANGEBYSCORE', KEY_deadlines, '-inf', nowS, 'LIMIT', 0, 1) > 0
      or #redis.call('ZRANGEBYSCORE', KEY_waiting, '-inf', nowS, 'LIMIT', 0, 1) > 0 then
      return {}
    end
  else
    local bound = tonumber(ARGV[5])
    cancelDue(now, nowS, bound)
    promoteDue(nowS, bound)
  end
end
-- ZRANGE and ZREMRANGEBYRANK rather than ZPOPMIN, whose reply would
-- carry every score as text for nothing.
local max = tonumber(ARGV[2])
local ids, loaded
-- recs holds the records of ids as read, by position, where cache holds
-- none (a job cancelDue or promoteDue read before); a long claim reads
-- them in chunks (prefetch) into cache instead.
local recs = {}
if #ARGV > 8 then
  -- The ids to take, in order, with their loaded records (a missing or
  -- corrupt record is taken too, to be dropped as below).
  local want = {}
  for i = 10, #ARGV do want[ARGV[i]] = true end
  local scan, matched, others, from = tonumber(ARGV[9]), 0, 0, 0
  ids, loaded = {}, {}
  local chunk = math.min(max + 100, 1000)
  while matched < max and others <= scan do
    local part = redis.call('ZRANGE', KEY_ready, from, from + chunk - 1)
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
  -- Numbers as text (num), as finalize passes them.
  ids = redis.call('ZRANGE', KEY_ready, '0', num(max - 1))
  if #ids > 1000 then
    prefetch(ids)
  elseif #ids > 0 then
    recs = redis.call('HMGET', KEY_jobs, unpack(ids))
  end
end
local out, n = {'0', '0', '0'}, 3
-- The positions and errors of the claimed jobs that have any.
local errOut, nErr = {}, 0
local exp, worker = ARGV[3], ARGV[4]
local budget, took = tonumber(ARGV[7]), ARGV[8] == '1'
local used, done = 0, 0
-- The pending lists of records and lease entries, filled here without
-- save's and defer's calls (a flush starts new ones).
local sets, leaseAdds = pending.sets, pending.leaseAdds
local nSets, nLeases = #sets, #leaseAdds
-- The claimed header (with its newline) made from each shared pending
-- header (load's r.head): jobs that share the one share the other (the
-- same attempt, token, lease, start and worker), so they take it with
-- their own tail in one concatenation instead of encoding the header
-- again. A header of one job's own is not kept: keeping it would cost
-- that job more than it saves.
local claimedHeads = {}
-- The short way: once a job of a shared pending header (not retried, no
-- unique key, no deadline) was claimed, every job whose record starts
-- with that header is claimed by putting the claimed header before its
-- tail, with no parse, no copy of the fields and no tables of its own
-- (its parsedActive entry shares fastFields). fastFrom is that pending
-- header, fastAt where its tail starts, fastTo the claimed header. The
-- header of a bare record (common.lua) is '', which every record starts
-- with: for it fastFrom is instead a pattern that only bare records
-- match, and fastLiteral false.
local fastFrom, fastAt, fastTo, fastFields, fastPlain, fastExp
local fastLiteral = true
local short = not loaded and not budget
for k, id in ipairs(ids) do
  local old = cache[id]
  if old == nil then old = recs[k] end
  if fastFrom and old and string.find(old, fastFrom, 1, fastLiteral) == 1 then
    done = done + 1
    -- move(id, 'p', 'a'): neither state has an in set.
    if movedFrom[id] ~= nil then movedTo[id] = 'a' end
    local tail = string.sub(old, fastAt)
    local rec = fastTo .. tail
    -- Nothing after reads the job again: cache is left as it is. The
    -- writes onto the pending lists repeat the slow way's below on
    -- purpose, as complete.lua's short ways do (a local function per job
    -- costs Redis more than the lines it saves).
    if memoize then
      local m = parsedActive[rec]
      if m then m[5] = m[5] + 1 else keep(rec, fastFields, '', tail, fastTo, fastPlain, fastExp) end
    end
    sets[nSets + 1], sets[nSets + 2] = id, rec
    nSets = nSets + 2
    leaseAdds[nLeases + 1], leaseAdds[nLeases + 2] = exp, id
    nLeases = nLeases + 2
    if nSets >= 2000 or nLeases >= 2000 then
      flush()
      sets, leaseAdds = pending.sets, pending.leaseAdds
      nSets, nLeases = #sets, #leaseAdds
    end
    out[n + 1], out[n + 2] = id, rec
    n = n + 2
  else
    local r
    if loaded then
      r = loaded[k]
    else
      if cache[id] == nil then cache[id] = old end
      r = load(id)
    end
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
      local plain = short and r.head and h[F_state] == 'p' and h[F_token] == '0' and h[F_deadline] == '' and r.uk == ''
      local errs = markClaimed(id, r, exp, nowS, worker)
      -- What save does, and defer for the lease.
      local rec
      local head = r.head and claimedHeads[r.head]
      if head then
        local tail = r.tail
        if not tail then
          tail = string.sub(r.rec, r.at)
          r.tail = tail
        end
        rec = head .. tail
      else
        rec = encode(r)
        if r.head then
          head = string.sub(rec, 1, #rec - #r.tail)
          claimedHeads[r.head] = head
        end
      end
      if plain then
        fastFrom, fastAt, fastTo, fastFields = r.head, #r.head + 1, head, copyHeader(h)
        fastPlain, fastExp = plainJob(h, ''), ms(exp)
        -- A header is matched as text: one of a priority below 0 holds a
        -- "-", which a pattern reads as a repetition.
        fastLiteral = r.head ~= ''
        if not fastLiteral then fastFrom = '^[\1-' .. string.char(BODY_LAST_VERSION) .. ']' end
      end
      cache[id] = rec
      if memoize then remember(rec, r, head) end
      sets[nSets + 1], sets[nSets + 2] = id, rec
      nSets = nSets + 2
      leaseAdds[nLeases + 1], leaseAdds[nLeases + 2] = exp, id
      nLeases = nLeases + 2
      if nSets >= 2000 or nLeases >= 2000 then
        flush()
        sets, leaseAdds = pending.sets, pending.leaseAdds
        nSets, nLeases = #sets, #leaseAdds
      end
      if h[F_deadline] ~= '' then redis.call('ZREM', KEY_deadlines, id) end
      if r.uk ~= '' then touchUnique(id, r) end
      out[n + 1], out[n + 2] = id, rec
      n = n + 2
      if errs ~= '' then
        errOut[nErr + 1], errOut[nErr + 2] = num((n - 3) / 2), errs
        nErr = nErr + 2
      end
    elseif r == false then
      out[n + 1], out[n + 2] = id, ''
      n = n + 2
    end
  end
end
-- Nothing in the loop touches the ready set: without a type filter the
-- first done ids are still its first.
if loaded then
  for i = 1, done, 500 do redis.call('ZREM', KEY_ready, unpack(ids, i, math.min(i + 499, done))) end
elseif done > 0 then
  redis.call('ZREMRANGEBYRANK', KEY_ready, '0', num(done - 1))
end
out[2] = num(used)
if nErr > 0 then
  out[3] = num(nErr / 2)
  for i = 1, nErr do out[n + i] = errOut[i] end
end
finalize(nowS)
return out

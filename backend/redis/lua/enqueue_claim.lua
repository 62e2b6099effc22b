-- enqueue_claim.lua: "enqueue lean" (lua/enqueue_lean.lua) and the claim
-- of a waiting claim of the same queue in one script, for an enqueue
-- that fills a waiting claim (handoff.go): one script run instead of
-- two, whose keys and arguments Redis passes once (about a thousand
-- instructions each). It writes new jobs of one queue that are all
-- pending, with no deadline, unique key or JID, then claims up to max
-- jobs of the queue as claim.lua does for a claim of one queue with no
-- type filter and no byte budget (claimLean in common.lua).
--
-- ARGV: 1 queue name, 2 now, 3 max, 4 lease expiry, 5 worker id (hex),
-- then per job 3 values: id, ready score, record; with one job, ARGV 9
-- is its claimed record: the record as this claim would write it (see
-- claimedRecord in enqueueclaim.go).
--
-- Returns the bare 0 when it wrote a lone job claimed, as ARGV 9 has it
-- (the fast path below): the caller holds all the claim would return.
-- Otherwise it returns {enqueue reply, claim reply...}: the enqueue reply
-- is what "enqueue lean" returns (0, or a list with per job 0 or 2); the
-- claim reply's values, claimLean's (common.lua), follow it. When the
-- queue has due work that only claim.lua does, the reply is the
-- enqueue's alone: the script claimed nothing, and the caller runs
-- claim.lua. Publishes on
-- the queue's wake channel (keys.wakeChannel) when it wrote a job that
-- its claim did not take, unless it left the claim to claim.lua: the
-- caller then owes the wake-up for the jobs that claim leaves. Fails
-- with KYUSTALE or KYUUNMARKED (see checkQueue), writing nothing, unless
-- the keys are marked as this queue's.
--
-- KEYS: jobs, errors, ready, waiting, leases, deadlines, unique,
-- queue_name and settings, in that order (see scriptSpec.keys).

local stale = checkQueue(ARGV[1], true)
if stale then return stale end
-- A lone job goes straight to active, written as the claim would write
-- it, when nothing else could be claimed before it and the claim would
-- do nothing else: the queue is idle (queueIdle). Its pending record is
-- then never written, read or parsed here, and the reply carries nothing
-- the caller sent: a table of the claimed record cost Redis its making
-- and its conversion, and Lua two more strings of the record's length.
if #ARGV == 9 and queueIdle() then
  local id = ARGV[6]
  if redis.call('HSETNX', KEY_jobs, id, ARGV[9]) == 1 then
    redis.call('ZADD', KEY_leases, 'inf', leaseAnchor, ARGV[4], id)
    return 0
  end
  -- The id is taken: the run below tells by whom.
end
-- The run starts here, not before the fast path, which needs nothing of
-- its state (scriptSpec.resetsLate in scripts.go); by EVALSHA the state
-- is fresh anyway.
reset()
local out
-- written lists the ids written, whose records are in cache: the claim
-- reads them from there, not from the jobs hash.
local written, nw = {}, 0
for b = 6, #ARGV - 2, 3 do
  local id, score, rec = ARGV[b], ARGV[b + 1], ARGV[b + 2]
  if redis.call('HSETNX', KEY_jobs, id, rec) == 0 then
    if not sameJob(redis.call('HGET', KEY_jobs, id), rec) then
      if not out then
        out = {}
        for k = 1, (b - 6) / 3 do out[k] = 0 end
      end
      out[#out + 1] = 2
    elseif out then
      out[#out + 1] = 0
    end
  else
    redis.call('ZADD', KEY_ready, score, id)
    cache[id] = rec
    nw = nw + 1
    written[nw] = id
    if out then out[#out + 1] = 0 end
  end
end
local claimed = claimLean(tonumber(ARGV[3]), ARGV[4], ARGV[5], ARGV[2])
if not claimed then return {out or 0} end
if nw > 0 then
  local got = {}
  for i = 3, #claimed, 3 do got[claimed[i]] = true end
  for i = 1, nw do
    if not got[written[i]] then
      redis.call('PUBLISH', string.match(KEY_jobs, '^{(.*):%d+}:jobs$') .. ':wake:' .. ARGV[1], '1')
      break
    end
  end
end
table.insert(claimed, 1, out or 0)
return claimed

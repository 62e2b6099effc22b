-- enqueue.lua: writes new jobs of one queue.
--
-- ARGV: 1 now, 2 wake channel, 3 count, 4 queue name, then per job 7
-- values: id, state letter (p or s), score (ready score for p, run-at for
-- s), deadline ("" for none), unique key ("" for none), unique until ("0":
-- until final), record; then, only when a job of the call has a JID, one
-- JID per job ("" for none), so a call without any sends what it did
-- before JIDs.
--
-- Returns 0 when every job was written as asked (an id already holding
-- this very job, whatever state it has reached since, was written by an
-- earlier try of the same call, and counts as written; see sameJob).
-- Otherwise it returns a list with per job 0 (written as asked), 2 when
-- the id is another job's (two ids collided; nothing was written for this
-- job), or {1, id, state letter} for a duplicate:
-- the id and state are the holder's, of the JID (checked first) or of the
-- unique key, or {3, id} when the JID's holder is a job of another queue
-- (the caller reads its state). Bare numbers, not
-- tables, wherever they suffice: Redis converts every table of a reply to
-- an array, at a cost above a job's own writes (about 4,000 instructions
-- for the one-element list a single enqueue used to get).
-- Publishes on the wake channel when a job is pending. Fails with
-- KYUSTALE or KYUUNMARKED (see checkQueue), writing nothing, unless the
-- keys are marked as this queue's.
--
-- KEYS: only jobs, ready, waiting, deadlines, unique, unique_ends,
-- queue_name, in_s and jids (see its entry in scripts.go), each at its
-- position among the queue's keys.

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
      if hrec then dupId, dupState = hid, string.sub(hrec, 1, 1) else elsewhere = hid end
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

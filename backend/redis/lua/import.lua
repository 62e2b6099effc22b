-- import.lua: writes whole jobs of one queue with their history (see
-- Import in import.go).
--
-- ARGV: 1 now, 2 wake channel, 3 count, 4 queue name, then per job 14
-- values: id, state letter, record, score (ready score for p, run-at for s
-- and r, "" otherwise), deadline ("" for none), unique key ("" when the
-- job holds none), unique until ("0": until final), then errors, result,
-- progress, logs, log counts and deletion time as their keys hold them
-- ("" for none of each), then the JID ("" for none).
--
-- Returns per job 0 when it was written, 2 when the id exists in this
-- queue (nothing written), {4, holder id} when its JID is held by another
-- job (checked first; nothing written), or {1, holder id} when its unique
-- key is held (nothing written). Publishes on the wake channel when a job is pending.
-- Fails with KYUSTALE or KYUUNMARKED (see checkQueue), writing nothing.
--
-- KEYS: the queue's keys (see common.lua).

local stale = checkQueue(ARGV[4], true)
if stale then return stale end
local now = tonumber(ARGV[1])
local n = tonumber(ARGV[3])
local out = {}
local woke = false
for i = 0, n - 1 do
  local b = 5 + i * 14
  local id, st, rec, score, dl, uk, untilms = ARGV[b], ARGV[b + 1], ARGV[b + 2], ARGV[b + 3], ARGV[b + 4], ARGV[b + 5], ARGV[b + 6]
  local errs, res, prog, logs, counts, fin = ARGV[b + 7], ARGV[b + 8], ARGV[b + 9], ARGV[b + 10], ARGV[b + 11], ARGV[b + 12]
  local jid = ARGV[b + 13]
  local dupId, jidHolder
  if jid ~= '' then
    jidHolder = redis.call('HGET', KEY_jids, jid)
    if jidHolder == id then jidHolder = nil end
  end
  -- A job that nothing else can refuse (no unique key, no jid held by
  -- another job) is written with its existence check, in one call.
  local direct = uk == '' and not jidHolder
  local there
  if direct then
    there = redis.call('HSETNX', KEY_jobs, id, rec) == 0
  else
    there = redis.call('HEXISTS', KEY_jobs, id) == 1
  end
  if there then
    out[#out + 1] = 2
  elseif jidHolder then
    out[#out + 1] = {4, jidHolder}
  else
    if uk ~= '' then
      local e = redis.call('HGET', KEY_unique, uk)
      if e then
        local hid, hu, hs = string.match(e, '^([^|]*)|([^|]*)|(.*)$')
        if hid and hid ~= id then
          local held
          if hu == '0' then held = not isFinal(hs) else held = now < tonumber(hu) end
          if held then dupId = hid end
        end
      end
    end
    if dupId then
      out[#out + 1] = {1, dupId}
    else
      if not direct then redis.call('HSET', KEY_jobs, id, rec) end
      if st == 'p' then
        redis.call('ZADD', KEY_ready, score, id)
        woke = true
      elseif st == 's' or st == 'r' then
        redis.call('ZADD', KEY_waiting, score, id)
      end
      move(id, false, st)
      if dl ~= '' then redis.call('ZADD', KEY_deadlines, dl, id) end
      if uk ~= '' then
        redis.call('HSET', KEY_unique, uk, id .. '|' .. untilms .. '|' .. st)
        if untilms ~= '0' then redis.call('ZADD', KEY_unique_ends, untilms, uk) else redis.call('ZREM', KEY_unique_ends, uk) end
      end
      if errs ~= '' then redis.call('HSET', KEY_errors, id, errs) end
      if res ~= '' then redis.call('HSET', KEY_results, id, res) end
      if prog ~= '' then redis.call('HSET', KEY_reports, id .. ':p', prog) end
      if logs ~= '' then redis.call('HSET', KEY_reports, id .. ':l', logs) end
      if counts ~= '' then redis.call('HSET', KEY_reports, id .. ':n', counts) end
      if fin ~= '' then redis.call('ZADD', KEY_final, fin, id) end
      if jid ~= '' then redis.call('HSET', KEY_jids, jid, id) end
      out[#out + 1] = 0
    end
  end
end
finalize(ARGV[1])
if woke then redis.call('PUBLISH', ARGV[2], '1') end
return out

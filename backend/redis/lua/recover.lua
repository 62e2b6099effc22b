-- recover.lua: ends up to limit expired leases of one queue: the job
-- goes back to pending, or to failed when its attempts are used up, or
-- ends cancelled when a cancel was requested. Each counts as processed
-- and failed in the minute of now.
--
-- ARGV: 1 now, 2 limit, 3 wake channel. Returns {recovered, failed}.
--
-- KEYS: the queue's keys (see common.lua).

local now, nowS = tonumber(ARGV[1]), ARGV[1]
local ids = redis.call('ZRANGEBYSCORE', KEY_leases, '-inf', nowS, 'LIMIT', 0, tonumber(ARGV[2]))
local moved, failed = 0, 0
local woke = false
prefetch(ids)
for _, id in ipairs(ids) do
  local r = load(id)
  redis.call('ZREM', KEY_leases, id)
  if r and r.h[F_state] == 'a' then
    addError(id, r.h[F_attempt], nowS, 'lease_expired', 'lease expired', '')
    count(true)
    r.h[F_lease_exp] = ''
    r.h[F_worker] = ''
    moved = moved + 1
    if r.h[F_cancel] == 'q' then
      endCancelled(id, r, nowS, false)
    elseif tonumber(r.h[F_attempt]) >= tonumber(r.h[F_max_attempts]) then
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

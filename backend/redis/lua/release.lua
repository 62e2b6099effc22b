-- release.lua: hands active jobs of one queue back to pending, or ends
-- them cancelled when a cancel was requested.
--
-- ARGV: 1 now, 2 wake channel, then pairs of id, token.
--
-- Returns per item 0 (released), 1 (lease lost) or 2 (no such job).
--
-- KEYS: the queue's keys (see common.lua).

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
    addError(id, r.h[F_attempt], nowS, 'interrupted', 'released', '')
    redis.call('ZREM', KEY_leases, id)
    r.h[F_attempt] = num(tonumber(r.h[F_attempt]) - 1)
    r.h[F_lease_exp] = ''
    r.h[F_worker] = ''
    if r.h[F_cancel] == 'q' then
      endCancelled(id, r, nowS, false)
    else
      setState(id, r, 'p')
      redis.call('ZADD', KEY_ready, readyScore(id, r), id)
      if r.h[F_deadline] ~= '' then redis.call('ZADD', KEY_deadlines, r.h[F_deadline], id) end
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

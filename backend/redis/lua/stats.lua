-- stats.lua: reads one queue's statistics.
--
-- ARGV: 1 the first minute (ms), 2 the number of minutes n, 3 the first
-- minute of the queue's rate window (ms), 4 the number of its minutes r.
--
-- Returns {pending, active (leaseAnchor not counted), scheduled, retry,
-- completed, failed, cancelled, oldest pending run-at ("" for none),
-- paused, tc, tf, tx, processed total, failed total, then n pairs
-- processed, failed per minute, then r such pairs of the rate window};
-- missing counters are "".
--
-- KEYS: the queue's keys (see common.lua).

local active = redis.call('ZCARD', KEY_leases)
if redis.call('ZSCORE', KEY_leases, leaseAnchor) then active = active - 1 end
local out = {redis.call('ZCARD', KEY_ready), active}
out[3] = redis.call('ZCARD', KEY_in_s)
out[4] = redis.call('ZCARD', KEY_in_r)
out[5] = redis.call('ZCARD', KEY_in_c)
out[6] = redis.call('ZCARD', KEY_in_f)
out[7] = redis.call('ZCARD', KEY_in_x)
-- The ready score is band * 2^44 + run-at, one band per priority: the
-- first job of each band has the band's earliest run-at.
local best
local lo = '-inf'
while true do
  local e = redis.call('ZRANGEBYSCORE', KEY_ready, lo, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  if #e == 0 then break end
  local sc = tonumber(e[2])
  local band = math.floor(sc / 17592186044416)
  local runAt = sc - band * 17592186044416
  if not best or runAt < best then best = runAt end
  lo = num((band + 1) * 17592186044416)
end
if best then out[#out + 1] = num(best) else out[#out + 1] = '' end
local v = redis.call('HMGET', KEY_settings, 'paused', 'tc', 'tf', 'tx')
for k = 1, 4 do out[#out + 1] = v[k] or '' end
local fields = {'p', 'f'}
for w = 0, 1 do
  local first, n = tonumber(ARGV[1 + 2 * w]), tonumber(ARGV[2 + 2 * w])
  for m = 0, n - 1 do
    local minute = num(first + m * 60000)
    fields[#fields + 1] = 'p:' .. minute
    fields[#fields + 1] = 'f:' .. minute
  end
end
local c = redis.call('HMGET', KEY_minutes, unpack(fields))
for k = 1, #fields do out[#out + 1] = c[k] or '' end
return out

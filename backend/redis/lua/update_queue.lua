-- update_queue.lua: changes a queue's settings and returns them.
--
-- ARGV: 1 queue name, 2 paused ("1" pause, "0" resume, "" keep), 3 "1" to
-- replace the retention overrides with 4..9: rc, tc, rf, tf, rx, tx (see
-- keys.go), 10 now, 11 wake channel.
--
-- Returns {paused, tc, tf, tx} ("" for unset). Resuming a paused queue
-- that holds pending (or due) jobs publishes on the wake channel. Fails
-- with KYUSTALE or KYUUNMARKED (see checkQueue) unless the keys are
-- marked as this queue's.
--
-- KEYS: the queue's keys (see common.lua).

local stale = checkQueue(ARGV[1], true)
if stale then return stale end
local was = redis.call('HGET', KEY_settings, 'paused') == '1'
if ARGV[2] == '1' then
  redis.call('HSET', KEY_settings, 'paused', '1')
elseif ARGV[2] == '0' then
  redis.call('HDEL', KEY_settings, 'paused')
  if was and (redis.call('ZCARD', KEY_ready) > 0 or #redis.call('ZRANGEBYSCORE', KEY_waiting, '-inf', ARGV[10], 'LIMIT', 0, 1) > 0) then
    redis.call('PUBLISH', ARGV[11], '1')
  end
end
if ARGV[3] == '1' then
  local names = {'rc', 'tc', 'rf', 'tf', 'rx', 'tx'}
  for k = 1, 6 do
    if ARGV[3 + k] == '' then
      redis.call('HDEL', KEY_settings, names[k])
    else
      redis.call('HSET', KEY_settings, names[k], ARGV[3 + k])
    end
  end
end
local v = redis.call('HMGET', KEY_settings, 'paused', 'tc', 'tf', 'tx')
for k = 1, 4 do v[k] = v[k] or '' end
return v

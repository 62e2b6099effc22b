-- retry_queue.lua: retries up to limit jobs of one queue in one state
-- (failed or cancelled), oldest (by id) first, as retry.lua does; a job
-- whose unique key another job holds is skipped.
--
-- ARGV: 1 now, 2 wake channel, 3 state letter (f or x), 4 limit.
-- Returns the number of jobs retried.
--
-- KEYS: the queue's keys (see common.lua).

local nowS = ARGV[1]
local now = tonumber(nowS)
local code, limit = ARGV[3], tonumber(ARGV[4])
local key = KEYS[inKey[code]]
local n = 0
local after = '-'
while n < limit do
  local ids = redis.call('ZRANGE', key, after, '+', 'BYLEX', 'LIMIT', 0, 500)
  if #ids == 0 then break end
  for _, id in ipairs(ids) do
    if n >= limit then break end
    local r = load(id)
    if r and r.h[F_state] == code and retryJob(id, r, now, nowS) == 0 then n = n + 1 end
  end
  after = '(' .. ids[#ids]
end
finalize(nowS)
if n > 0 then redis.call('PUBLISH', ARGV[2], '1') end
return n

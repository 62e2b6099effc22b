-- promote.lua: one Promote step on one queue.
--
-- ARGV: 1 now, 2 limit, 3 wake channel. Returns {promoted, cancelled};
-- together at most limit.
--
-- KEYS: the queue's keys (see common.lua).

local now, nowS = tonumber(ARGV[1]), ARGV[1]
local limit = tonumber(ARGV[2])
local cancelled = cancelDue(now, nowS, limit)
local moved = 0
if limit - cancelled > 0 then moved = promoteDue(nowS, limit - cancelled) end
finalize(nowS)
if moved > 0 then redis.call('PUBLISH', ARGV[3], '1') end
return {moved, cancelled}

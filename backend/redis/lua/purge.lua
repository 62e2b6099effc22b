-- purge.lua: deletes up to limit jobs of one queue in one state (never
-- active), oldest (by id) first. For scheduled, retry and final jobs it
-- takes them from the state's in set; pending jobs have none, so the
-- caller passes their ids, oldest first, and the script deletes those
-- still pending.
--
-- ARGV: 1 now, 2 state letter, 3 limit, then the ids for pending jobs
-- (oldest first; more than limit may be given). Returns the number of
-- jobs deleted.
--
-- KEYS: the queue's keys (see common.lua).

local code, limit = ARGV[2], tonumber(ARGV[3])
local ids = {}
if inKey[code] then
  ids = redis.call('ZRANGE', KEYS[inKey[code]], '-', '+', 'BYLEX', 'LIMIT', 0, limit)
else
  for i = 4, #ARGV do ids[#ids + 1] = ARGV[i] end
end
local n = 0
for _, id in ipairs(ids) do
  if n >= limit then break end
  local r = load(id)
  if r and r.h[F_state] == code then
    remove(id, r)
    n = n + 1
  end
end
finalize(ARGV[1])
return n

-- retention.lua: deletes up to limit final jobs of one queue whose
-- retention has run out, forgets up to limit unique keys whose period
-- has ended, and drops per-minute counters older than the history kept.
--
-- ARGV: 1 now, 2 limit, 3 the oldest minute to keep (ms). Returns the
-- number of jobs deleted.
--
-- KEYS: the queue's keys (see common.lua).

local nowS = ARGV[1]
local now = tonumber(nowS)
local limit = tonumber(ARGV[2])
local ids = redis.call('ZRANGEBYSCORE', KEY_final, '-inf', nowS, 'LIMIT', 0, limit)
for _, id in ipairs(ids) do
  local r = load(id)
  remove(id, r or nil)
end
local ends = redis.call('ZRANGEBYSCORE', KEY_unique_ends, '-inf', nowS, 'LIMIT', 0, limit)
for _, uk in ipairs(ends) do
  redis.call('ZREM', KEY_unique_ends, uk)
  local e = redis.call('HGET', KEY_unique, uk)
  if e then
    local hu = string.match(e, '^[^|]*|([^|]*)|')
    if hu ~= '0' and tonumber(hu) and now >= tonumber(hu) then redis.call('HDEL', KEY_unique, uk) end
  end
end
local keep = tonumber(ARGV[3])
local old = {}
for _, f in ipairs(redis.call('HKEYS', KEY_minutes)) do
  local m = tonumber(string.match(f, '^[pf]:(%d+)$'))
  if m and m < keep then old[#old + 1] = f end
end
for i = 1, #old, 1000 do redis.call('HDEL', KEY_minutes, unpack(old, i, math.min(i + 999, #old))) end
finalize(nowS)
return #ids

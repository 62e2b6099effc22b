-- complete.lua: finishes jobs of one queue: completed, or cancelled
-- when a cancel was requested (the result is stored either way). Each
-- completion counts as processed in the minute of now.
--
-- ARGV: 1 now, 2 retried ("1" when an earlier try of this call may have
-- run), then triples of id, token, result. On a retried call a job already
-- completed (or cancelled) under the same token counts as completed by
-- this call.
--
-- Returns per item 0 (completed), 1 (lease lost) or 2 (no such job).
--
-- KEYS: the queue's keys (see common.lua).

local now, nowS = tonumber(ARGV[1]), ARGV[1]
local ids = {}
for i = 3, #ARGV, 3 do ids[#ids + 1] = ARGV[i] end
prefetch(ids)
local out = {}
for i = 3, #ARGV, 3 do
  local id, tok, res = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local r, code = live(id, tok, now)
  if r then
    if res ~= '' then redis.call('HSET', KEY_results, id, res) end
    count(false)
    if r.h[F_cancel] == 'q' then
      endCancelled(id, r, nowS, res ~= '')
    else
      finish(id, r, 'c', nowS, res ~= '')
    end
  elseif code == 1 and ARGV[2] == '1' then
    local o = load(id)
    if o and (o.h[F_state] == 'c' or o.h[F_state] == 'x') and o.h[F_token] == tok then code = 0 end
  end
  out[#out + 1] = code
end
finalize(nowS)
return out

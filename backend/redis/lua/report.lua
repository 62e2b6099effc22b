-- report.lua: records progress and log lines of active jobs under live
-- leases.
--
-- ARGV: 1 now, 2 the cap on a job's lines, then per item: id, token,
-- progress (JSON, "" for none), the number of lines k, then k lines
-- (each a JSON object {"t": ms, "l": line}).
--
-- Returns per item 0 (recorded), 1 (lease lost) or 2 (no such job).
--
-- KEYS: the queue's keys (see common.lua).

local now = tonumber(ARGV[1])
local cap = tonumber(ARGV[2])
local out = {}
local i = 3
while i <= #ARGV do
  local id, tok, prog, k = ARGV[i], ARGV[i + 1], ARGV[i + 2], tonumber(ARGV[i + 3])
  local first = i + 4
  i = first + k
  local r, code = live(id, tok, now)
  if r then
    if prog ~= '' then redis.call('HSET', KEY_reports, id .. ':p', prog) end
    if k > 0 then
      local meta = redis.call('HGET', KEY_reports, id .. ':n')
      local kept, dropped = 0, 0
      if meta then
        local a, b = string.match(meta, '^(%d+)|(%d+)$')
        kept, dropped = tonumber(a) or 0, tonumber(b) or 0
      end
      local take = math.max(0, math.min(cap - kept, k))
      if take > 0 then
        local frag = table.concat(ARGV, ',', first, first + take - 1)
        local old = redis.call('HGET', KEY_reports, id .. ':l')
        if old and string.len(old) > 2 then
          redis.call('HSET', KEY_reports, id .. ':l', string.sub(old, 1, -2) .. ',' .. frag .. ']')
        else
          redis.call('HSET', KEY_reports, id .. ':l', '[' .. frag .. ']')
        end
      end
      redis.call('HSET', KEY_reports, id .. ':n', num(kept + take) .. '|' .. num(dropped + k - take))
    end
  end
  out[#out + 1] = code
end
return out

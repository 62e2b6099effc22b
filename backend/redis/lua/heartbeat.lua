-- heartbeat.lua: extends live leases of one queue.
--
-- ARGV: 1 now, 2 new expiry, then pairs of id, token.
--
-- Returns per lease 0 (extended), 1 (lost), 2 (no such job) or 3
-- (extended, and a cancel of the job was requested).
--
-- KEYS: the queue's keys (see common.lua).

local now = tonumber(ARGV[1])
local ids = {}
for i = 3, #ARGV, 2 do ids[#ids + 1] = ARGV[i] end
prefetch(ids)
local out = {}
for i = 3, #ARGV, 2 do
  local id = ARGV[i]
  local r, code = live(id, ARGV[i + 1], now)
  if r then
    r.h[F_lease_exp] = ARGV[2]
    save(id, r)
    defer(pending.leaseAdds, ARGV[2], id)
    if r.h[F_cancel] == 'q' then code = 3 end
  end
  out[#out + 1] = code
end
flush()
return out

-- jid_reserve.lua: reserves JIDs in the store-wide index, on a Cluster
-- (see jid.go).
--
-- ARGV: 1 the reservation's value ("token|ms"), then the JIDs. Returns
-- per JID "" when it was free and is now reserved, else the value that
-- holds it ("id|c" or another reservation).
--
-- KEYS: jids.

local out = {}
for i = 2, #ARGV do
  local v = redis.call('HGET', KEY_jids, ARGV[i])
  if v then
    out[#out + 1] = v
  else
    redis.call('HSET', KEY_jids, ARGV[i], ARGV[1])
    out[#out + 1] = ''
  end
end
return out

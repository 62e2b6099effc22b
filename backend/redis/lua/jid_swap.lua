-- jid_swap.lua: changes entries of the store-wide JID index that hold
-- the value expected, on a Cluster (see jid.go).
--
-- ARGV: triples of JID, value expected, new value ("" deletes the
-- entry). Returns per triple 1 when the entry held the value expected and
-- was changed, else 0.
--
-- KEYS: jids.

local out = {}
for i = 1, #ARGV, 3 do
  if redis.call('HGET', KEY_jids, ARGV[i]) == ARGV[i + 1] then
    if ARGV[i + 2] == '' then
      redis.call('HDEL', KEY_jids, ARGV[i])
    else
      redis.call('HSET', KEY_jids, ARGV[i], ARGV[i + 2])
    end
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
return out

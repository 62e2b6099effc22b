-- resign.lua: ends a lease its holder holds in the given term.
--
-- KEYS: lease (as lead.lua). ARGV: 1 holder, 2 epoch. Returns 1 when it
-- ended the lease, else 0.

local holder, epoch = unpack(redis.call('HMGET', KEY_lease, 'holder', 'epoch'))
if (holder or '') ~= ARGV[1] or epoch ~= ARGV[2] then return 0 end
redis.call('HSET', KEY_lease, 'holder', '', 'expires', 0)
return 1

-- lead.lua: takes or renews a lease (see backend.Leader).
--
-- KEYS: lease (the lease hash of one name: holder, epoch, expires ms; kept
-- after the lease ends so its epoch counts on). ARGV: 1 now ms, 2 holder,
-- 3 TTL ms. Returns {held (1 or 0), holder, epoch, expires ms}.

local now, holder, ttl = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
local cur, epoch, expires = unpack(redis.call('HMGET', KEY_lease, 'holder', 'epoch', 'expires'))
cur, epoch, expires = cur or '', tonumber(epoch) or 0, tonumber(expires) or 0
if cur ~= '' and now < expires then
  if cur ~= holder then return {0, cur, epoch, expires} end
  expires = now + ttl
  redis.call('HSET', KEY_lease, 'expires', expires)
  return {1, cur, epoch, expires}
end
epoch, expires = epoch + 1, now + ttl
redis.call('HSET', KEY_lease, 'holder', holder, 'epoch', epoch, 'expires', expires)
return {1, holder, epoch, expires}

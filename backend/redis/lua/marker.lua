-- marker.lua: claims a key prefix for kyu or checks that kyu holds it.
--
-- KEYS: meta. ARGV: 1 format version. Returns "new" when the prefix was
-- free and is now marked, "v:<version>" when kyu already holds it, or
-- "foreign:<what>" when the marker key holds something else.

local t = redis.call('TYPE', KEY_meta)
if type(t) == 'table' then t = t.ok end
if t == 'none' then
  redis.call('HSET', KEY_meta, 'kyu', ARGV[1])
  return 'new'
end
if t ~= 'hash' then return 'foreign:a ' .. t .. ' key' end
local v = redis.call('HGET', KEY_meta, 'kyu')
if not v then return 'foreign:a hash without the kyu marker' end
return 'v:' .. v

-- import_homes.lua: records the home of imported jobs whose ids do not
-- carry their queue's number (see Import in import.go), before the
-- import script writes them.
--
-- ARGV: 1 the queue's number, then the ids. An id without a home gets
-- this queue; one that has a home, or came before in this call, is not
-- the import's to write. Returns the positions (from 1) of those ids: an
-- empty array when every id's home is recorded now. One HMGET and one
-- HSET a thousand ids, where an HSETNX each cost the server more.
--
-- KEYS: homes.

local num = ARGV[1]
local n = #ARGV - 1
local out, adds, seen = {}, {}, {}
for i = 2, n + 1, 1000 do
  local got = redis.call('HMGET', KEY_homes, unpack(ARGV, i, math.min(i + 999, n + 1)))
  for k = 1, #got do
    local id = ARGV[i + k - 1]
    if got[k] or seen[id] then
      out[#out + 1] = i + k - 2
    else
      seen[id] = true
      adds[#adds + 1] = id
      adds[#adds + 1] = num
    end
  end
end
for k = 1, #adds, 4000 do redis.call('HSET', KEY_homes, unpack(adds, k, math.min(k + 3999, #adds))) end
return out

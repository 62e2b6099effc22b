-- register.lua: returns the number of a queue, giving it the next free
-- number when it has none.
--
-- KEYS: queues, queue_names, meta. ARGV: 1 queue name, 2 the
-- largest number allowed. Returns the number, or an error reply when the
-- numbers are used up.

local n = redis.call('HGET', KEY_queues, ARGV[1])
if n then return tonumber(n) end
n = redis.call('HINCRBY', KEY_meta, 'queues', 1)
if n > tonumber(ARGV[2]) then return redis.error_reply('KYU too many queues') end
redis.call('HSET', KEY_queues, ARGV[1], n)
redis.call('HSET', KEY_queue_names, n, ARGV[1])
return n

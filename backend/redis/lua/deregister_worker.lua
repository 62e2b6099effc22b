-- deregister_worker.lua: removes a worker's entry and its command (an
-- unknown id is no error), or, with ARGV[1] = "", the entries expired at
-- ARGV[2] (ms).
--
-- KEYS: workers, worker_ends, worker_cmds. Returns the number removed.

local ids = {ARGV[1]}
if ARGV[1] == '' then ids = redis.call('ZRANGEBYSCORE', KEY_worker_ends, '-inf', ARGV[2], 'LIMIT', 0, 1000) end
if #ids == 0 then return 0 end
redis.call('ZREM', KEY_worker_ends, unpack(ids))
redis.call('HDEL', KEY_worker_cmds, unpack(ids))
return redis.call('HDEL', KEY_workers, unpack(ids))

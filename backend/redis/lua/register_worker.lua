-- register_worker.lua: records a worker's entry, keeping the command on
-- it.
--
-- KEYS: workers, worker_ends, worker_cmds. ARGV: 1 id, 2 entry (JSON),
-- 3 expiry ms. Returns the entry's command ("" for none).

redis.call('HSET', KEY_workers, ARGV[1], ARGV[2])
redis.call('ZADD', KEY_worker_ends, ARGV[3], ARGV[1])
return redis.call('HGET', KEY_worker_cmds, ARGV[1]) or ''

-- register_worker.lua: records a worker's entry.
--
-- KEYS: workers, worker_ends. ARGV: 1 id, 2 entry (JSON), 3 expiry ms.
-- Returns 0.

redis.call('HSET', KEY_workers, ARGV[1], ARGV[2])
redis.call('ZADD', KEY_worker_ends, ARGV[3], ARGV[1])
return 0

-- get.lua: reads one job.
--
-- ARGV: 1 id. Returns a view (see view in common.lua), or {false} when
-- there is no such job.
--
-- KEYS: the queue's keys (see common.lua).

local id = ARGV[1]
local rec = redis.call('HGET', KEY_jobs, id)
if not rec then return {false} end
local ex = extras(id)
return {0, rec, ex[1], ex[2], ex[3], ex[4], ex[5], redis.call('ZSCORE', KEY_final, id)}

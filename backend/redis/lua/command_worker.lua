-- command_worker.lua: records a command on a worker's entry not expired
-- at now, keeping the stronger of the one it holds and the new one (stop
-- over quiet).
--
-- KEYS: workers, worker_ends, worker_cmds. ARGV: 1 id, 2 command, 3 now
-- ms. Returns {entry (JSON), command}, or false for no such entry.

local ends = redis.call('ZSCORE', KEY_worker_ends, ARGV[1])
if not ends or tonumber(ends) <= tonumber(ARGV[3]) then return false end
local entry = redis.call('HGET', KEY_workers, ARGV[1])
if not entry then return false end
local cmd = redis.call('HGET', KEY_worker_cmds, ARGV[1]) or ''
if cmd ~= 'stop' then
  cmd = ARGV[2]
  redis.call('HSET', KEY_worker_cmds, ARGV[1], cmd)
end
return {entry, cmd}

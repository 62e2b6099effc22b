-- run_now.lua: makes one scheduled or retry job pending at once (RunAt =
-- now), and publishes on the wake channel.
--
-- ARGV: 1 id, 2 now, 3 wake channel. Returns a view (see view in
-- common.lua) with code 0, or {2} (no such job), {3, state letter} (not
-- scheduled or retry) or {4} (the record does not parse).
--
-- KEYS: the queue's keys (see common.lua).

local id, nowS = ARGV[1], ARGV[2]
local r = load(id)
if r == nil then return {2} end
if r == false then return {4} end
if r.h[F_state] ~= 's' and r.h[F_state] ~= 'r' then return {3, r.h[F_state]} end
redis.call('ZREM', KEY_waiting, id)
r.h[F_run_at] = nowS
setState(id, r, 'p')
redis.call('ZADD', KEY_ready, readyScore(id, r), id)
save(id, r)
touchUnique(id, r)
finalize(nowS)
redis.call('PUBLISH', ARGV[3], '1')
return view(0, id, r, extras(id))

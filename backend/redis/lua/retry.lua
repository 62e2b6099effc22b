-- retry.lua: sends one failed or cancelled job back to pending (see
-- backend.RetryParams), and publishes on the wake channel.
--
-- ARGV: 1 id, 2 now, 3 wake channel. Returns a view (see view in
-- common.lua) with code 0, or {2} (no such job), {3, state letter} (not
-- failed or cancelled), {4} (the record does not parse) or {5, holder id}
-- (another job holds the unique key; nothing changed).
--
-- KEYS: the queue's keys (see common.lua).

local id, nowS = ARGV[1], ARGV[2]
local r = load(id)
if r == nil then return {2} end
if r == false then return {4} end
if r.h[F_state] ~= 'f' and r.h[F_state] ~= 'x' then return {3, r.h[F_state]} end
local code, holder = retryJob(id, r, tonumber(nowS), nowS)
if code ~= 0 then return {code, holder} end
finalize(nowS)
redis.call('PUBLISH', ARGV[3], '1')
return view(0, id, r, extras(id))

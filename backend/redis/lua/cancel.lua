-- cancel.lua: cancels one job: a scheduled, pending or retry job at
-- once (reason requested); an active one is marked (cancel code q) and
-- ends cancelled when its attempt ends.
--
-- ARGV: 1 id, 2 now. Returns a view (see view in common.lua) with code 0
-- (done; the view is the job after the call, even when retention deleted
-- it), or {2} (no such job), {3, state letter} (final: refused) or {4}
-- (the record does not parse).
--
-- KEYS: the queue's keys (see common.lua).

local id, nowS = ARGV[1], ARGV[2]
local r = load(id)
if r == nil then return {2} end
if r == false then return {4} end
local c = r.h[F_state]
if c == 's' or c == 'p' or c == 'r' then
  local ex = extras(id)
  redis.call('ZREM', KEY_ready, id)
  redis.call('ZREM', KEY_waiting, id)
  r.h[F_cancel] = 'r'
  finish(id, r, 'x', nowS, false)
  finalize(nowS)
  return view(0, id, r, ex)
elseif c == 'a' then
  if r.h[F_cancel] ~= 'q' then
    r.h[F_cancel] = 'q'
    save(id, r)
    flush()
  end
  return view(0, id, r, extras(id))
end
return {3, c}

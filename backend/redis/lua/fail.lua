-- fail.lua: ends attempts of one queue's jobs with an error. Each counts
-- as processed and failed in the minute of now.
--
-- ARGV: 1 now, 2 wake channel, then per item 7 values: id, token,
-- message, stack, retry-at ("" for at once), final ("1" or "0"), cancel
-- ("1": the handler cancelled its job, FailItem.Cancel).
--
-- Returns per item 0 (done), 1 (lease lost) or 2 (no such job).
--
-- KEYS: the queue's keys (see common.lua).

local now, nowS = tonumber(ARGV[1]), ARGV[1]
local ids = {}
for i = 3, #ARGV, 7 do ids[#ids + 1] = ARGV[i] end
prefetch(ids)
local out = {}
local woke = false
for i = 3, #ARGV, 7 do
  local id, tok = ARGV[i], ARGV[i + 1]
  local r, code = live(id, tok, now)
  if r then
    local cancel = ARGV[i + 6] == '1'
    local kind = 'failed'
    if cancel then kind = 'cancelled' end
    addError(id, r.h[F_attempt], nowS, kind, ARGV[i + 2], ARGV[i + 3])
    count(true)
    redis.call('ZREM', KEY_leases, id)
    r.h[F_lease_exp] = ''
    r.h[F_worker] = ''
    if r.h[F_cancel] == 'q' then
      endCancelled(id, r, nowS, false)
    elseif cancel then
      r.h[F_cancel] = 'h'
      finish(id, r, 'x', nowS, false)
    elseif ARGV[i + 5] == '1' or tonumber(r.h[F_attempt]) >= tonumber(r.h[F_max_attempts]) then
      finish(id, r, 'f', nowS, false)
    else
      local at = ARGV[i + 4]
      if at ~= '' and tonumber(at) > now then r.h[F_run_at] = at else r.h[F_run_at] = nowS end
      if requeue(id, r, 'r', now) then woke = true end
    end
  end
  out[#out + 1] = code
end
finalize(nowS)
if woke then redis.call('PUBLISH', ARGV[2], '1') end
return out

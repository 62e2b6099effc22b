-- list.lua: reads the jobs a listing shows, without payloads' other
-- companions: no result and no log lines.
--
-- ARGV: ids. Returns per id 8 values as a view does (see view in
-- common.lua), with result and log lines false; a missing job has a false
-- record.
--
-- KEYS: the queue's keys (see common.lua).

local recs = redis.call('HMGET', KEY_jobs, unpack(ARGV))
local out = {}
for i, id in ipairs(ARGV) do
  local b = #out
  out[b + 1] = 0
  out[b + 2] = recs[i]
  if recs[i] then
    local rp = redis.call('HMGET', KEY_reports, id .. ':p', id .. ':n')
    out[b + 3] = redis.call('HGET', KEY_errors, id)
    out[b + 4] = false
    out[b + 5] = rp[1]
    out[b + 6] = false
    out[b + 7] = rp[2]
    out[b + 8] = redis.call('ZSCORE', KEY_final, id)
  else
    for k = 3, 8 do out[b + k] = false end
  end
end
return out

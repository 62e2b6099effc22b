-- import.lua: writes whole jobs of one queue with their history (see
-- Import in import.go).
--
-- ARGV: 1 now, 2 wake channel, 3 count, 4 queue name, 5 how many of the
-- jobs, from the first, may exist in this queue (the rest are known new:
-- their homes were recorded just now, see import_homes.lua), then per
-- job: id, state letter, record, score (ready score for p, run-at for s
-- and r, "" otherwise), the letters of the job's optional values ("" for
-- none: a plain job is these five values), then one value per letter in
-- their order: d deadline, u unique key (the job holds it), t the key's
-- until (without it "0": until final), e errors, r result, p progress,
-- l logs, n log counts (these four as their keys hold them), f deletion
-- time, j JID.
--
-- Returns per job 0 when it was written, 2 when the id exists in this
-- queue (nothing written), {4, holder id} when its JID is held by another
-- job (checked first; nothing written), or {1, holder id} when its unique
-- key is held (nothing written); or an empty array when every job was
-- written. Publishes on the wake channel when a job is pending.
-- Fails with KYUSTALE or KYUUNMARKED (see checkQueue), writing nothing.
--
-- The ids that may exist are looked up in one HMGET per 1,000, and the
-- records and the ready and waiting entries are written a few thousand
-- values to a command at the end: each command a script calls costs the
-- server something of its own besides its work.
--
-- KEYS: the queue's keys (see common.lua).

local stale = checkQueue(ARGV[4], true)
if stale then return stale end
local now = tonumber(ARGV[1])
local n = tonumber(ARGV[3])
local checked = tonumber(ARGV[5])
local ids = {}
local b = 6
for i = 1, n do
  local opts = ARGV[b + 4]
  if opts ~= '' and string.find(opts, '[^dutreplnfj]') then
    return redis.error_reply('ERR import: optional values ' .. opts)
  end
  if i <= checked then ids[i] = ARGV[b] end
  b = b + 5 + #opts
end
local there = {}
for i = 1, checked, 1000 do
  local got = redis.call('HMGET', KEY_jobs, unpack(ids, i, math.min(i + 999, checked)))
  for k = 1, #got do there[i + k - 1] = got[k] ~= false end
end
local out = {} -- the codes of jobs not written, by position
local written = {} -- ids this run writes, of those that may exist
local recs, ready, waiting = {}, {}, {}
local nrec, nready, nwait = 0, 0, 0
local woke = false
b = 6
for i = 1, n do
  local id, st, rec, score, opts = ARGV[b], ARGV[b + 1], ARGV[b + 2], ARGV[b + 3], ARGV[b + 4]
  local dl, uk, untilms, errs, res, prog, logs, counts, fin, jid = '', '', '0', '', '', '', '', '', '', ''
  for k = 1, #opts do
    local c, v = string.sub(opts, k, k), ARGV[b + 4 + k]
    if c == 'd' then dl = v
    elseif c == 'u' then uk = v
    elseif c == 't' then untilms = v
    elseif c == 'e' then errs = v
    elseif c == 'r' then res = v
    elseif c == 'p' then prog = v
    elseif c == 'l' then logs = v
    elseif c == 'n' then counts = v
    elseif c == 'f' then fin = v
    else jid = v end
  end
  b = b + 5 + #opts
  local dupId, jidHolder
  if jid ~= '' then
    jidHolder = redis.call('HGET', KEY_jids, jid)
    if jidHolder == id then jidHolder = nil end
  end
  if i <= checked and (there[i] or written[id]) then
    out[i] = 2
  elseif jidHolder then
    out[i] = {4, jidHolder}
  else
    if uk ~= '' then
      local e = redis.call('HGET', KEY_unique, uk)
      if e then
        local hid, hu, hs = string.match(e, '^([^|]*)|([^|]*)|(.*)$')
        if hid and hid ~= id then
          local held
          if hu == '0' then held = not isFinal(hs) else held = now < tonumber(hu) end
          if held then dupId = hid end
        end
      end
    end
    if dupId then
      out[i] = {1, dupId}
    else
      if i <= checked then written[id] = true end
      recs[nrec + 1], recs[nrec + 2] = id, rec
      nrec = nrec + 2
      if st == 'p' then
        ready[nready + 1], ready[nready + 2] = score, id
        nready = nready + 2
        woke = true
      elseif st == 's' or st == 'r' then
        waiting[nwait + 1], waiting[nwait + 2] = score, id
        nwait = nwait + 2
      end
      move(id, false, st)
      if dl ~= '' then redis.call('ZADD', KEY_deadlines, dl, id) end
      if uk ~= '' then
        redis.call('HSET', KEY_unique, uk, id .. '|' .. untilms .. '|' .. st)
        if untilms ~= '0' then redis.call('ZADD', KEY_unique_ends, untilms, uk) else redis.call('ZREM', KEY_unique_ends, uk) end
      end
      if errs ~= '' then redis.call('HSET', KEY_errors, id, errs) end
      if res ~= '' then redis.call('HSET', KEY_results, id, res) end
      if prog ~= '' then redis.call('HSET', KEY_reports, id .. ':p', prog) end
      if logs ~= '' then redis.call('HSET', KEY_reports, id .. ':l', logs) end
      if counts ~= '' then redis.call('HSET', KEY_reports, id .. ':n', counts) end
      if fin ~= '' then defer(pending.finalAdds, fin, id) end
      if jid ~= '' then redis.call('HSET', KEY_jids, jid, id) end
    end
  end
end
for k = 1, nrec, 4000 do redis.call('HSET', KEY_jobs, unpack(recs, k, math.min(k + 3999, nrec))) end
for k = 1, nready, 4000 do redis.call('ZADD', KEY_ready, unpack(ready, k, math.min(k + 3999, nready))) end
for k = 1, nwait, 4000 do redis.call('ZADD', KEY_waiting, unpack(waiting, k, math.min(k + 3999, nwait))) end
finalize(ARGV[1])
if woke then redis.call('PUBLISH', ARGV[2], '1') end
if next(out) == nil then return {} end
for i = 1, n do
  if not out[i] then out[i] = 0 end
end
return out

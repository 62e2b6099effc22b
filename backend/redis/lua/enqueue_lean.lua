-- enqueue_lean.lua: writes new jobs of one queue that are all pending,
-- with no deadline, unique key or JID, as enqueue.lua does, with only
-- what such jobs need: each key and argument of a call costs Redis about
-- a thousand instructions.
--
-- ARGV: 1 queue name, then per job 3 values: id, ready score, record;
-- then, optionally, "q" (quiet): the script publishes no wake-up, which
-- the caller then owes for the jobs it did not claim right behind it
-- (handoff.go).
--
-- Returns what enqueue.lua returns for such jobs: 0 when every job was
-- written as asked (an id already holding this very job counts as
-- written; see sameJob in common.lua), else a list with per job 0 or 2
-- (the id is another job's; nothing was written for it). Publishes on the
-- queue's wake channel (keys.wakeChannel in keys.go) when it wrote a job,
-- unless quiet. Fails with KYUSTALE or KYUUNMARKED
-- (see checkQueue in common.lua), writing nothing, unless the keys are
-- marked as this queue's.
--
-- KEYS: jobs, ready and queue_name, in that order: the script is
-- standalone (see scriptSpec.standalone in scripts.go), so it goes
-- without common.lua and does here the little it needs of it: the check
-- of the queue's mark and sameJob. Such jobs enter no in set and count
-- nothing, so the run has nothing for finalize to write.

-- call is redis.call, looked up once: each lookup is two table reads.
local call = redis.call
local have = call('GET', KEY_queue_name)
if not have then
  return redis.error_reply('KYUUNMARKED queue keys are not marked')
elseif have ~= ARGV[1] then
  return redis.error_reply('KYUSTALE queue number now belongs to queue ' .. have)
end
-- out, the per-job list, is made only once a job's id turns out taken:
-- most calls write every job and return 0.
local out
local woke = false
-- With the quiet flag ARGV has 2 values beyond the jobs', else 1: the
-- loop's bound stops before it either way.
local quiet = #ARGV % 3 == 2
for b = 2, #ARGV - 2, 3 do
  local id, score, rec = ARGV[b], ARGV[b + 1], ARGV[b + 2]
  if call('HSETNX', KEY_jobs, id, rec) == 0 then
    -- The id holds this very job when what follows the header is the
    -- same (sameJob; a bare record, whose first byte is its body's
    -- version, 1 to BODY_LAST_VERSION, is all tail).
    local held = call('HGET', KEY_jobs, id)
    local heldTail, tail = held, rec
    if (string.byte(held) or 0) > BODY_LAST_VERSION then
      local i = string.find(held, '\n', 1, true)
      heldTail = i and string.sub(held, i + 1)
    end
    if (string.byte(rec) or 0) > BODY_LAST_VERSION then
      local i = string.find(rec, '\n', 1, true)
      tail = i and string.sub(rec, i + 1)
    end
    if not (heldTail and heldTail == tail) then
      if not out then
        out = {}
        for k = 1, (b - 2) / 3 do out[k] = 0 end
      end
      out[#out + 1] = 2
    elseif out then
      out[#out + 1] = 0
    end
  else
    call('ZADD', KEY_ready, score, id)
    woke = true
    if out then out[#out + 1] = 0 end
  end
end
if woke and not quiet then
  -- The wake channel is P:wake:<queue name> for the keys {P:N}:...; the
  -- channel is not an argument, which would cost more than this lookup
  -- of wakes (standaloneHead in scripts.go). An entry whose number is
  -- now another queue's is made again; 1,024 entries at most.
  local w = wakes[KEY_jobs]
  if not w or w[1] ~= ARGV[1] then
    if wakeCount >= 1024 then wakes, wakeCount = {}, 0 end
    w = {ARGV[1], string.match(KEY_jobs, '^{(.*):%d+}:jobs$') .. ':wake:' .. ARGV[1]}
    wakes[KEY_jobs], wakeCount = w, wakeCount + 1
  end
  call('PUBLISH', w[2], '1')
end
return out or 0

-- claim_lean.lua: claim.lua for the look of a waiting claim (ClaimWait
-- in waitclaim.go) with no type filter and no byte budget, which mostly
-- finds nothing: it passes only the keys claimLean (common.lua) touches,
-- and finds nothing at an idle queue (queueIdle) with two commands
-- instead of five.
--
-- ARGV: 1 now, 2 max, 3 lease expiry, 4 worker id (hex), as claim.lua
-- takes them, then 5 the queue name.
--
-- Returns claimLean's reply ({stopped, bytes}, then {id, record,
-- errors} per job, see common.lua), or an empty list, having changed
-- nothing, when the queue has due work that only claim.lua does: the
-- caller then runs claim.lua. Fails with KYUSTALE or KYUUNMARKED (see
-- checkQueue), changing nothing, unless the keys are marked as this
-- queue's.
--
-- KEYS: jobs, errors, ready, waiting, leases, deadlines, unique,
-- queue_name and settings, in that order (see scriptSpec.keys).

local stale = checkQueue(ARGV[5], true)
if stale then return stale end
if queueIdle() then return {'0', '0'} end
-- The run starts here, after the look at an idle queue, which needs
-- nothing of its state (scriptSpec.resetsLate in scripts.go).
reset()
return claimLean(tonumber(ARGV[2]), ARGV[3], ARGV[4], ARGV[1]) or {}

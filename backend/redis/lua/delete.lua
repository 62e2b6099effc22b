-- delete.lua: removes a job that is not active.
--
-- ARGV: 1 id. Returns 0 (deleted), 1 (active, nothing changed) or 2 (no
-- such job). A record that does not parse is deleted.
--
-- KEYS: the queue's keys (see common.lua).

local id = ARGV[1]
local r = load(id)
if r == nil then return 2 end
if r and r.h[F_state] == 'a' then return 1 end
remove(id, r or nil)
finalize('0')
return 0

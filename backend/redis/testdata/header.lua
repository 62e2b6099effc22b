-- Ways to read and write a record's header, for instruction counts: run
-- as EVAL with the mode as ARGV[1] on a redis-server under callgrind, and
-- subtract the count of mode "none" (docs/benchmarks.md, "Where it
-- stands" in the Redis section). Each mode does its work 20,000 times.
local n = 0
local mode = ARGV[1]
local fields = {'p', '0', '25', '0', '0', '1795330562299', '', '', '', '', '', '', '0', ''}
local body = string.rep('\0', 113)
local rec = table.concat(fields, '|') .. '\n' .. body
local binFormat = '>c1HHHhddddddc1Hc1'
local bin = struct.pack(binFormat, 'p', 0, 25, 0, 0, 1795330562299, 0, 0, 0, 0, 0, 'r', 0, 'n') .. body
-- The pattern the scripts' load uses (luaCommon in scripts.go), and the
-- same without sign checks.
local match = '^(%a)|(%-?%d+)|(%-?%d+)|(%-?%d+)|(%-?%d+)|(%-?%d+)|(%-?%d*)|(%-?%d*)|(%-?%d*)|(%-?%d*)|([^|\n]*)|([^|\n]*)|(%d+)|([^|\n]*)\n()'
local nosign = '^(%a)|(%d+)|(%d+)|(%d+)|(%-?%d+)|(%-?%d+)|(%-?%d*)|(%-?%d*)|(%-?%d*)|(%-?%d*)|(%x*)|(%a?)|(%d+)|([^|\n]*)\n()'
for i = 1, 20000 do
  local h = fields
  if mode == 'match' then
    h = {string.match(rec, match)}
  elseif mode == 'nosign' then
    h = {string.match(rec, nosign)}
  elseif mode == 'find' then
    h = {}
    local at = 1
    for k = 1, 13 do
      local j = string.find(rec, '|', at, true)
      h[k] = string.sub(rec, at, j - 1)
      at = j + 1
    end
    local j = string.find(rec, '\n', at, true)
    h[14], h[15] = string.sub(rec, at, j - 1), j + 1
  elseif mode == 'struct-read' then
    h = {struct.unpack(binFormat, bin)}
  elseif mode == 'text-write' then
    h[8] = tostring(i % 1000)
    local s = h[1] .. '|' .. h[2] .. '|' .. h[3] .. '|' .. h[4] .. '|' .. h[5] .. '|' .. h[6] .. '|' .. h[7]
      .. '|' .. h[8] .. '|' .. h[9] .. '|' .. h[10] .. '|' .. h[11] .. '|' .. h[12] .. '|' .. h[13]
      .. '|' .. h[14] .. '\n' .. body
    n = n + #s
  elseif mode == 'struct-write' then
    local s = struct.pack(binFormat, 'p', i % 1000, 25, 0, 0, 1795330562299, 0, 0, 0, 0, 0, 'r', 0, 'n') .. body
    n = n + #s
  elseif mode == 'none-write' then
    h[8] = tostring(i % 1000)
  end
  n = n + #h
end
return n

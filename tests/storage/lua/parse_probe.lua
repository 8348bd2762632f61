-- Runs after prelude.lua: prelude.lua's parse() of ARGV[5] as a flat reply, {0} for a corrupt
-- record, else {1, state, deliver_at, attempt, business, payload, entry, name, value, ...} with
-- the names sorted; entry is prelude.lua's entry_at() of it, '-' for none
-- (record_codec_diff_test.cpp compares it with the C++ reading).
local j = parse(ARGV[5], true)
if not j then return {0} end
local e = entry_at(j)
local r = {1, j.st, string.format('%.0f', j.at), tostring(j.att), j.biz, j.payload, e and string.format('%.0f', e) or '-'}
local names = {}
for k in pairs(j.f) do names[#names + 1] = k end
table.sort(names)
for _, k in ipairs(names) do
  r[#r + 1] = k
  r[#r + 1] = j.f[k]
end
return r

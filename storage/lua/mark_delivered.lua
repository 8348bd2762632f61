-- mark_delivered: a batch of one shard's jobs, run after prelude.lua (keys and ARGV[1..4]: lua_scripts.hpp).
-- Stride 10: job-id, deliver_at, attempt, business, mode ('drop' or 'keep'), ack_ms,
-- max_attempts, next ('' unknown, '-' the series ends, or the next occurrence's epoch ms),
-- its number, skip ('1': the occurrence was missed, not delivered; prelude's delivered()). ARGV[3] unused. Not fenced (as mark_ready.lua). The jobs mark_ready.lua's fast way does
-- not fit: the record is read and settled by delivered() (a repeat, a history, a payload kept
-- for the lifecycle), if it is still the claim of `attempt` in flight (prelude's settles()).
-- 'keep' with ack_ms > 0 keeps max_attempts in the record (ma) for claim.lua's
-- decision after silence: deliver again, or dead-letter. Per job: {changed, state, at}.
for i = FIRST, #KEYS do
  local a = 5 + (i - FIRST) * 10
  out[#out + 1] = settle_read(KEYS[i], ARGV[a], tonumber(ARGV[a + 2]) or 0, ARGV[a + 4] == 'keep',
                              tonumber(ARGV[a + 5]) or 0, tonumber(ARGV[a + 6]) or 0, ARGV[a + 7], ARGV[a + 8],
                              ARGV[a + 9] == '1', tonumber(ARGV[a + 1]))
end
flush()
return out

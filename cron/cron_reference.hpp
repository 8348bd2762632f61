// The slow reference model of cron_expr.hpp: what "the expression fires at instant t" means,
// written as directly as the header's rules say it, and a search that tries every second.
//
// The fast path (next_after) builds a month's matching days as a bit mask, searches fields with
// bit scans and maps local times to instants through the tz library's local_info. This model
// shares only the parsed CronExpr and the zone's offsets with it:
//
//   matches_local   each field checked on its own, every day form from its definition: the
//                   last weekday by scanning back from the month's end, nW as the Monday-Friday
//                   at the smallest distance from day n inside the month, n#k as (day-1)/7+1 == k,
//                   nL as "no weekday n a week later in the month", and Vixie's OR rule.
//   fires_at        an instant t fires iff its local time matches and t is that local time's
//                   first instant (not the second pass of an autumn overlap), or t is the first
//                   instant after a spring gap and some local time inside the gap matches.
//   next_after_slow the first second after `after` at which fires_at holds, trying each second
//                   up to a window: O(window) in seconds, for tests and the fuzzer only.
//
// Tests check next_after against next_after_slow on thousands of random expressions and
// instants (tests/cron), and the fuzzer does so for every expression it parses.
// Threading: pure functions, as cron_expr.hpp.
#pragma once

#include <date/tz.h>

#include <chrono>
#include <optional>

#include "cron/cron_expr.hpp"

namespace delayd::cron {

// True iff local (wall clock) time `t` satisfies every field of `e`, by the header's rules.
bool matches_local(const CronExpr& e, date::local_seconds t);

// True iff `e` fires at instant `t` in `zone` (nullptr: UTC), by the DST rules of
// cron_expr.hpp. O(1), or O(gap length) at the first instant after a spring gap.
bool fires_at(const CronExpr& e, date::sys_seconds t, const date::time_zone* zone);

// The first whole second s with after < s <= after + window at which fires_at holds, or nullopt.
// O(window / 1 s); meant for windows of hours to days.
std::optional<Instant> next_after_slow(const CronExpr& e, Instant after, const date::time_zone* zone,
                                       std::chrono::seconds window);

}  // namespace delayd::cron

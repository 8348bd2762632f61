// The arithmetic of a repeating job's series: which occurrence comes next, and which missed ones
// are skipped after an outage (docs/producing.md, "Repeats" and "Catch-up after an outage").
//
// A series is a rule (storage::RepeatRule: an interval or a cron expression in a zone, an end,
// a count, a catch-up policy) and the occurrence pending, `due` (its instant and number). The
// broker asks twice per occurrence, with its wall clock `now`:
//
//   before producing  skip(): has the series moved past `due` already, i.e. is the occurrence
//                     after it due by now too? Then `due` was missed, and with catch-up latest
//                     or none it is not delivered: the job goes on at the latest missed
//                     occurrence (latest; delivered at once) or at the first one still to come
//                     (none). With all, every missed occurrence is delivered.
//   after delivering  next(): the occurrence after `due`, by the policy: latest, the latest
//                     missed one if any passed meanwhile; all, the very next one (missed or not)
//                     until max_catchup missed ones were delivered in a row, then the first one
//                     still to come; none, the first one still to come.
//
// Both answers are written by the mark script in the call that settles `due`
// (storage/lua/mark_delivered.lua), so a crash cannot separate an occurrence from the choice
// of the next one (the crash-point table in storage/job_store.hpp).
//
// Numbering (the ready record's `repeat` header, and what repeat-count counts): an interval's
// occurrences are numbered on the grid deliver_at + (n - 1) * every, so a skipped one keeps its
// number and the series' numbers have gaps after an outage; a calendar series numbers its
// deliveries (a skipped occurrence takes no number), since counting the instants of a cron
// expression over a long outage has no closed form.
//
// Never early follows from the callers: an occurrence's instant is its deliver-at, and the fire
// path holds every record until its deliver-at. Pure: no clock, no I/O but the tz library's
// first read of a zone's rules.
// Threading: pure functions; callable from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "storage/repeat_rule.hpp"

namespace delayd::broker {

// Why the rule cannot be followed (its cron does not parse, its zone is not in this machine's
// tz database: both were checked at ingest, so only a changed tz database gets here), or nullopt.
std::optional<std::string> unusable(const storage::RepeatRule& rule);

// The first occurrence of `rule` strictly after `t`, counting from the occurrence `from` (an
// interval's grid is anchored on it); nullopt if none is left (past until or count, or a cron
// that never matches again). Precondition: rule.repeats() and !unusable(rule).
std::optional<storage::Occurrence> first_after(const storage::RepeatRule& rule, storage::Occurrence from,
                                               std::int64_t t);

// The last occurrence of `rule` after `from` and at or before `t` (within until and count), or
// nullopt if there is none in (from.at, t]. Precondition as first_after.
std::optional<storage::Occurrence> last_by(const storage::RepeatRule& rule, storage::Occurrence from, std::int64_t t);

// What to do instead of delivering `due`: nullopt, deliver it; otherwise where the series goes
// (the inner nullopt: nowhere, nothing is left). Only for catch-up latest and none, and only
// when the occurrence after `due` is due by `now` as well.
std::optional<std::optional<storage::Occurrence>> skip(const storage::RepeatRule& rule, storage::Occurrence due,
                                                       std::int64_t now);

// Where the series goes when the occurrence `due` expired (delayd reached it at `now`, later than
// its max-lateness-ms allows): the occurrence next() would choose after it, numbered as skip()
// numbers (a calendar series: the expired one's number); nullopt: nothing is left.
std::optional<storage::Occurrence> after_expired(const storage::RepeatRule& rule, storage::Occurrence due,
                                                 std::int64_t now, std::int64_t max_catchup);

// The occurrence after `done`, delivered by `now`; nullopt: the series ends. max_catchup (scheduler.max_catchup)
// bounds catch-up all (rule.caught_up counts the missed ones delivered in a row so far).
std::optional<storage::Occurrence> next(const storage::RepeatRule& rule, storage::Occurrence done, std::int64_t now,
                                        std::int64_t max_catchup);

}  // namespace delayd::broker

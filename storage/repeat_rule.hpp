// RepeatRule: how a repeating job's series goes on, as its job record holds it (key_schema.hpp's
// fields every, cron, tz, until, count, cu, cc) and as the ingest contract reads it from the
// repeat-* headers (contract/ingest_parse.hpp). The rule's arithmetic (the next occurrence, the
// catch-up after an outage) is broker/repeat_plan.hpp's; this file only names the facts.
// Threading: plain values and pure functions.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace delayd::storage {

// What a repeat does with the occurrences it missed (delayd was down, or behind), README
// "Catch-up after an outage":
//   latest  the latest missed occurrence once, then the schedule (the default)
//   all     every missed occurrence, oldest first, at most scheduler.max_catchup in a row, then
//           the schedule
//   none    none of them: the next occurrence still to come
enum class Catchup : unsigned char { latest, all, none };

constexpr std::string_view to_string(Catchup c) {
  switch (c) {
    case Catchup::latest:
      return "latest";
    case Catchup::all:
      return "all";
    case Catchup::none:
      return "none";
  }
  return "latest";
}

constexpr std::optional<Catchup> parse_catchup(std::string_view s) {
  for (Catchup c : {Catchup::latest, Catchup::all, Catchup::none}) {
    if (to_string(c) == s) return c;
  }
  return std::nullopt;
}

struct RepeatRule {
  // An interval repeat: occurrences at deliver_at + k * every. 0: not an interval repeat.
  std::chrono::milliseconds every{0};
  // A calendar repeat (cron/cron_expr.hpp's grammar, as the producer wrote it) and its IANA
  // zone. Empty cron: not a calendar repeat. At most one of every and cron is set.
  std::string cron;
  std::string tz = "UTC";
  // No occurrence after this instant (epoch ms); nullopt: no end.
  std::optional<std::int64_t> until;
  // At most this many occurrences (interval: numbered on the grid, so skipped ones count;
  // cron: numbered by delivery); 0: no limit.
  std::int64_t count = 0;
  Catchup catchup = Catchup::latest;
  // Missed occurrences delivered in a row so far (Catchup::all's bound); from the record.
  std::int64_t caught_up = 0;

  bool repeats() const { return every.count() > 0 || !cron.empty(); }
  bool operator==(const RepeatRule&) const = default;
};

// One occurrence of a series: when (epoch ms) and its number (RepeatRule::count's numbering).
struct Occurrence {
  std::int64_t at = 0;
  std::int64_t number = 0;
  bool operator==(const Occurrence&) const = default;
};

}  // namespace delayd::storage

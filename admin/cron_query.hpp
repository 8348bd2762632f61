// GET /cron/next and `delayctl cron next`: the next instants of a cron expression in a zone, so
// that a user can check an expression before publishing it (docs/producing.md, "Calendar schedules").
//   expr   the expression (cron/cron_expr.hpp's grammar), required
//   tz     an IANA zone name, default UTC
//   from   epoch ms or RFC 3339, default now: instants strictly after it
//   count  1..kMaxCronCount, default kDefaultCronCount
// Answer: {"expr", "tz", "from", "next": [{"at": RFC 3339 with the zone's offset, "epoch_ms"}],
// "complete"} (complete false: the schedule has fewer instants left than asked).
// Threading: pure, but a zone's rules load from the tz database on first use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <variant>

#include "admin/job_query.hpp"
#include "cron/cron_expr.hpp"

namespace delayd::admin {

inline constexpr std::size_t kMaxCronCount = 100;
inline constexpr std::size_t kDefaultCronCount = 5;

struct CronNextRequest {
  std::string expr;
  std::string tz = "UTC";
  cron::CronExpr parsed;
  const date::time_zone* zone = nullptr;
  std::int64_t from_ms = 0;
  std::size_t count = kDefaultCronCount;
};

// The query's parameters, checked: a 400 names the field (expr, tz, from, count, or an unknown one).
std::variant<CronNextRequest, BadRequest> parse_cron_next(const std::map<std::string, std::string, std::less<>>& params,
                                                          std::int64_t now_ms);
nlohmann::json cron_next_json(const CronNextRequest& request);

}  // namespace delayd::admin

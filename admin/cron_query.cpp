#include "admin/cron_query.hpp"

#include "cron/cron_format.hpp"

namespace delayd::admin {

std::variant<CronNextRequest, BadRequest> parse_cron_next(const std::map<std::string, std::string, std::less<>>& params,
                                                          std::int64_t now_ms) {
  for (const auto& [name, value] : params) {
    if (name != "expr" && name != "tz" && name != "from" && name != "count") {
      return BadRequest{name.empty() ? "query" : name,
                        "unknown parameter (GET /cron/next takes expr, tz, from, count)"};
    }
  }
  CronNextRequest r;
  const auto expr = params.find("expr");
  if (expr == params.end() || expr->second.empty()) return BadRequest{"expr", "required: a cron expression"};
  r.expr = expr->second;
  cron::ParsedCron parsed = cron::parse_cron(r.expr);
  if (!parsed) return BadRequest{"expr", parsed.error};
  r.parsed = *parsed.expr;
  if (const auto tz = params.find("tz"); tz != params.end()) r.tz = tz->second;
  r.zone = cron::find_zone(r.tz);
  if (r.zone == nullptr)
    return BadRequest{"tz", "not a time zone of the tz database (an IANA name such as Europe/Berlin)"};
  r.from_ms = now_ms;
  if (const auto from = params.find("from"); from != params.end()) {
    auto t = parse_time("from", from->second);
    if (auto* bad = std::get_if<BadRequest>(&t)) return std::move(*bad);
    r.from_ms = std::get<std::int64_t>(t);
  }
  if (const auto count = params.find("count"); count != params.end()) {
    const auto n = parse_count(count->second);
    if (!n || *n < 1 || *n > static_cast<std::int64_t>(kMaxCronCount)) {
      return BadRequest{"count", "must be a whole number from 1 to " + std::to_string(kMaxCronCount)};
    }
    r.count = static_cast<std::size_t>(*n);
  }
  return r;
}

nlohmann::json cron_next_json(const CronNextRequest& r) {
  const cron::Instant from{std::chrono::milliseconds(r.from_ms)};
  nlohmann::json next = nlohmann::json::array();
  const auto instants = cron::next_n(r.parsed, from, r.zone, r.count);
  for (const cron::Instant at : instants) {
    next.push_back({{"at", cron::format_in_zone(at, r.zone)}, {"epoch_ms", at.time_since_epoch().count()}});
  }
  return {{"expr", r.expr},
          {"tz", r.tz},
          {"from", r.from_ms},
          {"next", std::move(next)},
          {"complete", instants.size() == r.count}};
}

}  // namespace delayd::admin

// What the cron tests share: instants written as RFC 3339 (contract/time_format.hpp, compiled
// into the test), expressions that must parse, zones that must exist, and Catch printing
// instants as RFC 3339 so that a failure reads "2026-03-29T01:00:00.000Z == ...".
#pragma once

#include <date/tz.h>

#include <catch2/catch.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "contract/time_format.hpp"
#include "cron/cron_expr.hpp"

namespace delayd::cron::testing {

// The instant RFC 3339 text names ("2026-03-29T03:00:00+02:00"); fails the test if it is not one.
inline Instant at(std::string_view rfc3339) {
  const contract::ParsedTime t = contract::parse_rfc3339_ms(rfc3339);
  INFO("instant: " << rfc3339);
  REQUIRE(t);
  return Instant{std::chrono::milliseconds{t.epoch_ms}};
}

inline std::string show(Instant t) { return contract::format_rfc3339_ms(t.time_since_epoch().count()); }

// The expression `text` means; fails the test with the parser's message if it has none.
inline CronExpr cron(std::string_view text) {
  ParsedCron p = parse_cron(text);
  INFO("expression: '" << text << "': " << p.error);
  REQUIRE(p);
  return *p.expr;
}

// The zone named `name`; fails the test if the system tz database lacks it.
inline const date::time_zone* zone(std::string_view name) {
  const date::time_zone* z = find_zone(name);
  INFO("zone: " << name);
  REQUIRE(z != nullptr);
  return z;
}

// The next `n` instants of `text` after `from` in zone `tz`, as RFC 3339 UTC strings.
inline std::vector<std::string> next_utc(std::string_view text, std::string_view tz, std::string_view from,
                                         std::size_t n) {
  std::vector<std::string> out;
  for (Instant t : next_n(cron(text), at(from), tz == "UTC" ? nullptr : zone(tz), n)) out.push_back(show(t));
  return out;
}

}  // namespace delayd::cron::testing

namespace Catch {
template <>
struct StringMaker<delayd::cron::Instant> {
  static std::string convert(delayd::cron::Instant t) { return delayd::cron::testing::show(t); }
};
template <>
struct StringMaker<std::optional<delayd::cron::Instant>> {
  static std::string convert(const std::optional<delayd::cron::Instant>& t) {
    return t ? delayd::cron::testing::show(*t) : std::string("nullopt");
  }
};
}  // namespace Catch

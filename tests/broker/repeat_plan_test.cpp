// broker/repeat_plan.hpp: the next occurrence and the catch-up policies, for intervals and cron
// expressions, with last_by()'s doubling search checked against a walk over every occurrence.
#include "broker/repeat_plan.hpp"

#include <catch2/catch.hpp>
#include <random>

#include "contract/time_format.hpp"
#include "cron/cron_expr.hpp"

using delayd::broker::first_after;
using delayd::broker::last_by;
using delayd::broker::next;
using delayd::broker::skip;
using delayd::broker::unusable;
using delayd::storage::Catchup;
using delayd::storage::Occurrence;
using delayd::storage::RepeatRule;

namespace {

RepeatRule interval(std::int64_t every_ms, Catchup c = Catchup::latest) {
  RepeatRule r;
  r.every = std::chrono::milliseconds(every_ms);
  r.catchup = c;
  return r;
}

RepeatRule calendar(std::string cron, Catchup c = Catchup::latest, std::string tz = "UTC") {
  RepeatRule r;
  r.cron = std::move(cron);
  r.tz = std::move(tz);
  r.catchup = c;
  return r;
}

std::int64_t at(const char* rfc3339) { return delayd::contract::parse_rfc3339_ms(rfc3339).epoch_ms; }

}  // namespace

TEST_CASE("an interval goes on its grid, and after an outage each policy picks its occurrence", "[unit][repeat]") {
  const Occurrence done{0, 1};
  // Nothing missed: the next point of the grid, whatever the policy.
  for (Catchup c : {Catchup::latest, Catchup::all, Catchup::none}) {
    CHECK(next(interval(1000, c), done, 400, 100) == Occurrence{1000, 2});
  }
  // Acknowledged at 5 500: points 2..6 (1 000..5 000) have passed.
  CHECK(next(interval(1000, Catchup::latest), done, 5500, 100) == Occurrence{5000, 6});
  CHECK(next(interval(1000, Catchup::all), done, 5500, 100) == Occurrence{1000, 2});
  CHECK(next(interval(1000, Catchup::none), done, 5500, 100) == Occurrence{6000, 7});
  // all stops catching up after max_catchup missed ones in a row (the first of them plus 2).
  RepeatRule all = interval(1000, Catchup::all);
  all.caught_up = 2;
  CHECK(next(all, done, 5500, 3) == Occurrence{6000, 7});
  all.caught_up = 1;
  CHECK(next(all, done, 5500, 3) == Occurrence{1000, 2});
  // count and until bound every choice.
  RepeatRule bounded = interval(1000, Catchup::latest);
  bounded.count = 4;
  CHECK(next(bounded, done, 5500, 100) == Occurrence{3000, 4});
  CHECK_FALSE(next(bounded, Occurrence{3000, 4}, 3100, 100));
  bounded = interval(1000, Catchup::none);
  bounded.until = 2500;
  CHECK_FALSE(next(bounded, done, 5500, 100));
  bounded.catchup = Catchup::latest;
  CHECK(next(bounded, done, 5500, 100) == Occurrence{2000, 3});
}

TEST_CASE("an overtaken occurrence is skipped to the latest missed one or to the next to come", "[unit][repeat]") {
  const Occurrence due{1000, 1};
  CHECK_FALSE(skip(interval(1000), due, 1900));  // late, but the next one is not due yet
  CHECK(skip(interval(1000), due, 4500) == std::optional<Occurrence>(Occurrence{4000, 4}));
  CHECK(skip(interval(1000, Catchup::none), due, 4500) == std::optional<Occurrence>(Occurrence{5000, 5}));
  CHECK_FALSE(skip(interval(1000, Catchup::all), due, 4500));  // every one is delivered
  RepeatRule ends = interval(1000, Catchup::none);
  ends.until = 4000;
  const auto nothing = skip(ends, due, 4500);
  REQUIRE(nothing);
  CHECK_FALSE(*nothing);  // nowhere to go: the series ends
}

TEST_CASE("a cron repeat numbers its deliveries and catches up by the same policies", "[unit][repeat][cron]") {
  const std::int64_t t0 = at("2026-01-01T00:00:00Z");
  const Occurrence due{t0, 1};
  CHECK_FALSE(unusable(calendar("*/10 * * * * *")));
  CHECK(next(calendar("*/10 * * * * *"), due, t0 + 5'000, 100) == Occurrence{t0 + 10'000, 2});
  CHECK(next(calendar("*/10 * * * * *"), due, t0 + 65'000, 100) == Occurrence{t0 + 60'000, 2});
  CHECK(next(calendar("*/10 * * * * *", Catchup::all), due, t0 + 65'000, 100) == Occurrence{t0 + 10'000, 2});
  CHECK(next(calendar("*/10 * * * * *", Catchup::none), due, t0 + 65'000, 100) == Occurrence{t0 + 70'000, 2});
  // Skipped, the occurrence it goes on at takes the missed one's number.
  CHECK(skip(calendar("*/10 * * * * *"), due, t0 + 65'000) == std::optional<Occurrence>(Occurrence{t0 + 60'000, 1}));
  CHECK(skip(calendar("*/10 * * * * *", Catchup::none), due, t0 + 65'000) ==
        std::optional<Occurrence>(Occurrence{t0 + 70'000, 1}));
  RepeatRule r = calendar("*/10 * * * * *");
  r.count = 2;
  CHECK_FALSE(next(r, Occurrence{t0, 2}, t0 + 1, 100));
  r.count = 0;
  r.until = t0 + 30'000;
  CHECK(next(r, due, t0 + 65'000, 100) == Occurrence{t0 + 30'000, 2});
  // Zones: 09:00 in Berlin on weekdays, from a Friday to the Monday.
  RepeatRule berlin = calendar("0 9 * * MON-FRI", Catchup::latest, "Europe/Berlin");
  CHECK(first_after(berlin, Occurrence{at("2026-01-02T08:00:00Z"), 1}, at("2026-01-02T08:00:00Z")) ==
        Occurrence{at("2026-01-05T08:00:00Z"), 2});
  // A sparse expression over a long outage: found in a few calls.
  CHECK(last_by(calendar("0 0 1 1 *"), Occurrence{at("2020-01-01T00:00:00Z"), 1}, at("2026-06-01T00:00:00Z")) ==
        Occurrence{at("2026-01-01T00:00:00Z"), 2});
  CHECK_FALSE(last_by(calendar("0 0 1 1 *"), Occurrence{at("2026-01-01T00:00:00Z"), 1}, at("2026-06-01T00:00:00Z")));
}

TEST_CASE("last_by agrees with a walk over every occurrence", "[unit][repeat][cron]") {
  const char* exprs[] = {"*/7 * * * * *", "0 */5 * * * *", "30 2 * * *", "0 0 L * *",
                         "0 12 * * 5#2",  "15 10 ? * MON", "0 0 29 2 *"};
  const char* zones[] = {"UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe"};
  std::mt19937_64 rng(20261124);
  int compared = 0;
  for (const char* e : exprs) {
    for (const char* z : zones) {
      const RepeatRule rule = calendar(e, Catchup::latest, z);
      const auto zone = delayd::cron::find_zone(z);
      const auto expr = *delayd::cron::parse_cron(e).expr;
      for (int i = 0; i < 20; ++i) {
        const std::int64_t from = at("2026-01-01T00:00:00Z") + static_cast<std::int64_t>(rng() % 31'536'000'000ULL);
        // Windows from minutes to years, so that the walk below stays short for dense expressions.
        const bool dense = e[0] == '*' || e[2] == '*';  // every few seconds or minutes
        const std::int64_t span = std::int64_t{60'000} << (rng() % (dense ? 8 : 20));
        const std::int64_t t = from + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(span));
        std::optional<std::int64_t> slow;
        for (auto x = delayd::cron::next_after(expr, delayd::cron::Instant(std::chrono::milliseconds(from)), zone);
             x && x->time_since_epoch().count() <= t; x = delayd::cron::next_after(expr, *x, zone)) {
          slow = x->time_since_epoch().count();
        }
        const auto fast = last_by(rule, Occurrence{from, 1}, t);
        INFO(e << " in " << z << " from " << from << " to " << t);
        CHECK(fast.has_value() == slow.has_value());
        if (fast && slow) CHECK(fast->at == *slow);
        ++compared;
      }
    }
  }
  CHECK(compared == 7 * 4 * 20);
}

TEST_CASE("a rule the tz database cannot follow any more is named", "[unit][repeat]") {
  CHECK(unusable(calendar("* * * * *", Catchup::latest, "Mars/Olympus")).value_or("").starts_with("repeat-tz:"));
  CHECK(unusable(calendar("61 * * * *")).value_or("").starts_with("repeat-cron:"));
  CHECK_FALSE(unusable(interval(5)));
}

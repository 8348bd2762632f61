// The timing wheel's contract, edge by edge.
#include "wheel/timing_wheel.hpp"

#include <catch2/catch.hpp>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <vector>

namespace {

using delayd::wheel::Expired;
using delayd::wheel::ScheduleStatus;
using delayd::wheel::TimerHandle;
using delayd::wheel::TimingWheel;
using delayd::wheel::WheelConfig;

constexpr std::size_t unlimited = std::numeric_limits<std::size_t>::max();
constexpr std::uint64_t epoch_ms = 1'800'000'000'000;  // an epoch-millisecond "now", as the broker passes
constexpr std::uint64_t default_range = std::uint64_t{1} << 24;

TimerHandle must_schedule(TimingWheel& wheel, std::uint64_t deadline, std::uint64_t payload = 0) {
  const auto result = wheel.schedule(deadline, payload);
  REQUIRE(result.status == ScheduleStatus::scheduled);
  REQUIRE(result.handle.valid());
  return result.handle;
}

std::vector<Expired> advance(TimingWheel& wheel, std::uint64_t now, std::size_t limit = unlimited) {
  std::vector<Expired> out;
  const std::size_t n = wheel.advance(now, limit, out);
  REQUIRE(n == out.size());
  wheel.check_invariants();
  return out;
}

std::vector<std::uint64_t> payloads(const std::vector<Expired>& fired) {
  std::vector<std::uint64_t> p;
  for (const Expired& e : fired) p.push_back(e.payload);
  return p;
}

// Advances to each next expiry in turn and records the time each timer came out.
std::vector<std::pair<std::uint64_t, Expired>> run_to_empty(TimingWheel& wheel) {
  std::vector<std::pair<std::uint64_t, Expired>> fired;
  while (const auto next = wheel.next_expiry()) {
    for (const Expired& e : advance(wheel, *next)) fired.emplace_back(wheel.now(), e);
  }
  return fired;
}

}  // namespace

TEST_CASE("a new wheel is empty and reports its configuration", "[wheel]") {
  const TimingWheel wheel(WheelConfig{}, epoch_ms);
  CHECK(wheel.size() == 0);
  CHECK(wheel.empty());
  CHECK(wheel.now() == epoch_ms);
  CHECK(wheel.cursor() == epoch_ms);
  CHECK_FALSE(wheel.next_expiry().has_value());
  CHECK(wheel.range() == default_range);
  wheel.check_invariants();
}

TEST_CASE("invalid configurations are refused", "[wheel]") {
  CHECK_THROWS_AS(TimingWheel(WheelConfig{0, 8}), std::invalid_argument);
  CHECK_THROWS_AS(TimingWheel(WheelConfig{1, 0}), std::invalid_argument);
  CHECK_THROWS_AS(TimingWheel(WheelConfig{1, 13}), std::invalid_argument);
  CHECK_NOTHROW(TimingWheel(WheelConfig{1, 12}));
  CHECK_NOTHROW(TimingWheel(WheelConfig{1, 1}));
}

TEST_CASE("a timer is never released before its deadline", "[wheel][never-early]") {
  TimingWheel wheel(WheelConfig{}, epoch_ms);
  const std::uint64_t deadline = epoch_ms + 1234;
  const TimerHandle h = must_schedule(wheel, deadline, 7);

  CHECK(advance(wheel, deadline - 1).empty());
  CHECK(wheel.size() == 1);
  const auto fired = advance(wheel, deadline);
  REQUIRE(fired.size() == 1);
  CHECK(fired[0].handle == h);
  CHECK(fired[0].deadline == deadline);
  CHECK(fired[0].payload == 7);
  CHECK(wheel.size() == 0);
}

TEST_CASE("with a longer tick, deadlines round up and now rounds down", "[wheel][never-early]") {
  TimingWheel wheel(WheelConfig{10, 8}, 1000);
  must_schedule(wheel, 1015, 1);  // tick 102: released from now = 1020
  must_schedule(wheel, 1020, 2);  // exactly on a tick boundary: also from 1020

  CHECK(advance(wheel, 1015).empty());  // its deadline has passed, but not the tick that covers it
  CHECK(advance(wheel, 1019).empty());
  CHECK(payloads(advance(wheel, 1020)) == std::vector<std::uint64_t>{1, 2});
}

TEST_CASE("advanced to each next expiry, a timer is at most one tick late", "[wheel][never-early]") {
  const std::uint64_t tick = 10;
  TimingWheel wheel(WheelConfig{tick, 4}, 5);
  for (std::uint64_t d = 5; d < 5 + 3000; d += 7) must_schedule(wheel, d, d);

  std::size_t count = 0;
  for (const auto& [at, e] : run_to_empty(wheel)) {
    CHECK(at >= e.deadline);
    CHECK(at - e.deadline < tick);
    ++count;
  }
  CHECK(count == 3000 / 7 + 1);
}

TEST_CASE("a deadline equal to now fires on the next advance", "[wheel]") {
  TimingWheel wheel(WheelConfig{}, epoch_ms);
  must_schedule(wheel, epoch_ms, 1);
  CHECK(wheel.next_expiry() == epoch_ms);
  CHECK(payloads(advance(wheel, epoch_ms)) == std::vector<std::uint64_t>{1});
}

TEST_CASE("a deadline in the past fires on the next advance, even a backwards one", "[wheel]") {
  TimingWheel wheel(WheelConfig{}, epoch_ms);
  must_schedule(wheel, epoch_ms - 60'000, 1);
  must_schedule(wheel, 0, 2);
  CHECK(wheel.size() == 2);
  CHECK(wheel.next_expiry() <= epoch_ms);
  // A smaller now is taken as now(): time does not run backwards, and what is due comes out.
  CHECK(payloads(advance(wheel, epoch_ms - 5)) == std::vector<std::uint64_t>{1, 2});
  CHECK(wheel.now() == epoch_ms);
}

TEST_CASE("the maximum range is accepted and one beyond it is refused", "[wheel][range]") {
  SECTION("default configuration: 2^24 ticks of 1 ms from an epoch-ms start") {
    TimingWheel wheel(WheelConfig{}, epoch_ms);
    REQUIRE(wheel.range() == default_range);
    const std::uint64_t last = epoch_ms + wheel.range() - 1;
    const TimerHandle h = must_schedule(wheel, last, 1);

    const auto refused = wheel.schedule(last + 1, 2);
    CHECK(refused.status == ScheduleStatus::beyond_range);
    CHECK_FALSE(refused.handle.valid());
    CHECK(wheel.size() == 1);  // nothing stored, nothing clamped

    CHECK(advance(wheel, last - 1).empty());
    const auto fired = advance(wheel, last);
    REQUIRE(fired.size() == 1);
    CHECK(fired[0].handle == h);
  }
  SECTION("the window slides: after advancing, the old limit is inside the range") {
    TimingWheel wheel(WheelConfig{}, epoch_ms);
    CHECK(wheel.schedule(epoch_ms + default_range, 1).status == ScheduleStatus::beyond_range);
    advance(wheel, epoch_ms + 1);
    CHECK(wheel.schedule(epoch_ms + default_range, 1).status == ScheduleStatus::scheduled);
    CHECK(wheel.schedule(epoch_ms + 1 + default_range, 1).status == ScheduleStatus::beyond_range);
  }
  SECTION("a longer tick: the horizon is tick-aligned") {
    TimingWheel wheel(WheelConfig{1000, 2}, 10'500);  // 64 ticks of 1 s; cursor tick 10
    // Accepted iff ceil(d / 1000) <= 10 + 63, i.e. d <= 73'000.
    CHECK(wheel.range() == 73'000 + 1 - 10'500);
    CHECK(wheel.schedule(73'000, 1).status == ScheduleStatus::scheduled);
    CHECK(wheel.schedule(73'001, 2).status == ScheduleStatus::beyond_range);
  }
}

TEST_CASE("timers on slot and level boundaries fire exactly on time", "[wheel][boundaries]") {
  // Default geometry: level 0 spans 256 ticks, level 1 65'536, level 2 2^24.
  const std::uint64_t start = epoch_ms;  // 1.8e12 is not aligned to any level span
  TimingWheel wheel(WheelConfig{}, start);
  const std::uint64_t aligned1 = (start / 256 + 1) * 256;
  const std::uint64_t aligned2 = (start / 65'536 + 1) * 65'536;
  const std::uint64_t aligned3 = (start / default_range + 1) * default_range;
  const std::vector<std::uint64_t> deadlines = {
      start + 1,
      start + 255,
      start + 256,
      start + 257,
      aligned1 - 1,
      aligned1,
      aligned1 + 1,
      start + 65'535,
      start + 65'536,
      start + 65'537,
      aligned2 - 1,
      aligned2,
      aligned2 + 1,
      aligned3 - 1,
      aligned3,
      aligned3 + 1,
      start + default_range - 256,
      start + default_range - 1,
  };
  for (std::uint64_t d : deadlines) must_schedule(wheel, d, d);
  wheel.check_invariants();

  std::vector<std::uint64_t> seen;
  for (const auto& [at, e] : run_to_empty(wheel)) {
    CHECK(at == e.deadline);
    seen.push_back(e.deadline);
  }
  std::vector<std::uint64_t> sorted = deadlines;
  std::sort(sorted.begin(), sorted.end());
  CHECK(seen == sorted);
}

TEST_CASE("deadlines in the next top-level rotation wrap around correctly", "[wheel][boundaries]") {
  // Small wheel (2 bits: 4 slots per level, 64-tick range) so the top level wraps quickly.
  for (std::uint64_t start = 0; start < 130; ++start) {
    TimingWheel wheel(WheelConfig{1, 2}, start);
    REQUIRE(wheel.range() == 64);
    for (std::uint64_t d = start; d < start + 64; ++d) must_schedule(wheel, d, d);
    wheel.check_invariants();
    std::uint64_t expect = start;
    for (const auto& [at, e] : run_to_empty(wheel)) {
      REQUIRE(e.deadline == expect);
      REQUIRE(at == e.deadline);
      ++expect;
    }
    REQUIRE(expect == start + 64);
  }
}

TEST_CASE("timers with the same deadline come out in the order they were scheduled", "[wheel][order]") {
  TimingWheel wheel(WheelConfig{}, epoch_ms);
  const std::uint64_t deadline = epoch_ms + 3'000'000;  // starts on level 2
  std::uint64_t payload = 0;
  // Schedule some now, more after each cascade has moved the earlier ones down a level, and the
  // last ones when the deadline is inside level 0.
  for (std::uint64_t step :
       {std::uint64_t{0}, std::uint64_t{2'990'000}, std::uint64_t{2'999'900}, std::uint64_t{2'999'999}}) {
    advance(wheel, epoch_ms + step);
    for (int i = 0; i < 100; ++i) must_schedule(wheel, deadline, payload++);
  }
  const auto fired = advance(wheel, deadline);
  REQUIRE(fired.size() == 400);
  for (std::uint64_t i = 0; i < 400; ++i) CHECK(fired[i].payload == i);
}

TEST_CASE("advance releases at most `limit` and the rest come out next, in order", "[wheel][limit]") {
  TimingWheel wheel(WheelConfig{}, 0);
  for (std::uint64_t i = 0; i < 10; ++i) must_schedule(wheel, 500, i);
  must_schedule(wheel, 501, 10);

  CHECK(payloads(advance(wheel, 1000, 3)) == std::vector<std::uint64_t>{0, 1, 2});
  CHECK(wheel.size() == 8);
  CHECK(wheel.next_expiry() <= wheel.now());  // more is due already
  // A timer for the same deadline scheduled now still comes after the earlier ones.
  must_schedule(wheel, 500, 11);
  CHECK(payloads(advance(wheel, 1000, 4)) == std::vector<std::uint64_t>{3, 4, 5, 6});
  CHECK(advance(wheel, 1000, 0).empty());
  CHECK(payloads(advance(wheel, 1000, 100)) == std::vector<std::uint64_t>{7, 8, 9, 11, 10});
  CHECK(wheel.size() == 0);
  CHECK(wheel.cursor() == 1000);
}

TEST_CASE("cancel stops a pending timer and is a no-op on everything else", "[wheel][cancel]") {
  TimingWheel wheel(WheelConfig{}, epoch_ms);

  SECTION("a pending timer") {
    const TimerHandle h = must_schedule(wheel, epoch_ms + 10, 1);
    must_schedule(wheel, epoch_ms + 10, 2);
    CHECK(wheel.cancel(h));
    CHECK(wheel.size() == 1);
    CHECK_FALSE(wheel.cancel(h));  // twice: no-op
    CHECK(payloads(advance(wheel, epoch_ms + 10)) == std::vector<std::uint64_t>{2});
  }
  SECTION("after it fired") {
    const TimerHandle h = must_schedule(wheel, epoch_ms + 10, 1);
    advance(wheel, epoch_ms + 10);
    CHECK_FALSE(wheel.cancel(h));
    CHECK(wheel.size() == 0);
  }
  SECTION("a stale handle whose index was reused") {
    const TimerHandle old = must_schedule(wheel, epoch_ms + 10, 1);
    advance(wheel, epoch_ms + 10);
    // Freed indices are reused oldest first, after a short delay: churn timers until a pending
    // one holds the old index under a new generation.
    TimerHandle current;
    for (std::uint64_t i = 0; i < 1000; ++i) {
      current = must_schedule(wheel, wheel.now() + 1, 1000 + i);
      if (current.index == old.index) break;
      advance(wheel, wheel.now() + 1);
    }
    REQUIRE(current.index == old.index);
    REQUIRE(current.generation != old.generation);
    CHECK_FALSE(wheel.cancel(old));  // cannot reach the timer now using its index
    CHECK(wheel.size() == 1);
    const auto fired = advance(wheel, wheel.now() + 1);
    REQUIRE(fired.size() == 1);
    CHECK(fired[0].handle == current);
  }
  SECTION("default and foreign handles") {
    must_schedule(wheel, epoch_ms + 10, 1);
    CHECK_FALSE(wheel.cancel(TimerHandle{}));
    CHECK_FALSE(wheel.cancel(TimerHandle{12345, 1}));
    CHECK_FALSE(wheel.cancel(TimerHandle{0, 99}));
    CHECK(wheel.size() == 1);
  }
  wheel.check_invariants();
}

TEST_CASE("cancelling a timer whose slot is cascading", "[wheel][cancel]") {
  TimingWheel wheel(WheelConfig{}, 0);
  // All in one level-2 slot (ticks 65'536..131'071), due at different ticks.
  std::vector<TimerHandle> handles;
  for (std::uint64_t i = 0; i < 300; ++i) handles.push_back(must_schedule(wheel, 100'000 + i, i));
  REQUIRE(wheel.stats().levels[2].entries == 300);

  SECTION("cancelled before the cascade: dropped when the slot opens, never released") {
    for (std::uint64_t i = 0; i < 300; i += 2) REQUIRE(wheel.cancel(handles[i]));
    CHECK(wheel.stats().orphans == 150);
    const auto fired = advance(wheel, 100'000 + 300);
    REQUIRE(fired.size() == 150);
    for (std::size_t k = 0; k < fired.size(); ++k) CHECK(fired[k].payload == 2 * k + 1);
    CHECK(wheel.stats().orphans == 0);  // memory and indices reclaimed by the cascade
  }
  SECTION("cancelled after the cascade moved it down a level") {
    advance(wheel, 99'999);  // opens the level-2 slot; everything is now on levels 0 and 1
    CHECK(wheel.stats().levels[2].entries == 0);
    CHECK(wheel.cancel(handles[299]));
    CHECK(wheel.cancel(handles[0]));
    const auto fired = advance(wheel, 100'000 + 300);
    REQUIRE(fired.size() == 298);
    CHECK(fired.front().payload == 1);
    CHECK(fired.back().payload == 298);
  }
  SECTION("cancelled while its slot is open and its batch was cut short by the limit") {
    std::vector<TimerHandle> late;
    for (std::uint64_t i = 0; i < 10; ++i) late.push_back(must_schedule(wheel, 200'000, 1000 + i));
    const auto first = advance(wheel, 200'000, 300 + 4);  // the 300, then 4 of the 10
    REQUIRE(first.size() == 304);
    CHECK(first.back().payload == 1003);
    CHECK(wheel.cancel(late[6]));
    CHECK_FALSE(wheel.cancel(late[2]));  // already released
    CHECK(payloads(advance(wheel, 200'000)) == std::vector<std::uint64_t>{1004, 1005, 1007, 1008, 1009});
  }
  wheel.check_invariants();
}

TEST_CASE("a cancelled entry in a due batch is skipped and does not count against the limit",
          "[wheel][cancel][limit]") {
  TimingWheel wheel(WheelConfig{}, 0);
  std::vector<TimerHandle> h;
  for (std::uint64_t i = 0; i < 6; ++i) h.push_back(must_schedule(wheel, 50, i));
  CHECK(payloads(advance(wheel, 50, 2)) == std::vector<std::uint64_t>{0, 1});
  CHECK(wheel.cancel(h[2]));
  CHECK(wheel.cancel(h[3]));
  CHECK(payloads(advance(wheel, 50, 2)) == std::vector<std::uint64_t>{4, 5});
  CHECK(wheel.empty());
}

TEST_CASE("huge time jumps", "[wheel][jumps]") {
  TimingWheel wheel(WheelConfig{}, epoch_ms);

  SECTION("over an empty wheel: nothing fires, the window moves along") {
    const std::uint64_t later = epoch_ms + 1'000'000'000'000;  // ~31 years
    CHECK(advance(wheel, later).empty());
    CHECK(wheel.now() == later);
    CHECK(wheel.cursor() == later);
    CHECK(wheel.range() == default_range);
    must_schedule(wheel, later + default_range - 1);
  }
  SECTION("over a full wheel: everything fires, in deadline order") {
    for (std::uint64_t i = 0; i < 5000; ++i) must_schedule(wheel, epoch_ms + (i * 7919) % default_range, i);
    const auto fired = advance(wheel, std::numeric_limits<std::uint64_t>::max());
    REQUIRE(fired.size() == 5000);
    for (std::size_t i = 1; i < fired.size(); ++i) CHECK(fired[i - 1].deadline <= fired[i].deadline);
    CHECK(wheel.empty());
    CHECK_FALSE(wheel.next_expiry().has_value());
  }
  SECTION("a long jump cut short by the limit keeps the rest in order") {
    for (std::uint64_t i = 0; i < 100; ++i) must_schedule(wheel, epoch_ms + 1000 * (100 - i), i);
    const std::uint64_t later = epoch_ms + 10 * default_range;
    std::vector<std::uint64_t> deadlines;
    while (!wheel.empty()) {
      for (const Expired& e : advance(wheel, later, 7)) deadlines.push_back(e.deadline);
    }
    REQUIRE(deadlines.size() == 100);
    CHECK(std::is_sorted(deadlines.begin(), deadlines.end()));
  }
}

TEST_CASE("next_expiry names the next due time, from any level", "[wheel][next-expiry]") {
  TimingWheel wheel(WheelConfig{}, epoch_ms);
  CHECK_FALSE(wheel.next_expiry().has_value());

  must_schedule(wheel, epoch_ms + 10'000'000, 1);  // level 2
  CHECK(wheel.next_expiry() == epoch_ms + 10'000'000);
  must_schedule(wheel, epoch_ms + 30'000, 2);  // level 1
  CHECK(wheel.next_expiry() == epoch_ms + 30'000);
  const TimerHandle soon = must_schedule(wheel, epoch_ms + 100, 3);  // level 0
  CHECK(wheel.next_expiry() == epoch_ms + 100);

  // Cancelling the earliest may leave next_expiry early (never late); advancing to it releases
  // nothing and the next answer is the true one.
  CHECK(wheel.cancel(soon));
  const auto early = wheel.next_expiry();
  REQUIRE(early.has_value());
  CHECK(*early <= epoch_ms + 30'000);
  CHECK(advance(wheel, *early).empty());
  CHECK(wheel.next_expiry() == epoch_ms + 30'000);

  CHECK(payloads(advance(wheel, epoch_ms + 30'000)) == std::vector<std::uint64_t>{2});
  CHECK(wheel.next_expiry() == epoch_ms + 10'000'000);
  CHECK(payloads(advance(wheel, epoch_ms + 10'000'000)) == std::vector<std::uint64_t>{1});
  CHECK_FALSE(wheel.next_expiry().has_value());
}

TEST_CASE("introspection reports per-level occupancy", "[wheel][stats]") {
  TimingWheel wheel(WheelConfig{}, 0);
  must_schedule(wheel, 10);         // level 0
  must_schedule(wheel, 11);         // level 0, another slot
  must_schedule(wheel, 1000);       // level 1
  must_schedule(wheel, 1001);       // level 1, same slot
  must_schedule(wheel, 5'000'000);  // level 2
  const auto s = wheel.stats();
  CHECK(s.levels[0].occupied_slots == 2);
  CHECK(s.levels[0].entries == 2);
  CHECK(s.levels[1].occupied_slots == 1);
  CHECK(s.levels[1].entries == 2);
  CHECK(s.levels[2].occupied_slots == 1);
  CHECK(s.levels[2].entries == 1);
  CHECK(s.pending == 5);
  CHECK(s.orphans == 0);
  CHECK(s.chunks_total >= 5);
}

TEST_CASE("memory is reused: a steady load stops growing the pool", "[wheel][memory]") {
  TimingWheel wheel(WheelConfig{1, 4}, 0);  // 4096-tick range
  std::uint64_t x = 12345;
  auto next_random = [&x] {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  };
  for (int i = 0; i < 2000; ++i) must_schedule(wheel, next_random() % 4096, 0);
  std::vector<Expired> out;
  std::size_t high_water = 0;
  for (int round = 0; round < 200; ++round) {
    const auto next = wheel.next_expiry();
    REQUIRE(next.has_value());
    out.clear();
    wheel.advance(*next, unlimited, out);
    for (std::size_t i = 0; i < out.size(); ++i) must_schedule(wheel, wheel.now() + 1 + next_random() % 4000, 0);
    if (round == 100) high_water = wheel.stats().chunks_total;
  }
  CHECK(wheel.size() == 2000);
  CHECK(wheel.stats().chunks_total == high_water);
  wheel.check_invariants();
}

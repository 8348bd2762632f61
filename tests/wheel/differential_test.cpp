// The wheel against ReferenceWheel: random schedule / cancel / advance sequences, many seeds and
// shapes of wheel. After every operation both must agree on what was accepted, what was
// cancelled, what was released (same timers, same order), size, now, cursor and range, and the
// wheel's next_expiry() must never be later than the true one (and equal to it when nothing was
// cancelled). The wheel's own invariant checker runs throughout.
//
// Scale: DELAYD_WHEEL_DIFF_OPS sets the operations per (shape, seed) run. The default gives a
// about three million operations in all; sanitizer builds default to a third of that. The [.long]
// case runs ten times the default. DELAYD_WHEEL_DIFF_VERBOSE=1 prints what each run covered
// (timers scheduled, refused, cancelled, released, batches cut by the limit, peak size).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "tests/wheel/reference_wheel.hpp"
#include "wheel/timing_wheel.hpp"

namespace {

using delayd::wheel::Expired;
using delayd::wheel::ScheduleStatus;
using delayd::wheel::TimerHandle;
using delayd::wheel::TimingWheel;
using delayd::wheel::WheelConfig;
using delayd::wheel::testing::ReferenceWheel;

constexpr std::uint64_t max_u64 = std::numeric_limits<std::uint64_t>::max();
constexpr std::size_t unlimited = std::numeric_limits<std::size_t>::max();

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_UNDEFINED__)
constexpr std::size_t default_ops = 20'000;
#else
constexpr std::size_t default_ops = 60'000;
#endif

std::size_t ops_per_run(std::size_t multiplier) {
  if (const char* env = std::getenv("DELAYD_WHEEL_DIFF_OPS")) {
    const long long n = std::atoll(env);
    if (n > 0) return static_cast<std::size_t>(n) * multiplier;
  }
  return default_ops * multiplier;
}

struct Shape {
  const char* name;
  std::uint64_t tick;
  unsigned slot_bits;
  std::uint64_t start;
};

// Small wheels cascade and wrap constantly; the default one checks the broker's configuration
// with epoch-millisecond times; the last one runs at the top of the 64-bit range.
const Shape shapes[] = {
    {"2 bits, tick 1", 1, 2, 0},
    {"3 bits, tick 1, odd start", 1, 3, 1'000'003},
    {"3 bits, tick 7", 7, 3, 12'345},
    {"4 bits, tick 1000, epoch ms", 1000, 4, 1'800'000'000'123},
    {"8 bits, tick 1, epoch ms", 1, 8, 1'800'000'000'000},
    {"5 bits, tick 3, near 2^64", 3, 5, max_u64 - (std::uint64_t{1} << 30)},
};

std::uint64_t sat_add(std::uint64_t a, std::uint64_t b) { return a > max_u64 - b ? max_u64 : a + b; }

class Driver {
 public:
  Driver(const Shape& shape, std::uint64_t seed, bool cancels)
      : shape_(shape),
        rng_(seed),
        cancels_(cancels),
        wheel_(WheelConfig{shape.tick, shape.slot_bits}, shape.start),
        ref_(shape.tick, shape.slot_bits, shape.start),
        slot_span_(shape.tick << shape.slot_bits) {}

  void run(std::size_t ops) {
    for (std::size_t op = 0; op < ops; ++op) {
      // Alternate filling and draining phases so that the wheel sees both crowded slots (many
      // timers per slot, long cascades) and a near-empty wheel (long jumps between slots).
      const bool filling = (op / 2048) % 2 == 0;
      const std::uint64_t dice = pick(100);
      const bool crowded = ref_.size() > 5000;
      if (!crowded && dice < (filling ? 70U : 30U)) {
        schedule(deadline());
      } else if (cancels_ && dice < (filling ? 78U : 40U)) {
        cancel();
      } else {
        advance(next_now(), limit());
      }
      if (op % 16 == 0) wheel_.check_invariants();
      compare_state();
    }
    // Drain everything: both must release the same remaining timers, in order.
    for (int i = 0; i < 10'000 && ref_.size() > 0; ++i) {
      const std::uint64_t to = wheel_.next_expiry().value_or(wheel_.now());
      advance(std::max(to, wheel_.now()), limit());
      compare_state();
    }
    REQUIRE(ref_.size() == 0);
    REQUIRE(wheel_.size() == 0);
    wheel_.check_invariants();
    if (std::getenv("DELAYD_WHEEL_DIFF_VERBOSE")) {
      std::printf("%s: sched=%zu refused=%zu cancels_ok=%zu released=%zu cut=%zu maxsize=%zu\n", shape_.name,
                  handles_.size(), refused_, cancelled_, released_, cut_, max_size_);
    }
  }

 private:
  std::uint64_t pick(std::uint64_t n) { return std::uniform_int_distribution<std::uint64_t>(0, n - 1)(rng_); }

  std::uint64_t deadline() {
    const std::uint64_t now = wheel_.now();
    const std::uint64_t range = wheel_.range();
    switch (pick(10)) {
      case 0:  // the past, or exactly now
        return pick(2) == 0 ? now : now - std::min(now, pick(4 * slot_span_ + 1));
      case 1: {  // at and around the edge of the range
        const std::uint64_t edge = sat_add(now, range);
        const std::uint64_t off = pick(3 * shape_.tick + 1);
        return pick(2) == 0 ? edge - std::min(edge, off) : sat_add(edge, off);
      }
      case 2:  // a deadline many timers share
        if (!popular_.empty() && pick(4) != 0) return popular_[pick(popular_.size())];
        popular_.push_back(sat_add(now, pick(std::max<std::uint64_t>(range, 1))));
        if (popular_.size() > 16) popular_.erase(popular_.begin());
        return popular_.back();
      case 3: {  // on a slot boundary of some level, give or take one
        const unsigned level = static_cast<unsigned>(pick(3));
        const std::uint64_t unit = shape_.tick << (level * shape_.slot_bits);
        const std::uint64_t base = sat_add(now, pick(std::max<std::uint64_t>(range, 1)));
        const std::uint64_t aligned = base - base % unit;
        return aligned - std::min<std::uint64_t>(aligned, 1) + pick(3);
      }
      case 4:
      case 5:  // soon: within a few level-0 spans
        return sat_add(now, pick(4 * slot_span_ + 1));
      default:  // anywhere in the range, and a little beyond
        return sat_add(now, pick(sat_add(range, range / 16) | 1));
    }
  }

  std::uint64_t next_now() {
    const std::uint64_t now = wheel_.now();
    const std::uint64_t dice = pick(100);
    if (dice < 40) {
      if (const auto next = wheel_.next_expiry()) return *next;
      return sat_add(now, pick(2 * shape_.tick + 1));
    }
    if (dice < 70) return sat_add(now, pick(2 * shape_.tick + 1));
    if (dice < 80) return sat_add(now, pick(std::max<std::uint64_t>(wheel_.range() / 64, 1)));
    if (dice < 82) {  // a huge jump: whole ranges, sometimes decades
      return pick(4) == 0 ? sat_add(now, std::uint64_t{1} << 40) : sat_add(now, pick(sat_add(3 * wheel_.range(), 1)));
    }
    if (dice < 90) return now - std::min(now, pick(1000));  // backwards: must be ignored
    return now;
  }

  std::size_t limit() {
    const std::uint64_t dice = pick(10);
    if (dice < 5) return unlimited;
    if (dice < 9) return static_cast<std::size_t>(pick(6));
    return static_cast<std::size_t>(1 + pick(100));
  }

  void schedule(std::uint64_t deadline) {
    const std::uint64_t payload = rng_();
    const auto result = wheel_.schedule(deadline, payload);
    const auto id = ref_.schedule(deadline, payload);
    INFO("schedule deadline " << deadline << " at now " << wheel_.now());
    REQUIRE((result.status == ScheduleStatus::scheduled) == id.has_value());
    if (!id) {
      ++refused_;
      REQUIRE_FALSE(result.handle.valid());
      return;
    }
    REQUIRE(result.handle.valid());
    REQUIRE(*id == handles_.size());
    handles_.push_back(result.handle);
  }

  void cancel() {
    if (handles_.empty() || pick(20) == 0) {
      REQUIRE_FALSE(wheel_.cancel(TimerHandle{}));
      return;
    }
    // Mostly recent timers (likely pending), sometimes any (likely fired, cancelled or stale).
    const std::size_t n = handles_.size();
    const std::size_t id = pick(2) == 0 ? n - 1 - static_cast<std::size_t>(pick(std::min<std::size_t>(n, 64)))
                                        : static_cast<std::size_t>(pick(n));
    INFO("cancel id " << id);
    const bool ok = wheel_.cancel(handles_[id]);
    cancelled_ += ok;
    REQUIRE(ok == ref_.cancel(id));
  }

  void advance(std::uint64_t now, std::size_t limit) {
    got_.clear();
    want_.clear();
    const std::size_t n = wheel_.advance(now, limit, got_);
    const std::size_t m = ref_.advance(now, limit, want_);
    INFO("advance to " << now << " limit " << limit);
    REQUIRE(n == got_.size());
    REQUIRE(n == m);
    released_ += n;
    if (n == limit && n > 0) ++cut_;
    for (std::size_t i = 0; i < n; ++i) {
      INFO("release #" << i);
      REQUIRE(got_[i].handle == handles_[want_[i].id]);
      REQUIRE(got_[i].deadline == want_[i].deadline);
      REQUIRE(got_[i].payload == want_[i].payload);
      REQUIRE(got_[i].deadline <= wheel_.now());  // never early
    }
  }

  void compare_state() {
    max_size_ = std::max(max_size_, wheel_.size());
    REQUIRE(wheel_.size() == ref_.size());
    REQUIRE(wheel_.now() == ref_.now());
    REQUIRE(wheel_.cursor() == ref_.cursor());
    REQUIRE(wheel_.range() == ref_.range());
    const auto got = wheel_.next_expiry();
    const auto want = ref_.next_expiry();
    REQUIRE(got.has_value() == want.has_value());
    if (got) {
      REQUIRE(*got <= *want);
      if (!cancels_) REQUIRE(*got == *want);
    }
  }

  const Shape& shape_;
  std::mt19937_64 rng_;
  bool cancels_;
  TimingWheel wheel_;
  ReferenceWheel ref_;
  std::uint64_t slot_span_;
  std::vector<TimerHandle> handles_;  // by reference id
  std::vector<std::uint64_t> popular_;
  std::size_t refused_ = 0, cancelled_ = 0, released_ = 0, cut_ = 0, max_size_ = 0;
  std::vector<Expired> got_;
  std::vector<ReferenceWheel::Released> want_;
};

void run_all(std::size_t multiplier) {
  const std::size_t ops = ops_per_run(multiplier);
  for (const Shape& shape : shapes) {
    for (std::uint64_t seed = 1; seed <= 8; ++seed) {
      const bool cancels = seed % 4 != 0;  // every fourth run has no cancels: next_expiry exact
      INFO("shape '" << shape.name << "', seed " << seed << ", " << ops << " ops");
      Driver(shape, seed * 0x9E3779B97F4A7C15ULL, cancels).run(ops);
    }
  }
}

}  // namespace

TEST_CASE("the wheel releases exactly what the reference model releases, in the same order", "[wheel][differential]") {
  run_all(1);
}

TEST_CASE("the differential test, ten times longer", "[.long][wheel][differential]") { run_all(10); }

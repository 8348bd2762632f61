// The server watch (broker/server_watch.hpp): its looks run on a thread of their own, at their
// periods, and what they found reaches findings(); a look that fails is skipped, said once, and
// the watch goes on. The looks here are stand-ins: what each says is the test's.
#include "broker/server_watch.hpp"

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <thread>

#include "redis/connection.hpp"
#include "support/captured_log.hpp"

using namespace delayd::broker;
using delayd::testing::CapturedLog;
using namespace std::chrono_literals;

namespace {

// Calls `done` until it is true or `bound` has passed; what it said last.
template <typename Done>
bool eventually(Done done, std::chrono::milliseconds bound = 10s) {
  const auto until = std::chrono::steady_clock::now() + bound;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= until) return done();
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

// Looks that say: a host clock 2 s ahead of Redis's and unsynchronized, settings that are safe;
// each counts its calls.
struct Stand {
  std::atomic<int> clock_looks{0};
  std::atomic<int> settings_looks{0};

  ServerWatch::Looks looks() {
    return {.host_clock =
                [] {
                  return std::optional<HostClockSync>(HostClockSync{false, 16'000'000});
                },
            .redis_time_us =
                [this] {
                  ++clock_looks;
                  return std::optional<std::int64_t>(1'000'000'000'000'000);
                },
            .now_us = [] { return std::int64_t{1'000'000'002'000'000}; },
            .redis_settings =
                [this] {
                  ++settings_looks;
                  return RedisSettingsFindings{};
                }};
  }
};

RedisSettingsFindings unsafe_at_start() {
  RedisSettingsFindings f;
  f.refusal = "redis server x may drop waiting jobs";
  return f;
}

}  // namespace

TEST_CASE("the watch looks at the clocks at once, and findings() says what the looks found", "[watch]") {
  CapturedLog log("%l: %v");
  Stand stand;
  {
    ServerWatch watch(stand.looks(), {.clock = 1h, .settings = std::nullopt}, {});
    REQUIRE(eventually([&] { return watch.findings().rounds >= 1; }));
    const ServerFindings f = watch.findings();
    REQUIRE(f.clock_offset_s);
    CHECK(*f.clock_offset_s == Approx(2.0));
    CHECK_THAT(f.clock_problem, Catch::Contains("2.00 s ahead of Redis's"));
    REQUIRE(f.host_clock);
    CHECK_FALSE(f.host_clock->synchronized);
    CHECK(f.host_clock->max_error_us == 16'000'000);
    CHECK(f.redis_settings_problem.empty());
  }
  CHECK(stand.clock_looks == 1);     // a period of an hour: once, and the destructor did not wait it out
  CHECK(stand.settings_looks == 0);  // no settings period: never
  const std::string said = log.text();
  CHECK_THAT(said, Catch::Contains("warning: ") && Catch::Contains("ahead of Redis's"));
  CHECK_THAT(said, Catch::Contains("warning: the kernel says this host's clock is not synchronized"));
}

TEST_CASE("the settings are looked at one period after start, and their verdict replaces start-up's", "[watch]") {
  CapturedLog log("%l: %v");
  Stand stand;
  {
    // A period of an hour: start-up's verdict stands.
    ServerWatch watch(stand.looks(), {.clock = 1h, .settings = 1h}, unsafe_at_start());
    CHECK(watch.findings().redis_settings_problem == "redis server x may drop waiting jobs");
    REQUIRE(eventually([&] { return watch.findings().rounds >= 1; }));
    CHECK(watch.findings().redis_settings_problem == "redis server x may drop waiting jobs");
  }
  CHECK(stand.settings_looks == 0);
  {
    ServerWatch watch(stand.looks(), {.clock = 1h, .settings = 5ms}, unsafe_at_start());
    REQUIRE(eventually([&] { return watch.findings().redis_settings_problem.empty(); }));
    CHECK(stand.settings_looks >= 1);
  }
  CHECK_THAT(log.text(), Catch::Contains("no server may drop waiting jobs any more"));
}

TEST_CASE("a look that fails is skipped and said once, a Redis out of reach not at all, and the watch goes on",
          "[watch]") {
  CapturedLog log("%l: %v");
  std::atomic<int> calls{0};
  ServerWatch::Looks looks{.host_clock = [] { return std::optional<HostClockSync>(); },
                           .redis_time_us = [&]() -> std::optional<std::int64_t> {
                             const int n = ++calls;
                             if (n <= 3) throw std::runtime_error("ERR something unforeseen");
                             if (n <= 6) throw delayd::redis::RedisIoError("redis 127.0.0.1:1: connection refused");
                             return std::nullopt;  // refused TIME (an ACL): no reading, no problem
                           },
                           .now_us = [] { return std::int64_t{0}; },
                           .redis_settings = [] { return RedisSettingsFindings{}; }};
  {
    ServerWatch watch(std::move(looks), {.clock = 1ms, .settings = std::nullopt}, {});
    REQUIRE(eventually([&] { return calls >= 8; }));
    const ServerFindings f = watch.findings();
    CHECK_FALSE(f.clock_offset_s);
    CHECK(f.clock_problem.empty());
    CHECK_FALSE(f.host_clock);  // the kernel did not answer
  }
  const std::string said = log.text();
  const auto count = [&](const std::string& what) {
    std::size_t n = 0;
    for (auto at = said.find(what); at != std::string::npos; at = said.find(what, at + 1)) ++n;
    return n;
  };
  CHECK(count("ERR something unforeseen") == 1);
  CHECK(count("warning: comparing this host's clock with Redis's failed") == 1);
  CHECK(count("connection refused") == 0);
}

// The time stamp each line of delayd's text log starts with (base/log_time.hpp): read back from a
// line spdlog wrote with the pattern itself, and from the offsets it may carry.
#include "base/log_time.hpp"

#include <spdlog/spdlog.h>

#include <catch2/catch.hpp>
#include <chrono>

#include "support/captured_log.hpp"

using delayd::base::kLogPattern;
using delayd::base::log_line_time_ms;

TEST_CASE("a line written with the log pattern reads back as the moment it was written", "[log]") {
  const auto now_ms = [] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  delayd::testing::CapturedLog log(kLogPattern);
  const std::int64_t before = now_ms();
  spdlog::info("shard delay-ingest/3 assigned (epoch 7)");
  const std::int64_t after = now_ms();
  const auto at = log_line_time_ms(log.text());
  REQUIRE(at);
  CHECK(*at >= before);
  CHECK(*at <= after);
}

TEST_CASE("a log line's time stamp reads with its offset, with or without the colon", "[log]") {
  // 2026-12-08T01:40:55.256Z is 1 796 694 055 256 ms after the epoch.
  CHECK(log_line_time_ms("2026-12-08T01:40:55.256+00:00 info x") == 1'796'694'055'256);
  CHECK(log_line_time_ms("2026-12-08T01:40:55.256+0000 info x") == 1'796'694'055'256);
  CHECK(log_line_time_ms("2026-12-08T07:10:55.256+05:30 info x") == 1'796'694'055'256);
  CHECK(log_line_time_ms("2026-12-07T20:40:55.256-05:00 info x") == 1'796'694'055'256);
  CHECK_FALSE(log_line_time_ms("librdkafka: something without a time"));
  CHECK_FALSE(log_line_time_ms("2026-12-08T01:40:55.256 info x"));  // no offset
  CHECK_FALSE(log_line_time_ms(""));
}

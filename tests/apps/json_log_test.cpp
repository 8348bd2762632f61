// The JSON log lines of log.format = json: one parseable object per line, the message intact
// (quotes, newlines, invalid UTF-8), the job-id lifted out where a line names one, and the trace
// and span of a traced job's lines.
#include "apps/delayd/json_log.hpp"

#include <spdlog/sinks/ostream_sink.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sstream>

namespace {

// Logs `text` at `level` through a logger with the JSON formatter; returns what it wrote.
std::string log_line(spdlog::level::level_enum level, const std::string& text) {
  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  spdlog::logger logger("json-test", sink);
  logger.set_formatter(std::make_unique<delayd::apps::JsonLogFormatter>());
  logger.set_level(spdlog::level::trace);
  logger.log(level, "{}", text);
  logger.flush();
  return out.str();
}

}  // namespace

TEST_CASE("a JSON log line is one object with time, level and the message intact", "[log]") {
  const std::string line = log_line(spdlog::level::warn, "redis unavailable: \"LOADING\"\nretrying");
  REQUIRE(line.size() > 1);
  CHECK(line.back() == '\n');
  CHECK(line.find('\n') == line.size() - 1);  // the message's newline is escaped, not written
  const auto j = nlohmann::json::parse(line);
  CHECK(j.at("level") == "warning");
  CHECK(j.at("msg") == "redis unavailable: \"LOADING\"\nretrying");
  const std::string ts = j.at("ts");
  CHECK(ts.size() == 24);  // 2026-11-23T03:01:45.110Z
  CHECK(ts.back() == 'Z');
  CHECK_FALSE(j.contains("job_id"));
}

TEST_CASE("a line about one job carries its id", "[log]") {
  CHECK(nlohmann::json::parse(log_line(spdlog::level::err, "job order-17: attempt 2 failed (x)")).at("job_id") ==
        "order-17");
  CHECK(nlohmann::json::parse(log_line(spdlog::level::info, "job a1 set aside: corrupt")).at("job_id") == "a1");
  CHECK(nlohmann::json::parse(log_line(spdlog::level::info, "cancel for job-id z9, unknown")).at("job_id") == "z9");
  CHECK_FALSE(nlohmann::json::parse(log_line(spdlog::level::info, "the job is late")).contains("job_id"));
}

TEST_CASE("invalid UTF-8 in a message never stops a log line", "[log]") {
  const auto j = nlohmann::json::parse(log_line(spdlog::level::info, std::string("bytes \xff\xfe end")));
  CHECK(j.at("msg").get<std::string>().find("end") != std::string::npos);
}

TEST_CASE("a line written for a traced job names its trace and span", "[log]") {
  const auto span = delayd::telemetry::parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
  REQUIRE(span);
  {
    const delayd::telemetry::LogScope scope(&*span);
    const auto j = nlohmann::json::parse(log_line(spdlog::level::warn, "job order-17: attempt 2 failed (x)"));
    CHECK(j.at("job_id") == "order-17");
    CHECK(j.at("trace_id") == "4bf92f3577b34da6a3ce929d0e0e4736");
    CHECK(j.at("span_id") == "00f067aa0ba902b7");
  }
  const auto after = nlohmann::json::parse(log_line(spdlog::level::warn, "job order-17: attempt 3 failed (x)"));
  CHECK_FALSE(after.contains("trace_id"));
  CHECK_FALSE(after.contains("span_id"));
}

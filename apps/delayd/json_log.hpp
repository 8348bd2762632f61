// JsonLogFormatter: spdlog lines as one JSON object each, for log shippers (log.format = json):
//   {"ts":"2026-11-23T03:01:45.110Z","level":"warning","msg":"shard ...","job_id":"..."}
// `ts` is UTC with milliseconds; `level` is spdlog's name (trace, debug, info, warning, error,
// critical); `msg` is the message, escaped as JSON requires. A message about one job (it starts
// with "job <id>", as delayd's per-job lines do, or says "job-id <id>") also gets the id as
// "job_id", so a shipper can index by it without parsing text. A line written inside a
// telemetry::LogScope (a traced job's accept or delivery) also gets "trace_id" and "span_id",
// lowercase hex as in traceparent, so that logs and traces join.
// Threading: spdlog calls format() under its sink's lock; the formatter keeps no state.
#pragma once

#include <spdlog/formatter.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <ctime>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "telemetry/log_scope.hpp"

namespace delayd::apps {

class JsonLogFormatter final : public spdlog::formatter {
 public:
  // Appends one JSON object and a newline to `dest`.
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const std::string_view text(msg.payload.data(), msg.payload.size());
    nlohmann::json line{{"ts", utc_ms(msg.time)},
                        {"level", std::string(spdlog::level::to_string_view(msg.level).data(),
                                              spdlog::level::to_string_view(msg.level).size())},
                        {"msg", std::string(text)}};
    if (auto id = job_id_in(text); !id.empty()) line["job_id"] = std::string(id);
    if (const telemetry::SpanContext* span = telemetry::LogScope::current()) {
      line["trace_id"] = telemetry::to_hex(span->trace_id);
      line["span_id"] = telemetry::to_hex(span->span_id);
    }
    // Replacement of invalid UTF-8: a log line must never throw.
    const std::string out = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    dest.append(out.data(), out.data() + out.size());
    dest.push_back('\n');
  }
  std::unique_ptr<spdlog::formatter> clone() const override { return std::make_unique<JsonLogFormatter>(); }

  // The job named by `text`: the word after a leading "job " (delayd's per-job lines start so),
  // or after "job-id " anywhere, up to a space, ':', ',' or ';'; "" if none.
  static std::string_view job_id_in(std::string_view text) {
    std::string_view rest;
    if (text.rfind("job ", 0) == 0) {
      rest = text.substr(4);
    } else if (const auto at = text.find("job-id "); at != std::string_view::npos) {
      rest = text.substr(at + 7);
    } else {
      return {};
    }
    return rest.substr(0, rest.find_first_of(" :,;"));
  }

 private:
  static std::string utc_ms(spdlog::log_clock::time_point t) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
    const std::time_t secs = static_cast<std::time_t>(ms / 1000);
    std::tm tm{};
    gmtime_r(&secs, &tm);
    char buf[40];
    const std::size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
    return std::string(buf, n) + "." + std::to_string(1000 + ms % 1000).substr(1) + "Z";
  }
};

}  // namespace delayd::apps

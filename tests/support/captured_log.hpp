// CapturedLog: what spdlog's default logger writes while it lives, for tests that check what
// delayd says (the admin endpoint's audit lines, the Redis settings watch's lines).
#pragma once

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <sstream>
#include <string>

namespace delayd::testing {

class CapturedLog {
 public:
  // Each line as `pattern` says (spdlog's flags: "%v" the text alone, "%l: %v" with its level).
  explicit CapturedLog(const std::string& pattern = "%v") : previous_(spdlog::default_logger()) {
    auto logger = std::make_shared<spdlog::logger>("captured", std::make_shared<spdlog::sinks::ostream_sink_mt>(out_));
    logger->set_pattern(pattern);
    spdlog::set_default_logger(std::move(logger));
  }
  ~CapturedLog() { spdlog::set_default_logger(previous_); }
  CapturedLog(const CapturedLog&) = delete;
  CapturedLog& operator=(const CapturedLog&) = delete;

  // Everything written so far.
  std::string text() {
    spdlog::default_logger()->flush();
    return out_.str();
  }
  // What was written since the last take() (or the start), then forgotten.
  std::string take() {
    std::string written = text();
    out_.str("");
    return written;
  }

 private:
  std::ostringstream out_;
  std::shared_ptr<spdlog::logger> previous_;
};

}  // namespace delayd::testing

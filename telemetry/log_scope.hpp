// LogScope: the span a thread is working for, so that its log lines can name it (JSON logs add
// trace_id and span_id: apps/delayd/json_log.hpp). RAII: the scope in force before is restored
// at the end, so scopes nest.
//
//   { LogScope scope(span_context); spdlog::warn("job {} ...", id); }   // the line names the span
//   LogScope::current()   the innermost scope's context on this thread, or nullptr.
// Threading: per thread (thread_local); a scope must end on the thread that made it.
#pragma once

#include "telemetry/trace_context.hpp"

namespace delayd::telemetry {

class LogScope {
 public:
  // A scope for `context`; nullptr (no span: tracing off, or the job has none) changes nothing.
  explicit LogScope(const SpanContext* context) : previous_(current_), active_(context != nullptr) {
    if (active_) {
      own_ = *context;
      current_ = &own_;
    }
  }
  ~LogScope() {
    if (active_) current_ = previous_;
  }
  LogScope(const LogScope&) = delete;
  LogScope& operator=(const LogScope&) = delete;

  static const SpanContext* current() { return current_; }

 private:
  static inline thread_local const SpanContext* current_ = nullptr;
  const SpanContext* previous_;
  bool active_;
  SpanContext own_{};
};

}  // namespace delayd::telemetry

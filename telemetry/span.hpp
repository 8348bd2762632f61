// SpanData: one finished span, as the exporter sends it (OTLP's Span, the fields delayd uses).
// Times are wall-clock nanoseconds since the Unix epoch, as OTLP wants them.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "telemetry/trace_context.hpp"

namespace delayd::telemetry {

// OTLP's SpanKind values (the numbers are the wire encoding).
enum class SpanKind : unsigned char { internal = 1, server = 2, client = 3, producer = 4, consumer = 5 };
// OTLP's Status.code values.
enum class StatusCode : unsigned char { unset = 0, ok = 1, error = 2 };

// A span's attribute. The key, and a string_view value, must outlive the span: delayd's are
// literals (no allocation per span for them); text of the job (its id, business, topic) is owned.
struct Attribute {
  using Value = std::variant<std::string, std::string_view, std::int64_t, bool>;
  std::string_view key;
  Value value;
};

struct SpanData {
  SpanContext context;             // its own trace id and span id
  std::optional<SpanId> parent;    // the parent's span id, in the same trace; none: a root
  std::vector<SpanContext> links;  // other traces' spans it follows from
  std::string name;                // e.g. "send ready.orders"
  SpanKind kind = SpanKind::internal;
  std::chrono::nanoseconds start{0};  // since the Unix epoch
  std::chrono::nanoseconds end{0};    // since the Unix epoch, >= start
  std::vector<Attribute> attributes;
  StatusCode status = StatusCode::unset;
  std::string status_message;  // with StatusCode::error
};

// The wall clock in the unit of SpanData's times.
inline std::chrono::nanoseconds wall_now() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch());
}

}  // namespace delayd::telemetry

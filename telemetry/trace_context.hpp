// Trace contexts as W3C Trace Context writes them in a `traceparent` header
// (https://www.w3.org/TR/trace-context/):
//
//   00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01
//   ^  ^ trace-id: 16 bytes, 32 lowercase hex   ^ parent-id (span id): 8 bytes ^ flags (bit 0: sampled)
//   version
//
//   parse_traceparent(text)  the context, or nullopt for anything the recommendation says to
//                            ignore: a wrong length, uppercase or non-hex digits, version ff, an
//                            all-zero trace or span id. A version above 00 is read by its first
//                            four fields if they are followed by '-' or end the text.
//   format_traceparent(ctx)  version 00, lowercase; parse_traceparent(format_traceparent(c)) == c.
//   new_trace_id() / new_span_id()  random, never all zero; thread-safe (a generator per thread).
//   to_hex(id)               lowercase hex, the OTLP JSON encoding of ids.
// Threading: pure functions, except the generators' thread-local state.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace delayd::telemetry {

// The header names W3C Trace Context gives Kafka records (as for HTTP).
inline constexpr std::string_view kTraceparentHeader = "traceparent";
inline constexpr std::string_view kTracestateHeader = "tracestate";

using TraceId = std::array<std::uint8_t, 16>;
using SpanId = std::array<std::uint8_t, 8>;

struct SpanContext {
  TraceId trace_id{};
  SpanId span_id{};
  bool sampled = false;
  bool operator==(const SpanContext&) const = default;
};

std::optional<SpanContext> parse_traceparent(std::string_view text);
std::string format_traceparent(const SpanContext& context);
TraceId new_trace_id();
SpanId new_span_id();
std::string to_hex(const TraceId& id);
std::string to_hex(const SpanId& id);

}  // namespace delayd::telemetry

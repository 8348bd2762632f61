// OTLP/HTTP JSON encoding of a batch of spans: the body of a POST to /v1/traces, an
// ExportTraceServiceRequest in the protobuf JSON mapping with OTLP's own rules
// (https://opentelemetry.io/docs/specs/otlp/#json-protobuf-encoding): field names in lowerCamelCase,
// trace and span ids as lowercase hex (not base64), enums as integers, 64-bit integers (times,
// int attributes) as decimal strings.
//
//   encode_otlp_json(resource, spans)  one resourceSpans with `resource`'s attributes and one
//                                      scopeSpans (scope "delayd", its version) holding `spans`.
// Invalid UTF-8 in a name or attribute is replaced (U+FFFD), never thrown. Written by hand, without
// a JSON document in between: the exporter encodes every span delayd makes, and a DOM per batch
// cost several times the CPU (bench/run-trace-cost.sh).
// Threading: a pure function.
#pragma once

#include <span>
#include <string>
#include <utility>
#include <vector>

#include "telemetry/span.hpp"

namespace delayd::telemetry {

struct Resource {
  std::vector<std::pair<std::string, std::string>> attributes;  // service.name first, by convention
  std::string scope_version;                                    // delayd's version, the instrumentation scope's
};

std::string encode_otlp_json(const Resource& resource, std::span<const SpanData> spans);

}  // namespace delayd::telemetry

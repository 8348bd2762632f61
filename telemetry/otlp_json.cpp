#include "telemetry/otlp_json.hpp"

#include <nlohmann/json.hpp>

namespace delayd::telemetry {
namespace {

using nlohmann::json;

json any_value(const Attribute& a) {
  return std::visit(
      [](const auto& v) -> json {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) {
          return json{{"stringValue", v}};
        } else if constexpr (std::is_same_v<T, bool>) {
          return json{{"boolValue", v}};
        } else {
          return json{{"intValue", std::to_string(v)}};
        }
      },
      a.value);
}

json attributes(const std::vector<Attribute>& attrs) {
  json out = json::array();
  for (const Attribute& a : attrs) out.push_back(json{{"key", a.key}, {"value", any_value(a)}});
  return out;
}

json span_json(const SpanData& s) {
  json j{{"traceId", to_hex(s.context.trace_id)},
         {"spanId", to_hex(s.context.span_id)},
         {"name", s.name},
         {"kind", static_cast<int>(s.kind)},
         {"startTimeUnixNano", std::to_string(s.start.count())},
         {"endTimeUnixNano", std::to_string(s.end.count())},
         {"attributes", attributes(s.attributes)}};
  if (s.parent) j["parentSpanId"] = to_hex(*s.parent);
  if (!s.links.empty()) {
    json links = json::array();
    for (const SpanContext& l : s.links) {
      links.push_back(json{{"traceId", to_hex(l.trace_id)}, {"spanId", to_hex(l.span_id)}});
    }
    j["links"] = std::move(links);
  }
  if (s.status != StatusCode::unset) {
    json status{{"code", static_cast<int>(s.status)}};
    if (!s.status_message.empty()) status["message"] = s.status_message;
    j["status"] = std::move(status);
  }
  return j;
}

}  // namespace

std::string encode_otlp_json(const Resource& resource, std::span<const SpanData> spans) {
  json list = json::array();
  for (const SpanData& s : spans) list.push_back(span_json(s));
  const json body{
      {"resourceSpans",
       json::array({json{
           {"resource", json{{"attributes", attributes(resource.attributes)}}},
           {"scopeSpans", json::array({json{{"scope", json{{"name", "delayd"}, {"version", resource.scope_version}}},
                                            {"spans", std::move(list)}}})}}})}};
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace delayd::telemetry

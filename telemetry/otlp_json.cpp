#include "telemetry/otlp_json.hpp"

#include <charconv>

namespace delayd::telemetry {
namespace {

// Appends `s` as a JSON string: quotes, backslashes and control characters escaped, valid
// UTF-8 copied, every byte of an invalid sequence written as U+FFFD.
void put_string(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  static constexpr std::string_view kReplacement = "\xef\xbf\xbd";
  out += '"';
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      if (c == '"' || c == '\\') {
        out += '\\';
        out += static_cast<char>(c);
      } else if (c < 0x20) {
        out += "\\u00";
        out += kHex[c >> 4];
        out += kHex[c & 15];
      } else {
        out += static_cast<char>(c);
      }
      ++i;
      continue;
    }
    // The length of a well-formed sequence starting here (shortest forms only, no surrogates,
    // nothing above U+10FFFF), or 0.
    std::size_t n = 0;
    unsigned lo = 0x80;
    unsigned hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) {
      n = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
      n = 3;
      if (c == 0xe0) lo = 0xa0;
      if (c == 0xed) hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      n = 4;
      if (c == 0xf0) lo = 0x90;
      if (c == 0xf4) hi = 0x8f;
    }
    bool ok = n > 0 && i + n <= s.size();
    for (std::size_t k = 1; ok && k < n; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      ok = k == 1 ? b >= lo && b <= hi : b >= 0x80 && b <= 0xbf;
    }
    if (ok) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out += kReplacement;
      ++i;
    }
  }
  out += '"';
}

// A 64-bit integer as OTLP JSON writes it: a decimal string.
void put_int_string(std::string& out, std::int64_t v) {
  char buf[24];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out += '"';
  out.append(buf, end);
  out += '"';
}

void put_attribute(std::string& out, std::string_view key, const Attribute::Value& value) {
  out += "{\"key\":";
  put_string(out, key);
  out += ",\"value\":{";
  std::visit(
      [&out](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, bool>) {
          out += v ? "\"boolValue\":true" : "\"boolValue\":false";
        } else if constexpr (std::is_same_v<T, std::int64_t>) {
          out += "\"intValue\":";
          put_int_string(out, v);
        } else {
          out += "\"stringValue\":";
          put_string(out, v);
        }
      },
      value);
  out += "}}";
}

void put_span(std::string& out, const SpanData& s) {
  out += "{\"traceId\":\"";
  out += to_hex(s.context.trace_id);
  out += "\",\"spanId\":\"";
  out += to_hex(s.context.span_id);
  out += '"';
  if (s.parent) {
    out += ",\"parentSpanId\":\"";
    out += to_hex(*s.parent);
    out += '"';
  }
  out += ",\"name\":";
  put_string(out, s.name);
  out += ",\"kind\":";
  out += static_cast<char>('0' + static_cast<int>(s.kind));
  out += ",\"startTimeUnixNano\":";
  put_int_string(out, s.start.count());
  out += ",\"endTimeUnixNano\":";
  put_int_string(out, s.end.count());
  out += ",\"attributes\":[";
  for (std::size_t i = 0; i < s.attributes.size(); ++i) {
    if (i > 0) out += ',';
    put_attribute(out, s.attributes[i].key, s.attributes[i].value);
  }
  out += ']';
  if (!s.links.empty()) {
    out += ",\"links\":[";
    for (std::size_t i = 0; i < s.links.size(); ++i) {
      out += i > 0 ? ",{\"traceId\":\"" : "{\"traceId\":\"";
      out += to_hex(s.links[i].trace_id);
      out += "\",\"spanId\":\"";
      out += to_hex(s.links[i].span_id);
      out += "\"}";
    }
    out += ']';
  }
  if (s.status != StatusCode::unset) {
    out += ",\"status\":{\"code\":";
    out += static_cast<char>('0' + static_cast<int>(s.status));
    if (!s.status_message.empty()) {
      out += ",\"message\":";
      put_string(out, s.status_message);
    }
    out += '}';
  }
  out += '}';
}

}  // namespace

std::string encode_otlp_json(const Resource& resource, std::span<const SpanData> spans) {
  std::string out;
  out.reserve(256 + spans.size() * 900);
  out += "{\"resourceSpans\":[{\"resource\":{\"attributes\":[";
  for (std::size_t i = 0; i < resource.attributes.size(); ++i) {
    if (i > 0) out += ',';
    put_attribute(out, resource.attributes[i].first, resource.attributes[i].second);
  }
  out += "]},\"scopeSpans\":[{\"scope\":{\"name\":\"delayd\",\"version\":";
  put_string(out, resource.scope_version);
  out += "},\"spans\":[";
  for (std::size_t i = 0; i < spans.size(); ++i) {
    if (i > 0) out += ',';
    put_span(out, spans[i]);
  }
  out += "]}]}]}";
  return out;
}

}  // namespace delayd::telemetry

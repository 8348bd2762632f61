#include "config/otel_env.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <optional>
#include <string_view>

#include "base/text_encoding.hpp"
#include "config/config.hpp"

namespace delayd::config {
namespace {

using Env = std::map<std::string, std::string>;

// A variable's value, and the variable it came from: the traces-only one (`specific`) wins over
// the general one; an empty value counts as unset (the OpenTelemetry rule).
struct Found {
  std::string name;
  std::string value;
};
std::optional<Found> find(const Env& env, std::string_view specific, std::string_view general = {}) {
  for (const std::string_view name : {specific, general}) {
    if (name.empty()) continue;
    if (auto it = env.find(std::string(name)); it != env.end() && !it->second.empty()) {
      return Found{std::string(name), it->second};
    }
  }
  return std::nullopt;
}

[[noreturn]] void fail(const Found& f, std::string_view problem) {
  throw ConfigError("config error: " + f.name + " = \"" + f.value + "\" (from env " + f.name +
                    "): " + std::string(problem));
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string(s);
}

bool parse_bool(const Found& f) {
  const std::string v = lower(trim(f.value));
  if (v == "true") return true;
  if (v == "false") return false;
  fail(f, "must be true or false");
}

std::int64_t parse_count(const Found& f, std::int64_t min, std::int64_t max) {
  const std::string v = trim(f.value);
  std::int64_t n = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc{} || end != v.data() + v.size() || n < min || n > max) {
    fail(f, "must be a whole number from " + std::to_string(min) + " to " + std::to_string(max));
  }
  return n;
}

// "k=v,k2=v2": keys trimmed, values trimmed and percent-decoded (the W3C baggage form the
// OpenTelemetry specification uses for both lists).
std::vector<std::pair<std::string, std::string>> parse_list(const Found& f) {
  std::vector<std::pair<std::string, std::string>> out;
  std::string_view rest = f.value;
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    if (trim(item).empty()) continue;
    const auto eq = item.find('=');
    if (eq == std::string_view::npos) fail(f, "each entry must be key=value (\"" + trim(item) + "\" is not)");
    std::string key = trim(item.substr(0, eq));
    auto value = base::percent_decode(trim(item.substr(eq + 1)));
    if (key.empty()) fail(f, "an entry has an empty key");
    if (!value) fail(f, "bad percent-escape in the value of " + key);
    out.emplace_back(std::move(key), std::move(*value));
  }
  return out;
}

// http://host[:port][/path]; `append_traces`: the general endpoint, to which v1/traces is added.
void parse_endpoint(const Found& f, bool append_traces, TracingConfig& t) {
  std::string_view url = f.value;
  if (url.starts_with("https://")) {
    fail(f,
         "https is not supported by delayd's exporter; send to a collector over http (e.g. a sidecar on "
         "localhost), which can forward over TLS");
  }
  if (!url.starts_with("http://")) fail(f, "must be an http:// url");
  url.remove_prefix(7);
  const auto slash = url.find('/');
  const std::string_view authority = url.substr(0, slash);
  std::string path = slash == std::string_view::npos ? std::string() : std::string(url.substr(slash));
  std::string_view host = authority;
  std::string_view port;
  if (authority.starts_with('[')) {
    const auto close = authority.find(']');
    if (close == std::string_view::npos) fail(f, "unclosed '[' in the host");
    host = authority.substr(1, close - 1);
    if (close + 1 < authority.size()) {
      if (authority[close + 1] != ':') fail(f, "expected ':' after the IPv6 address");
      port = authority.substr(close + 2);
    }
  } else if (const auto colon = authority.rfind(':'); colon != std::string_view::npos) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
  }
  if (host.empty()) fail(f, "the url has no host");
  t.host = std::string(host);
  t.port = 80;  // http's own port when the url names none (the 4318 convention is the url's job)
  if (!port.empty()) {
    int n = 0;
    const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), n);
    if (ec != std::errc{} || end != port.data() + port.size() || n < 1 || n > 65535) {
      fail(f, "the port must be a whole number from 1 to 65535");
    }
    t.port = static_cast<std::uint16_t>(n);
  }
  if (append_traces) {
    if (path.empty() || path.back() != '/') path += '/';
    path += "v1/traces";
  } else if (path.empty()) {
    path = "/";
  }
  t.target = std::move(path);
  t.endpoint_origin = f.name;
}

}  // namespace

TracingConfig read_otel_env(const Env& env) {
  TracingConfig t;
  bool disabled = false;
  if (auto f = find(env, "OTEL_SDK_DISABLED")) disabled = parse_bool(*f);
  if (auto f = find(env, "OTEL_TRACES_EXPORTER")) {
    const std::string v = lower(trim(f->value));
    if (v == "none") {
      disabled = true;
    } else if (v != "otlp") {
      fail(*f, "must be otlp or none (delayd exports OTLP/HTTP JSON only)");
    }
  }
  if (auto f = find(env, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")) {
    if (trim(f->value) != "http/json") fail(*f, "must be http/json: delayd's exporter sends OTLP/HTTP JSON only");
  }
  if (auto f = find(env, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")) {
    parse_endpoint(*f, false, t);
  } else if (auto g = find(env, "OTEL_EXPORTER_OTLP_ENDPOINT")) {
    parse_endpoint(*g, true, t);
  }
  if (auto f = find(env, "OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS")) t.headers = parse_list(*f);
  if (auto f = find(env, "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT")) {
    t.timeout_ms = parse_count(*f, 1, 600'000);
  }
  if (auto f = find(env, "OTEL_RESOURCE_ATTRIBUTES")) t.resource = parse_list(*f);
  // service.name: OTEL_SERVICE_NAME, else the resource's own, else "delayd".
  for (const auto& [k, v] : t.resource) {
    if (k == "service.name") t.service_name = v;
  }
  if (auto f = find(env, "OTEL_SERVICE_NAME")) t.service_name = trim(f->value);
  if (auto f = find(env, "OTEL_TRACES_SAMPLER")) {
    static constexpr std::pair<std::string_view, TraceSampler> kSamplers[] = {
        {"always_on", TraceSampler::always_on},
        {"always_off", TraceSampler::always_off},
        {"traceidratio", TraceSampler::ratio},
        {"parentbased_always_on", TraceSampler::parent_always_on},
        {"parentbased_always_off", TraceSampler::parent_always_off},
        {"parentbased_traceidratio", TraceSampler::parent_ratio}};
    const std::string v = lower(trim(f->value));
    const auto it =
        std::find_if(std::begin(kSamplers), std::end(kSamplers), [&](const auto& s) { return s.first == v; });
    if (it == std::end(kSamplers)) {
      fail(*f,
           "must be always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or "
           "parentbased_traceidratio");
    }
    t.sampler = it->second;
  }
  if (auto f = find(env, "OTEL_TRACES_SAMPLER_ARG")) {
    if (t.sampler == TraceSampler::ratio || t.sampler == TraceSampler::parent_ratio) {
      const std::string v = trim(f->value);
      char* end = nullptr;
      const double r = std::strtod(v.c_str(), &end);
      if (v.empty() || end != v.c_str() + v.size() || !(r >= 0.0 && r <= 1.0)) fail(*f, "must be a number from 0 to 1");
      t.ratio = r;
    }
  }
  if (auto f = find(env, "OTEL_BSP_MAX_QUEUE_SIZE"))
    t.max_queue = static_cast<std::size_t>(parse_count(*f, 1, 1'000'000));
  if (auto f = find(env, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE")) {
    t.max_batch = static_cast<std::size_t>(parse_count(*f, 1, 100'000));
  }
  if (t.max_batch > t.max_queue) t.max_batch = t.max_queue;  // the specification's rule
  if (auto f = find(env, "OTEL_BSP_SCHEDULE_DELAY")) t.schedule_delay_ms = parse_count(*f, 1, 3'600'000);
  t.enabled = !disabled && !t.host.empty();
  return t;
}

}  // namespace delayd::config

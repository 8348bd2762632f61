#include "telemetry/tracer.hpp"

#include <cmath>

namespace delayd::telemetry {
namespace {

ExporterOptions exporter_options(const config::TracingConfig& c, const std::string& version) {
  ExporterOptions o;
  o.host = c.host;
  o.port = c.port;
  o.target = c.target;
  o.headers = c.headers;
  o.timeout = std::chrono::milliseconds(c.timeout_ms);
  o.max_queue = c.max_queue;
  o.max_batch = c.max_batch;
  o.schedule_delay = std::chrono::milliseconds(c.schedule_delay_ms);
  o.resource.scope_version = version;
  o.resource.attributes.emplace_back("service.name", c.service_name);
  bool has_version = false;
  for (const auto& [k, v] : c.resource) {
    if (k == "service.name") continue;  // said once, above
    has_version = has_version || k == "service.version";
    o.resource.attributes.emplace_back(k, v);
  }
  if (!has_version) o.resource.attributes.emplace_back("service.version", version);
  o.resource.attributes.emplace_back("telemetry.sdk.name", "delayd");
  o.resource.attributes.emplace_back("telemetry.sdk.language", "cpp");
  o.resource.attributes.emplace_back("telemetry.sdk.version", version);
  return o;
}

}  // namespace

Tracer::Tracer(const config::TracingConfig& config, const std::string& version)
    : sampler_(config.sampler), ratio_(config.ratio), exporter_(exporter_options(config, version)) {}

bool Tracer::sample_new(const TraceId& id) const {
  using config::TraceSampler;
  switch (sampler_) {
    case TraceSampler::always_on:
    case TraceSampler::parent_always_on:
      return true;
    case TraceSampler::always_off:
    case TraceSampler::parent_always_off:
      return false;
    case TraceSampler::ratio:
    case TraceSampler::parent_ratio:
      break;
  }
  if (ratio_ >= 1.0) return true;
  std::uint64_t low = 0;
  for (std::size_t i = 8; i < 16; ++i) low = low << 8 | id[i];
  // low / 2^64 < ratio, in doubles: exact enough at the 2^-53 scale of a ratio.
  return std::ldexp(static_cast<double>(low), -64) < ratio_;
}

SpanContext Tracer::child_of(const SpanContext& parent) const {
  SpanContext c;
  c.trace_id = parent.trace_id;
  c.span_id = new_span_id();
  c.sampled = parent_based() ? parent.sampled : sample_new(parent.trace_id);
  return c;
}

SpanContext Tracer::new_trace(const std::optional<SpanContext>& follows) const {
  SpanContext c;
  c.trace_id = new_trace_id();
  c.span_id = new_span_id();
  c.sampled = parent_based() && follows ? follows->sampled : sample_new(c.trace_id);
  return c;
}

void Tracer::end(SpanData span) {
  if (span.context.sampled) exporter_.submit(std::move(span));
}

std::unique_ptr<Tracer> make_tracer(const config::TracingConfig& config, const std::string& version) {
  if (!config.enabled) return nullptr;
  return std::make_unique<Tracer>(config, version);
}

}  // namespace delayd::telemetry

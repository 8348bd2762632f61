// Tracer: delayd's part in a trace (the OTEL_* settings, config/otel_env.hpp): new span
// contexts, the sampling decision, and finished spans handed to the exporter (exporter.hpp).
//
// Sampling (OTEL_TRACES_SAMPLER): decided once, when a span's context is made, and carried in
// its `sampled` flag; an unsampled span costs its ids and nothing else (end() drops it).
//   always_on / always_off    every span / none;
//   traceidratio              a new trace is sampled when the low 8 bytes of its id, read as a
//                             number, fall below ratio * 2^64: the same trace id decides the same
//                             way in every service using this rule;
//   parentbased_*             a child follows its parent's flag; a new trace that follows a link
//                             (the publish span, linked to the producer's context) follows the
//                             link's flag, so a sampled producer gets a sampled chain; a new trace
//                             without either uses the named rule.
// Threading: every function may be called from any thread (the ingest and loop threads both
// start spans); the exporter has its own thread.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "config/otel_env.hpp"
#include "telemetry/exporter.hpp"
#include "telemetry/span.hpp"

namespace delayd::telemetry {

class Tracer {
 public:
  // Starts the exporter thread. Precondition: config.enabled.
  Tracer(const config::TracingConfig& config, const std::string& version);

  // A new span in `parent`'s trace, sampled as the sampler says for a child of it.
  SpanContext child_of(const SpanContext& parent) const;
  // A new span starting a new trace; `follows`: the context it is linked to, if any.
  SpanContext new_trace(const std::optional<SpanContext>& follows) const;
  // Hands a finished span to the exporter if it is sampled; never waits.
  void end(SpanData span);
  ExporterCounters counters() const { return exporter_.counters(); }
  // Sends what is queued within `timeout` (the stop of the service).
  void shutdown(std::chrono::milliseconds timeout) { exporter_.shutdown(timeout); }

 private:
  bool sample_new(const TraceId& id) const;
  // The sampler follows the parent's (or linked context's) decision where there is one.
  bool parent_based() const {
    return sampler_ == config::TraceSampler::parent_always_on || sampler_ == config::TraceSampler::parent_always_off ||
           sampler_ == config::TraceSampler::parent_ratio;
  }

  config::TraceSampler sampler_;
  double ratio_;
  SpanExporter exporter_;
};

// An enabled tracer for `config`, or null when tracing is off.
std::unique_ptr<Tracer> make_tracer(const config::TracingConfig& config, const std::string& version);

}  // namespace delayd::telemetry

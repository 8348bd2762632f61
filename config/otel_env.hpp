// Tracing settings: OpenTelemetry's standard OTEL_* environment variables, read once at start-up
// (the variables every OpenTelemetry SDK reads, so a Kubernetes deployment sets them the same way
// for every service). Tracing is off unless an OTLP endpoint is given.
//
//   OTEL_SDK_DISABLED                    true: off whatever else is set (true/false)
//   OTEL_TRACES_EXPORTER                 otlp (default) or none (off)
//   OTEL_EXPORTER_OTLP_TRACES_ENDPOINT   http://host[:port]/path, used as written
//   OTEL_EXPORTER_OTLP_ENDPOINT          http://host[:port][/base]: /v1/traces is appended
//   OTEL_EXPORTER_OTLP[_TRACES]_PROTOCOL http/json only (delayd's exporter speaks OTLP/HTTP JSON)
//   OTEL_EXPORTER_OTLP[_TRACES]_HEADERS  k=v,k2=v2 (values percent-decoded): sent with each export
//   OTEL_EXPORTER_OTLP[_TRACES]_TIMEOUT  ms, one export's request (default 10000)
//   OTEL_SERVICE_NAME                    service.name (default "delayd")
//   OTEL_RESOURCE_ATTRIBUTES             k=v,k2=v2 (values percent-decoded)
//   OTEL_TRACES_SAMPLER                  always_on, always_off, traceidratio, parentbased_always_on
//                                        (default), parentbased_always_off, parentbased_traceidratio
//   OTEL_TRACES_SAMPLER_ARG              the ratio for the *traceidratio samplers, 0..1 (default 1)
//   OTEL_BSP_MAX_QUEUE_SIZE              spans waiting for export at most (default 2048); more are
//                                        dropped and counted, never waited for
//   OTEL_BSP_MAX_EXPORT_BATCH_SIZE       spans per export at most (default 512)
//   OTEL_BSP_SCHEDULE_DELAY              ms between exports when the batch is not full (default 5000)
// The _TRACES_ variant of a variable wins over the general one. A value that does not parse, an
// https endpoint or another protocol is a configuration error naming the variable (delayd exits
// 2 at start-up, as for its own settings), not silently ignored.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace delayd::config {

enum class TraceSampler : unsigned char {
  always_on,
  always_off,
  ratio,              // traceidratio
  parent_always_on,   // parentbased_always_on
  parent_always_off,  // parentbased_always_off
  parent_ratio,       // parentbased_traceidratio
};

struct TracingConfig {
  bool enabled = false;  // an endpoint is set, and neither OTEL_SDK_DISABLED nor exporter none
  // Where spans go: OTLP/HTTP JSON, POST http://host:port + target.
  std::string host;
  std::uint16_t port = 4318;
  std::string target = "/v1/traces";
  std::string endpoint_origin;  // the variable the endpoint came from, for messages
  std::vector<std::pair<std::string, std::string>> headers;
  std::int64_t timeout_ms = 10'000;
  std::string service_name = "delayd";
  std::vector<std::pair<std::string, std::string>> resource;  // OTEL_RESOURCE_ATTRIBUTES, in order
  TraceSampler sampler = TraceSampler::parent_always_on;
  double ratio = 1.0;
  std::size_t max_queue = 2048;
  std::size_t max_batch = 512;
  std::int64_t schedule_delay_ms = 5000;
};

// The OTEL_* variables of `env` (a map of the process's variables, as process_environment()
// gives). Throws ConfigError naming the variable for a value that does not parse.
TracingConfig read_otel_env(const std::map<std::string, std::string>& env);

}  // namespace delayd::config

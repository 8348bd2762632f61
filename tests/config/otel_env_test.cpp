// The OTEL_* variables (config/otel_env.hpp): tracing off unless an endpoint is set, the standard
// defaults, the traces-only variants winning, and a configuration error naming the variable for
// each value delayd cannot honour.
#include "config/otel_env.hpp"

#include <catch2/catch.hpp>

#include "config/config.hpp"

using delayd::config::ConfigError;
using delayd::config::read_otel_env;
using delayd::config::TraceSampler;
using Env = std::map<std::string, std::string>;

TEST_CASE("otel env: off unless an endpoint is set, with the standard defaults") {
  const auto t = read_otel_env({});
  CHECK_FALSE(t.enabled);
  CHECK(t.service_name == "delayd");
  CHECK(t.sampler == TraceSampler::parent_always_on);
  CHECK(t.max_queue == 2048);
  CHECK(t.max_batch == 512);
  CHECK(t.schedule_delay_ms == 5000);
  CHECK(t.timeout_ms == 10'000);
  CHECK_FALSE(read_otel_env({{"OTEL_SERVICE_NAME", "x"}, {"OTEL_TRACES_SAMPLER", "always_on"}}).enabled);
}

TEST_CASE("otel env: the general endpoint gets /v1/traces, the traces endpoint is used as written") {
  auto t = read_otel_env({{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"}});
  CHECK(t.enabled);
  CHECK(t.host == "collector");
  CHECK(t.port == 4318);
  CHECK(t.target == "/v1/traces");
  t = read_otel_env({{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/base/"}});
  CHECK(t.target == "/base/v1/traces");
  t = read_otel_env({{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://[::1]"}});
  CHECK(t.host == "::1");
  CHECK(t.port == 80);
  t = read_otel_env({{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:1"},
                     {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://b:2/custom/path"}});
  CHECK(t.host == "b");
  CHECK(t.port == 2);
  CHECK(t.target == "/custom/path");
  CHECK(t.endpoint_origin == "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
}

TEST_CASE("otel env: disabled by OTEL_SDK_DISABLED or exporter none, whatever the endpoint") {
  const Env on{{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"}};
  Env e = on;
  e["OTEL_SDK_DISABLED"] = "TRUE";
  CHECK_FALSE(read_otel_env(e).enabled);
  e = on;
  e["OTEL_SDK_DISABLED"] = "false";
  CHECK(read_otel_env(e).enabled);
  e = on;
  e["OTEL_TRACES_EXPORTER"] = "none";
  CHECK_FALSE(read_otel_env(e).enabled);
  e = on;
  e["OTEL_SDK_DISABLED"] = "";  // empty: unset
  CHECK(read_otel_env(e).enabled);
}

TEST_CASE("otel env: lists, sampler, batch settings") {
  const auto t = read_otel_env({{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"},
                                {"OTEL_EXPORTER_OTLP_HEADERS", "api-key=s%3Dcret, x-team = core"},
                                {"OTEL_RESOURCE_ATTRIBUTES", "service.name=from-resource,deployment.environment=prod"},
                                {"OTEL_TRACES_SAMPLER", "parentbased_traceidratio"},
                                {"OTEL_TRACES_SAMPLER_ARG", "0.25"},
                                {"OTEL_BSP_MAX_QUEUE_SIZE", "100"},
                                {"OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "500"},
                                {"OTEL_BSP_SCHEDULE_DELAY", "250"},
                                {"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "3000"}});
  REQUIRE(t.headers.size() == 2);
  CHECK(t.headers[0] == std::pair<std::string, std::string>{"api-key", "s=cret"});
  CHECK(t.headers[1] == std::pair<std::string, std::string>{"x-team", "core"});
  CHECK(t.service_name == "from-resource");
  CHECK(t.resource.size() == 2);
  CHECK(t.sampler == TraceSampler::parent_ratio);
  CHECK(t.ratio == 0.25);
  CHECK(t.max_queue == 100);
  CHECK(t.max_batch == 100);  // never above the queue
  CHECK(t.schedule_delay_ms == 250);
  CHECK(t.timeout_ms == 3000);
  CHECK(read_otel_env({{"OTEL_RESOURCE_ATTRIBUTES", "service.name=a"}, {"OTEL_SERVICE_NAME", "b"}}).service_name ==
        "b");
}

TEST_CASE("otel env: a value delayd cannot honour is a configuration error naming the variable") {
  const auto refused = [](const std::string& var, const std::string& value, const std::string& says) {
    INFO(var << "=" << value);
    Env e{{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"}};
    e[var] = value;
    CHECK_THROWS_WITH(read_otel_env(e),
                      Catch::Contains("config error: " + var + " = \"" + value + "\" (from env " + var + ")") &&
                          Catch::Contains(says));
  };
  refused("OTEL_EXPORTER_OTLP_ENDPOINT", "https://c:4318", "https is not supported");
  refused("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "c:4318", "must be an http:// url");
  refused("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:99999", "from 1 to 65535");
  refused("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc", "must be http/json");
  refused("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf", "must be http/json");
  refused("OTEL_SDK_DISABLED", "yes", "must be true or false");
  refused("OTEL_TRACES_EXPORTER", "jaeger", "must be otlp or none");
  refused("OTEL_TRACES_SAMPLER", "jaeger_remote", "must be always_on");
  refused("OTEL_RESOURCE_ATTRIBUTES", "novalue", "key=value");
  refused("OTEL_EXPORTER_OTLP_HEADERS", "k=%zz", "bad percent-escape");
  refused("OTEL_BSP_MAX_QUEUE_SIZE", "0", "from 1 to");
  refused("OTEL_BSP_SCHEDULE_DELAY", "5s", "whole number");
  Env e{{"OTEL_TRACES_SAMPLER", "traceidratio"}, {"OTEL_TRACES_SAMPLER_ARG", "1.5"}};
  CHECK_THROWS_WITH(read_otel_env(e), Catch::Contains("OTEL_TRACES_SAMPLER_ARG") && Catch::Contains("from 0 to 1"));
}

TEST_CASE("otel env: load_config reads the variables, and a bad one stops start-up") {
  delayd::config::ConfigFlags flags;
  const auto c = delayd::config::load_config(flags, {{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"}});
  CHECK(c.tracing.enabled);
  CHECK(c.warnings.empty());  // OTEL_* are not unknown DELAYD_* variables
  CHECK_THROWS_AS(delayd::config::load_config(flags, {{"OTEL_TRACES_SAMPLER", "nope"}}), ConfigError);
}

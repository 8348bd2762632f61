// delayd: the delayed-message broker. Settings: config/config.hpp; what it does:
// broker/service.hpp; the admin endpoint: admin/admin_server.hpp.
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <chrono>
#include <csignal>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "admin/admin_server.hpp"
#include "admin/job_backend.hpp"
#include "admin/metric_catalog.hpp"
#include "apps/delayd/json_log.hpp"
#include "base/allocator.hpp"
#include "base/log_time.hpp"
#include "base/thread_name.hpp"
#include "broker/loop_settings.hpp"
#include "broker/service.hpp"
#include "config/config.hpp"
#include "connectors/librdkafka_version.hpp"
#include "connectors/log.hpp"
#include "delayd/build_info.hpp"
#include "telemetry/tracer.hpp"

int main(int argc, char** argv) {
  CLI::App app{"delayd: a delayed-message broker on Kafka and Redis"};
  delayd::config::ConfigFlags flags;
  delayd::config::add_config_flags(app, flags);
  std::string reference;
  app.add_option("--print-reference", reference,
                 "print a reference page of the documentation as Markdown and exit: config "
                 "(docs/reference/configuration.md) or metrics (docs/reference/metrics.md)")
      ->check(CLI::IsMember({"config", "metrics"}));
  // What runs: the version, the commit, the build type, the malloc the process found
  // (base/allocator.hpp) and the librdkafka it loaded (connectors/librdkafka_version.hpp).
  const auto identity = [] {
    return "delayd " + std::string(delayd::build::kVersion) + " (" + std::string(delayd::build::kRevision) + ", " +
           std::string(delayd::build::kBuildType) + "), " + delayd::base::allocator_name() + ", librdkafka " +
           delayd::connectors::running_librdkafka().text;
  };
  app.set_version_flag("--version", identity,
                       "print the version, the commit, the build type, the memory allocator and librdkafka's "
                       "version, and exit");
  CLI11_PARSE(app, argc, argv);
  // From the code's own tables and built-in defaults, whatever the environment says.
  if (!reference.empty()) {
    std::cout << (reference == "config" ? delayd::config::render_config_reference()
                                        : delayd::admin::render_metrics_reference());
    return 0;
  }

  delayd::config::Config config;
  try {
    config = delayd::config::load_config(flags, delayd::config::process_environment());
  } catch (const delayd::config::ConfigError& e) {
    std::cerr << "delayd: " << e.what() << "\n";
    return 2;
  }
  if (delayd::config::print_config_if_asked(flags, config, std::cout)) return 0;

  spdlog::set_level(spdlog::level::from_str(config.log.level));
  if (config.log.format == "json") {
    spdlog::set_formatter(std::make_unique<delayd::apps::JsonLogFormatter>());
  } else {
    spdlog::set_pattern(delayd::base::kLogPattern);
  }
  spdlog::info("{}", identity());
  for (const auto& w : config.warnings) spdlog::warn("{}", w);
  if (const auto rdkafka = delayd::connectors::running_librdkafka();
      delayd::config::delivery_mode(config) == delayd::config::DeliveryMode::exactly_once &&
      delayd::connectors::transactions_spin(rdkafka)) {
    const std::string first = delayd::connectors::transactions_stop_spinning().text;
    spdlog::warn(
        "kafka.delivery = exactly_once on librdkafka {}: before {} each transaction keeps a producer thread "
        "spinning for one to two milliseconds, so delayd uses more CPU a job and its lateness tail is longer "
        "than on librdkafka {} or later (docs/performance/cost.md, \"The cost of a job\"); scripts/librdkafka.sh "
        "builds a later one, and LD_LIBRARY_PATH makes delayd load it",
        rdkafka.text, first, first);
  }
  if (const auto rdkafka = delayd::connectors::running_librdkafka();
      delayd::connectors::commits_lose_assignment(rdkafka) && delayd::broker::cooperative_rebalancing(config)) {
    const std::string first = delayd::connectors::commits_keep_assignment().text;
    spdlog::warn(
        "librdkafka {} with partition.assignment.strategy = cooperative-sticky: before {} a member whose offset "
        "commit meets a rebalance drops all its partitions as lost and rejoins (confluentinc/librdkafka#4059), so "
        "when another instance leaves the group (by session timeout or on its own) this one can lose its shards "
        "too, and the jobs of both wait a rebalance or two longer (docs/guarantees.md); scripts/librdkafka.sh "
        "builds a later one, and LD_LIBRARY_PATH makes delayd load it",
        rdkafka.text, first);
  }
  delayd::connectors::set_log_hook([](delayd::connectors::LogLevel level, std::string_view msg) {
    using L = delayd::connectors::LogLevel;
    switch (level) {
      case L::debug:
        spdlog::debug("kafka: {}", msg);
        break;
      case L::info:
        spdlog::info("kafka: {}", msg);
        break;
      case L::warning:
        spdlog::warn("kafka: {}", msg);
        break;
      case L::error:
        spdlog::error("kafka: {}", msg);
        break;
    }
  });

  // A write to a connection the server closed (Redis over TLS or plain hiredis) must be an error
  // return, retried like any outage, not SIGPIPE ending the process.
  std::signal(SIGPIPE, SIG_IGN);
  // Signals are taken by an Asio signal_set on its own thread; the scheduling loop notices the
  // flag within one turn (at most ~100 ms) and shuts down cleanly.
  // From the signal on, /readyz answers 503 (the admin endpoint, below) while the loop drains.
  std::atomic<bool> stop{false};
  boost::asio::io_context io;
  std::optional<delayd::admin::AdminServer> admin;
  boost::asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& ec, int sig) {
    if (ec) return;
    spdlog::info("signal {} received: stopping", sig);
    if (admin) admin->begin_stop("signal " + std::to_string(sig) + " received, draining");
    stop = true;
  });
  // The admin endpoint shares the Asio thread; binding happens here so a taken port stops
  // start-up with a message naming the setting. /jobs and the pending counts use a Redis client
  // and a Kafka producer of the endpoint's own, on its worker thread, never the loop's.
  if (!config.admin.listen.empty()) {
    try {
      admin.emplace(io, delayd::admin::admin_options(config),
                    std::make_unique<delayd::admin::StoreJobBackend>(config, std::chrono::seconds(5)));
      spdlog::info("admin endpoint on {}:{} (/healthz, /readyz, /metrics, /stats, /jobs/{{id}}){}",
                   config.admin.listen.substr(0, config.admin.listen.rfind(':')), admin->port(),
                   config.admin.token.empty() && config.admin.read_token.empty()
                       ? ""
                       : "; bearer token required but for /healthz and /readyz");
    } catch (const std::exception& e) {
      std::cerr << "delayd: " << e.what() << "\n";
      return 2;
    }
  }
  // One thread runs the io_context: the signal wait and the admin endpoint (which needs exactly one).
  std::thread signal_thread([&] {
    delayd::base::name_this_thread("admin-io");
    io.run();
  });

  // Traces (the OTEL_* variables): off unless an endpoint is set; the exporter runs on its own
  // thread and sends what is queued when the service stops.
  std::unique_ptr<delayd::telemetry::Tracer> tracer;
  if (config.tracing.enabled) {
    tracer = delayd::telemetry::make_tracer(config.tracing, delayd::build::kVersion);
    spdlog::info("traces: OTLP/HTTP JSON to {}:{}{} (from {}) as service {}", config.tracing.host, config.tracing.port,
                 config.tracing.target, config.tracing.endpoint_origin, config.tracing.service_name);
  }

  int status = 1;
  try {
    std::function<void(delayd::broker::LoopSnapshot)> publish;
    delayd::broker::StartupReport starting;
    if (admin) {
      publish = [&admin](delayd::broker::LoopSnapshot s) { admin->publish(std::move(s)); };
      starting = [&admin](const std::string& problem) { admin->starting_up(problem); };
    }
    status = delayd::broker::Service(config, tracer.get()).run(stop, publish, starting);
  } catch (const std::exception& e) {
    spdlog::critical("delayd failed: {}", e.what());
  }
  if (tracer) tracer->shutdown(std::chrono::seconds(2));
  io.stop();
  signal_thread.join();
  admin.reset();
  return status;
}

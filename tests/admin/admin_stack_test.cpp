// The admin endpoint of the real delayd executable against the local stack (label e2e; needs
// KAFKA_BOOTSTRAP and REDIS_URL): the counters on /metrics move as jobs are published, delivered,
// cancelled through DELETE /jobs/{id}, duplicated and dead-lettered; promtool accepts the text
// (that case needs promtool: support/requires.hpp); delayd_build_info names the build; /livez
// answers as /healthz; from SIGTERM on /readyz answers 503 "stopping" while delayd drains;
// and 500 idle connections plus a 100 KB header neither silence /healthz nor stop jobs firing.
#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <catch2/catch.hpp>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "broker/host_clock.hpp"
#include "e2e/harness.hpp"
#include "support/requires.hpp"

using namespace delayd::e2e;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

const std::string kToken = "stack-test-token";

// One HTTP/1.0 request (closed by the server), with the bearer token; "" if nothing answers.
std::string call(std::uint16_t port, const std::string& method, const std::string& path,
                 const std::string& extra_headers = "") {
  return delayd::e2e::http_request(port, method, path, "Authorization: Bearer " + kToken + "\r\n" + extra_headers);
}

std::string body(const std::string& response) {
  const auto at = response.find("\r\n\r\n");
  return at == std::string::npos ? "" : response.substr(at + 4);
}

// The value of a sample line "series value"; 0 when absent.
double sample(const std::string& text, const std::string& series) {
  const auto at = text.find("\n" + series + " ");
  return at == std::string::npos ? 0 : std::stod(text.substr(at + series.size() + 2));
}

std::string metrics(std::uint16_t port) { return body(call(port, "GET", "/metrics")); }

// Polls /metrics until `series` reaches `at_least`; the last text.
std::string wait_for(std::uint16_t port, const std::string& series, double at_least,
                     std::chrono::seconds timeout = std::chrono::seconds(30)) {
  // A series that is not there yet reads as 0, so presence is waited for too (the pending gauges
  // appear only after the endpoint's first read of Redis, up to 5 s after start).
  auto there = [&](const std::string& t) {
    return t.find("\n" + series + " ") != std::string::npos && sample(t, series) >= at_least;
  };
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string text = metrics(port);
  while (!there(text) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    text = metrics(port);
  }
  INFO(text);
  CHECK(there(text));
  return text;
}

}  // namespace

TEST_CASE("the counters on /metrics move as jobs are published, cancelled and dead-lettered", "[e2e][admin]") {
  // Asked first: a missing promtool skips the case before delayd starts (fails it under CI).
  const std::string promtool =
      delayd::testing::require_tool("promtool", "Debian package prometheus; scripts/install-deps.sh installs it");
  World w("adminmetrics");
  const std::uint16_t port = free_port();
  w.settings["DELAYD_ADMIN_LISTEN"] = "127.0.0.1:" + std::to_string(port);
  w.settings["DELAYD_ADMIN_TOKEN"] = kToken;
  w.settings["DELAYD_ADMIN_READ_TIMEOUT_MS"] = "2000";
  w.create_topics({"orders"}, 1);
  DelaydProcess delayd(w);
  delayd.set_die_with_test(true);
  delayd.start();

  // Ready once the shard is loaded and nothing is down.
  REQUIRE_THAT(http_get_until_ok(port, "/readyz"), Catch::Contains(" 200 ") && Catch::EndsWith("ready\n"));
  CHECK_THAT(http_get(port, "/metrics"), Catch::StartsWith("HTTP/1.0 401"));  // the token is asked

  const std::string before = metrics(port);
  CHECK(sample(before, "delayd_jobs_accepted_total") == 0);

  Publisher pub(w);
  const std::int64_t soon = now_ms() + 500;
  for (int i = 0; i < 3; ++i) pub.send(job_at("m-soon-" + std::to_string(i), soon, "v"));
  pub.send(job_at("m-later", now_ms() + 120'000, "v"));
  pub.send(job_at("m-soon-0", soon, "v"));  // the same id again: a duplicate
  delayd::connectors::OutRecord invalid;
  invalid.key = "bad";
  invalid.value = "x";
  invalid.headers = {{"business", "orders"}};  // no deliver-at: dead-lettered
  pub.send_raw(invalid);
  pub.flush();

  wait_for(port, "delayd_jobs_accepted_total", 4);
  wait_for(port, "delayd_jobs_delivered_total", 3);
  std::string text = wait_for(port, "delayd_jobs_dead_lettered_total{reason=\"invalid_record\"}", 1);
  CHECK(sample(text, "delayd_jobs_duplicate_total") == 1);
  CHECK(sample(text, "delayd_delivery_attempts_total{outcome=\"delivered\"}") >= 3);
  CHECK(sample(text, "delayd_lateness_seconds_count") >= 3);
  CHECK(sample(text, "delayd_kafka_produce_seconds_count") >= 3);
  CHECK(sample(text, "delayd_redis_request_seconds_count") > 0);
  CHECK(sample(text, "delayd_outage{dependency=\"redis\"}") == 0);
  CHECK(sample(text, "process_resident_memory_bytes") > 0);
  CHECK(sample(text, "delayd_ready") == 1);
  // This host's clock against the stack's Redis, on this host too: read at the first turn, no skew.
  CHECK(text.find("\ndelayd_clock_offset_seconds ") != std::string::npos);
  CHECK(std::abs(sample(text, "delayd_clock_offset_seconds")) < 0.1);
  CHECK(sample(text, "delayd_redis_may_drop_waiting_jobs") == 0);  // the stack's Redis has no limit
  // What this host's kernel says of its clock, read at the first turn too.
  const auto sync = delayd::broker::read_host_clock_sync();
  REQUIRE(sync.has_value());
  CHECK(sample(text, "delayd_clock_synchronized") == (sync->synchronized ? 1 : 0));
  CHECK(text.find("\ndelayd_clock_max_error_seconds ") != std::string::npos);
  CHECK(sample(text, "delayd_clock_max_error_seconds") >= 0);

  // GET and DELETE /jobs/{id}, as delayctl get and cancel.
  const std::string job = call(port, "GET", "/jobs/m-later");
  REQUIRE_THAT(job, Catch::Contains(" 200 "));
  CHECK(nlohmann::json::parse(body(job))["state"] == "delay");
  CHECK_THAT(call(port, "GET", "/jobs/no-such-job"), Catch::Contains(" 404 "));
  const std::string cancel = call(port, "DELETE", "/jobs/m-later");
  INFO(cancel);
  REQUIRE_THAT(cancel, Catch::Contains(" 200 "));
  CHECK(nlohmann::json::parse(body(cancel))["cancelled"] == true);
  CHECK_THAT(call(port, "DELETE", "/jobs/m-later"), Catch::Contains(" 409 "));   // cancelled already
  CHECK_THAT(call(port, "DELETE", "/jobs/m-soon-1"), Catch::Contains(" 409 "));  // delivered
  text = wait_for(port, "delayd_jobs_cancelled_total", 1);
  text = wait_for(port, "delayd_jobs_pending{shard=\"" + w.ingest_topic + ":0\"}", 0);
  CHECK(text.find("delayd_jobs_pending{") != std::string::npos);
  // Consumer lag per assigned partition: every record published here has been read by now.
  const std::string lag0 = "delayd_ingest_lag_records{partition=\"" + w.ingest_topic + ":0\"}";
  text = wait_for(port, lag0, 0);
  CHECK(sample(text, lag0) <= 6);

  // promtool accepts the live text.
  const std::string file = "delayd-admin-stack-metrics.txt";
  std::ofstream(file) << text;
  const int checked = std::system((promtool + " check metrics < " + file).c_str());
  CHECK(checked == 0);
  // The figures for the log (scripts/test.sh shows lines starting "admin:").
  std::cout << "admin: /metrics after 4 jobs, a duplicate, an invalid record and a cancel: accepted "
            << sample(text, "delayd_jobs_accepted_total") << ", delivered "
            << sample(text, "delayd_jobs_delivered_total") << ", duplicate "
            << sample(text, "delayd_jobs_duplicate_total") << ", dead-lettered (invalid_record) "
            << sample(text, "delayd_jobs_dead_lettered_total{reason=\"invalid_record\"}") << ", cancelled "
            << sample(text, "delayd_jobs_cancelled_total") << "; promtool check metrics "
            << (checked == 0 ? "ok" : "FAILED") << "\n";

  // The build on /metrics: the build type, a revision (the git commit, or "unknown") and the project
  // version.
  const auto build = text.find("\ndelayd_build_info{");
  REQUIRE(build != std::string::npos);
  const std::string build_line = text.substr(build + 1, text.find('\n', build + 1) - build - 1);
  CHECK_THAT(
      build_line,
      Catch::Matches(
          R"re(delayd_build_info\{build_type="\w+",revision="([0-9a-f]{4,40}|unknown)",version="\d+\.\d+\.\d+"\} 1)re"));

  // /livez is /healthz under the name Kubernetes uses: the same answer, without the token.
  const std::string livez = http_get(port, "/livez");
  CHECK_THAT(livez, Catch::Contains(" 200 "));
  CHECK(body(livez) == body(http_get(port, "/healthz")));
  CHECK(body(livez) == "ok\n");

  // SIGTERM: /readyz turns 503 with the reason while delayd drains (before it ends), so an
  // orchestrator stops sending it work; asked until the signal has been handled.
  REQUIRE_THAT(http_get(port, "/readyz"), Catch::Contains(" 200 "));
  REQUIRE(::kill(delayd.pid(), SIGTERM) == 0);
  std::string during = http_get(port, "/readyz");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (during.find(" 200 ") != std::string::npos && std::chrono::steady_clock::now() < deadline) {
    during = http_get(port, "/readyz");
  }
  INFO("the first /readyz answer after SIGTERM that is not 200 (\"\" = delayd had already ended): " << during);
  CHECK_THAT(during, Catch::Contains(" 503 "));
  CHECK(body(during) == "not ready: stopping (signal 15 received, draining)\n");
  std::cout << "admin: after SIGTERM /readyz answered: " << body(during);
  // It ends by itself after that one signal (a second one, as stop() sends, could find it past
  // its signal handling, in its last teardown).
  const auto ends_by = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (delayd.running() && std::chrono::steady_clock::now() < ends_by) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  REQUIRE_FALSE(delayd.running());
  CHECK(delayd.exit_status() == std::optional<int>(0));
}

TEST_CASE("500 idle connections and a 100 KB header neither silence healthz nor stop jobs firing",
          "[e2e][admin][limits]") {
  World w("adminslowloris");
  const std::uint16_t port = free_port();
  w.settings["DELAYD_ADMIN_LISTEN"] = "127.0.0.1:" + std::to_string(port);
  w.settings["DELAYD_ADMIN_READ_TIMEOUT_MS"] = "3000";
  w.create_topics({"orders"}, 1);
  DelaydProcess delayd(w);
  delayd.set_die_with_test(true);
  delayd.start();
  http_get_until_ok(port, "/healthz");

  asio::io_context io;
  std::vector<tcp::socket> idle;
  for (int i = 0; i < 500; ++i) {
    idle.emplace_back(io).connect({asio::ip::make_address("127.0.0.1"), port});
    if (i % 50 == 0) asio::write(idle.back(), asio::buffer(std::string("GET /healthz HTTP/1.1\r\nX-Slow: ")));
  }
  const std::string huge = call(port, "GET", "/healthz", "X-Pad: " + std::string(100 * 1024, 'a') + "\r\n");
  if (!huge.empty()) CHECK_THAT(huge, Catch::Contains(" 431 "));  // the parser stopped before the version

  Publisher pub(w);
  const std::int64_t due = now_ms() + 1000;
  for (int i = 0; i < 5; ++i) pub.send(job_at("s-" + std::to_string(i), due, "v"));
  pub.flush();
  int answered = 0;
  std::chrono::steady_clock::duration slowest{};
  for (int i = 0; i < 10; ++i) {
    const auto started = std::chrono::steady_clock::now();
    const std::string answer = http_get(port, "/healthz");
    const auto took = std::chrono::steady_clock::now() - started;
    CHECK_THAT(answer, Catch::StartsWith("HTTP/1.0 200"));
    CHECK(took < std::chrono::milliseconds(500));
    answered += answer.starts_with("HTTP/1.0 200") ? 1 : 0;
    slowest = std::max(slowest, took);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  Collector ready(w, {w.ready_topic("orders")});
  CHECK(ready.collect_until([](const auto& recs) { return recs.size() >= 5; }, std::chrono::seconds(30)));
  std::cout << "admin: with 500 idle connections and a 100 KB header (answer '" << huge.substr(0, huge.find("\r\n"))
            << "'): healthz answered " << answered << " of 10, slowest "
            << std::chrono::duration_cast<std::chrono::microseconds>(slowest).count() / 1000.0 << " ms; jobs fired "
            << ready.records().size() << " of 5\n";
  CHECK(delayd.running());
  idle.clear();
  CHECK(delayd.stop() == 0);
}

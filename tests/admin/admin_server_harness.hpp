// The admin endpoint's test harness (admin_server_test.cpp, admin_access_test.cpp): requests over
// real loopback sockets to a server on a port the kernel picks, a fake job backend, snapshots,
// and a capture of the log (the audit lines).
#pragma once

#include <spdlog/spdlog.h>

#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "admin/admin_server.hpp"
#include "admin/audit.hpp"
#include "admin/request_target.hpp"
#include "delayd/build_info.hpp"
#include "support/captured_log.hpp"
#include "support/requires.hpp"

namespace delayd::admin::test {

using delayd::admin::AdminOptions;
using delayd::admin::AdminServer;
using delayd::admin::JobAnswer;
using AdminSnapshot = delayd::broker::LoopSnapshot;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

inline tcp::endpoint at(std::uint16_t port) { return {asio::ip::make_address("127.0.0.1"), port}; }

// Everything the server sends until it closes the connection (or `limit` bytes).
inline std::string read_all(tcp::socket& socket) {
  std::string out;
  boost::system::error_code ec;
  char buf[4096];
  for (;;) {
    const std::size_t n = socket.read_some(asio::buffer(buf), ec);
    out.append(buf, n);
    if (ec) break;
  }
  return out;
}

// The whole response of one request on its own connection, closed by the server (HTTP/1.0, or
// "Connection: close").
inline std::string request(std::uint16_t port, const std::string& text) {
  asio::io_context io;
  tcp::socket socket(io);
  socket.connect(at(port));
  boost::system::error_code ec;
  asio::write(socket, asio::buffer(text), ec);
  return read_all(socket);
}

inline std::string get(std::uint16_t port, const std::string& path, const std::string& extra_headers = "") {
  return request(port, "GET " + path + " HTTP/1.1\r\nHost: t\r\nConnection: close\r\n" + extra_headers + "\r\n");
}

inline std::string body(const std::string& response) { return response.substr(response.find("\r\n\r\n") + 4); }

// One response read from a kept-alive connection (Content-Length framed).
inline std::string read_one(tcp::socket& socket, std::string& pending) {
  char buf[4096];
  for (;;) {
    const auto head_end = pending.find("\r\n\r\n");
    if (head_end != std::string::npos) {
      const auto cl = pending.find("Content-Length: ");
      REQUIRE(cl != std::string::npos);
      const std::size_t length = std::stoul(pending.substr(cl + 16));
      if (pending.size() >= head_end + 4 + length) {
        std::string one = pending.substr(0, head_end + 4 + length);
        pending.erase(0, one.size());
        return one;
      }
    }
    const std::size_t n = socket.read_some(asio::buffer(buf));
    pending.append(buf, n);
  }
}

struct FakeJobs final : delayd::admin::JobBackend {
  JobAnswer get(const std::string& id) override {
    if (id == "boom") throw std::runtime_error("redis unavailable");
    if (id == "nope") return {404, R"({"error": "no job nope"})"};
    return {200, nlohmann::json{{"job_id", id}, {"state", "delay"}}.dump()};
  }
  // "live" is cancelled (200), "nope" does not exist (404), any other id was delivered (409).
  JobAnswer cancel(const std::string& id) override {
    ++cancel_calls;
    if (id == "live") return {200, nlohmann::json{{"job_id", id}, {"cancelled", true}, {"state", "cancelled"}}.dump()};
    if (id == "nope") return {404, R"({"error": "no job nope"})"};
    return {409, nlohmann::json{{"job_id", id}, {"cancelled", false}, {"state", "delivered"}}.dump()};
  }
  delayd::storage::StoreStats store_stats() override {
    delayd::storage::StoreStats s;
    s.pending_by_shard = {{"delay-ingest:0", 12}};
    s.by_business_state = {{"orders", {{"delay", 12}, {"finished", 3}}}};
    return s;
  }
  delayd::admin::Overview overview(std::int64_t now_ms) override {
    ++overview_calls;
    if (overview_fails) throw std::runtime_error("redis unavailable");
    delayd::admin::Overview o;
    o.pending_by_business = {{"orders", 9}, {"mail", 3}};
    o.pending_by_shard = {{"delay-ingest:0", 12}};
    o.next_due = now_ms + 30'000;
    o.due.assign(delayd::admin::kDueWindowsS.size() + 1, 0);
    o.due[1] = 2;
    o.due.back() = 10;
    return o;
  }
  std::atomic<int> overview_calls{0};
  std::atomic<bool> overview_fails{false};
  std::atomic<int> cancel_calls{0};
};

inline AdminOptions options(std::string token = "", std::size_t max_connections = 64,
                            std::chrono::milliseconds read_timeout = std::chrono::milliseconds(5000)) {
  AdminOptions o;
  o.listen = "127.0.0.1:0";
  o.token = std::move(token);
  o.limits.max_connections = max_connections;
  o.limits.read_timeout = read_timeout;
  return o;
}

// options() with both tokens.
inline AdminOptions with_tokens(std::string admin, std::string read) {
  AdminOptions o = options(std::move(admin));
  o.read_token = std::move(read);
  return o;
}

// The whole response to `method path`, with "Authorization: Bearer <token>" unless token is empty.
inline std::string call(std::uint16_t port, const std::string& method, const std::string& path,
                        const std::string& token = "") {
  return request(port, method + " " + path + " HTTP/1.1\r\nHost: t\r\nConnection: close\r\n" +
                           (token.empty() ? "" : "Authorization: Bearer " + token + "\r\n") + "\r\n");
}

using delayd::testing::CapturedLog;  // the audit lines among what it captures

struct Running {
  explicit Running(AdminOptions o = options(), std::unique_ptr<delayd::admin::JobBackend> jobs = nullptr)
      : server(io, std::move(o), std::move(jobs)) {}
  ~Running() {
    io.stop();
    thread.join();
  }
  std::uint16_t port() const { return server.port(); }
  asio::io_context io;
  AdminServer server;
  std::thread thread{[this] { io.run(); }};
};

inline AdminSnapshot sample_snapshot() {
  AdminSnapshot s;
  s.held = 7;
  s.in_wheel = 5;
  s.in_flight = 2;
  s.shards = {"delay-ingest:0"};
  s.counters.ingest.accepted = 3;
  s.counters.fire.delivered = 2;
  s.counters.ingest.cancelled = 1;
  s.counters.ingest.dead_lettered = 1;
  s.counters.fire.failed = 0;
  s.outages = {{"redis", false}, {"kafka", false}};
  s.lateness.observe(0.003);
  s.redis_request.observe(0.0004);
  s.kafka_produce.observe(0.02);
  s.delivery.commit.observe(0.03);
  return s;
}

// sample_snapshot() later in a busy life: every family of /metrics has a value (promtool sees them all).
inline AdminSnapshot busy_snapshot() {
  AdminSnapshot s = sample_snapshot();
  s.counters.ingest.accepted = 10;
  s.counters.ingest.dead_lettered = 4;
  s.counters.ingest.reports_failed = 6;
  s.counters.fire.redelivered = 2;
  s.lateness.observe(0.5);
  s.rebalances = 2;
  s.outages["kafka"] = true;
  s.compression = {3, 3000, 700, 12345};
  s.next_due =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count() +
      30'000;
  return s;
}

// The value of the sample line that starts with `series` ("name" or "name{labels}").
inline double sample(const std::string& text, const std::string& series) {
  const auto at_line = text.find("\n" + series + " ");
  if (at_line == std::string::npos) return -1;
  return std::stod(text.substr(at_line + series.size() + 2));
}

}  // namespace delayd::admin::test

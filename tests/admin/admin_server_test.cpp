// The admin endpoint over real loopback sockets, on a port the kernel picks.
#include <catch2/catch.hpp>

#include "admin/admin_server.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <nlohmann/json.hpp>

#include <thread>

using delayd::admin::AdminServer;
using AdminSnapshot = delayd::broker::LoopSnapshot;
namespace asio = boost::asio;

namespace {

// The whole response of one request, as a client without any HTTP library sees it.
std::string request(std::uint16_t port, const std::string& text) {
  asio::io_context io;
  asio::ip::tcp::socket socket(io);
  socket.connect({asio::ip::make_address("127.0.0.1"), port});
  asio::write(socket, asio::buffer(text));
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

std::string body(const std::string& response) { return response.substr(response.find("\r\n\r\n") + 4); }

struct Running {
  asio::io_context io;
  AdminServer server{io, "127.0.0.1:0"};
  std::thread thread{[this] { io.run(); }};
  ~Running() {
    io.stop();
    thread.join();
  }
};

}  // namespace

TEST_CASE("healthz is 503 until the loop publishes, then ok, then degraded during an outage", "[admin]") {
  Running r;
  CHECK_THAT(request(r.server.port(), "GET /healthz HTTP/1.0\r\n\r\n"), Catch::StartsWith("HTTP/1.0 503"));
  r.server.publish({});
  const std::string ok = request(r.server.port(), "GET /healthz HTTP/1.0\r\n\r\n");
  CHECK_THAT(ok, Catch::StartsWith("HTTP/1.0 200"));
  CHECK(body(ok) == "ok\n");
  AdminSnapshot s;
  s.problem = "redis unavailable: connection refused";
  r.server.publish(s);
  CHECK(body(request(r.server.port(), "GET /healthz HTTP/1.0\r\n\r\n")) == "degraded: redis unavailable: connection refused\n");
}

TEST_CASE("stats serves the last snapshot as JSON", "[admin]") {
  Running r;
  AdminSnapshot s;
  s.held = 7;
  s.in_wheel = 5;
  s.in_flight = 2;
  s.shards = {"delay-ingest:0"};
  s.next_due = 1'795'000'000'123;
  s.counters = {{"delivered", 42}};
  r.server.publish(s);
  const std::string response = request(r.server.port(), "GET /stats HTTP/1.1\r\nHost: x\r\n\r\n");
  REQUIRE_THAT(response, Catch::StartsWith("HTTP/1.0 200") && Catch::Contains("application/json"));
  const auto j = nlohmann::json::parse(body(response));
  CHECK(j["alive"] == true);
  CHECK(j["held"] == 7);
  CHECK(j["in_wheel"] == 5);
  CHECK(j["in_flight"] == 2);
  CHECK(j["shards"] == nlohmann::json::array({"delay-ingest:0"}));
  CHECK(j["next_due"] == 1'795'000'000'123);
  CHECK(j["next_due_iso"] == "2026-11-18T11:06:40.123Z");
  CHECK(j["counters"]["delivered"] == 42);
}

TEST_CASE("other paths, other methods and garbage get the right refusal", "[admin]") {
  Running r;
  CHECK_THAT(request(r.server.port(), "GET /metrics HTTP/1.0\r\n\r\n"), Catch::StartsWith("HTTP/1.0 404"));
  CHECK_THAT(request(r.server.port(), "POST /stats HTTP/1.0\r\n\r\n"), Catch::StartsWith("HTTP/1.0 405"));
  CHECK_THAT(request(r.server.port(), "nonsense\r\n\r\n"), Catch::StartsWith("HTTP/1.0 400"));
}

TEST_CASE("parse_request_head splits the first line at its first two spaces", "[admin]") {
  using delayd::admin::parse_request_head;
  using delayd::admin::RequestHead;
  CHECK(parse_request_head("GET /healthz HTTP/1.0\r\n\r\n") == RequestHead{"GET", "/healthz"});
  CHECK(parse_request_head("GET /stats HTTP/1.1\r\nHost: a b c\r\n\r\n") == RequestHead{"GET", "/stats"});
  CHECK(parse_request_head("GET  HTTP/1.0\r\n") == RequestHead{"GET", ""});
  CHECK(parse_request_head("GET /x ") == RequestHead{"GET", "/x"});  // no CRLF: the whole text
  CHECK(parse_request_head("") == std::nullopt);
  CHECK(parse_request_head("GET /healthz\r\n\r\n") == std::nullopt);
  CHECK(parse_request_head("GET\r\n /a b\r\n") == std::nullopt);  // spaces after the first line do not count
}

TEST_CASE("a taken port or a bad address stops start-up with a message naming admin.listen", "[admin]") {
  Running r;
  asio::io_context io;
  const std::string taken = "127.0.0.1:" + std::to_string(r.server.port());
  CHECK_THROWS_WITH(AdminServer(io, taken), Catch::Contains("admin.listen") && Catch::Contains("cannot listen"));
  CHECK_THROWS_WITH(AdminServer(io, "not-an-ip:80"), Catch::Contains("admin.listen") && Catch::Contains("IP address"));
}

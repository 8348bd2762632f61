#include "admin/admin_server.hpp"

#include "broker/time_format.hpp"

#include <boost/asio/read_until.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>
#include <nlohmann/json.hpp>

#include <stdexcept>

namespace delayd::admin {

using broker::format_rfc3339_ms;

namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

constexpr auto kStaleAfter = std::chrono::seconds(15);

std::string http(int status, const char* reason, const std::string& type, const std::string& body) {
  return "HTTP/1.0 " + std::to_string(status) + " " + reason + "\r\nContent-Type: " + type +
         "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
}

tcp::endpoint parse_listen(const std::string& listen) {
  const auto colon = listen.rfind(':');
  if (colon == std::string::npos) throw std::runtime_error("admin.listen '" + listen + "' is not host:port");
  std::string host = listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  boost::system::error_code ec;
  const auto address = asio::ip::make_address(host == "localhost" ? "127.0.0.1" : host, ec);
  if (ec) throw std::runtime_error("admin.listen '" + listen + "': '" + host + "' is not an IP address");
  return {address, static_cast<std::uint16_t>(std::stoi(listen.substr(colon + 1)))};
}

// One connection: read the request head, answer, close. Owns itself through shared_from_this.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, std::function<std::string(const std::string&)> respond)
      : socket_(std::move(socket)), respond_(std::move(respond)), buffer_(8192) {}

  void start() {
    auto self = shared_from_this();
    asio::async_read_until(socket_, buffer_, "\r\n\r\n", [self](boost::system::error_code ec, std::size_t n) {
      if (ec && n == 0) {
        self->answer(http(400, "Bad Request", "text/plain", "bad request\n"));
        return;
      }
      std::string head(asio::buffers_begin(self->buffer_.data()), asio::buffers_begin(self->buffer_.data()) + n);
      self->answer(self->respond_(head));
    });
  }

 private:
  void answer(std::string response) {
    response_ = std::move(response);
    auto self = shared_from_this();
    asio::async_write(socket_, asio::buffer(response_), [self](boost::system::error_code, std::size_t) {
      boost::system::error_code ignored;
      self->socket_.shutdown(tcp::socket::shutdown_both, ignored);
      self->socket_.close(ignored);
    });
  }

  tcp::socket socket_;
  std::function<std::string(const std::string&)> respond_;
  asio::streambuf buffer_;
  std::string response_;
};

}  // namespace

AdminServer::AdminServer(asio::io_context& io, const std::string& listen) : acceptor_(io) {
  const tcp::endpoint endpoint = parse_listen(listen);
  boost::system::error_code ec;
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) throw std::runtime_error("admin.listen '" + listen + "': cannot listen: " + ec.message());
  accept();
}

AdminServer::~AdminServer() {
  boost::system::error_code ignored;
  acceptor_.close(ignored);
}

std::uint16_t AdminServer::port() const { return acceptor_.local_endpoint().port(); }

void AdminServer::publish(broker::LoopSnapshot snapshot) {
  std::lock_guard lock(shared_->mutex);
  shared_->snapshot = std::move(snapshot);
  shared_->last_publish = std::chrono::steady_clock::now();
}

void AdminServer::accept() {
  acceptor_.async_accept([this, shared = shared_](boost::system::error_code ec, tcp::socket socket) {
    if (ec) return;  // closed: the server is going away
    std::make_shared<Session>(std::move(socket), [shared](const std::string& request) {
      return respond(request, *shared);
    })->start();
    accept();
  });
}

std::optional<RequestHead> parse_request_head(std::string_view request) {
  const auto line_end = request.find("\r\n");
  const std::string_view line = request.substr(0, line_end);
  const auto sp1 = line.find(' ');
  const auto sp2 = line.find(' ', sp1 == std::string_view::npos ? 0 : sp1 + 1);
  if (sp1 == std::string_view::npos || sp2 == std::string_view::npos) return std::nullopt;
  return RequestHead{std::string(line.substr(0, sp1)), std::string(line.substr(sp1 + 1, sp2 - sp1 - 1))};
}

std::string AdminServer::respond(const std::string& request, Shared& shared) {
  const std::optional<RequestHead> head = parse_request_head(request);
  if (!head) return http(400, "Bad Request", "text/plain", "bad request\n");
  const std::string& method = head->method;
  const std::string& path = head->path;
  if (path != "/healthz" && path != "/stats") return http(404, "Not Found", "text/plain", "not found\n");
  if (method != "GET") return http(405, "Method Not Allowed", "text/plain", "only GET\n");

  broker::LoopSnapshot s;
  std::optional<std::chrono::steady_clock::time_point> last;
  {
    std::lock_guard lock(shared.mutex);
    s = shared.snapshot;
    last = shared.last_publish;
  }
  const bool alive = last && std::chrono::steady_clock::now() - *last < kStaleAfter;
  if (path == "/healthz") {
    if (!alive) return http(503, "Service Unavailable", "text/plain", "the scheduling loop is not turning (still starting up, or stuck)\n");
    return http(200, "OK", "text/plain", s.problem.empty() ? "ok\n" : "degraded: " + s.problem + "\n");
  }
  nlohmann::json j{{"alive", alive},        {"held", s.held},     {"in_wheel", s.in_wheel},
                   {"in_flight", s.in_flight}, {"shards", s.shards}, {"counters", s.counters},
                   {"problem", s.problem}};
  if (s.next_due) {
    j["next_due"] = *s.next_due;
    j["next_due_iso"] = format_rfc3339_ms(*s.next_due);
  } else {
    j["next_due"] = nullptr;
  }
  return http(200, "OK", "application/json", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

}  // namespace delayd::admin

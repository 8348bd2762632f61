#include "admin/http_server.hpp"

#include <atomic>
#include <boost/asio/post.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <list>
#include <optional>

namespace delayd::admin {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {
class Session;
}

struct HttpServer::Core {
  Core(asio::io_context& io, HttpLimits l, HttpHandler h) : acceptor(io), limits(l), handler(std::move(h)) {}

  tcp::acceptor acceptor;
  HttpLimits limits;
  HttpHandler handler;
  std::list<Session*> sessions;  // open connections, oldest first
  HttpServerCounters counters;
  bool closed = false;

  // Makes room for one more connection: true when there is room (after closing the oldest
  // connection waiting for a request, if needed).
  bool make_room();
};

namespace {

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, std::shared_ptr<HttpServer::Core> core)
      : stream_(std::move(socket)), core_(std::move(core)) {
    core_->sessions.push_back(this);
    self_in_list_ = std::prev(core_->sessions.end());
  }
  ~Session() { forget(); }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Starts reading the first request.
  void start() { read_request(); }

  // Whether the connection is waiting for (the rest of) a request, so may be closed for room.
  bool waiting() const { return waiting_; }

  // Closes the connection and leaves the server's list at once; the pending read then ends.
  void close() {
    forget();
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
  }

 private:
  void forget() {
    if (!in_list_) return;
    core_->sessions.erase(self_in_list_);
    in_list_ = false;
  }

  void read_request() {
    if (!in_list_) return;
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(core_->limits.max_header_bytes));
    parser_->body_limit(core_->limits.max_body_bytes);
    stream_.expires_after(core_->limits.read_timeout);
    waiting_ = true;
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_read(ec); });
  }

  void on_read(beast::error_code ec) {
    waiting_ = false;
    if (!in_list_ || ec == http::error::end_of_stream || ec == asio::error::operation_aborted) return close();
    if (ec == beast::error::timeout) {
      ++core_->counters.timed_out;
      return close();
    }
    if (ec == http::error::header_limit || ec == http::error::body_limit) {
      ++core_->counters.too_large;
      const bool header = ec == http::error::header_limit;
      return send(
          make_response(header ? 431 : 413, header ? "request header fields too large\n" : "request body too large\n"),
          false, 11);
    }
    if (ec) {
      ++core_->counters.bad;
      // A connection reset or the like gets no answer; a malformed request does.
      const beast::error_code http_kind = http::error::end_of_stream;
      if (ec.category() != http_kind.category() || ec == http::error::partial_message) return close();
      return send(make_response(400, "bad request\n"), false, 11);
    }
    HttpRequest request = parser_->release();
    const bool keep_alive = request.keep_alive();
    const unsigned version = request.version();
    auto answered = std::make_shared<std::atomic<bool>>(false);
    auto self = shared_from_this();
    Reply reply([self, answered, keep_alive, version](HttpResponse response) {
      if (answered->exchange(true)) return;
      asio::post(self->stream_.get_executor(), [self, keep_alive, version, r = std::move(response)]() mutable {
        self->send(std::move(r), keep_alive, version);
      });
    });
    core_->handler(request, std::move(reply));
  }

  void send(HttpResponse response, bool keep_alive, unsigned version) {
    if (!in_list_) return;
    response_.emplace(std::move(response));
    response_->version(version);
    response_->keep_alive(keep_alive);
    response_->prepare_payload();
    stream_.expires_after(core_->limits.read_timeout);
    http::async_write(stream_, *response_,
                      [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_write(ec); });
  }

  void on_write(beast::error_code ec) {
    if (ec == beast::error::timeout) ++core_->counters.timed_out;
    const bool again = !ec && response_ && response_->keep_alive();
    response_.reset();
    if (again) return read_request();
    close();
  }

  beast::tcp_stream stream_;
  std::shared_ptr<HttpServer::Core> core_;
  std::list<Session*>::iterator self_in_list_;
  bool in_list_ = true;
  bool waiting_ = false;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::optional<HttpResponse> response_;
};

void accept_next(const std::shared_ptr<HttpServer::Core>& core) {
  core->acceptor.async_accept([core](beast::error_code ec, tcp::socket socket) {
    if (core->closed) return;
    if (ec) {
      // Out of descriptors or the like: the listening socket stays, the next accept may work.
      if (ec == asio::error::operation_aborted) return;
      return accept_next(core);
    }
    ++core->counters.accepted;
    if (!core->make_room()) {
      ++core->counters.refused;
      beast::error_code ignored;
      socket.close(ignored);
    } else {
      std::make_shared<Session>(std::move(socket), core)->start();
    }
    accept_next(core);
  });
}

}  // namespace

bool HttpServer::Core::make_room() {
  if (sessions.size() < limits.max_connections) return true;
  for (Session* s : sessions) {
    if (s->waiting()) {
      ++counters.evicted;
      s->close();
      return true;
    }
  }
  return false;
}

HttpResponse make_response(unsigned status, std::string body, const std::string& type) {
  HttpResponse r{static_cast<http::status>(status), 11};
  r.set(http::field::content_type, type);
  r.set(http::field::cache_control, "no-store");
  r.body() = std::move(body);
  return r;
}

HttpServer::HttpServer(asio::io_context& io, const tcp::endpoint& endpoint, HttpLimits limits, HttpHandler handler)
    : core_(std::make_shared<Core>(io, limits, std::move(handler))) {
  if (core_->limits.max_connections == 0) core_->limits.max_connections = 1;
  auto& a = core_->acceptor;
  a.open(endpoint.protocol());
  a.set_option(tcp::acceptor::reuse_address(true));
  a.bind(endpoint);
  a.listen(asio::socket_base::max_listen_connections);
  port_ = a.local_endpoint().port();
  accept_next(core_);
}

HttpServer::~HttpServer() {
  // Run with the io_context stopped or on its thread (see the header): state is not locked.
  core_->closed = true;
  beast::error_code ignored;
  core_->acceptor.close(ignored);
  while (!core_->sessions.empty()) core_->sessions.front()->close();
}

std::uint16_t HttpServer::port() const { return port_; }
HttpServerCounters HttpServer::counters() const { return core_->counters; }
std::size_t HttpServer::open_connections() const { return core_->sessions.size(); }

}  // namespace delayd::admin

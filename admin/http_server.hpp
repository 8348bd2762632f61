// HttpServer: a small HTTP/1.1 server on Boost.Beast for the admin endpoint, built so that no
// client, however slow, many or large, can take the endpoint (or the process) down.
//
//   - Each request is read by a Beast request_parser with a header limit (a larger head is
//     answered 431 and the connection closed) and a body limit (413, closed). Anything else
//     the parser refuses is answered 400 and closed.
//   - One deadline per request: the whole request must arrive within read_timeout of the
//     first wait for it (a slowloris trickling one byte at a time gains nothing), and the answer
//     must be sent within read_timeout too; an idle keep-alive connection is closed after it.
//   - At most max_connections connections are open. A connection beyond the cap closes the
//     oldest one that is waiting for a request (idle or half-sent); if every open connection is
//     being answered, the new one is closed at once. So idle sockets can never lock out a probe
//     that sends its request at once.
//   - Keep-alive as HTTP/1.1 says (HTTP/1.0 closes unless asked to keep alive).
//
// The handler is given each request with a Reply: it may answer at once on the server's
// thread, or hand the Reply to another thread and answer from there (the answer is posted back
// to the server's thread). A Reply that is dropped unanswered closes the connection.
//
// Threading: everything runs on the io_context given; that io_context must be run by exactly
// one thread (the server's state is not locked). Reply objects may be called from any thread.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace delayd::admin {

using HttpRequest = boost::beast::http::request<boost::beast::http::string_body>;
using HttpResponse = boost::beast::http::response<boost::beast::http::string_body>;

struct HttpLimits {
  std::size_t max_connections = 64;
  std::chrono::milliseconds read_timeout{5000};
  std::size_t max_header_bytes = 8192;
  std::size_t max_body_bytes = 4096;
};

// What the server counts of its own defences (read on the server's thread).
struct HttpServerCounters {
  std::uint64_t accepted = 0;   // connections accepted
  std::uint64_t evicted = 0;    // waiting connections closed to make room for a new one
  std::uint64_t refused = 0;    // new connections closed because every slot was busy answering
  std::uint64_t timed_out = 0;  // connections closed by the read/write deadline
  std::uint64_t too_large = 0;  // requests refused by the header or body limit
  std::uint64_t bad = 0;        // requests the parser refused otherwise
};

// Answers one request, once. Callable from any thread; copies share the one answer.
class Reply {
 public:
  explicit Reply(std::function<void(HttpResponse)> send) : send_(std::move(send)) {}
  // Sends `response` (its keep-alive, version and Content-Length are set by the server).
  void operator()(HttpResponse response) const { send_(std::move(response)); }

 private:
  std::function<void(HttpResponse)> send_;
};

using HttpHandler = std::function<void(const HttpRequest&, Reply)>;

// A plain-text response; Content-Type text/plain unless `type` says otherwise.
HttpResponse make_response(unsigned status, std::string body, const std::string& type = "text/plain; charset=utf-8");

class HttpServer {
 public:
  // Binds and listens on `endpoint` at once: a bad or taken address throws
  // boost::system::system_error. Starts accepting on `io`.
  HttpServer(boost::asio::io_context& io, const boost::asio::ip::tcp::endpoint& endpoint, HttpLimits limits,
             HttpHandler handler);
  // Stops accepting and closes every open connection. Call with the io_context stopped, or on
  // its thread.
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  std::uint16_t port() const;  // the bound port
  // Call on the server's thread (or with it stopped).
  HttpServerCounters counters() const;
  std::size_t open_connections() const;  // likewise

  struct Core;  // shared with the connections, which may outlive the server object

 private:
  std::shared_ptr<Core> core_;
  std::uint16_t port_ = 0;
};

}  // namespace delayd::admin

// AdminServer: a small HTTP/1.0 endpoint for operators and orchestrators, on Boost.Asio.
//
//   GET /healthz  200 "ok" while the scheduling loop turns; 200 "degraded: <reason>" while it
//                 turns but Redis or Kafka is failing (restarting delayd would not help); 503
//                 when the loop has not turned for 15 s or has not started.
//   GET /stats    200, a JSON snapshot of what this instance holds: jobs held and in the wheel,
//                 records in flight, owned shards, next due time, counters since start.
//   anything else 404 (unknown path) or 405 (not GET).
// One request per connection, answered and closed; requests larger than 8 KiB are refused.
//
// Threading: the server runs on the io_context's thread; the scheduling loop calls publish()
// from its own thread. The snapshot is the only shared state and is guarded by a mutex, so the
// loop never waits on a client.
#pragma once

#include "broker/snapshot.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace delayd::admin {

// The request line of an HTTP request head, split at its first two spaces.
struct RequestHead {
  std::string method;
  std::string path;
  bool operator==(const RequestHead&) const = default;
};

// Reads the method and path from the first line of `request` (up to the first CRLF, or all of
// it): "<method> <path> <rest>". nullopt when that line has fewer than two spaces, which the
// server answers with 400. Header lines are not read. Pure and total on any bytes.
std::optional<RequestHead> parse_request_head(std::string_view request);


class AdminServer {
 public:
  // Binds at once, so a bad or taken address stops start-up. Throws std::runtime_error naming
  // the address.
  AdminServer(boost::asio::io_context& io, const std::string& listen);
  ~AdminServer();
  AdminServer(const AdminServer&) = delete;
  AdminServer& operator=(const AdminServer&) = delete;

  std::uint16_t port() const;  // the bound port (useful with port 0)
  // Called by the scheduling loop; also marks the loop as alive.
  void publish(broker::LoopSnapshot snapshot);

 private:
  struct Shared {
    std::mutex mutex;
    broker::LoopSnapshot snapshot;
    std::optional<std::chrono::steady_clock::time_point> last_publish;
  };
  void accept();
  static std::string respond(const std::string& request, Shared& shared);

  boost::asio::ip::tcp::acceptor acceptor_;
  std::shared_ptr<Shared> shared_ = std::make_shared<Shared>();
};

}  // namespace delayd::admin

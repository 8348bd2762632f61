// AdminServer: delayd's HTTP endpoint for operators, orchestrators and Prometheus, served by
// admin/http_server (Boost.Beast: header and body limits, a deadline per request, a connection
// cap, keep-alive).
//
//   GET /healthz     liveness: 200 "ok" while the scheduling loop turns; 200 "degraded: <reason>"
//                    while it turns but Redis or Kafka is failing (restarting would not help);
//                    503 when the loop has not turned for 15 s or has not started.
//   GET /readyz      readiness: 200 "ready" when the loop turns and no outage is on (Redis and
//                    Kafka reachable); 503 with the reason otherwise.
//   GET /metrics     Prometheus text format (admin/metrics.hpp).
//   GET /stats       JSON: jobs held and in the wheel, records in flight, owned shards, next due
//                    time, counters since start, the current problem.
//   GET /jobs/{id}   the job as `delayctl get` prints it; 404 when there is none.
//   DELETE /jobs/{id} cancel, with `delayctl cancel`'s verdicts (admin/job_backend.hpp).
//   anything else    404 (unknown path) or 405 (method not allowed there).
// With a token set, every path but /healthz and /readyz asks for "Authorization: Bearer <token>"
// (401 without it, compared in constant time).
//
// Threading: the HTTP server runs on the io_context's thread (run by one thread). The scheduling
// loop calls publish() from its own thread; the snapshot is the only state shared with it,
// under a mutex held for a copy, so the loop never waits on a client. /jobs and the pending
// counts for /metrics go to a worker thread of the AdminServer's own (the JobBackend is used on
// it alone), so Redis or Kafka being slow never holds up /healthz or the loop.
#pragma once

#include "admin/http_server.hpp"
#include "broker/snapshot.hpp"
#include "config/config.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <string>

namespace delayd::admin {

struct AdminOptions {
  std::string listen;  // host:port; port 0 picks a free one
  std::string token;   // empty: no token asked
  HttpLimits limits;
};

// The admin.* settings of `config`.
AdminOptions admin_options(const broker::Config& config);

// An HTTP answer with a JSON body, from the JobBackend.
struct JobAnswer {
  unsigned status = 200;
  std::string json;  // the body
};

// Jobs in Redis, for /jobs/{id} and delayd_jobs_pending. Called on the admin's worker thread
// only, one call at a time; may block (Redis, Kafka). May throw: the caller answers 503.
class JobBackend {
 public:
  virtual ~JobBackend() = default;
  virtual JobAnswer get(const std::string& job_id) = 0;
  virtual JobAnswer cancel(const std::string& job_id) = 0;
  virtual std::map<std::string, std::int64_t> pending_by_shard() = 0;
};

class AdminServer {
 public:
  // Binds at once, so a bad or taken address stops start-up: throws std::runtime_error naming
  // admin.listen. Without `jobs`, /jobs answers 503 and delayd_jobs_pending is absent.
  AdminServer(boost::asio::io_context& io, AdminOptions options, std::unique_ptr<JobBackend> jobs = nullptr);
  // Call with the io_context stopped, or on its thread. Waits for the worker's current call.
  ~AdminServer();
  AdminServer(const AdminServer&) = delete;
  AdminServer& operator=(const AdminServer&) = delete;

  std::uint16_t port() const;  // the bound port (useful with port 0)
  // Called by the scheduling loop; also marks the loop as alive. Any thread.
  void publish(broker::LoopSnapshot snapshot);

  struct State;  // shared with requests in progress

 private:
  std::shared_ptr<State> state_;
  std::unique_ptr<HttpServer> http_;
  std::unique_ptr<boost::asio::thread_pool> worker_;  // runs the JobBackend's calls, one at a time
};

}  // namespace delayd::admin

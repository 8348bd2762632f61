// AdminServer: delayd's HTTP endpoint for operators, orchestrators and Prometheus, served by
// admin/http_server (Boost.Beast: header and body limits, a deadline per request, a connection
// cap, keep-alive).
//
//   GET /healthz     liveness: 200 "ok" while the scheduling loop turns; 200 "degraded: <reason>"
//                    while it turns but Redis or Kafka is failing (restarting would not help);
//                    503 when the loop has not turned for 15 s or has not started.
//   GET /livez       the same answer as /healthz (the name Kubernetes' liveness probes use).
//   GET /readyz      readiness: 200 "ready" when the loop turns and no outage is on (Redis and
//                    Kafka reachable); 503 with the reason otherwise, and from the moment a stop
//                    begins (begin_stop(): SIGTERM) until the process ends.
//   GET /metrics     Prometheus text format (admin/metrics.hpp).
//   GET /            the status page (admin/status_page.hpp): one self-contained HTML document
//                    that polls /stats and /overview. Served without the token (it holds no
//                    data; the page sends the token it reads from its URL fragment).
//   GET /stats       JSON: jobs held and in the wheel, records in flight, owned shards, next due
//                    time, counters since start, the current problem, the lateness histogram.
//   GET /overview    JSON, from Redis through the JobBackend, read at most every 2 s (cached):
//                    pending jobs per business and per shard, and how many fall due in each
//                    window of kDueWindowsS (the due timeline).
//   GET /jobs        a page of a walk over jobs, filtered (admin/job_query.hpp, storage/job_browse.hpp).
//   GET /jobs/{id}   the job as `delayctl get` prints it; 404 when there is none.
//   DELETE /jobs/{id} cancel, with `delayctl cancel`'s verdicts (admin/job_backend.hpp).
//   POST /jobs/{id}/run-now, /reschedule (body {"deliver_at"} or {"delay_ms"}), /retry: the
//                    console's actions on one job, verdicts in admin/job_backend.hpp.
//   POST /jobs/bulk  an action on every job of a filter: a dry run's count, or an operation
//                    (admin/operation_runner.hpp); GET /operations[/{id}] its progress, DELETE
//                    /operations/{id} stops it.
//                    Every write is audited (admin/audit.hpp).
//   GET /whoami      JSON {"access": "admin" | "read" | "open"}: what the request's token grants.
//   anything else    404 (unknown path) or 405 (method not allowed there).
// With a token set, every path but /, /healthz, /livez and /readyz asks for "Authorization: Bearer <token>"
// (401 without it, compared in constant time); the read token may only read (GET, HEAD), its
// writes get 403 and an audit line (admin/access.hpp). Routes are given the Access granted.
//
// Threading: the HTTP server runs on the io_context's thread (run by one thread). The scheduling
// loop calls publish() from its own thread; the snapshot is the only state shared with it,
// under a mutex held for a copy, so the loop never waits on a client. /jobs and the pending
// counts for /metrics go to a worker thread of the AdminServer's own (the JobBackend is used on
// it alone), so Redis or Kafka being slow never holds up /healthz or the loop. /overview's reads go
// there too, one at a time: requests that come while one runs wait for its answer.
#pragma once

#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "admin/audit.hpp"
#include "admin/dead_letter_query.hpp"
#include "admin/http_server.hpp"
#include "admin/job_query.hpp"
#include "broker/snapshot.hpp"
#include "config/config.hpp"
#include "storage/job_store.hpp"

namespace delayd::admin {

struct AdminOptions {
  std::string listen;      // host:port; port 0 picks a free one
  std::string token;       // may read and write; empty: none (no token asked unless read_token is set)
  std::string read_token;  // may only read; empty: none
  HttpLimits limits;
};

// The admin.* settings of `config`.
AdminOptions admin_options(const config::Config& config);

// An HTTP answer with a JSON body, from the JobBackend.
struct JobAnswer {
  unsigned status = 200;
  std::string json;  // the body
};

// The due timeline's windows, in seconds from now: window 0 is what is overdue (deliver_at <=
// now), window i (1..9) is kDueWindowsS[i-1] < deliver_at - now <= kDueWindowsS[i], and one more
// window after the last counts everything beyond 24 h.
inline constexpr std::array<std::int64_t, 10> kDueWindowsS = {0, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400};

// What /overview shows: pending jobs in Redis over every known shard.
struct Overview {
  std::map<std::string, std::int64_t> pending_by_business;  // the "<business>|delay" counters
  std::map<std::string, std::int64_t> pending_by_shard;     // entries of each pending set
  std::optional<std::int64_t> next_due;                     // epoch ms
  std::vector<std::int64_t> due;                            // kDueWindowsS.size() + 1 counts, as kDueWindowsS says
};

// Jobs in Redis, for /jobs/{id}, /overview and delayd_jobs_pending. Called on the admin's worker thread
// only, one call at a time; may block (Redis, Kafka). May throw: the caller answers 503.
class JobBackend {
 public:
  virtual ~JobBackend() = default;
  virtual JobAnswer get(const std::string& job_id) = 0;
  virtual JobAnswer cancel(const std::string& job_id) = 0;
  // The console's calls (admin/job_backend.hpp has the verdicts); a backend without them answers
  // 503.
  virtual JobAnswer list(const ListRequest& request, std::int64_t now_ms);
  virtual JobAnswer reschedule(const std::string& job_id, std::int64_t deliver_at, std::int64_t now_ms);
  virtual JobAnswer retry(const std::string& job_id, std::int64_t now_ms);
  virtual JobAnswer bulk(const BulkRequest& request, std::int64_t now_ms);
  virtual JobAnswer operation(const std::string& id);  // "" lists the newest
  virtual JobAnswer stop_operation(const std::string& id);
  virtual JobAnswer dead_letters(const DeadLetterListRequest& request);
  virtual JobAnswer redrive(const RedriveRequest& request, std::int64_t now_ms);
  // Where the backend reports writes that end later (a bulk operation's end, with its counts);
  // the AdminServer sets it once, before any call. Any thread may call it.
  using AuditSink = std::function<void(const AuditEntry&)>;
  virtual void set_audit_sink(AuditSink) {}
  virtual storage::StoreStats store_stats() = 0;
  // The overview as of now_ms (epoch ms).
  virtual Overview overview(std::int64_t now_ms) = 0;
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
  // Start-up waits for a dependency: /healthz and /readyz answer 503 naming `problem` ("redis
  // unavailable: <reason>") until the loop first publishes; empty: nothing to wait for. Any thread.
  void starting_up(std::string problem);
  // A stop has begun (SIGTERM): /readyz answers 503 "not ready: stopping (<reason>)" from now on,
  // while the loop drains; /healthz is unchanged. Any thread.
  void begin_stop(std::string reason);

  struct State;  // shared with requests in progress

 private:
  std::shared_ptr<State> state_;
  std::unique_ptr<HttpServer> http_;
  std::unique_ptr<boost::asio::thread_pool> worker_;  // runs the JobBackend's calls, one at a time
};

}  // namespace delayd::admin

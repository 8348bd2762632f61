#include "admin/admin_server.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/beast/http/field.hpp>
#include <boost/beast/http/verb.hpp>
#include <chrono>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <vector>

#include "admin/access.hpp"
#include "admin/audit.hpp"
#include "admin/cron_query.hpp"
#include "admin/metrics.hpp"
#include "admin/request_target.hpp"
#include "admin/status_page.hpp"
#include "broker/loop_counters.hpp"
#include "broker/wall_clock.hpp"
#include "contract/ingest_parse.hpp"
#include "contract/time_format.hpp"

namespace delayd::admin {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
using SteadyClock = std::chrono::steady_clock;

namespace {

constexpr auto kStaleAfter = std::chrono::seconds(15);
constexpr auto kPendingEvery = std::chrono::seconds(5);
constexpr auto kOverviewEvery = std::chrono::seconds(2);
constexpr std::string_view kOperations = "/operations";
constexpr std::string_view kDeadLetters = "/dead-letters";
constexpr std::string_view kRedrive = "/dead-letters/redrive";

tcp::endpoint parse_listen(const std::string& listen) {
  const auto colon = listen.rfind(':');
  if (colon == std::string::npos) throw std::runtime_error("admin.listen '" + listen + "' is not host:port");
  std::string host = listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  boost::system::error_code ec;
  const auto address = asio::ip::make_address(host == "localhost" ? "127.0.0.1" : host, ec);
  if (ec) throw std::runtime_error("admin.listen '" + listen + "': '" + host + "' is not an IP address");
  int port = -1;
  try {
    port = std::stoi(listen.substr(colon + 1));
  } catch (const std::exception&) {
  }
  if (port < 0 || port > 65535) throw std::runtime_error("admin.listen '" + listen + "': bad port");
  return {address, static_cast<std::uint16_t>(port)};
}

using broker::system_now_ms;

HttpResponse json_response(unsigned status, const nlohmann::json& j) {
  return make_response(status, j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n",
                       "application/json");
}

}  // namespace

struct AdminServer::State {
  State(asio::io_context& i, AdminOptions o, std::unique_ptr<JobBackend> j)
      : io(i), options(std::move(o)), jobs(std::move(j)) {}

  asio::io_context& io;
  const AdminOptions options;
  std::unique_ptr<JobBackend> jobs;     // the worker's alone
  asio::thread_pool* worker = nullptr;  // null once the server is going away
  HttpServer* http = nullptr;           // the io thread's

  std::mutex mutex;  // guards snapshot, last_publish and stopping (shared with the loop's thread)
  broker::LoopSnapshot snapshot;
  std::optional<SteadyClock::time_point> last_publish;
  std::string stopping;  // why the process is stopping (begin_stop()); empty while it is not
  std::string starting;  // what start-up waits for (starting_up()); empty once it waits for nothing

  // The io thread's:
  Metrics metrics;  // but for count_admin_action(), which the worker calls too (audit.hpp)
  bool pending_running = false;
  SteadyClock::time_point pending_next{};
  std::optional<HttpResponse> overview;  // the last /overview answer (200 or 503)
  SteadyClock::time_point overview_at{};
  bool overview_running = false;
  std::vector<Reply> overview_waiting;  // requests for the read in progress

  struct Seen {
    broker::LoopSnapshot snapshot;
    bool started = false;
    bool alive = false;
    std::string stopping;
    std::string starting;
  };
  Seen seen() {
    std::lock_guard lock(mutex);
    Seen s{snapshot, last_publish.has_value(), last_publish && SteadyClock::now() - *last_publish < kStaleAfter,
           stopping, starting};
    return s;
  }
};

namespace {

using State = AdminServer::State;

HttpResponse healthz(State& state) {
  const auto s = state.seen();
  if (!s.started && !s.starting.empty()) return make_response(503, "starting up: " + s.starting + "\n");
  if (!s.alive) return make_response(503, "the scheduling loop is not turning (still starting up, or stuck)\n");
  std::string problems = s.snapshot.problem;
  for (const std::string* more :
       {&s.snapshot.missing_topics_problem, &s.snapshot.clock_problem, &s.snapshot.redis_settings_problem}) {
    if (!more->empty()) problems += (problems.empty() ? "" : "; ") + *more;
  }
  return make_response(200, problems.empty() ? "ok\n" : "degraded: " + problems + "\n");
}

HttpResponse readyz(State& state) {
  const auto s = state.seen();
  // First: a stopping instance takes no new work whatever else holds, so load balancers and
  // Kubernetes take it out of rotation while it drains.
  if (!s.stopping.empty()) return make_response(503, "not ready: stopping (" + s.stopping + ")\n");
  if (!s.started) {
    return make_response(503, "not ready: starting up" + (s.starting.empty() ? "" : " (" + s.starting + ")") + "\n");
  }
  if (!s.alive) return make_response(503, "not ready: the scheduling loop has not turned for 15 s\n");
  std::string down;
  for (const auto& [dependency, on] : s.snapshot.outages) {
    if (on) down += (down.empty() ? "" : ", ") + dependency;
  }
  if (!down.empty()) {
    return make_response(503, "not ready: outage of " + down +
                                  (s.snapshot.problem.empty() ? "" : " (" + s.snapshot.problem + ")") + "\n");
  }
  if (!s.snapshot.problem.empty()) return make_response(503, "not ready: " + s.snapshot.problem + "\n");
  if (!s.snapshot.joining.empty()) {
    std::string names;
    for (const auto& group : s.snapshot.joining) names += (names.empty() ? "" : ", ") + group;
    return make_response(503, "not ready: joining consumer group" +
                                  std::string(s.snapshot.joining.size() > 1 ? "s " : " ") + names + "\n");
  }
  if (!s.snapshot.loading.empty()) {
    std::string names;
    for (const auto& shard : s.snapshot.loading) names += (names.empty() ? "" : ", ") + shard;
    return make_response(
        503, "not ready: loading " + std::to_string(s.snapshot.loading.size()) + " assigned shards (" + names + ")\n");
  }
  return make_response(200, "ready\n");
}

// /stats "counters": every total under its name (broker/loop_counters.hpp), the dead letters of
// each reason that has counted as "dead_lettered.<reason>", and the gauge max_turn_ms.
nlohmann::json counters_json(const broker::LoopSnapshot& s) {
  nlohmann::json c = nlohmann::json::object();
  for (const auto& [name, field] : broker::kIngestCounterNames) c[std::string(name)] = s.counters.ingest.*field;
  for (const auto& [name, field] : broker::kFireCounterNames) c[std::string(name)] = s.counters.fire.*field;
  const broker::DeadLetterCounts dead = s.counters.dead_lettered_by();
  for (const broker::DeadLetterReason reason : broker::kDeadLetterReasons) {
    if (dead[reason] > 0) c[broker::dead_lettered_name(reason)] = dead[reason];
  }
  c["max_turn_ms"] = s.max_turn.count();
  return c;
}

HttpResponse stats(State& state) {
  const auto seen = state.seen();
  const broker::LoopSnapshot& s = seen.snapshot;
  nlohmann::json j{{"alive", seen.alive},      {"held", s.held},     {"in_wheel", s.in_wheel},
                   {"in_flight", s.in_flight}, {"shards", s.shards}, {"counters", counters_json(s)},
                   {"problem", s.problem}};
  // Partitions per topic read (ingest topics and the status topic): how the groups spread them.
  j["partitions"] = nlohmann::json::object();
  for (const auto& [topic, n] : s.partitions) j["partitions"][topic] = n;
  if (s.next_due) {
    j["next_due"] = *s.next_due;
    j["next_due_iso"] = contract::format_rfc3339_ms(*s.next_due);
  } else {
    j["next_due"] = nullptr;
  }
  j["lateness"] = {{"bounds_s", broker::DurationHistogram::kBoundsSeconds},
                   {"counts", s.lateness.counts},
                   {"count", s.lateness.count},
                   {"sum_s", s.lateness.sum_seconds}};
  return json_response(200, j);
}

// "12 min" or "2 h": a window bound of kDueWindowsS.
std::string window_bound(std::int64_t seconds) {
  return seconds < 3600 ? std::to_string(seconds / 60) + " min" : std::to_string(seconds / 3600) + " h";
}

// /overview's JSON of `o`, read at now_ms.
nlohmann::json overview_json(const Overview& o, std::int64_t now_ms) {
  std::int64_t pending = 0;
  for (const auto& [shard, n] : o.pending_by_shard) pending += n;
  nlohmann::json j{{"read_at", now_ms},
                   {"read_at_iso", contract::format_rfc3339_ms(now_ms)},
                   {"pending", pending},
                   {"pending_by_business", o.pending_by_business},
                   {"pending_by_shard", o.pending_by_shard},
                   {"next_due", nullptr}};
  if (o.next_due) {
    j["next_due"] = *o.next_due;
    j["next_due_iso"] = contract::format_rfc3339_ms(*o.next_due);
  }
  nlohmann::json due = nlohmann::json::array();
  for (std::size_t i = 0; i < o.due.size() && i <= kDueWindowsS.size(); ++i) {
    nlohmann::json w{{"count", o.due[i]}, {"from_s", nullptr}, {"to_s", nullptr}};
    if (i == 0) {
      w["window"] = "overdue";
      w["to_s"] = 0;
    } else if (i == kDueWindowsS.size()) {
      w["window"] = "> " + window_bound(kDueWindowsS.back());
      w["from_s"] = kDueWindowsS.back();
    } else {
      const std::int64_t from = kDueWindowsS[i - 1];
      const std::int64_t to = kDueWindowsS[i];
      w["from_s"] = from;
      w["to_s"] = to;
      if (from == 0) {
        w["window"] = "< " + window_bound(to);
      } else {
        const std::string a = window_bound(from);
        const std::string b = window_bound(to);
        const bool same_unit = a.substr(a.find(' ')) == b.substr(b.find(' '));
        w["window"] = (same_unit ? a.substr(0, a.find(' ')) : a) + "-" + b;
      }
    }
    due.push_back(std::move(w));
  }
  j["due"] = std::move(due);
  return j;
}

// Answers from the cached overview while it is younger than kOverviewEvery; otherwise reads it
// on the worker (one read at a time; requests meanwhile wait for it). A failed read is cached
// too (503), so a Redis outage costs one attempt per kOverviewEvery. The io thread's.
void overview(const std::shared_ptr<State>& state, const Reply& reply) {
  if (!state->jobs || !state->worker) return reply(json_response(503, {{"error", "no job store on this endpoint"}}));
  if (state->overview && SteadyClock::now() - state->overview_at < kOverviewEvery) return reply(*state->overview);
  state->overview_waiting.push_back(reply);
  if (state->overview_running) return;
  state->overview_running = true;
  asio::post(*state->worker, [state] {
    const std::int64_t now_ms = system_now_ms();
    HttpResponse answer;
    try {
      answer = json_response(200, overview_json(state->jobs->overview(now_ms), now_ms));
    } catch (const std::exception& e) {
      answer = json_response(503, {{"error", e.what()}});
    }
    asio::post(state->io, [state, answer = std::move(answer)] {
      state->overview = answer;
      state->overview_at = SteadyClock::now();
      state->overview_running = false;
      std::vector<Reply> waiting;
      waiting.swap(state->overview_waiting);
      for (const Reply& r : waiting) r(answer);
    });
  });
}

HttpResponse status_page() {
  HttpResponse r = make_response(200, std::string(status_page_html()), "text/html; charset=utf-8");
  r.set(http::field::cache_control, "no-store");
  r.set("Content-Security-Policy", std::string(status_page_csp()));
  r.set("X-Content-Type-Options", "nosniff");
  r.set("Referrer-Policy", "no-referrer");
  return r;
}

// Asks the worker for pending counts when the last ask is kPendingEvery old; the answer lands
// in the metrics on the io thread, for the next scrape.
void refresh_pending(const std::shared_ptr<State>& state) {
  if (!state->jobs || !state->worker || state->pending_running || SteadyClock::now() < state->pending_next) return;
  state->pending_running = true;
  asio::post(*state->worker, [state] {
    std::optional<storage::StoreStats> pending;
    try {
      pending = state->jobs->store_stats();
    } catch (const std::exception&) {
      // Redis unreachable: keep the last counts; the outage shows in delayd_outage.
    }
    asio::post(state->io, [state, pending = std::move(pending)] {
      if (pending) {
        state->metrics.set_pending(pending->pending_by_shard);
        state->metrics.set_job_counts(pending->by_business_state);
      }
      state->pending_running = false;
      state->pending_next = SteadyClock::now() + kPendingEvery;
    });
  });
}

HttpResponse metrics(const std::shared_ptr<State>& state) {
  state->metrics.update(state->seen().snapshot);
  state->metrics.set_ready(readyz(*state).result() == http::status::ok);
  if (state->http) state->metrics.set_http(state->http->counters(), state->http->open_connections());
  refresh_pending(state);
  return make_response(200, state->metrics.render(), "text/plain; version=0.0.4; charset=utf-8");
}

// Runs `call` on the worker (the JobBackend's thread) and replies with its answer; 503 when it
// throws (Redis or Kafka failing) or when this endpoint has no job store. A write passes its
// audit entry: audited once answered, its outcome from the answer's status.
template <class Call>
void on_worker(const std::shared_ptr<State>& state, const Reply& reply, Call call,
               std::optional<AuditEntry> audited = std::nullopt) {
  if (!state->jobs || !state->worker) {
    if (audited) {
      audited->outcome = AuditOutcome::error;
      audit(state->metrics, *audited);
    }
    return reply(json_response(503, {{"error", "no job store on this endpoint"}}));
  }
  asio::post(*state->worker, [state, reply, call = std::move(call), audited = std::move(audited)]() mutable {
    JobAnswer answer{503, ""};
    try {
      answer = call(*state->jobs);
    } catch (const std::exception& e) {
      answer = {503, nlohmann::json{{"error", e.what()}}.dump(2, ' ', false, nlohmann::json::error_handler_t::replace)};
    }
    if (audited) {
      audited->outcome = outcome_of_status(answer.status);
      audit(state->metrics, *audited);
    }
    reply(make_response(answer.status, answer.json + "\n", "application/json"));
  });
}

// GET /cron/next: the next instants of an expression in a zone (admin/cron_query.hpp); small and
// bounded (at most kMaxCronCount instants), answered on the io thread.
HttpResponse cron_next(std::string_view target) {
  const QueryParams params = query_params(target);
  if (!params.error.empty()) return json_response(400, {{"error", params.error}});
  auto parsed = parse_cron_next(params.values, system_now_ms());
  if (auto* bad = std::get_if<BadRequest>(&parsed)) return json_response(400, bad->json());
  return json_response(200, cron_next_json(std::get<CronNextRequest>(parsed)));
}

// GET /jobs: the query is checked here, on the io thread; the walk runs on the worker.
void list_jobs(const std::shared_ptr<State>& state, const HttpRequest& req, const Reply& reply) {
  if (req.method() != http::verb::get) return reply(json_response(405, {{"error", "GET"}}));
  const QueryParams params = query_params(std::string_view(req.target().data(), req.target().size()));
  if (!params.error.empty()) return reply(json_response(400, {{"error", params.error}}));
  auto parsed = parse_list_request(params.values);
  if (auto* bad = std::get_if<BadRequest>(&parsed)) return reply(json_response(400, bad->json()));
  on_worker(state, reply, [request = std::get<ListRequest>(std::move(parsed))](JobBackend& jobs) {
    return jobs.list(request, system_now_ms());
  });
}

// The audit action of a bulk request.
AuditAction bulk_action(storage::JobStore::Action a) {
  using A = storage::JobStore::Action;
  return a == A::cancel    ? AuditAction::bulk_cancel
         : a == A::run_now ? AuditAction::bulk_run_now
                           : AuditAction::bulk_retry;
}

// POST /jobs/bulk: the body is checked here, on the io thread. A dry run changes nothing and is
// not audited; a refused body is (invalid), and so is the operation started.
void bulk(const std::shared_ptr<State>& state, const HttpRequest& req, Access access, const Reply& reply) {
  auto parsed = parse_bulk_request(req.body());
  if (auto* bad = std::get_if<BadRequest>(&parsed)) {
    audit(state->metrics, {access, AuditAction::other, "POST /jobs/bulk", std::nullopt, AuditOutcome::invalid});
    return reply(json_response(400, bad->json()));
  }
  BulkRequest request = std::get<BulkRequest>(std::move(parsed));
  request.access = std::string(to_string(access));
  std::optional<AuditEntry> audited;
  if (!request.dry_run)
    audited = AuditEntry{access, bulk_action(request.action), request.filter_json, std::nullopt, {}};
  on_worker(
      state, reply, [request = std::move(request)](JobBackend& jobs) { return jobs.bulk(request, system_now_ms()); },
      std::move(audited));
}

// GET /dead-letters and POST /dead-letters/redrive: checked here, on the io thread; the walk and
// the redrive's dry run read Kafka on the worker. As for a bulk action, a dry run is not audited.
void dead_letters(const std::shared_ptr<State>& state, const HttpRequest& req, std::string_view path, Access access,
                  const Reply& reply) {
  if (path == kDeadLetters) {
    if (req.method() != http::verb::get) return reply(json_response(405, {{"error", "GET"}}));
    const QueryParams params = query_params(std::string_view(req.target().data(), req.target().size()));
    if (!params.error.empty()) return reply(json_response(400, {{"error", params.error}}));
    auto parsed = parse_dead_letter_request(params.values);
    if (auto* bad = std::get_if<BadRequest>(&parsed)) return reply(json_response(400, bad->json()));
    return on_worker(state, reply, [request = std::get<DeadLetterListRequest>(std::move(parsed))](JobBackend& jobs) {
      return jobs.dead_letters(request);
    });
  }
  if (path != kRedrive) return reply(make_response(404, "not found\n"));
  if (req.method() != http::verb::post) return reply(json_response(405, {{"error", "POST"}}));
  auto parsed = parse_redrive_request(req.body());
  if (auto* bad = std::get_if<BadRequest>(&parsed)) {
    audit(state->metrics, {access, AuditAction::redrive, std::string(kRedrive), std::nullopt, AuditOutcome::invalid});
    return reply(json_response(400, bad->json()));
  }
  RedriveRequest request = std::get<RedriveRequest>(std::move(parsed));
  request.access = std::string(to_string(access));
  std::optional<AuditEntry> audited;
  if (!request.dry_run) audited = AuditEntry{access, AuditAction::redrive, request.filter_json, std::nullopt, {}};
  on_worker(
      state, reply, [request = std::move(request)](JobBackend& jobs) { return jobs.redrive(request, system_now_ms()); },
      std::move(audited));
}

// GET /operations, GET and DELETE /operations/{id}.
void operations(const std::shared_ptr<State>& state, const HttpRequest& req, std::string_view path, Access access,
                const Reply& reply) {
  std::string id;
  if (path != kOperations) {
    id = std::string(path.substr(kOperations.size() + 1));
    const bool hex16 = id.size() == 16 && id.find_first_not_of("0123456789abcdef") == std::string::npos;
    if (!hex16) return reply(json_response(400, {{"error", "an operation id is 16 hex digits"}, {"field", "id"}}));
  }
  if (req.method() == http::verb::get) {
    return on_worker(state, reply, [id](JobBackend& jobs) { return jobs.operation(id); });
  }
  if (req.method() == http::verb::delete_ && !id.empty()) {
    return on_worker(
        state, reply, [id](JobBackend& jobs) { return jobs.stop_operation(id); },
        AuditEntry{access, AuditAction::stop_operation, id, std::nullopt, {}});
  }
  reply(json_response(405, {{"error", id.empty() ? "GET" : "GET or DELETE"}}));
}

void jobs(const std::shared_ptr<State>& state, const HttpRequest& req, std::string_view path, Access access,
          const Reply& reply) {
  if (path == "/jobs") return list_jobs(state, req, reply);
  if (path == "/jobs/bulk" && req.method() == http::verb::post) return bulk(state, req, access, reply);
  auto route = job_route(path);
  if (!route) {
    return reply(json_response(
        400, {{"error", "the path must be /jobs/{id} or /jobs/{id}/run-now|reschedule|retry, with a valid id"}}));
  }
  std::string id = std::move(route->job_id);
  if (!contract::is_valid_job_id(id)) {
    return reply(json_response(400, {{"error", "id: a job-id is 1-" + std::to_string(contract::kMaxJobIdChars) +
                                                   " printable ASCII characters without spaces"},
                                     {"field", "id"}}));
  }
  switch (route->action) {
    case JobAction::none: {
      const bool cancel = req.method() == http::verb::delete_;
      if (!cancel && req.method() != http::verb::get) return reply(json_response(405, {{"error", "GET or DELETE"}}));
      std::optional<AuditEntry> audited;
      if (cancel) audited = AuditEntry{access, AuditAction::cancel, id, std::nullopt, {}};
      return on_worker(
          state, reply, [cancel, id](JobBackend& jobs) { return cancel ? jobs.cancel(id) : jobs.get(id); },
          std::move(audited));
    }
    case JobAction::run_now:
    case JobAction::retry:
    case JobAction::reschedule:
      break;
  }
  if (req.method() != http::verb::post) return reply(json_response(405, {{"error", "POST"}}));
  AuditEntry audited{access, AuditAction::reschedule, id, std::nullopt, {}};
  if (route->action == JobAction::retry) {
    audited.action = AuditAction::retry;
    return on_worker(
        state, reply, [id](JobBackend& jobs) { return jobs.retry(id, system_now_ms()); }, audited);
  }
  if (route->action == JobAction::run_now) {
    audited.action = AuditAction::run_now;
    return on_worker(
        state, reply,
        [id](JobBackend& jobs) {
          const std::int64_t now = system_now_ms();
          return jobs.reschedule(id, now, now);
        },
        audited);
  }
  const std::int64_t now = system_now_ms();
  auto at = parse_reschedule_body(req.body(), now);
  if (auto* bad = std::get_if<BadRequest>(&at)) {
    audited.outcome = AuditOutcome::invalid;
    audit(state->metrics, audited);
    return reply(json_response(400, bad->json()));
  }
  on_worker(
      state, reply,
      [id, at = std::get<std::int64_t>(at), now](JobBackend& jobs) { return jobs.reschedule(id, at, now); }, audited);
}

// 401, asking for a bearer token.
HttpResponse unauthorized() {
  HttpResponse r = make_response(401, "a bearer token is required (admin.token or admin.read_token)\n");
  r.set(http::field::www_authenticate, "Bearer realm=\"delayd\"");
  return r;
}

// 403 for a write with a token that may only read, audited as refused.
HttpResponse refuse_write(State& state, const HttpRequest& req, std::string_view path, Access access) {
  AuditEntry entry = requested_action(req.method(), path);
  entry.access = access;
  entry.outcome = AuditOutcome::refused;
  audit(state.metrics, entry);
  return json_response(403, {{"error", "the read token cannot change anything (admin.read_token); use admin.token"}});
}

void handle(const std::shared_ptr<State>& state, const HttpRequest& req, const Reply& reply) {
  const std::string_view target(req.target().data(), req.target().size());
  const std::string_view path = target_path(target);
  const bool get = req.method() == http::verb::get;
  const auto only_get = [&] { reply(make_response(405, "only GET\n")); };
  if (path == "/healthz" || path == "/livez") return get ? reply(healthz(*state)) : only_get();
  if (path == "/readyz") return get ? reply(readyz(*state)) : only_get();
  if (path == "/") return get ? reply(status_page()) : only_get();
  const bool known = path == "/metrics" || path == "/stats" || path == "/overview" || path == "/whoami" ||
                     path == "/cron/next" || path == "/jobs" || path.starts_with(kJobsPrefix) || path == kOperations ||
                     path == kDeadLetters || path == kRedrive ||
                     (path.starts_with(kOperations) && path[kOperations.size()] == '/');
  if (!known) return reply(make_response(404, "not found\n"));
  const std::optional<Access> access = access_of(req, state->options.token, state->options.read_token);
  if (!access) return reply(unauthorized());
  if (!allows(*access, req.method())) return reply(refuse_write(*state, req, path, *access));
  if (path == "/metrics") return get ? reply(metrics(state)) : only_get();
  if (path == "/stats") return get ? reply(stats(*state)) : only_get();
  if (path == "/overview") return get ? overview(state, reply) : only_get();
  if (path == "/whoami") return get ? reply(json_response(200, {{"access", to_string(*access)}})) : only_get();
  if (path == "/cron/next") return get ? reply(cron_next(target)) : only_get();
  if (path.starts_with(kOperations)) return operations(state, req, path, *access, reply);
  if (path.starts_with(kDeadLetters)) return dead_letters(state, req, path, *access, reply);
  return jobs(state, req, path, *access, reply);
}

}  // namespace

// What a backend without the console's calls answers.
const JobAnswer kNotSupported{503, R"({"error": "not supported here"})"};
JobAnswer JobBackend::list(const ListRequest&, std::int64_t) { return kNotSupported; }
JobAnswer JobBackend::reschedule(const std::string&, std::int64_t, std::int64_t) { return kNotSupported; }
JobAnswer JobBackend::retry(const std::string&, std::int64_t) { return kNotSupported; }
JobAnswer JobBackend::bulk(const BulkRequest&, std::int64_t) { return kNotSupported; }
JobAnswer JobBackend::operation(const std::string&) { return kNotSupported; }
JobAnswer JobBackend::stop_operation(const std::string&) { return kNotSupported; }
JobAnswer JobBackend::dead_letters(const DeadLetterListRequest&) { return kNotSupported; }
JobAnswer JobBackend::redrive(const RedriveRequest&, std::int64_t) { return kNotSupported; }

AdminOptions admin_options(const config::Config& config) {
  AdminOptions o;
  o.listen = config.admin.listen;
  o.token = config.admin.token;
  o.read_token = config.admin.read_token;
  o.limits.max_connections = static_cast<std::size_t>(config.admin.max_connections);
  o.limits.read_timeout = std::chrono::milliseconds(config.admin.read_timeout_ms);
  o.limits.max_header_bytes = static_cast<std::size_t>(config.admin.max_header_bytes);
  o.limits.max_body_bytes = static_cast<std::size_t>(config.admin.max_body_bytes);
  return o;
}

AdminServer::AdminServer(asio::io_context& io, AdminOptions options, std::unique_ptr<JobBackend> jobs)
    : state_(std::make_shared<State>(io, std::move(options), std::move(jobs))) {
  const tcp::endpoint endpoint = parse_listen(state_->options.listen);
  try {
    http_ = std::make_unique<HttpServer>(
        io, endpoint, state_->options.limits,
        [state = state_](const HttpRequest& req, Reply reply) { handle(state, req, reply); });
  } catch (const boost::system::system_error& e) {
    throw std::runtime_error("admin.listen '" + state_->options.listen + "': cannot listen: " + e.code().message());
  }
  state_->http = http_.get();
  worker_ = std::make_unique<asio::thread_pool>(1);
  state_->worker = worker_.get();
  if (state_->jobs) {
    state_->jobs->set_audit_sink([weak = std::weak_ptr<State>(state_)](const AuditEntry& e) {
      if (auto s = weak.lock()) audit(s->metrics, e);
    });
  }
}

AdminServer::~AdminServer() {
  state_->worker = nullptr;
  state_->http = nullptr;
  http_.reset();
  // The call in progress finishes; queued ones are dropped (their connections are closed).
  worker_->stop();
  worker_->join();
}

std::uint16_t AdminServer::port() const { return http_->port(); }

void AdminServer::publish(broker::LoopSnapshot snapshot) {
  std::lock_guard lock(state_->mutex);
  state_->snapshot = std::move(snapshot);
  state_->last_publish = SteadyClock::now();
}

void AdminServer::starting_up(std::string problem) {
  std::lock_guard lock(state_->mutex);
  state_->starting = std::move(problem);
}

void AdminServer::begin_stop(std::string reason) {
  std::lock_guard lock(state_->mutex);
  state_->stopping = reason.empty() ? "stopping" : std::move(reason);
}

}  // namespace delayd::admin

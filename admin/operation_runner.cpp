#include "admin/operation_runner.hpp"

#include <spdlog/spdlog.h>

#include <map>
#include <nlohmann/json.hpp>

#include "admin/job_query.hpp"
#include "base/backoff.hpp"
#include "broker/wall_clock.hpp"
#include "config/redis_options.hpp"
#include "storage/job_browse.hpp"

namespace delayd::admin {

namespace {

using Fields = storage::OperationStore::Fields;
using SteadyClock = std::chrono::steady_clock;

using broker::system_now_ms;

std::int64_t number(const Fields& f, const std::string& name) {
  const auto it = f.find(name);
  if (it == f.end()) return 0;
  try {
    return std::stoll(it->second);
  } catch (const std::exception&) {
    return 0;
  }
}

// Why an action changed nothing, for the operation's "skipped" counts.
std::string skip_reason(storage::JobStore::Action action, storage::JobState state) {
  using storage::JobState;
  if (state == JobState::in_flight) return "in flight";
  if (state == JobState::missing) return "gone";
  if (action == storage::JobStore::Action::retry && state == JobState::failed) return "payload gone";
  return "now " + std::string(to_string(state));
}

bool running(const Fields& f) {
  const auto it = f.find("status");
  return it != f.end() && (it->second == "running" || it->second == "stopping");
}

}  // namespace

std::string create_operation(storage::OperationStore& ops, const BulkRequest& request, std::int64_t now_ms) {
  return ops.create({{"action", std::string(action_name(request.action))},
                     {"filter", request.filter_json.dump()},
                     {"rate_per_s", std::to_string(request.rate_per_s)},
                     {"status", "running"},
                     {"matched", "0"},
                     {"done", "0"},
                     {"failed", "0"},
                     {"skipped", "{}"},
                     {"created_at", std::to_string(now_ms)},
                     {"access", request.access},
                     {"updated_at", std::to_string(now_ms)}},
                    now_ms);
}

OperationRunner::OperationRunner(config::Config config, std::string member, OnEnd on_end, std::string only)
    : config_(std::move(config)), member_(std::move(member)), on_end_(std::move(on_end)), only_(std::move(only)) {
  thread_ = std::thread([this] { run(); });
}

OperationRunner::~OperationRunner() {
  stopping_ = true;
  cv_.notify_all();
  thread_.join();
}

void OperationRunner::wake() {
  {
    std::lock_guard lock(mutex_);
    woken_ = true;
  }
  cv_.notify_all();
}

void OperationRunner::wait_for(std::chrono::milliseconds d) {
  std::unique_lock lock(mutex_);
  cv_.wait_for(lock, d, [this] { return woken_ || stopping_.load(); });
  woken_ = false;
}

void OperationRunner::run() {
  base::Backoff backoff(std::chrono::milliseconds(200), std::chrono::milliseconds(10'000));
  bool failing = false;
  while (!stopping_) {
    try {
      auto redis = config::make_redis_client(config_);
      const storage::KeySchema keys(config_.redis.prefix);
      storage::JobStore jobs(*redis, keys, config_.redis.job_retention_s);
      storage::OperationStore ops(*redis, keys);
      while (!stopping_) {
        for (const std::string& id : ops.list()) {
          if (stopping_) break;
          if (!only_.empty() && id != only_) continue;
          auto fields = ops.load(id);
          if (!fields || !running(*fields) || !ops.lease(id, member_, kLease)) continue;
          execute(ops, jobs, id, std::move(*fields));
        }
        if (failing) spdlog::info("bulk operations: Redis answers again");
        failing = false;
        backoff.reset();
        wait_for(kLookEvery);
      }
    } catch (const std::exception& e) {
      if (!failing) spdlog::warn("bulk operations: waiting for Redis: {}", e.what());  // one line per outage
      failing = true;
      wait_for(backoff.next());
    }
  }
}

void OperationRunner::execute(storage::OperationStore& ops, storage::JobStore& jobs, const std::string& id,
                              Fields fields) {
  const nlohmann::json filter_json = nlohmann::json::parse(fields["filter"], nullptr, false);
  auto filter = parse_stored_filter(filter_json);
  storage::JobStore::Action action = storage::JobStore::Action::cancel;
  bool known_action = false;
  for (auto a :
       {storage::JobStore::Action::cancel, storage::JobStore::Action::run_now, storage::JobStore::Action::retry}) {
    if (fields["action"] == action_name(a)) {
      action = a;
      known_action = true;
    }
  }
  const auto end = [&](const std::string& status, const std::string& error) {
    fields["status"] = status;
    fields["ended_at"] = std::to_string(system_now_ms());
    fields["updated_at"] = fields["ended_at"];
    if (!error.empty()) fields["last_error"] = error;
    ops.save(id, {{"status", status},
                  {"ended_at", fields["ended_at"]},
                  {"updated_at", fields["updated_at"]},
                  {"last_error", fields["last_error"]}});
    ops.ended(id);
    ops.lease(id, member_, kLease, true);
    if (on_end_) on_end_(id, fields);
  };
  if (std::holds_alternative<BadRequest>(filter) || !known_action) {
    return end("failed",
               "the stored operation does not read: " +
                   (known_action ? std::get<BadRequest>(filter).json().dump() : "action " + fields["action"]));
  }
  const storage::JobFilter& f = std::get<storage::JobFilter>(filter);
  std::optional<storage::WalkCursor> cursor =
      fields["cursor"].empty()
          ? std::optional<storage::WalkCursor>(storage::WalkCursor{number(fields, "created_at"), 0, {}, {}})
          : decode_cursor(f, fields["cursor"]);
  if (!cursor) return end("failed", "the stored cursor does not read");
  std::int64_t matched = number(fields, "matched"), done = number(fields, "done"), failed = number(fields, "failed");
  nlohmann::json skipped = nlohmann::json::parse(fields["skipped"], nullptr, false);
  if (!skipped.is_object()) skipped = nlohmann::json::object();
  const std::int64_t rate = std::max<std::int64_t>(1, number(fields, "rate_per_s"));
  const std::size_t batch = static_cast<std::size_t>(std::min<std::int64_t>(static_cast<std::int64_t>(kBatch), rate));
  ops.save(id, {{"runner", member_}});
  const auto started = SteadyClock::now();
  std::int64_t acted_here = 0;
  while (!stopping_) {
    const auto status = ops.load(id);
    if (!status) return;  // expired or deleted by hand
    if (status->count("status") && status->at("status") == "stopping") return end("stopped", "");
    if (!ops.lease(id, member_, kLease)) return;  // another instance took it over
    const std::int64_t now = system_now_ms();
    const storage::WalkPage page = storage::walk_jobs(jobs, f, *cursor, batch, now);
    std::map<std::string, std::vector<std::string>> by_shard;
    for (const storage::BrowsedJob& j : page.jobs) by_shard[j.shard].push_back(j.job_id);
    for (const auto& [shard, ids] : by_shard) {
      for (const storage::Transition& t : jobs.act(action, shard, ids, now)) {
        if (t.changed) {
          ++done;
        } else if (t.state == storage::JobState::corrupt) {
          ++failed;
        } else {
          const std::string why = skip_reason(action, t.state);
          skipped[why] = skipped.value(why, 0) + 1;
        }
      }
    }
    matched += static_cast<std::int64_t>(page.jobs.size());
    acted_here += static_cast<std::int64_t>(page.jobs.size());
    Fields progress{{"matched", std::to_string(matched)},
                    {"done", std::to_string(done)},
                    {"failed", std::to_string(failed)},
                    {"skipped", skipped.dump()},
                    {"cursor", page.next ? encode_cursor(f, *page.next) : fields["cursor"]},
                    {"updated_at", std::to_string(system_now_ms())},
                    {"last_error", ""}};
    ops.save(id, progress);
    for (auto& [k, v] : progress) fields[k] = v;
    if (!page.next) return end("done", "");
    // The rate: the jobs acted on here so far may not be ahead of rate_per_s.
    const auto due = started + std::chrono::milliseconds(acted_here * 1000 / rate);
    for (auto left = due - SteadyClock::now(); left.count() > 0 && !stopping_; left = due - SteadyClock::now()) {
      wait_for(std::chrono::duration_cast<std::chrono::milliseconds>(left) + std::chrono::milliseconds(1));
    }
  }
  ops.lease(id, member_, kLease, true);  // shutting down: another instance may take it at once
}

}  // namespace delayd::admin

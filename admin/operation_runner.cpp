#include "admin/operation_runner.hpp"

#include <spdlog/spdlog.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "admin/dead_letter_query.hpp"
#include "admin/dead_letter_topic.hpp"
#include "admin/job_query.hpp"
#include "base/backoff.hpp"
#include "base/thread_name.hpp"
#include "broker/loop_settings.hpp"
#include "broker/wall_clock.hpp"
#include "config/redis_options.hpp"
#include "connectors/kafka_producer.hpp"
#include "connectors/topic_reader.hpp"
#include "contract/ingest_parse.hpp"
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

// An operation's counts as its hash keeps them: read when a runner takes it, saved every batch.
struct Progress {
  std::int64_t matched = 0, done = 0, failed = 0;
  nlohmann::json skipped = nlohmann::json::object();  // {reason: count}

  static Progress of(const Fields& f) {
    Progress p{number(f, "matched"), number(f, "done"), number(f, "failed"),
               nlohmann::json::parse(f.count("skipped") ? f.at("skipped") : "{}", nullptr, false)};
    if (!p.skipped.is_object()) p.skipped = nlohmann::json::object();
    return p;
  }
  void skip(const std::string& why) { skipped[why] = skipped.value(why, 0) + 1; }
  // The counts, with the cursor and the time, as one batch's HSET (plus `extra`).
  Fields save(const std::string& cursor, Fields extra) const {
    extra.insert({{"matched", std::to_string(matched)},
                  {"done", std::to_string(done)},
                  {"failed", std::to_string(failed)},
                  {"skipped", skipped.dump()},
                  {"cursor", cursor},
                  {"updated_at", std::to_string(system_now_ms())}});
    return extra;
  }
};

// The operation's rate_per_s (at least 1).
std::int64_t rate_of(const Fields& f) { return std::max<std::int64_t>(1, number(f, "rate_per_s")); }

bool running(const Fields& f) {
  const auto it = f.find("status");
  return it != f.end() && (it->second == "running" || it->second == "stopping");
}

// A new operation's fields: running, nothing done yet.
Fields new_operation(std::string_view action, const nlohmann::json& filter, std::int64_t rate_per_s,
                     const std::string& access, std::int64_t now_ms) {
  return {{"action", std::string(action)},
          {"filter", filter.dump()},
          {"rate_per_s", std::to_string(rate_per_s)},
          {"status", "running"},
          {"matched", "0"},
          {"done", "0"},
          {"failed", "0"},
          {"skipped", "{}"},
          {"created_at", std::to_string(now_ms)},
          {"access", access},
          {"updated_at", std::to_string(now_ms)}};
}

}  // namespace

std::string create_redrive_operation(storage::OperationStore& ops, const RedriveRequest& request, std::int64_t now_ms) {
  // The dead letters there are now: not those a failing redrive writes again meanwhile.
  nlohmann::json filter = request.filter_json;
  if (!request.filter.until || *request.filter.until > now_ms) filter["until"] = std::to_string(now_ms);
  return ops.create(new_operation(kRedriveAction, filter, request.rate_per_s, request.access, now_ms), now_ms);
}

std::string create_operation(storage::OperationStore& ops, const BulkRequest& request, std::int64_t now_ms) {
  return ops.create(
      new_operation(action_name(request.action), request.filter_json, request.rate_per_s, request.access, now_ms),
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
  base::name_this_thread("admin-ops");
  base::Backoff backoff(std::chrono::milliseconds(200), std::chrono::milliseconds(10'000));
  bool failing = false;
  while (!stopping_) {
    try {
      auto redis = config::make_redis_client(config_);
      const storage::KeySchema keys(config_.redis.prefix);
      storage::JobStore jobs(*redis, keys, config_.redis.job_retention_s, config::script_calls(config_));
      storage::OperationStore ops(*redis, keys);
      while (!stopping_) {
        for (const std::string& id : ops.list()) {
          if (stopping_) break;
          if (!only_.empty() && id != only_) continue;
          auto fields = ops.load(id);
          if (!fields || !running(*fields) || !ops.lease(id, member_, kLease)) continue;
          execute(ops, jobs, id, std::move(*fields));
        }
        if (failing) spdlog::info("bulk operations: going on again");
        failing = false;
        backoff.reset();
        wait_for(kLookEvery);
      }
    } catch (const std::exception& e) {
      // One line per outage (Redis, or Kafka for a redrive).
      if (!failing) spdlog::warn("bulk operations: waiting: {}", e.what());
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
  const auto end = [&](const std::string& status, const std::string& error) { finish(ops, id, fields, status, error); };
  if (fields["action"] == kRedriveAction) return execute_redrive(ops, jobs, id, std::move(fields));
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
  Progress progress = Progress::of(fields);
  Pace pace{rate_of(fields), SteadyClock::now()};
  const std::size_t batch = batch_for(pace.rate);
  ops.save(id, {{"runner", member_}});
  while (!stopping_) {
    if (!may_go_on(ops, id, fields)) return;
    const std::int64_t now = system_now_ms();
    const storage::WalkPage page = storage::walk_jobs(jobs, f, *cursor, batch, now);
    std::map<std::string, std::vector<std::string>> by_shard;
    for (const storage::BrowsedJob& j : page.jobs) by_shard[j.shard].push_back(j.job_id);
    for (const auto& [shard, ids] : by_shard) {
      for (const storage::Transition& t : jobs.act(action, shard, ids, now)) {
        if (t.changed) {
          ++progress.done;
        } else if (t.state == storage::JobState::corrupt) {
          ++progress.failed;
        } else {
          progress.skip(skip_reason(action, t.state));
        }
      }
    }
    progress.matched += static_cast<std::int64_t>(page.jobs.size());
    pace.acted += static_cast<std::int64_t>(page.jobs.size());
    const Fields saved =
        progress.save(page.next ? encode_cursor(f, *page.next) : fields["cursor"], {{"last_error", ""}});
    ops.save(id, saved);
    for (auto& [k, v] : saved) fields[k] = v;
    if (!page.next) return end("done", "");
    wait_for_pace(pace);
  }
  ops.lease(id, member_, kLease, true);  // shutting down: another instance may take it at once
}

bool OperationRunner::may_go_on(storage::OperationStore& ops, const std::string& id, Fields& fields) {
  const auto status = ops.load(id);
  if (!status) return false;  // expired or deleted by hand
  if (status->count("status") && status->at("status") == "stopping") {
    finish(ops, id, fields, "stopped", "");
    return false;
  }
  return ops.lease(id, member_, kLease);  // false: another instance took it over
}

std::size_t OperationRunner::batch_for(std::int64_t rate) {
  return static_cast<std::size_t>(std::min<std::int64_t>(static_cast<std::int64_t>(kBatch), rate));
}

void OperationRunner::finish(storage::OperationStore& ops, const std::string& id, Fields& fields,
                             const std::string& status, const std::string& error) {
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
}

void OperationRunner::wait_for_pace(const Pace& pace) {
  // The items acted on here so far may not be ahead of rate_per_s.
  const auto due = pace.started + std::chrono::milliseconds(pace.acted * 1000 / pace.rate);
  for (auto left = due - SteadyClock::now(); left.count() > 0 && !stopping_; left = due - SteadyClock::now()) {
    wait_for(std::chrono::duration_cast<std::chrono::milliseconds>(left) + std::chrono::milliseconds(1));
  }
}

namespace {

// Each ingest partition's end offset, as JSON (the operation's ingest_marks).
nlohmann::json ingest_ends(connectors::TopicReader& reader, const std::string& topic) {
  nlohmann::json out = nlohmann::json::array();
  const int n = reader.partitions(topic).value_or(0);
  for (int p = 0; p < n; ++p) out.push_back(reader.watermarks(topic, p).high);
  return out;
}

// The dead letters (their ids) this operation published to the ingest topic after `marks`: what
// a crash between a batch's publishing and its progress being saved left unsaid.
std::set<std::string> published_since(connectors::TopicReader& reader, const std::string& topic,
                                      const nlohmann::json& marks, const std::string& operation) {
  std::set<std::string> out;
  const int n = reader.partitions(topic).value_or(0);
  for (int p = 0; p < n; ++p) {
    std::int64_t from = static_cast<std::size_t>(p) < marks.size() && marks[p].is_number_integer()
                            ? marks[p].get<std::int64_t>()
                            : reader.watermarks(topic, p).low;
    const std::int64_t end = reader.watermarks(topic, p).high;
    while (from < end) {
      const std::vector<connectors::Record> chunk = reader.read(topic, p, from, end, 5000);
      if (chunk.empty()) {
        // Transaction markers only (a transactional producer writes the topic too): past them.
        if (const auto reached = reader.reached_end(); reached && *reached > from) {
          from = *reached;
          continue;
        }
        throw connectors::KafkaError("reading " + topic + " for a resumed redrive: nothing arrived");
      }
      for (const connectors::Record& rec : chunk) {
        from = rec.offset + 1;
        const auto* op = connectors::find_header(rec.headers, contract::kHeaderRedriveOperation);
        const auto* of = connectors::find_header(rec.headers, contract::kHeaderRedrivenFrom);
        if (op && *op == operation && of && of->has_value()) out.insert(**of);
      }
    }
  }
  return out;
}

}  // namespace

void OperationRunner::execute_redrive(storage::OperationStore& ops, storage::JobStore& jobs, const std::string& id,
                                      Fields fields) {
  const auto end = [&](const std::string& status, const std::string& error) { finish(ops, id, fields, status, error); };
  auto filter = parse_stored_dead_letter_filter(nlohmann::json::parse(fields["filter"], nullptr, false));
  if (auto* bad = std::get_if<BadRequest>(&filter)) {
    return end("failed", "the stored operation does not read: " + bad->json().dump());
  }
  const DeadLetterFilter& f = std::get<DeadLetterFilter>(filter);
  std::optional<DeadLetterCursor> cursor;
  if (!fields["cursor"].empty()) {
    cursor = decode_dead_letter_cursor(f, fields["cursor"]);
    if (!cursor) return end("failed", "the stored cursor does not read");
  }
  const std::string& ingest = config_.kafka.ingest_topic;
  const RedriveTarget target = redrive_target(config_);
  connectors::TopicReader reader(config::kafka_properties(config_, config::KafkaClient::consumer));
  std::vector<connectors::DeliveryReport> reports;
  connectors::KafkaProducer producer(broker::producer_properties(config_),
                                     [&](const connectors::DeliveryReport& r) { reports.push_back(r); });
  DeadLetterTopic source(reader, config_.kafka.dlq_topic);
  // Crash safety (never one dead letter redriven twice by one operation): the ingest topic's
  // end offsets are saved before a batch is published (ingest_marks), so a runner taking the
  // operation over reads what was published after them and skips those dead letters.
  //   crash point                           what the next runner does
  //   before a batch is published           publishes it (nothing of it is in Kafka)
  //   part of the batch published           skips the part it finds after ingest_marks
  //   batch published, progress not saved   skips all of it, counts it done
  //   progress saved                        goes on from the saved cursor and marks
  nlohmann::json marks = nlohmann::json::parse(fields["ingest_marks"], nullptr, false);
  std::set<std::string> already;
  if (marks.is_array()) {
    already = published_since(reader, ingest, marks, id);
  } else {
    marks = ingest_ends(reader, ingest);
    ops.save(id, {{"ingest_marks", marks.dump()}});
  }
  Progress progress = Progress::of(fields);
  Pace pace{rate_of(fields), SteadyClock::now()};
  const std::size_t batch = batch_for(pace.rate);
  ops.save(id, {{"runner", member_}});
  while (!stopping_) {
    if (!may_go_on(ops, id, fields)) return;
    const DeadLetterPage page = walk_dead_letters(source, f, cursor, batch);
    std::vector<connectors::OutRecord> out;
    std::vector<std::string> to_locate;
    for (const connectors::Record& rec : page.records) {
      ++progress.matched;
      if (already.count(dead_letter_id(rec.partition, rec.offset))) {
        ++progress.done;  // published before a crash cut its batch short
        continue;
      }
      auto r = redrive_record(rec, config_.admin.max_redrives, target, id);
      if (auto* why = std::get_if<std::string>(&r)) {
        progress.skip(*why);
        continue;
      }
      out.push_back(std::move(std::get<Redriven>(r).record));
    }
    // A job's dead letter goes back to the partition (the shard) that holds the job, so that
    // the shard that failed it revives it.
    std::vector<std::size_t> at;
    for (std::size_t i = 0; i < out.size(); ++i) {
      const auto* job = connectors::find_header(out[i].headers, contract::kHeaderJobId);
      if (out[i].partition < 0 && job && job->has_value()) {
        at.push_back(i);
        to_locate.push_back(**job);
      }
    }
    if (!to_locate.empty()) {
      const auto where = jobs.locate(to_locate);
      for (std::size_t k = 0; k < at.size(); ++k) {
        if (where[k]) out[at[k]].partition = storage::partition_of(where[k]->shard, ingest).value_or(-1);
      }
    }
    reports.clear();
    for (const connectors::OutRecord& rec : out) producer.produce(rec);
    if (!producer.flush(30'000)) throw connectors::KafkaError("redrive: the ingest topic did not take a batch in 30 s");
    std::string last_error;
    for (const connectors::DeliveryReport& r : reports) {
      if (r.ok) {
        ++progress.done;
      } else {
        ++progress.failed;
        last_error = r.error;
      }
    }
    pace.acted += static_cast<std::int64_t>(page.records.size());
    marks = ingest_ends(reader, ingest);
    const Fields saved = progress.save(page.next ? encode_dead_letter_cursor(f, *page.next) : fields["cursor"],
                                       {{"ingest_marks", marks.dump()}, {"last_error", last_error}});
    ops.save(id, saved);
    for (auto& [k, v] : saved) fields[k] = v;
    cursor = page.next;
    if (!page.next) return end("done", "");
    wait_for_pace(pace);
  }
  ops.lease(id, member_, kLease, true);
}

}  // namespace delayd::admin

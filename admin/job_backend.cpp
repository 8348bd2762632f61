#include "admin/job_backend.hpp"

#include <algorithm>
#include <limits>
#include <string>
#include <thread>

#include "admin/cancel_flow.hpp"
#include "admin/dead_letter_topic.hpp"
#include "admin/job_json.hpp"
#include "broker/ownership.hpp"
#include "config/redis_options.hpp"
#include "contract/ingest_parse.hpp"
#include "contract/time_format.hpp"
#include "storage/job_browse.hpp"
#include "storage/operation_store.hpp"

namespace delayd::admin {

namespace {

constexpr std::int64_t kPublishWaitMs = 10'000;

JobAnswer answer(unsigned status, const nlohmann::json& j) { return {status, to_text(j)}; }

}  // namespace

StoreJobBackend::StoreJobBackend(config::Config config, std::chrono::milliseconds cancel_wait)
    : config_(std::move(config)),
      cancel_wait_(cancel_wait),
      runner_(std::make_unique<OperationRunner>(
          config_, broker::Ownership::member_name(),
          [this](const std::string& id, const storage::OperationStore::Fields& f) { audit_end(id, f); })) {}

void StoreJobBackend::set_audit_sink(AuditSink sink) {
  std::lock_guard lock(sink_mutex_);
  sink_ = std::move(sink);
}

void StoreJobBackend::audit_end(const std::string& id, const storage::OperationStore::Fields& f) {
  const auto text = [&](const char* name) { return f.count(name) ? f.at(name) : std::string(); };
  const auto number = [&](const char* name) {
    try {
      return static_cast<std::int64_t>(std::stoll(text(name)));
    } catch (const std::exception&) {
      return std::int64_t{0};
    }
  };
  AuditEntry e;
  e.access = text("access") == "read" ? Access::read : text("access") == "open" ? Access::open : Access::admin;
  e.action = text("action") == "cancel"         ? AuditAction::bulk_cancel
             : text("action") == "run-now"      ? AuditAction::bulk_run_now
             : text("action") == kRedriveAction ? AuditAction::redrive
                                                : AuditAction::bulk_retry;
  e.target = {{"operation", id}, {"filter", nlohmann::json::parse(text("filter"), nullptr, false)}};
  std::int64_t skipped = 0;
  const nlohmann::json s = nlohmann::json::parse(text("skipped"), nullptr, false);
  if (s.is_object()) {
    for (const auto& [why, n] : s.items()) skipped += n.is_number() ? n.get<std::int64_t>() : 0;
  }
  e.counts = AuditCounts{number("matched"), number("done"), skipped, number("failed")};
  e.outcome = text("status") == "done"      ? AuditOutcome::ok
              : text("status") == "stopped" ? AuditOutcome::stopped
                                            : AuditOutcome::error;
  std::lock_guard lock(sink_mutex_);
  if (sink_) sink_(e);
}

StoreJobBackend::~StoreJobBackend() = default;

template <class F>
auto StoreJobBackend::with_store(F f) {
  try {
    if (!store_) {
      redis_ = config::make_redis_client(config_);
      store_ = std::make_unique<storage::JobStore>(*redis_, storage::KeySchema(config_.redis.prefix),
                                                   config_.redis.job_retention_s, config::script_calls(config_));
    }
    return f(*store_);
  } catch (...) {
    store_.reset();
    redis_.reset();
    throw;
  }
}

JobAnswer StoreJobBackend::get(const std::string& job_id) {
  const auto fields = with_store([&](storage::JobStore& s) { return s.get(job_id); });
  if (!fields) return answer(404, {{"error", "no job " + job_id}});
  return answer(200, job_to_json(job_id, *fields));
}

template <class F>
auto StoreJobBackend::with_reader(F f) {
  try {
    if (!reader_) {
      reader_ =
          std::make_unique<connectors::TopicReader>(config::kafka_properties(config_, config::KafkaClient::consumer));
    }
    DeadLetterTopic source(*reader_, config_.kafka.dlq_topic);
    return f(static_cast<DeadLetterSource&>(source));
  } catch (...) {
    reader_.reset();
    throw;
  }
}

std::string StoreJobBackend::state_of(const std::string& job_id) {
  const auto fields = with_store([&](storage::JobStore& s) { return s.get(job_id); });
  if (!fields) return "missing";
  const auto it = fields->find("state");
  return it == fields->end() ? "unknown" : it->second;
}

void StoreJobBackend::publish(const connectors::OutRecord& record, std::string_view what) {
  if (!producer_) {
    producer_ =
        std::make_unique<connectors::KafkaProducer>(config::kafka_properties(config_, config::KafkaClient::producer),
                                                    [this](const connectors::DeliveryReport& r) { report_ = r; });
  }
  report_.reset();
  producer_->produce(record);
  // Bounded below kafka.message_timeout_ms so that a Kafka outage costs a 503, not a stuck
  // worker (and a slow shutdown).
  producer_->flush(static_cast<int>(std::min<std::int64_t>(config_.kafka.message_timeout_ms, kPublishWaitMs)));
  if (!report_) {
    throw connectors::KafkaError("Kafka did not acknowledge the " + std::string(what) + " within " +
                                 std::to_string(kPublishWaitMs) + " ms; it may still be delivered");
  }
  if (!report_->ok) {
    throw connectors::KafkaError("the " + std::string(what) + " was not delivered: " + report_->error);
  }
}

JobAnswer StoreJobBackend::cancel(const std::string& job_id) {
  const CancelOutcome o = cancel_and_wait(
      [&] { return state_of(job_id); },
      [&] { publish(contract::cancel_record(config_.kafka.ingest_topic, job_id), "cancel record"); }, cancel_wait_);
  switch (o.verdict) {
    case CancelVerdict::no_job:
      return answer(404, {{"error", "no job " + job_id}});
    case CancelVerdict::pending:
      return answer(202, {{"job_id", job_id},
                          {"cancelled", false},
                          {"state", o.state},
                          {"note",
                           "the cancel is published but delayd has not acted on it yet; if it arrives while "
                           "the job is in flight, it has no effect"}});
    case CancelVerdict::cancelled:
      return answer(200, {{"job_id", job_id}, {"cancelled", true}, {"state", o.state}});
    case CancelVerdict::not_waiting:
    case CancelVerdict::not_cancelled:
      break;
  }
  return answer(409, {{"job_id", job_id}, {"cancelled", false}, {"state", o.state}});
}

JobAnswer StoreJobBackend::list(const ListRequest& request, std::int64_t now_ms) {
  const storage::WalkPage page = with_store([&](storage::JobStore& s) {
    return storage::walk_jobs(s, request.filter, request.cursor.value_or(storage::WalkCursor{now_ms, 0, {}, {}}),
                              request.limit, now_ms);
  });
  return answer(200, page_json(request.filter, page));
}

JobAnswer StoreJobBackend::reschedule(const std::string& job_id, std::int64_t deliver_at, std::int64_t now_ms) {
  const storage::Transition t =
      with_store([&](storage::JobStore& s) { return s.reschedule_anywhere({}, job_id, deliver_at, now_ms); });
  if (t.state == storage::JobState::missing) return answer(404, {{"error", "no job " + job_id}});
  if (t.changed) {
    return answer(200, {{"job_id", job_id},
                        {"rescheduled", true},
                        {"state", "delay"},
                        {"deliver_at", deliver_at},
                        {"deliver_at_iso", contract::format_rfc3339_ms(deliver_at)},
                        {"shard", t.shard}});
  }
  return answer(409, {{"job_id", job_id},
                      {"rescheduled", false},
                      {"state", to_string(t.state)},
                      {"error", t.state == storage::JobState::in_flight ? "its delivery is under way"
                                                                        : "only a waiting (delay) job can be moved"}});
}

JobAnswer StoreJobBackend::retry(const std::string& job_id, std::int64_t now_ms) {
  const storage::Transition t = with_store([&](storage::JobStore& s) { return s.retry_anywhere(job_id, now_ms); });
  if (t.state == storage::JobState::missing) return answer(404, {{"error", "no job " + job_id}});
  if (t.changed) {
    return answer(200, {{"job_id", job_id}, {"retried", true}, {"state", "delay"}, {"source", "payload"}});
  }
  if (t.state == storage::JobState::failed) return retry_from_dead_letter(job_id);
  return answer(409, {{"job_id", job_id},
                      {"retried", false},
                      {"state", to_string(t.state)},
                      {"error", "only a failed job can be retried"}});
}

JobAnswer StoreJobBackend::retry_from_dead_letter(const std::string& job_id) {
  const auto refuse = [&](const std::string& why) {
    return answer(409,
                  {{"job_id", job_id}, {"retried", false}, {"state", "failed"}, {"source", nullptr}, {"error", why}});
  };
  const auto fields = with_store([&](storage::JobStore& s) { return s.get(job_id); });
  const auto dl = fields ? fields->find("dl") : decltype(fields->find("dl")){};
  if (!fields || dl == fields->end()) {
    return refuse(
        "its payload is gone (its business keeps none: scheduler.keep_payload) and its record does not say "
        "where its dead letter is");
  }
  const auto colon = dl->second.find(':');
  const auto partition = parse_count(dl->second.substr(0, colon));
  const auto offset = colon == std::string::npos ? std::nullopt : parse_count(dl->second.substr(colon + 1));
  if (!partition || !offset) return refuse("its record's dead-letter place '" + dl->second + "' does not read");
  const std::vector<connectors::Record> found = with_reader([&](DeadLetterSource& source) {
    return source.read(static_cast<std::int32_t>(*partition), *offset, *offset + 1, 1);
  });
  if (found.empty() || found.front().offset != *offset) {
    return refuse("its payload is gone and its dead letter " + dl->second +
                  " is no longer in the dead-letter topic (its retention)");
  }
  auto redriven = redrive_record(found.front(), config::kMaxRedrives, redrive_target(config_), "retry");
  if (auto* why = std::get_if<std::string>(&redriven)) return refuse("its dead letter " + dl->second + ": " + *why);
  connectors::OutRecord& record = std::get<Redriven>(redriven).record;
  const auto shard = fields->find("shard");
  if (shard != fields->end()) {
    record.partition = storage::partition_of(shard->second, config_.kafka.ingest_topic).value_or(-1);
  }
  publish(record, "dead letter");
  // The shard's owner revives the job when it reads the record (accept.lua): watched here as a
  // cancel is.
  std::string state = "failed";
  const auto until = std::chrono::steady_clock::now() + cancel_wait_;
  while ((state = state_of(job_id)) == "failed" && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return answer(state == "failed" ? 202 : 200, {{"job_id", job_id},
                                                {"retried", state != "failed"},
                                                {"state", state},
                                                {"source", "dead_letter"},
                                                {"dead_letter", dl->second}});
}

JobAnswer StoreJobBackend::bulk(const BulkRequest& request, std::int64_t now_ms) {
  if (request.dry_run) {
    const storage::JobCount n =
        with_store([&](storage::JobStore& s) { return storage::count_jobs(s, request.filter, now_ms, kDryRunFor); });
    return answer(200, {{"dry_run", true},
                        {"action", action_name(request.action)},
                        {"matched", n.matched},
                        {"complete", n.complete},
                        {"examined", n.examined}});
  }
  const std::string id = with_store([&](storage::JobStore& s) {
    storage::OperationStore ops(*redis_, s.keys());
    return create_operation(ops, request, now_ms);
  });
  runner_->wake();
  return answer(202, {{"operation", id}, {"status", "running"}});
}

JobAnswer StoreJobBackend::dead_letters(const DeadLetterListRequest& request) {
  return with_reader([&](DeadLetterSource& source) {
    const DeadLetterPage page = walk_dead_letters(source, request.filter, request.cursor, request.limit);
    return answer(200, dead_letter_page_json(request.filter, page));
  });
}

JobAnswer StoreJobBackend::redrive(const RedriveRequest& request, std::int64_t now_ms) {
  if (request.dry_run) {
    return with_reader([&](DeadLetterSource& source) {
      return answer(200, to_json(count_redrivable(source, request.filter, config_.admin.max_redrives,
                                                  redrive_target(config_), kDryRunFor)));
    });
  }
  const std::string id = with_store([&](storage::JobStore& s) {
    storage::OperationStore ops(*redis_, s.keys());
    return create_redrive_operation(ops, request, now_ms);
  });
  runner_->wake();
  return answer(202, {{"operation", id}, {"status", "running"}});
}

JobAnswer StoreJobBackend::operation(const std::string& id) {
  return with_store([&](storage::JobStore& s) {
    storage::OperationStore ops(*redis_, s.keys());
    if (id.empty()) {
      nlohmann::json list = nlohmann::json::array();
      for (const std::string& one : ops.list()) {
        if (auto f = ops.load(one)) list.push_back(operation_to_json(one, *f));
      }
      return answer(200, {{"operations", list}});
    }
    const auto f = ops.load(id);
    if (!f) return answer(404, {{"error", "no operation " + id}});
    return answer(200, operation_to_json(id, *f));
  });
}

JobAnswer StoreJobBackend::stop_operation(const std::string& id) {
  JobAnswer a = with_store([&](storage::JobStore& s) {
    storage::OperationStore ops(*redis_, s.keys());
    const auto f = ops.load(id);
    if (!f) return answer(404, {{"error", "no operation " + id}});
    const std::string status = f->count("status") ? f->at("status") : "";
    if (status != "running" && status != "stopping") {
      return answer(409, {{"operation", id}, {"status", status}, {"error", "it has ended"}});
    }
    ops.save(id, {{"status", "stopping"}});
    return answer(202, {{"operation", id}, {"status", "stopping"}});
  });
  runner_->wake();
  return a;
}

storage::StoreStats StoreJobBackend::store_stats() {
  return with_store([](storage::JobStore& s) { return s.stats(); });
}

Overview StoreJobBackend::overview(std::int64_t now_ms) {
  std::vector<std::int64_t> bounds;
  for (const std::int64_t s : kDueWindowsS) bounds.push_back(now_ms + s * 1000);
  bounds.push_back(std::numeric_limits<std::int64_t>::max());
  return with_store([&](storage::JobStore& store) {
    const storage::StoreStats stats = store.stats();
    Overview o;
    o.pending_by_shard = stats.pending_by_shard;
    o.next_due = stats.next_due;
    for (const auto& [business, states] : stats.by_business_state) {
      const auto it = states.find("delay");
      o.pending_by_business[business] = it == states.end() ? 0 : it->second;
    }
    o.due = store.due_counts(bounds);
    return o;
  });
}

}  // namespace delayd::admin

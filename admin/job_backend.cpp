#include "admin/job_backend.hpp"

#include <algorithm>
#include <limits>
#include <string>
#include <thread>

#include "admin/job_json.hpp"
#include "config/redis_options.hpp"
#include "contract/ingest_parse.hpp"

namespace delayd::admin {

namespace {

constexpr std::int64_t kPublishWaitMs = 10'000;

JobAnswer answer(unsigned status, const nlohmann::json& j) { return {status, to_text(j)}; }

}  // namespace

StoreJobBackend::StoreJobBackend(config::Config config, std::chrono::milliseconds cancel_wait)
    : config_(std::move(config)), cancel_wait_(cancel_wait) {}

StoreJobBackend::~StoreJobBackend() = default;

template <class F>
auto StoreJobBackend::with_store(F f) {
  try {
    if (!store_) {
      redis_ = config::make_redis_client(config_);
      store_ = std::make_unique<storage::JobStore>(*redis_, storage::KeySchema(config_.redis.prefix),
                                                   config_.redis.job_retention_s);
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

std::string StoreJobBackend::state_of(const std::string& job_id) {
  const auto fields = with_store([&](storage::JobStore& s) { return s.get(job_id); });
  if (!fields) return "missing";
  const auto it = fields->find("state");
  return it == fields->end() ? "unknown" : it->second;
}

void StoreJobBackend::publish_cancel(const std::string& job_id) {
  if (!producer_) {
    producer_ =
        std::make_unique<connectors::KafkaProducer>(config::kafka_properties(config_, config::KafkaClient::producer),
                                                    [this](const connectors::DeliveryReport& r) { report_ = r; });
  }
  connectors::OutRecord rec;
  rec.topic = config_.kafka.ingest_topic;
  rec.key = job_id;
  rec.headers = {{std::string(contract::kHeaderOp), "cancel"}, {std::string(contract::kHeaderJobId), job_id}};
  report_.reset();
  producer_->produce(rec);
  // Bounded below kafka.message_timeout_ms so that a Kafka outage costs a 503, not a stuck
  // worker (and a slow shutdown).
  producer_->flush(static_cast<int>(std::min<std::int64_t>(config_.kafka.message_timeout_ms, kPublishWaitMs)));
  if (!report_) {
    throw connectors::KafkaError("Kafka did not acknowledge the cancel record within " +
                                 std::to_string(kPublishWaitMs) + " ms; it may still be delivered");
  }
  if (!report_->ok) throw connectors::KafkaError("the cancel record was not delivered: " + report_->error);
}

JobAnswer StoreJobBackend::cancel(const std::string& job_id) {
  const std::string before = state_of(job_id);
  if (before == "missing") return answer(404, {{"error", "no job " + job_id}});
  if (before != "delay") return answer(409, {{"job_id", job_id}, {"cancelled", false}, {"state", before}});
  publish_cancel(job_id);
  const auto deadline = std::chrono::steady_clock::now() + cancel_wait_;
  std::string now_state = state_of(job_id);
  while (now_state == "delay" && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    now_state = state_of(job_id);
  }
  if (now_state == "delay") {
    return answer(202, {{"job_id", job_id},
                        {"cancelled", false},
                        {"state", now_state},
                        {"note",
                         "the cancel is published but delayd has not acted on it yet; if it arrives while "
                         "the job is in flight, it has no effect"}});
  }
  const bool cancelled = now_state == "cancelled";
  return answer(cancelled ? 200 : 409, {{"job_id", job_id}, {"cancelled", cancelled}, {"state", now_state}});
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

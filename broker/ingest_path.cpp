#include "broker/ingest_path.hpp"

#include "broker/delivery_tags.hpp"
#include "broker/header_convert.hpp"
#include "connectors/kafka_error.hpp"

#include <spdlog/spdlog.h>

#include <chrono>

namespace delayd::broker {

IngestPath::IngestPath(Scheduler& scheduler, storage::JobStore& store, connectors::KafkaProducer& producer,
                       connectors::KafkaAdmin* admin, IngestOptions options)
    : scheduler_(scheduler), store_(store), producer_(producer), admin_(admin), options_(std::move(options)) {}

void IngestPath::process(const std::vector<connectors::Record>& batch, std::int64_t now_ms) {
  accepts_.clear();
  dlq_waiting_.clear();
  dlq_errors_.clear();
  for (const auto& rec : batch) {
    ParsedIngest parsed = parse_ingest(rec, options_.rules);
    if (auto* job = std::get_if<ScheduleJob>(&parsed)) {
      if (options_.create_topics) ensure_topic(job->ready_topic);
      storage::NewJob j;
      j.job_id = std::move(job->job_id);
      j.deliver_at = job->deliver_at_ms;
      j.business = std::move(job->business);
      j.topic = std::move(job->ready_topic);
      j.shard = storage::shard_id(rec.topic, rec.partition);
      j.source = rec.topic + "/" + std::to_string(rec.partition) + "/" + std::to_string(rec.offset);
      j.key = std::move(job->key);
      j.value = std::move(job->value);
      j.headers = to_stored(job->carried);
      accepts_.push_back(std::move(j));
    } else if (auto* c = std::get_if<CancelJob>(&parsed)) {
      flush_accepts(now_ms);  // a cancel applies to what came before it in the partition
      cancel(c->job_id, now_ms);
    } else {
      dead_letter(rec, std::get<Invalid>(parsed).reason);
    }
  }
  flush_accepts(now_ms);
  await_dead_letters();
}

void IngestPath::flush_accepts(std::int64_t now_ms) {
  if (accepts_.empty()) return;
  const auto outcomes = store_.accept(accepts_, now_ms);
  for (size_t i = 0; i < outcomes.size(); ++i) {
    const auto& o = outcomes[i];
    if (o.created) {
      ++counters_.accepted;
    } else {
      ++counters_.duplicates;
    }
    // Hold it if it is due within the horizon: the ingest half of the horizon invariant. An
    // existing job is offered too (a replay after a crash may be the only way it gets held).
    if (o.state == "delay" && o.shard == accepts_[i].shard) {
      scheduler_.offer(o.shard, accepts_[i].job_id, o.deliver_at);
    }
  }
  accepts_.clear();
}

void IngestPath::cancel(const std::string& job_id, std::int64_t now_ms) {
  const storage::Transition t = store_.cancel(job_id, now_ms);
  if (t.changed) {
    scheduler_.cancel(job_id);
    ++counters_.cancelled;
    spdlog::info("job {} cancelled", job_id);
  } else if (t.state == "missing") {
    spdlog::warn("cancel for unknown job {} ignored", job_id);
  } else {
    spdlog::info("cancel for job {} had no effect: it is {}", job_id, t.state);
  }
}

void IngestPath::dead_letter(const connectors::Record& rec, const std::string& reason) {
  spdlog::warn("ingest record {}/{}/{} rejected: {}", rec.topic, rec.partition, rec.offset, reason);
  connectors::OutRecord out;
  out.topic = options_.dlq_topic;
  out.key = rec.key;
  out.value = rec.value;
  out.headers = rec.headers;
  out.headers.push_back({std::string(kHeaderError), reason});
  out.headers.push_back({"source-topic", rec.topic});
  out.headers.push_back({"source-partition", std::to_string(rec.partition)});
  out.headers.push_back({"source-offset", std::to_string(rec.offset)});
  out.tag = make_tag(TagKind::ingest_dlq, ++seq_);
  dlq_waiting_.emplace(out.tag, false);
  producer_.produce(out);
  ++counters_.dead_lettered;
}

void IngestPath::on_report(const connectors::DeliveryReport& report) {
  auto it = dlq_waiting_.find(report.tag);
  if (it == dlq_waiting_.end()) return;  // from an earlier, abandoned try of a batch
  it->second = true;
  if (!report.ok) dlq_errors_.push_back(report.error);
}

void IngestPath::await_dead_letters() {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.dlq_timeout_ms);
  auto outstanding = [&] {
    for (const auto& [tag, done] : dlq_waiting_) {
      if (!done) return true;
    }
    return false;
  };
  while (outstanding()) {
    if (std::chrono::steady_clock::now() >= deadline) {
      throw connectors::KafkaError("dead-letter topic " + options_.dlq_topic + " did not acknowledge within " +
                                   std::to_string(options_.dlq_timeout_ms) + " ms");
    }
    producer_.poll(20);
  }
  if (!dlq_errors_.empty()) {
    throw connectors::KafkaError("writing to dead-letter topic " + options_.dlq_topic + " failed: " +
                                 dlq_errors_.front());
  }
}

void IngestPath::ensure_topic(const std::string& topic) {
  if (admin_ == nullptr || known_topics_.count(topic) != 0) return;
  try {
    admin_->ensure_topics({topic}, options_.topic_partitions, options_.topic_replication);
    known_topics_.insert(topic);
    spdlog::info("ready topic {} is in place", topic);
  } catch (const connectors::KafkaError& e) {
    // Not fatal: the job is still accepted; its delivery retries until the topic exists.
    spdlog::warn("could not create ready topic {}: {}", topic, e.what());
  }
}

}  // namespace delayd::broker

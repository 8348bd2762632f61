#include "broker/ingest_path.hpp"

#include "broker/dead_letter.hpp"
#include "broker/delivery_tags.hpp"
#include "broker/header_convert.hpp"
#include "connectors/kafka_error.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

namespace delayd::broker {

namespace {

std::int64_t steady_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string position(const connectors::Record& rec) {
  return rec.topic + "/" + std::to_string(rec.partition) + "/" + std::to_string(rec.offset);
}

IngestPath::Offsets next_offsets(std::span<const connectors::Record> batch) {
  std::map<connectors::TopicPartition, std::int64_t> next;
  for (const auto& r : batch) {
    auto& n = next[{r.topic, r.partition}];
    n = std::max(n, r.offset + 1);
  }
  return {next.begin(), next.end()};
}

}  // namespace

IngestPath::IngestPath(Scheduler& scheduler, storage::JobStore& store, connectors::KafkaProducer& producer,
                       TopicCreator* topics, IngestOptions options)
    : scheduler_(scheduler), store_(store), producer_(producer), topics_(topics), options_(std::move(options)) {}

IngestPath::Batch& IngestPath::batch_for(std::span<const connectors::Record> batch) {
  const std::string first = position(batch.front());
  if (!batches_.empty() && !batches_.back().processed) {
    if (batches_.back().first == first) return batches_.back();  // a retry after an outage
    // The caller gave up on that batch (its partitions were revoked): its records will be read
    // again by their owner, so its offsets must never be committed.
    batches_.back().offsets.clear();
    batches_.back().processed = true;
  }
  Batch b;
  b.id = ++batch_seq_;
  b.offsets = next_offsets(batch);
  b.first = first;
  batches_.push_back(std::move(b));
  return batches_.back();
}

void IngestPath::process(std::span<const connectors::Record> batch, std::int64_t now_ms) {
  Batch& b = batch_for(batch);
  accepts_.clear();
  for (std::size_t i = b.resume; i < batch.size(); ++i) {
    const connectors::Record& rec = batch[i];
    ParsedIngest parsed = parse_ingest(rec, options_.rules);
    if (auto* job = std::get_if<ScheduleJob>(&parsed)) {
      if (auto why = refuse_topic(*job)) parsed = Invalid{std::move(*why)};
    }
    if (auto* job = std::get_if<ScheduleJob>(&parsed)) {
      storage::NewJob j;
      j.job_id = std::move(job->job_id);
      j.deliver_at = job->deliver_at_ms;
      j.business = std::move(job->business);
      j.shard = storage::shard_id(rec.topic, rec.partition);
      j.key = std::move(job->key);
      j.value = std::move(job->value);
      j.headers = to_stored(job->carried);
      accepts_.push_back(std::move(j));
    } else if (auto* c = std::get_if<CancelJob>(&parsed)) {
      flush_accepts(b, i, now_ms);  // a cancel applies to what came before it in the partition
      cancel(storage::shard_id(rec.topic, rec.partition), c->job_id, now_ms);
      b.resume = i + 1;
    } else if (b.dead_lettered.insert(i).second) {
      dead_letter(b, rec, std::get<Invalid>(parsed).reason);
    }
  }
  flush_accepts(b, batch.size(), now_ms);
  wait_for_replicas(b, batch.size());
  b.processed = true;
}

void IngestPath::wait_for_replicas(Batch& b, std::size_t end) {
  if (options_.wait_on == nullptr || options_.wait_replicas <= 0 || b.replicated >= end) return;
  try {
    options_.wait_on->wait_replicas(options_.wait_replicas, options_.wait_timeout_ms);
  } catch (const storage::RedisIoError&) {
    // Write it all again on the retry (idempotent): a new primary may lack some of it, and a
    // write it already has costs nothing. Dead-letter copies are not sent twice.
    b.resume = b.replicated;
    throw;
  }
  b.replicated = end;
}

std::optional<std::string> IngestPath::refuse_topic(const ScheduleJob& job) {
  if (topics_ == nullptr || topics_->request(job.ready_topic)) return std::nullopt;
  return "business '" + job.business + "' needs ready topic " + job.ready_topic + ", and delayd has already asked for " +
         std::to_string(topics_->requested()) +
         " ready topics (kafka.max_ready_topics); create the topic yourself or raise the limit";
}

void IngestPath::flush_accepts(Batch& b, std::size_t next, std::int64_t now_ms) {
  if (!accepts_.empty()) {
    const auto outcomes = store_.accept(accepts_, now_ms);
    for (size_t i = 0; i < outcomes.size(); ++i) {
      const auto& o = outcomes[i];
      if (o.created) {
        ++counters_.accepted;
      } else if (o.cancelled_early) {
        ++counters_.cancelled;
        spdlog::info("job {} arrived after its cancel: accepted as cancelled, never delivered", accepts_[i].job_id);
      } else {
        ++counters_.duplicates;
      }
      // Hold it if it is due within the horizon: the ingest half of the horizon invariant. An
      // existing job is offered too (a replay after a crash may be the only way it gets held).
      if (o.state == storage::JobState::delay) {
        scheduler_.offer(accepts_[i].shard, accepts_[i].job_id, o.deliver_at);
      }
    }
    accepts_.clear();
  }
  b.resume = next;
}

void IngestPath::cancel(const std::string& shard, const std::string& job_id, std::int64_t now_ms) {
  const storage::Transition t = store_.cancel_anywhere(shard, job_id, now_ms, options_.cancel_memory_s);
  if (t.changed) {
    scheduler_.cancel(job_id);
    ++counters_.cancelled;
    spdlog::info("job {} cancelled", job_id);
  } else if (t.state == storage::JobState::missing) {
    spdlog::info("cancel for unknown job {}: remembered for {} s in case the job arrives", job_id,
                 options_.cancel_memory_s);
  } else {
    spdlog::info("cancel for job {} had no effect: it is {}", job_id, storage::to_string(t.state));
  }
}

void IngestPath::dead_letter(Batch& b, const connectors::Record& rec, const std::string& reason) {
  spdlog::warn("ingest record {} rejected: {}", position(rec), reason);
  DeadLetter d;
  d.batch = b.id;
  d.record.topic = options_.dlq_topic;
  d.record.key = rec.key;
  d.record.value = rec.value;
  d.record.headers = rec.headers;
  d.record.headers.push_back({std::string(kHeaderError), reason});
  d.record.headers.push_back({"source-topic", rec.topic});
  d.record.headers.push_back({"source-partition", std::to_string(rec.partition)});
  d.record.headers.push_back({"source-offset", std::to_string(rec.offset)});
  ++b.outstanding;
  ++counters_.dead_lettered;
  send(std::move(d));
}

void IngestPath::send(DeadLetter letter) {
  const std::uint64_t tag = make_tag(TagKind::ingest_dlq, ++seq_);
  letter.record.tag = tag;
  letter.retry_at = 0;
  auto [it, inserted] = dead_letters_.emplace(tag, std::move(letter));
  try {
    producer_.produce(it->second.record, 0);  // never wait for room: a full queue is retried
  } catch (const connectors::KafkaError& e) {
    connectors::DeliveryReport r;
    r.tag = tag;
    r.error_class = connectors::DeliveryError::transient;
    r.error = e.what();
    on_report(r);
  }
}

void IngestPath::on_report(const connectors::DeliveryReport& report) {
  auto it = dead_letters_.find(report.tag);
  if (it == dead_letters_.end() || it->second.retry_at != 0) return;
  DeadLetter& d = it->second;
  if (report.ok) {
    for (auto& b : batches_) {
      if (b.id == d.batch) --b.outstanding;
    }
    dead_letters_.erase(it);
    return;
  }
  if (report.error_class == connectors::DeliveryError::too_large && shrink_dead_letter(d.record)) {
    spdlog::warn("dead-letter copy too large for {} ({}); sending it without its value", options_.dlq_topic,
                 report.error);
    DeadLetter smaller = std::move(d);
    dead_letters_.erase(it);
    send(std::move(smaller));
    return;
  }
  d.backoff_ms = std::clamp<std::int64_t>(d.backoff_ms * 2, 1000, 30000);
  d.retry_at = steady_ms() + d.backoff_ms;
  spdlog::warn("dead-letter write to {} failed ({}); trying again in {} ms", options_.dlq_topic, report.error,
               d.backoff_ms);
}

void IngestPath::retry_dead_letters() {
  const std::int64_t now = steady_ms();
  std::vector<std::uint64_t> due;
  for (const auto& [tag, d] : dead_letters_) {
    if (d.retry_at != 0 && d.retry_at <= now) due.push_back(tag);
  }
  for (std::uint64_t tag : due) {
    auto node = dead_letters_.extract(tag);
    ++counters_.dead_letter_retries;
    send(std::move(node.mapped()));
  }
}

IngestPath::Offsets IngestPath::take_committable() {
  std::map<connectors::TopicPartition, std::int64_t> next;
  while (!batches_.empty() && batches_.front().processed && batches_.front().outstanding == 0) {
    for (const auto& [tp, offset] : batches_.front().offsets) next[tp] = std::max(next[tp], offset);
    batches_.pop_front();
  }
  return {next.begin(), next.end()};
}

}  // namespace delayd::broker

#include "broker/fire_path.hpp"

#include "broker/delivery_tags.hpp"
#include "broker/header_convert.hpp"
#include "broker/ingest_parse.hpp"
#include "connectors/kafka_error.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>

namespace delayd::broker {

namespace {

// While Redis is unreachable, claimed-nothing jobs go back to the wheel this far ahead.
constexpr std::int64_t kOutageRequeueMs = 200;

connectors::OutRecord ready_record(const storage::Claim& c) {
  connectors::OutRecord r;
  r.topic = c.topic;
  r.key = c.key;
  r.value = c.value;
  r.headers = to_kafka(c.headers);
  r.headers.push_back({std::string(kHeaderJobId), c.job_id});
  r.headers.push_back({std::string(kHeaderDeliverAt), std::to_string(c.deliver_at)});
  r.headers.push_back({std::string(kHeaderAttempt), std::to_string(c.attempt)});
  return r;
}

}  // namespace

FirePath::FirePath(Scheduler& scheduler, storage::JobStore& store, connectors::KafkaProducer& producer,
                   FireOptions options)
    : scheduler_(scheduler), store_(store), producer_(producer), options_(std::move(options)) {}

std::int64_t FirePath::backoff(int attempt) const {
  std::int64_t d = options_.retry_backoff_ms;
  for (int i = 1; i < attempt && d < options_.retry_backoff_max_ms; ++i) d *= 2;
  return std::min(d, options_.retry_backoff_max_ms);
}

void FirePath::produce(InFlight entry, TagKind kind) {
  const std::uint64_t tag = make_tag(kind, ++seq_);
  entry.record.tag = tag;
  auto [it, inserted] = in_flight_.emplace(tag, std::move(entry));
  // A refusal at enqueue time comes back through on_report(), so there is one failure path. So
  // does a queue that stays full: the job then retries like any failed attempt, rather than
  // wait for a report that will never come.
  try {
    producer_.produce(it->second.record);
  } catch (const connectors::KafkaError& e) {
    connectors::DeliveryReport r;
    r.tag = tag;
    r.topic = it->second.record.topic;
    r.error = e.what();
    on_report(r);
  }
}

std::size_t FirePath::fire_due(std::int64_t now_ms) {
  const std::vector<Scheduler::Slot> slots = scheduler_.take_due(now_ms);
  if (slots.empty()) return 0;
  std::vector<std::string> ids;
  ids.reserve(slots.size());
  for (auto s : slots) ids.push_back(scheduler_.job(s).job_id);

  std::vector<storage::Claim> claims;
  try {
    claims = store_.claim(ids, now_ms);
  } catch (...) {
    // Not claimed, not produced: they stay due. Back into the wheel, shortly.
    for (auto s : slots) scheduler_.retry_at(s, now_ms + kOutageRequeueMs);
    throw;
  }

  std::map<std::string, std::vector<std::string>> stale;  // shard -> job-ids
  std::size_t produced = 0;
  for (size_t i = 0; i < slots.size(); ++i) {
    const storage::Claim& c = claims[i];
    switch (c.kind) {
      case storage::Claim::Kind::deliver:
        produce(InFlight{slots[i], c.job_id, c.attempt, ready_record(c), {}}, TagKind::ready);
        ++produced;
        break;
      case storage::Claim::Kind::early:
        // Our clock is behind the deliver-at Redis holds (only possible if they disagree, e.g.
        // a job re-published with another deliver-at): wait for it, never deliver early.
        scheduler_.retry_at(slots[i], c.deliver_at);
        break;
      case storage::Claim::Kind::gone:
        if (c.state == "payload_missing") {
          // Cannot happen through delayd's own writes (the payload is written before the
          // pending entry); if someone deleted it, fail the job loudly rather than retry forever.
          spdlog::error("job {}: its payload is missing from Redis; marking it failed", c.job_id);
          store_.mark_failed(c.job_id, "payload missing from Redis", now_ms);
          ++counters_.failed;
        } else {
          stale[scheduler_.shard_name(scheduler_.job(slots[i]).shard)].push_back(c.job_id);
          ++counters_.dropped_stale;
        }
        scheduler_.release(slots[i]);
        break;
    }
  }
  counters_.produced += produced;
  for (const auto& [shard, job_ids] : stale) store_.drop_pending(shard, job_ids);
  return produced;
}

void FirePath::on_report(const connectors::DeliveryReport& report) { reports_.push_back(report); }

void FirePath::settle(std::int64_t now_ms) {
  if (reports_.empty()) return;
  // Acknowledged ready records first, all in one round trip; a report leaves the queue only
  // once Redis has taken its outcome.
  std::vector<std::string> ids;
  std::vector<std::uint64_t> tags;
  for (const auto& r : reports_) {
    auto it = in_flight_.find(r.tag);
    if (r.ok && it != in_flight_.end() && tag_kind(r.tag) == TagKind::ready) {
      ids.push_back(it->second.job_id);
      tags.push_back(r.tag);
    }
  }
  if (!ids.empty()) {
    const auto marked = store_.mark_ready(ids, now_ms);
    for (size_t i = 0; i < tags.size(); ++i) {
      auto it = in_flight_.find(tags[i]);
      if (!marked[i].changed && marked[i].state != "ready") {
        spdlog::warn("job {} delivered but found in state {} (not marked ready)", ids[i], marked[i].state);
      }
      scheduler_.release(it->second.slot);
      in_flight_.erase(it);
      ++counters_.delivered;
    }
  }
  while (!reports_.empty()) {
    const connectors::DeliveryReport& r = reports_.front();
    if (in_flight_.count(r.tag) != 0) handle_failure(r.tag, r, now_ms);  // may throw: stays queued
    reports_.pop_front();
  }
}

void FirePath::handle_failure(std::uint64_t tag, const connectors::DeliveryReport& report, std::int64_t now_ms) {
  auto it = in_flight_.find(tag);
  InFlight& f = it->second;
  const bool dlq_write = tag_kind(tag) == TagKind::failed_dlq;

  if (dlq_write && report.ok) {
    // The dead-letter copy is safe: now the job may be called failed.
    store_.mark_failed(f.job_id, f.reason, now_ms);
    scheduler_.release(f.slot);
    in_flight_.erase(it);
    ++counters_.failed;
    return;
  }
  if (!dlq_write && f.attempt >= options_.max_attempts) {
    spdlog::error("job {}: attempt {} of {} failed ({}); writing it to {}", f.job_id, f.attempt,
                  options_.max_attempts, report.error, options_.dlq_topic);
    InFlight dead = std::move(f);
    in_flight_.erase(it);
    dead.reason = "delivery to " + dead.record.topic + " failed after " + std::to_string(dead.attempt) +
                  " attempts: " + report.error;
    dead.record.headers.push_back({std::string(kHeaderError), dead.reason});
    dead.record.topic = options_.dlq_topic;
    produce(std::move(dead), TagKind::failed_dlq);
    return;
  }
  // A failed attempt (or a failed dead-letter write): free the job for a cancel, re-score its
  // pending entry, and try again after the backoff.
  const std::string error = dlq_write ? "dead-letter write failed: " + report.error : report.error;
  const std::int64_t at = now_ms + backoff(f.attempt);
  spdlog::warn("job {}: attempt {} failed ({}); retrying in {} ms", f.job_id, f.attempt, error, at - now_ms);
  store_.release(f.job_id, error, at);
  scheduler_.retry_at(f.slot, at);
  in_flight_.erase(it);
  ++counters_.retried;
}

}  // namespace delayd::broker

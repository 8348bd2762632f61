// FirePath's second half (fire_path.hpp): a record's delivery report and what follows it. A
// success is marked ready in Redis (batched: apply_marks(), marked()), then its follow-up (a
// repeat's next occurrence, etf1's history); a failure is classified by decide() and retried,
// refunded or dead-lettered (handle_failure(), dead_letter()). The first half, claiming and
// producing, is fire_path.cpp.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "base/backoff.hpp"
#include "broker/dead_letter.hpp"
#include "broker/fire_path.hpp"
#include "broker/repeat_plan.hpp"
#include "connectors/kafka_error.hpp"
#include "contract/ingest_parse.hpp"
#include "contract/peer_formats.hpp"
#include "telemetry/log_scope.hpp"

namespace delayd::broker {

namespace {

using connectors::DeliveryError;

// How often a missing ready topic is asked to be created again while it stays missing, ms.
constexpr std::int64_t kAskAgainMs = 10'000;
// Delivery reports one settle() call handles at most: as many as fire_due() may send.
constexpr std::size_t kSettleBudget = 5000;

// The span a job's log lines name: its last publish span, if it had one.
const telemetry::SpanContext* traced(const PublishTrace& t) {
  return t.context.trace_id == telemetry::TraceId{} ? nullptr : &t.context;
}

}  // namespace

FailureAction decide(DeliveryError error, int attempt, const FireOptions& options,
                     std::chrono::milliseconds topic_missing_for) {
  FailureAction a;
  switch (error) {
    case DeliveryError::none:
    case DeliveryError::transient:
    case DeliveryError::refused:  // the login or an ACL: fixed outside delayd while the job waits
      a.refund = true;
      a.delay_ms = options.retry_outage_ms;
      return a;
    case DeliveryError::fenced:  // not the job's fault; handle_failure() gives the shard up first
    case DeliveryError::possibly_persisted:
    case DeliveryError::fatal:
      a.refund = true;
      a.keep_firing = true;
      a.delay_ms = options.retry_outage_ms;
      return a;
    case DeliveryError::too_large:
      a.kind = FailureAction::Kind::dead_letter;
      a.strip_value = true;
      return a;
    case DeliveryError::unknown_topic:
      // The topic's fault, not the job's: wait for it without spending attempts, and give up
      // only when it has been gone for missing_topic_timeout.
      if (topic_missing_for >= options.missing_topic_timeout) {
        a.kind = FailureAction::Kind::dead_letter;
        return a;
      }
      a.refund = true;
      a.delay_ms = options.retry_outage_ms;
      return a;
    case DeliveryError::permanent:
      if (attempt >= options.max_attempts) {
        a.kind = FailureAction::Kind::dead_letter;
        return a;
      }
      a.delay_ms = base::doubling(std::chrono::milliseconds(options.retry_backoff_ms),
                                  std::chrono::milliseconds(options.retry_backoff_max_ms), attempt)
                       .count();
      return a;
  }
  return a;
}
void FirePath::on_report(const connectors::DeliveryReport& report) {
  if (tag_kind(report.tag) == TagKind::follow_up) {
    // Not waited for (FireOptions::etf1_tombstone_topics): a failure is told, nothing retried.
    if (!report.ok) spdlog::warn("etf1 follow-up record to {} not written: {}", report.topic, report.error);
    return;
  }
  if (tag_kind(report.tag) == TagKind::ready) {
    if (auto it = in_flight_.find(report.tag); it != in_flight_.end()) {
      produce_latency_.observe(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - it->second.produced_at).count());
      end_span(it->second, report);
    }
  }
  reports_.push_back(report);
}

void FirePath::apply_marks() {
  if (marker_ == nullptr) return;
  std::exception_ptr failure;
  for (MarkResult& r : marker_->take_done()) {
    auto it = marks_.find(r.id);
    if (it == marks_.end()) continue;
    PendingMark pm = std::move(it->second);
    marks_.erase(it);
    if (r.error) {
      // What was written is not known: the reports go round again (a mark is safe to repeat: it settles
      // only the claim of its attempt still in flight, mark_ready.lua).
      for (std::size_t k = 0; k < pm.tags.size(); ++k) {
        if (auto f = in_flight_.find(pm.tags[k]); f != in_flight_.end()) f->second.marking = false;
        reports_.push_front(std::move(pm.reports[k]));
      }
      if (!failure) failure = r.error;
      continue;
    }
    marked(pm.tags, r.marked);
  }
  if (failure) std::rethrow_exception(failure);
}

void FirePath::marked(const std::vector<std::uint64_t>& tags, const std::vector<storage::Transition>& marked) {
  for (std::size_t k = 0; k < tags.size(); ++k) {
    auto it = in_flight_.find(tags[k]);
    if (it == in_flight_.end()) continue;
    if (!marked[k].changed &&
        (marked[k].state == storage::JobState::missing || marked[k].state == storage::JobState::corrupt)) {
      spdlog::warn("job {} delivered but its record is {} (not marked ready)", it->second.job_id,
                   storage::to_string(marked[k].state));
    } else if (!marked[k].changed) {
      // Settled already: this mark was sent again after its answer was lost (the job may have
      // moved on since, and the mark leaves it be), or another owner settled it.
      spdlog::debug("job {} delivered; already settled (now {})", it->second.job_id,
                    storage::to_string(marked[k].state));
    }
    // The shard is read before follow_up() releases the slot, and only when etf1 needs it.
    const bool etf1 = marked[k].changed && marked[k].state == storage::JobState::ready &&
                      !options_.follow_ups_with_record && !it->second.recovered &&
                      (!options_.etf1_tombstone_topics.empty() || !options_.etf1_history_topic.empty());
    const std::string shard = etf1 ? shard_of(it->second.slot) : std::string();
    follow_up(it->second, marked[k]);
    if (etf1) after_etf1_delivery(it->second, shard);
    in_flight_.erase(it);
    ++counters_.delivered;
  }
}

void FirePath::after_etf1_delivery(const InFlight& f, const std::string& shard) {
  // The schedule's topic and key: the last scheduler-topic and scheduler-key headers, the ones
  // the etf1 format adds after the input's own (which could hold the same names).
  const std::optional<std::string>* topic = nullptr;
  const std::optional<std::string>* key = nullptr;
  for (auto h = f.record.headers.rbegin(); h != f.record.headers.rend() && (!topic || !key); ++h) {
    if (!topic && h->name == contract::kEtf1Topic) topic = &h->value;
    if (!key && h->name == contract::kEtf1Key) key = &h->value;
  }
  if (topic == nullptr || key == nullptr || !topic->has_value() || !key->has_value()) return;
  const auto partition = storage::partition_of(shard, **topic);
  if (!partition) return;  // not read from its schedules topic: not an etf1 job
  auto send = [&](connectors::OutRecord r) {
    r.tag = make_tag(TagKind::follow_up, ++follow_up_seq_);
    sink_.produce(r, shard, 0);  // a failure is reported, and told (on_report())
  };
  if (options_.etf1_tombstone_topics.count(**topic) > 0) {
    send(contract::etf1_tombstone(**topic, *partition, **key, "fired"));
  }
  if (!options_.etf1_history_topic.empty()) {
    connectors::OutRecord copy = f.record;
    copy.topic = options_.etf1_history_topic;
    copy.partition = -1;
    send(std::move(copy));
  }
}

void FirePath::settle_all(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto left = [&] {
    return std::max(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()),
                    std::chrono::milliseconds(0));
  };
  if (claimer_ != nullptr) {
    claimer_->wait_idle(left());
    apply_claims();
  }
  settle(options_.clock());
  if (marker_ == nullptr) return;
  marker_->wait_idle(left());
  apply_marks();
}

void FirePath::settle(std::int64_t now_ms) {
  apply_marks();  // may throw: the failed marks' reports are queued again
  if (reports_.empty()) return;
  // At most kSettleBudget reports per call, so that claims for what falls due next are not held
  // up behind a large backlog of acknowledgements (the loop calls settle() again soon).
  // Acknowledged ready records first, a mark call per shard and jobs_per_call; a report leaves
  // the queue only once Redis has taken its outcome.
  const std::size_t budget = std::min(reports_.size(), kSettleBudget);
  std::vector<Scheduler::Slot> slots;
  std::vector<std::uint64_t> tags;
  for (std::size_t i = 0; i < budget; ++i) {
    const connectors::DeliveryReport& r = reports_[i];
    auto it = in_flight_.find(r.tag);
    if (r.ok && it != in_flight_.end() && tag_kind(r.tag) == TagKind::ready && !it->second.marking) {
      slots.push_back(it->second.slot);
      tags.push_back(r.tag);
    }
  }
  if (!tags.empty()) delivery_outage_.reset();
  for (std::size_t i = 0; i < budget && !refused_topics_.empty(); ++i) {
    if (reports_[i].ok) refused_topics_.erase(reports_[i].topic);
  }
  for (std::size_t i = 0; i < budget && !missing_topics_.empty(); ++i) {
    if (!reports_[i].ok) continue;
    if (const auto was = missing_topics_.delivered(reports_[i].topic, now_ms)) {
      spdlog::info("ready topic {} exists again after {} ms; {} deliveries had failed meanwhile and go out now",
                   reports_[i].topic, std::max<std::int64_t>(now_ms - was->since_ms, 0), was->failures);
    }
  }
  std::unordered_map<std::uint64_t, const connectors::DeliveryReport*> report_of;
  if (marker_ != nullptr) {
    for (std::size_t i = 0; i < budget; ++i) report_of[reports_[i].tag] = &reports_[i];
  }
  for (const auto& [shard, index] : by_shard(slots)) {
    std::vector<storage::JobStore::Delivered> jobs;
    std::vector<std::uint64_t> group;
    jobs.reserve(index.size());
    for (size_t i : index) {
      jobs.push_back(delivered(in_flight_.at(tags[i]), now_ms));
      group.push_back(tags[i]);
    }
    if (marker_ != nullptr) {
      // Handed to the settle thread; applied by a later settle() (apply_marks()).
      PendingMark pm;
      for (std::uint64_t tag : group) {
        in_flight_.at(tag).marking = true;
        pm.reports.push_back(*report_of.at(tag));
      }
      pm.tags = std::move(group);
      const std::uint64_t id = ++stage_seq_;
      marks_.emplace(id, std::move(pm));
      marker_->submit({id, scheduler_.shard_name(shard), std::move(jobs), now_ms});
      continue;
    }
    send_prepared(options_.clock());  // a due record waits behind one call at most
    const auto result =
        store_.mark_ready(scheduler_.shard_name(shard), std::span<const storage::JobStore::Delivered>(jobs),
                          now_ms);  // may throw: all stay queued
    marked(group, result);
  }
  for (std::size_t i = 0; i < budget; ++i) {
    const connectors::DeliveryReport& r = reports_.front();
    if (auto it = in_flight_.find(r.tag); it != in_flight_.end() && !it->second.marking) {
      // May throw (Redis): the report stays queued and is handled again.
      if (tag_kind(r.tag) == TagKind::failed_dlq) {
        handle_dead_letter_report(r.tag, r, now_ms);
      } else {
        handle_failure(r.tag, r, now_ms);
      }
    }
    reports_.pop_front();
  }
}

void FirePath::handle_failure(std::uint64_t tag, const connectors::DeliveryReport& report, std::int64_t now_ms) {
  auto it = in_flight_.find(tag);
  InFlight& f = it->second;
  const telemetry::LogScope scope(traced(f.trace));
  std::chrono::milliseconds missing_for{0};
  if (report.error_class == DeliveryError::unknown_topic) {
    // The wall time it was handed to the producer, from the steady clock's age of that moment.
    const auto age =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - f.produced_at);
    missing_for = note_missing_topic(f.record.topic, now_ms, now_ms - age.count());
  }
  if (report.error_class == DeliveryError::fenced) {
    // Its transaction can never commit: another owner's producer took the shard's id over. The
    // shard is not ours; its new owner delivers the job.
    lose(shard_of(f.slot));
    scheduler_.release(f.slot);
    in_flight_.erase(it);
    return;
  }
  const FailureAction action = decide(report.error_class, f.attempt, options_, missing_for);
  // A missing topic is one business's matter, shown by missing_topics(): not a Kafka outage.
  if (report.error_class == DeliveryError::refused) {
    refused_topics_[f.record.topic] = report.error;
  } else if (action.refund && report.error_class != DeliveryError::unknown_topic) {
    delivery_outage_ = report.error;
  }
  if (action.kind == FailureAction::Kind::retry) {
    retry(f, report.error, action, now_ms);
    in_flight_.erase(it);
    return;
  }
  if (!still_ours(f.slot)) {
    // The shard moved on: its new owner retries the job and decides about the dead letter.
    scheduler_.release(f.slot);
    in_flight_.erase(it);
    return;
  }
  DeadLetterReason why = DeadLetterReason::delivery_failed;
  std::string reason;
  if (report.error_class == DeliveryError::too_large) {
    why = DeadLetterReason::too_large;
    reason = "ready record of " + std::to_string(connectors::record_bytes(f.record)) +
             " bytes refused as too large by Kafka: " + report.error;
  } else if (report.error_class == DeliveryError::unknown_topic) {
    why = DeadLetterReason::topic_missing;
    reason = "ready topic " + f.record.topic + " has not existed for " + std::to_string(missing_for.count() / 1000) +
             " s (kafka.missing_topic_timeout_ms): " + report.error;
  } else {
    reason =
        "delivery to " + f.record.topic + " failed after " + std::to_string(f.attempt) + " attempts: " + report.error;
  }
  // One line per job for a job's own failure; a missing topic says it once per topic instead.
  spdlog::log(why == DeadLetterReason::topic_missing ? spdlog::level::debug : spdlog::level::err,
              "job {}: {}; writing it to {}", f.job_id, reason, options_.dlq_topic);
  InFlight dead = std::move(f);
  in_flight_.erase(it);
  dead_letter(std::move(dead), std::move(reason), action.strip_value, why);
}

std::chrono::milliseconds FirePath::note_missing_topic(const std::string& topic, std::int64_t now_ms,
                                                       std::int64_t sent_ms) {
  MissingTopics::Entry* found = missing_topics_.failed(topic, now_ms, sent_ms);
  if (found == nullptr) return std::chrono::milliseconds(0);  // a straggler of an outage that ended
  MissingTopics::Entry& e = *found;
  if (e.failures == 1) {
    spdlog::warn(
        "ready topic {} does not exist: its jobs wait for it without spending attempts{}, and are "
        "dead-lettered if it is still missing after {} ms (kafka.missing_topic_timeout_ms)",
        topic, options_.on_missing_topic ? " while it is created again" : "", options_.missing_topic_timeout.count());
  }
  // Asked again every kAskAgainMs while it stays missing: a creation that met the old topic
  // still being deleted found it "existing" and did nothing.
  if (options_.on_missing_topic && (e.asked_ms == 0 || now_ms - e.asked_ms >= kAskAgainMs)) {
    e.asked_ms = now_ms;
    options_.on_missing_topic(topic);
  }
  return missing_topics_.missing_for(topic, now_ms);
}

void FirePath::dead_letter(InFlight entry, std::string reason, bool strip_value, DeadLetterReason why) {
  ++counters_.dead_lettered_by[why];
  entry.reason = std::move(reason);
  entry.record.headers.push_back({std::string(contract::kHeaderError), entry.reason});
  entry.record.headers.push_back({std::string(contract::kHeaderReason), std::string(to_string(why))});
  entry.record.topic = options_.dlq_topic;
  entry.record.partition = -1;
  if (strip_value) shrink_dead_letter(entry.record);
  produce(std::move(entry), TagKind::failed_dlq);
}

void FirePath::handle_dead_letter_report(std::uint64_t tag, const connectors::DeliveryReport& report,
                                         std::int64_t now_ms) {
  auto it = in_flight_.find(tag);
  InFlight& f = it->second;
  const telemetry::LogScope scope(traced(f.trace));
  if (report.ok) {
    // The dead-letter copy is safe: now the job may be called failed (unless the shard moved
    // on meanwhile: then the new owner's attempts decide, and the copy stays a stray one).
    try {
      // A recovered one's place in the dead-letter topic is not known (its log record does not say).
      store_.mark_failed(
          shard_of(f.slot), f.job_id, f.reason, now_ms,
          f.recovered ? std::nullopt
                      : std::optional<storage::DeadLetterAt>(storage::DeadLetterAt{report.partition, report.offset}),
          options_.policies.of(f.business).keep_payload);
    } catch (const storage::ShardFenced& e) {
      lose(e.shard);
    }
    scheduler_.release(f.slot);
    in_flight_.erase(it);
    ++counters_.failed;
    return;
  }
  if (report.error_class == DeliveryError::fenced) {  // as handle_failure() says
    lose(shard_of(f.slot));
    scheduler_.release(f.slot);
    in_flight_.erase(it);
    return;
  }
  if (report.error_class == DeliveryError::too_large && shrink_dead_letter(f.record)) {
    InFlight smaller = std::move(f);
    in_flight_.erase(it);
    produce(std::move(smaller), TagKind::failed_dlq);
    return;
  }
  // The copy could not be written: send the job round again (not counted), so that it is
  // dead-lettered on a later try. It stays pending in Redis meanwhile.
  FailureAction again = decide(DeliveryError::transient, f.attempt, options_);
  again.keep_firing = report.error_class == DeliveryError::possibly_persisted;
  if (report.error_class == DeliveryError::refused) refused_topics_[f.record.topic] = report.error;  // the DLQ's Write
  retry(f, "dead-letter write failed: " + report.error, again, now_ms);
  in_flight_.erase(it);
}

storage::JobStore::Delivered FirePath::delivered(const InFlight& f, std::int64_t now_ms) const {
  using Mode = storage::JobStore::Mode;
  const config::BusinessPolicy& p = options_.policies.of(f.business);
  const Mode mode = p.keep_payload ? Mode::keep : f.plain ? Mode::fast : Mode::drop;
  const auto ack = p.keep_payload ? p.ack_timeout : std::chrono::milliseconds(0);
  storage::JobStore::Delivered d{f.job_id, f.deliver_at, f.attempt, f.business, mode, ack, p.max_process_attempts};
  if (f.rule.repeats()) {
    // The next occurrence, chosen here and written by the mark (repeat_plan.hpp); a rule that
    // cannot be followed any more ends the series after this delivery.
    d.next_known = true;
    if (auto why = unusable(f.rule)) {
      spdlog::error("job {}: {}; its repeat ends with this occurrence", f.job_id, *why);
    } else {
      d.next = next(f.rule, {f.deliver_at, f.repeat}, now_ms, options_.max_catchup);
    }
  }
  return d;
}

void FirePath::follow_up(const InFlight& f, const storage::Transition& marked) {
  const std::string shard = shard_of(f.slot);
  scheduler_.release(f.slot);
  // Not changed and delay: settled already, by this mark whose answer was lost (the news of a
  // repeat's next occurrence with it) or moved on since (a failed report's retry); held again
  // where Redis says it waits, as the first answer would have.
  if (marked.at <= 0 || (!marked.changed && marked.state != storage::JobState::delay)) return;
  if (marked.changed && marked.state == storage::JobState::delay) ++counters_.repeated;
  // Redis holds the job's next time now: held at once if within the horizon (the loader brings
  // it otherwise), as ingest does for a new job.
  scheduler_.offer(shard, f.job_id, marked.at);
}

void FirePath::retry(InFlight& f, const std::string& error, const FailureAction& action, std::int64_t now_ms) {
  const std::int64_t at = now_ms + action.delay_ms;
  // An outage fails every record in flight: those are logged once by the service, not per job;
  // a missing topic once per topic (note_missing_topic). Counted failures (Kafka refused the
  // record) get one line per 10 s with the number of them, however many jobs they hit.
  spdlog::debug("job {}: attempt {} failed ({}); retrying in {} ms{}", f.job_id, f.attempt, error, action.delay_ms,
                action.refund ? " (not counted)" : "");
  if (!action.refund) {
    if (const std::uint64_t n = refused_log_.note()) {
      spdlog::warn("job {}: attempt {} failed ({}); retrying in {} ms ({} such failures since the last line)", f.job_id,
                   f.attempt, error, action.delay_ms, n);
    }
  }
  try {
    store_.release(shard_of(f.slot), f.job_id, error, at, {action.refund, action.keep_firing}, now_ms);
  } catch (const storage::ShardFenced& e) {
    lose(e.shard);  // the new owner's in-flight entry and schedule stand; retry_at() lets go
  }
  scheduler_.retry_at(f.slot, at);
  if (action.refund) {
    ++counters_.retried_outage;
  } else {
    ++counters_.retried;
  }
}
}  // namespace delayd::broker

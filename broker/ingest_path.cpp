#include "broker/ingest_path.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "broker/dead_letter.hpp"
#include "broker/delivery_tags.hpp"
#include "broker/header_convert.hpp"
#include "connectors/kafka_error.hpp"
#include "contract/peer_formats.hpp"
#include "telemetry/log_scope.hpp"

namespace delayd::broker {

namespace {

std::int64_t steady_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// How often reports that wait for their job's delivery to settle are tried again, and for how long.
constexpr std::int64_t kReportRetryMs = 20;
constexpr std::int64_t kReportWaitMaxMs = 120'000;

std::string position(const connectors::Record& rec) {
  return rec.topic + "/" + std::to_string(rec.partition) + "/" + std::to_string(rec.offset);
}

// A batch's records as a Batch knows them: its first and last record and how many. Two reads
// that agree on these are the same records (offsets of a partition only grow within a batch).
// The first record alone is not enough: after a rebalance the same offset may start a longer or
// shorter read, and neither a resume point nor "processed" of the one holds for the other.
std::string span_of(std::span<const connectors::Record> batch) {
  return position(batch.front()) + ".." + position(batch.back()) + "#" + std::to_string(batch.size());
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

namespace {

// Flushes the wheel feed when a public call of IngestPath ends, however it ends: the owner is
// woken once for what the call handed over (WheelFeed::flush()).
struct FlushOnExit {
  WheelFeed& feed;
  ~FlushOnExit() { feed.flush(); }
};

}  // namespace

IngestPath::IngestPath(WheelFeed& wheel, storage::JobStore& store, connectors::KafkaProducer& producer,
                       TopicCreator* topics, IngestOptions options)
    : wheel_(wheel),
      posting_store_(store),
      producer_(producer),
      topics_(topics),
      options_(std::move(options)),
      send_ahead_(options_.send_ahead && !(options_.wait_on != nullptr && options_.wait_replicas > 0)) {}

IngestPath::Batch& IngestPath::batch_for(std::span<const connectors::Record> batch) {
  const std::string records = span_of(batch);
  for (Batch& b : batches_) {
    if (!b.processed && b.records == records) return b;  // a retry after an outage
  }
  // Batches the caller gave up on (their partitions were revoked): their records will be read
  // again by their owner, so their offsets must never be committed. A posted batch is not one.
  for (Batch& b : batches_) {
    const bool posted = std::any_of(posted_.begin(), posted_.end(), [&](const Posted& p) { return p.batch == b.id; });
    if (b.processed || posted) continue;
    b.offsets.clear();
    b.processed = true;
  }
  Batch b;
  b.id = ++batch_seq_;
  b.offsets = next_offsets(batch);
  b.records = records;
  batches_.push_back(std::move(b));
  return batches_.back();
}

bool IngestPath::processed(std::span<const connectors::Record> batch) const {
  const std::string records = span_of(batch);
  return std::any_of(batches_.begin(), batches_.end(),
                     [&](const Batch& b) { return b.records == records && b.processed; });
}

IngestPath::Batch& IngestPath::batch_by_id(std::uint64_t id) {
  for (Batch& b : batches_) {
    if (b.id == id) return b;
  }
  throw std::logic_error("ingest: batch " + std::to_string(id) + " is not known");
}

void IngestPath::process(std::span<const connectors::Record> batch, std::int64_t now_ms) {
  const FlushOnExit flush{wheel_};
  Batch& b = batch_for(batch);
  accepts_.clear();
  accept_traces_.clear();
  reports_.clear();
  for (std::size_t i = b.resume; i < batch.size(); ++i) {
    const connectors::Record& rec = batch[i];
    if (!options_.status_topic.empty() && rec.topic == options_.status_topic) {
      contract::ParsedStatus status = contract::parse_status(rec);
      if (auto* r = std::get_if<contract::StatusReport>(&status)) {
        reports_.push_back({std::move(*r), rec.partition});
      } else if (b.dead_lettered.insert(i).second) {
        dead_letter(b, rec, std::get<contract::Invalid>(status).reason, DeadLetterReason::invalid_status);
      }
      continue;
    }
    contract::ParsedIngest parsed = parse(rec);
    DeadLetterReason why_dead = DeadLetterReason::invalid_record;
    if (auto* job = std::get_if<contract::ScheduleJob>(&parsed)) {
      if (auto why = refuse_topic(*job)) {
        parsed = contract::Invalid{std::move(*why)};
        why_dead = DeadLetterReason::topic_refused;
      }
    }
    if (auto* job = std::get_if<contract::ScheduleJob>(&parsed)) {
      storage::NewJob j;
      j.job_id = std::move(job->job_id);
      j.deliver_at = job->deliver_at_ms;
      j.business = std::move(job->business);
      j.shard = storage::shard_id(rec.topic, rec.partition);
      j.key = std::move(job->key);
      j.value = std::move(job->value);
      j.headers = to_stored(job->carried);
      j.repeat = job->repeat;
      j.max_lateness = std::chrono::milliseconds(job->max_lateness_ms);
      j.redrive_count = job->redrive_count;
      if (job->upsert) j.version = rec.offset;
      if (options_.tracer != nullptr) {
        AcceptTrace t{{}, trace_context(rec.headers), telemetry::wall_now(), rec.topic, rec.partition, rec.offset};
        t.context = t.parent ? options_.tracer->child_of(*t.parent) : options_.tracer->new_trace(std::nullopt);
        accept_traces_.push_back(std::move(t));
      }
      accepts_.push_back(std::move(j));
    } else if (auto* c = std::get_if<contract::CancelJob>(&parsed)) {
      const std::string shard = storage::shard_id(rec.topic, rec.partition);
      if (unwritten_schedule(shard, c->job_id)) {
        // Its job came earlier in this batch and is not written yet: the cancel goes first, into
        // this shard only, and the job is then accepted straight into cancelled. Written the
        // other way round, a job already due (a job and its cancel read late together, after an
        // outage) would be offered to the wheel, whose owner could claim it before the cancel's
        // round trip. A crash between the two writes replays both: the same outcome.
        cancel(shard, c->job_id, rec.offset, now_ms, CancelScope::own_shard);
        flush_accepts(b, i, now_ms);
      } else {
        flush_accepts(b, i, now_ms);  // a cancel applies to what came before it in the partition
        cancel(shard, c->job_id, rec.offset, now_ms, CancelScope::anywhere);
      }
      b.resume = i + 1;
    } else if (auto* r = std::get_if<contract::RescheduleJob>(&parsed)) {
      flush_accepts(b, i, now_ms);  // like a cancel: after what came before it
      reschedule(storage::shard_id(rec.topic, rec.partition), *r, now_ms);
      b.resume = i + 1;
    } else if (auto* ignored = std::get_if<contract::Ignored>(&parsed)) {
      ++counters_.ignored;
      spdlog::debug("ingest record {} left alone: {}", position(rec), ignored->why);
    } else if (auto* dropped = std::get_if<contract::Dropped>(&parsed)) {
      if (b.dead_lettered.insert(i).second) {
        ++counters_.dropped;
        spdlog::info("schedule {} dropped: {}", dropped->job_id, dropped->reason);
        tombstone(b, rec, "dropped");
      }
    } else if (b.dead_lettered.insert(i).second) {
      dead_letter(b, rec, std::get<contract::Invalid>(parsed).reason, why_dead);
      if (rec.key && !rec.key->empty() && format_of(rec.topic) == config::IngestFormat::etf1) {
        tombstone(b, rec, "invalid");
      }
    }
  }
  if (send_ahead_ && !accepts_.empty() && reports_.empty()) {
    post_accepts(b, batch.size(), now_ms);  // processed once collected
    return;
  }
  flush_accepts(b, batch.size(), now_ms);
  wait_for_replicas(b, batch.size());
  b.processed = true;
}

void IngestPath::post_accepts(Batch& b, std::size_t end, std::int64_t now_ms) {
  Posted p;
  p.batch = b.id;
  p.end = end;
  p.jobs = std::move(accepts_);
  p.traces = std::move(accept_traces_);
  accepts_.clear();
  accept_traces_.clear();
  try {
    p.call = posting_store_.accept_post(p.jobs, now_ms);
  } catch (...) {
    abandon();
    throw;
  }
  posted_.push_back(std::move(p));
  // Redis has this batch queued behind the one before while its replies are read and applied.
  while (posted_.size() > 1) collect_one();
}

void IngestPath::collect_one() {
  Posted& p = posted_.front();
  std::vector<storage::AcceptOutcome> outcomes;
  try {
    outcomes = posting_store_.accept_collect(p.call);
  } catch (...) {
    abandon();
    throw;
  }
  Batch& b = batch_by_id(p.batch);
  apply_accepts(b, p.jobs, p.traces, outcomes);
  b.resume = p.end;
  b.processed = true;
  posted_.pop_front();
}

void IngestPath::settle() {
  const FlushOnExit flush{wheel_};
  while (!posted_.empty()) collect_one();
}

storage::JobStore& IngestPath::store() {
  settle();
  return posting_store_;
}

void IngestPath::abandon() noexcept {
  posted_.clear();
  posting_store_.abandon_posts();
}

void IngestPath::wait_for_replicas(Batch& b, std::size_t end) {
  if (options_.wait_on == nullptr || options_.wait_replicas <= 0 || b.replicated >= end) return;
  try {
    options_.wait_on->wait_replicas(options_.wait_replicas, options_.wait_timeout_ms);
  } catch (const redis::RedisIoError&) {
    // Write it all again on the retry (idempotent): a new primary may lack some of it, and a
    // write it already has costs nothing. Dead-letter copies are not sent twice.
    b.resume = b.replicated;
    throw;
  }
  b.replicated = end;
}

config::IngestFormat IngestPath::format_of(std::string_view topic) const {
  const auto it = options_.formats.find(topic);
  return it == options_.formats.end() ? config::IngestFormat::delayd : it->second;
}

contract::ParsedIngest IngestPath::parse(const connectors::Record& rec) const {
  switch (format_of(rec.topic)) {
    case config::IngestFormat::etf1:
      return contract::parse_etf1(rec, options_.rules);
    case config::IngestFormat::chronos:
      return contract::parse_chronos(rec, options_.rules);
    case config::IngestFormat::delayd:
      break;
  }
  return contract::parse_ingest(rec, options_.rules);
}

void IngestPath::tombstone(Batch& b, const connectors::Record& rec, std::string_view why) {
  DeadLetter d;
  d.batch = b.id;
  d.record = contract::etf1_tombstone(rec.topic, rec.partition, rec.key.value_or(""), why);
  ++b.outstanding;
  send(std::move(d));
}

std::optional<std::string> IngestPath::refuse_topic(const contract::ScheduleJob& job) {
  if (topics_ == nullptr || topics_->request(job.ready_topic)) return std::nullopt;
  return "business '" + job.business + "' needs ready topic " + job.ready_topic +
         ", and delayd has already asked for " + std::to_string(topics_->requested()) +
         " ready topics (kafka.max_ready_topics); create the topic yourself or raise the limit";
}

void IngestPath::flush_accepts(Batch& b, std::size_t next, std::int64_t now_ms) {
  settle();  // what was posted before runs first, as it was read first
  flush_reports(b, now_ms);
  if (!accepts_.empty()) {
    const auto outcomes = store().accept(accepts_, now_ms);
    apply_accepts(b, accepts_, accept_traces_, outcomes);
    accepts_.clear();
    accept_traces_.clear();
  }
  b.resume = next;
}

void IngestPath::apply_accepts(Batch& b, const std::vector<storage::NewJob>& jobs, std::vector<AcceptTrace>& traces,
                               const std::vector<storage::AcceptOutcome>& outcomes) {
  const bool traced = options_.tracer != nullptr && traces.size() == jobs.size();
  for (size_t i = 0; i < outcomes.size(); ++i) {
    const telemetry::LogScope scope(traced ? &traces[i].context : nullptr);
    if (accepted(jobs[i], outcomes[i], b.id)) ++b.outstanding;  // its offset waits
    if (traced) options_.tracer->end(accept_span(traces[i], jobs[i], outcomes[i]));
  }
}

bool IngestPath::accepted(const storage::NewJob& job, const storage::AcceptOutcome& o, std::uint64_t batch) {
  using storage::AcceptKind;
  switch (o.kind) {
    case AcceptKind::created:
      ++counters_.accepted;
      break;
    case AcceptKind::again:
      ++counters_.accepted;
      spdlog::info("job {} scheduled again: its earlier job was delivered or final", job.job_id);
      break;
    case AcceptKind::updated:
      ++counters_.upserted;
      spdlog::debug("job {} updated to {}", job.job_id, o.deliver_at);
      break;
    case AcceptKind::cancelled_early:
      ++counters_.cancelled;
      spdlog::info("job {} arrived after its cancel: accepted as cancelled, never delivered", job.job_id);
      break;
    case AcceptKind::in_flight:
      // Its delivery is under way: applied once that settles (retry_waiting()), its offset held.
      waiting_upserts_.push_back({job, batch});
      return true;
    case AcceptKind::existed:
      ++counters_.duplicates;
      break;
  }
  // Hold it if it is due within the horizon: the ingest half of the horizon invariant. An
  // existing job is offered too (a replay after a crash may be the only way it gets held); a
  // job that moved is moved (offer() holds it once, whatever time it had).
  if (o.state == storage::JobState::delay) {
    if (o.kind == AcceptKind::updated || o.kind == AcceptKind::again) {
      wheel_.move(job.shard, job.job_id, o.deliver_at);
    } else {
      wheel_.offer(job.shard, job.job_id, o.deliver_at);
    }
  }
  return false;
}

bool IngestPath::unwritten_schedule(const std::string& shard, const std::string& job_id) const {
  bool found = false;
  for (const storage::NewJob& j : accepts_) {
    if (j.job_id != job_id || j.shard != shard) continue;
    if (j.version) return false;  // an upsert: accepted after a cancel it would be a new job
    found = true;
  }
  return found;
}

void IngestPath::cancel(const std::string& shard, const std::string& job_id, std::int64_t offset, std::int64_t now_ms,
                        CancelScope scope) {
  const storage::Transition t = scope == CancelScope::own_shard
                                    ? store().cancel(shard, job_id, now_ms, options_.cancel_memory_s, offset)
                                    : store().cancel_anywhere(shard, job_id, now_ms, options_.cancel_memory_s, offset);
  if (t.changed && t.state == storage::JobState::in_flight) {
    ++counters_.cancelled;
    spdlog::info("job {} cancelled: an occurrence is on its way, the series ends after it", job_id);
  } else if (t.changed) {
    wheel_.cancel(t.shard.empty() ? shard : t.shard, job_id);
    ++counters_.cancelled;
    spdlog::info("job {} cancelled", job_id);
  } else if (t.state == storage::JobState::missing && scope == CancelScope::own_shard) {
    spdlog::debug("cancel for job {} written before the job, read just before it", job_id);
  } else if (t.state == storage::JobState::missing) {
    spdlog::info("cancel for unknown job {}: remembered for {} s in case the job arrives", job_id,
                 options_.cancel_memory_s);
  } else {
    spdlog::info("cancel for job {} had no effect: it is {}", job_id, storage::to_string(t.state));
  }
}

void IngestPath::reschedule(const std::string& shard, const contract::RescheduleJob& r, std::int64_t now_ms) {
  const storage::Transition t = store().reschedule_anywhere(shard, r.job_id, r.deliver_at_ms, now_ms);
  if (t.changed) {
    // The owner moves the timer when it reads the wake list; if that is us, at once.
    wheel_.move(t.shard, r.job_id, r.deliver_at_ms);
    ++counters_.rescheduled;
    spdlog::info("job {} rescheduled to {}", r.job_id, r.deliver_at_ms);
  } else if (t.state == storage::JobState::in_flight) {
    ++counters_.reschedules_late;
    spdlog::info("reschedule for job {} too late: its delivery is under way", r.job_id);
  } else {
    ++counters_.reschedules_missed;
    spdlog::info("reschedule for job {} had no effect: it is {}", r.job_id, storage::to_string(t.state));
  }
}

void IngestPath::flush_reports(Batch& b, std::int64_t now_ms) {
  if (reports_.empty()) return;
  const std::vector<bool> wait = apply_reports(reports_, now_ms);  // may throw: the batch is read again
  for (size_t i = 0; i < reports_.size(); ++i) {
    if (!wait[i]) continue;
    waiting_reports_.push_back({std::move(reports_[i]), b.id, steady_ms()});
    ++b.outstanding;  // its offset waits for it
  }
  reports_.clear();
}

void IngestPath::retry_waiting(std::int64_t now_ms) {
  if ((waiting_reports_.empty() && waiting_upserts_.empty()) || steady_ms() < next_report_retry_) return;
  const FlushOnExit flush{wheel_};
  next_report_retry_ = steady_ms() + kReportRetryMs;
  if (!waiting_upserts_.empty()) {
    std::vector<storage::NewJob> again;
    again.reserve(waiting_upserts_.size());
    for (const auto& w : waiting_upserts_) again.push_back(w.job);
    const auto outcomes = store().accept(again, now_ms);  // may throw: all stay waiting
    std::vector<WaitingUpsert> waiting = std::move(waiting_upserts_);
    waiting_upserts_.clear();
    for (size_t i = 0; i < waiting.size(); ++i) {
      if (!accepted(waiting[i].job, outcomes[i], waiting[i].batch)) settle_batch(waiting[i].batch);
    }
  }
  if (waiting_reports_.empty()) return;
  std::vector<ReadReport> again;
  again.reserve(waiting_reports_.size());
  for (const auto& w : waiting_reports_) again.push_back(w.report);
  const std::vector<bool> wait = apply_reports(again, now_ms);  // may throw: all stay waiting
  std::vector<WaitingReport> still;
  for (size_t i = 0; i < waiting_reports_.size(); ++i) {
    WaitingReport& w = waiting_reports_[i];
    if (wait[i] && steady_ms() - w.since_ms < kReportWaitMaxMs) {
      still.push_back(std::move(w));
      continue;
    }
    if (wait[i]) {
      ++counters_.reports_ignored;
      spdlog::warn("report '{}' for job {} dropped: the job stayed in flight for {} s",
                   to_string(w.report.report.status), w.report.report.job_id, kReportWaitMaxMs / 1000);
    }
    settle_batch(w.batch);
  }
  waiting_reports_ = std::move(still);
}

void IngestPath::settle_batch(std::uint64_t batch) {
  for (auto& b : batches_) {
    if (b.id == batch) --b.outstanding;
  }
}

std::vector<bool> IngestPath::apply_reports(const std::vector<ReadReport>& read, std::int64_t now_ms) {
  std::vector<std::string> ids;
  std::vector<std::int32_t> likely;
  ids.reserve(read.size());
  likely.reserve(read.size());
  for (const auto& r : read) {
    ids.push_back(r.report.job_id);
    likely.push_back(r.partition);
  }
  const auto located = store().locate(ids, likely);
  std::vector<storage::Report> reports;
  std::vector<std::string> where;
  reports.reserve(read.size());
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (size_t i = 0; i < read.size(); ++i) {
    const contract::StatusReport& s = read[i].report;
    const config::BusinessPolicy& p = options_.policies.of(located[i] ? located[i]->business : std::string());
    storage::Report r;
    r.job_id = s.job_id;
    r.status = s.status;
    r.error = s.error;
    const auto after = s.retry_after_ms ? std::optional(std::chrono::milliseconds(*s.retry_after_ms)) : std::nullopt;
    // The backoff doubles with the attempt the report is about: its echo when it has one. The
    // record's attempt alone can lag behind it: read before the mark of that delivery lands (the
    // report then applies after it, with the backoff of the attempt before: too short).
    const int attempt = std::max({located[i] ? located[i]->attempt : 1, s.attempt, 1});
    r.retry_at = p.retry_at(attempt, now_ms, after, unit(jitter_));
    r.max_attempts = p.max_process_attempts;
    r.ack_timeout = p.ack_timeout;
    r.attempt = s.attempt;
    reports.push_back(std::move(r));
    where.push_back(located[i] ? located[i]->shard : std::string());
  }
  const auto outcomes = store().report(reports, where, now_ms);
  std::vector<bool> wait(outcomes.size(), false);
  for (size_t i = 0; i < outcomes.size(); ++i) {
    const auto& o = outcomes[i];
    if (o.verdict == storage::ReportOutcome::Verdict::wait) {
      wait[i] = true;
      continue;
    }
    count(read[i].report, o);
    // A failed job due again: if its shard is ours, its timer moves now (others read the wake list).
    if (o.verdict == storage::ReportOutcome::Verdict::applied && o.state == storage::JobState::delay) {
      wheel_.move(o.shard, read[i].report.job_id, o.due_at);
    }
  }
  return wait;
}

void IngestPath::count(const contract::StatusReport& report, const storage::ReportOutcome& o) {
  using Verdict = storage::ReportOutcome::Verdict;
  if (o.verdict == Verdict::unknown) {
    ++counters_.reports_unknown;
    // One line per 10 s at most: a storm of stray reports must not flood the log.
    ++unknown_unlogged_;
    const auto now = std::chrono::steady_clock::now();
    if (now >= next_unknown_log_) {
      spdlog::info("report '{}' for unknown job {} ({} reports for unknown jobs since the last such line)",
                   to_string(report.status), report.job_id, unknown_unlogged_);
      unknown_unlogged_ = 0;
      next_unknown_log_ = now + std::chrono::seconds(10);
    }
    return;
  }
  if (o.verdict == Verdict::ignored) {
    ++counters_.reports_ignored;
    spdlog::debug("report for job {} ignored: it is {}", report.job_id, storage::to_string(o.state));
    return;
  }
  switch (report.status) {
    case storage::ReportStatus::running:
      ++counters_.reports_running;
      break;
    case storage::ReportStatus::finished:
      ++counters_.reports_finished;
      break;
    case storage::ReportStatus::failed:
      ++counters_.reports_failed;
      if (o.dead) {
        spdlog::warn("job {} reported failed on its last attempt ({}); it goes to the dead-letter topic", report.job_id,
                     report.error);
      } else if (o.state == storage::JobState::failed) {
        spdlog::warn("job {} reported failed ({}); failed for good, its business keeps no payload", report.job_id,
                     report.error);
      }
      break;
  }
}

void IngestPath::dead_letter(Batch& b, const connectors::Record& rec, const std::string& reason, DeadLetterReason why) {
  spdlog::warn("ingest record {} rejected: {}", position(rec), reason);
  DeadLetter d;
  d.batch = b.id;
  d.record.topic = options_.dlq_topic;
  d.record.key = rec.key;
  d.record.value = rec.value;
  d.record.headers = rec.headers;
  d.record.headers.push_back({std::string(contract::kHeaderError), reason});
  d.record.headers.push_back({std::string(contract::kHeaderReason), std::string(to_string(why))});
  d.record.headers.push_back({std::string(contract::kHeaderSourceTopic), rec.topic});
  d.record.headers.push_back({std::string(contract::kHeaderSourcePartition), std::to_string(rec.partition)});
  d.record.headers.push_back({std::string(contract::kHeaderSourceOffset), std::to_string(rec.offset)});
  ++b.outstanding;
  ++counters_.dead_lettered;
  ++counters_.dead_lettered_by[why];
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
    settle_batch(d.batch);
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
  const std::chrono::milliseconds wait = d.backoff.next();
  d.retry_at = steady_ms() + wait.count();
  spdlog::warn("write to {} failed ({}); trying again in {} ms", d.record.topic, report.error, wait.count());
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

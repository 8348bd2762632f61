#include "broker/fire_path.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>

#include "base/backoff.hpp"
#include "broker/dead_letter.hpp"
#include "broker/delivery_tags.hpp"
#include "broker/header_convert.hpp"
#include "broker/repeat_plan.hpp"
#include "config/config_names.hpp"
#include "connectors/kafka_error.hpp"
#include "contract/ingest_parse.hpp"
#include "contract/peer_formats.hpp"
#include "telemetry/log_scope.hpp"

namespace delayd::broker {

namespace {

using connectors::DeliveryError;

// While Redis is unreachable, claimed-nothing jobs go back to the wheel this far ahead.
constexpr std::int64_t kOutageRequeueMs = 200;
// Batches of the scheduler's fire_batch one fire_due() call takes at most.
constexpr int kMaxFireRounds = 10;
// How often a missing ready topic is asked to be created again while it stays missing, ms.
constexpr std::int64_t kAskAgainMs = 10'000;
// Delivery reports one settle() call handles at most: as many as fire_due() may send.
constexpr std::size_t kSettleBudget = 5000;

connectors::OutRecord ready_record(const storage::Claim& c, const std::string& topic_template) {
  connectors::OutRecord r;
  r.topic = config::render_ready_topic(topic_template, c.business);
  r.key = c.key;
  r.value = c.value;
  r.headers = to_kafka(c.headers);
  r.headers.push_back({std::string(contract::kHeaderBusiness), c.business});
  r.headers.push_back({std::string(contract::kHeaderJobId), c.job_id});
  r.headers.push_back({std::string(contract::kHeaderDeliverAt), std::to_string(c.deliver_at)});
  r.headers.push_back({std::string(contract::kHeaderAttempt), std::to_string(c.attempt)});
  if (c.repeat > 0) r.headers.push_back({std::string(contract::kHeaderRepeat), std::to_string(c.repeat)});
  return r;
}

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

FirePath::FirePath(Scheduler& scheduler, storage::JobStore& store, RecordSink& sink, FireOptions options,
                   FireWorkers workers)
    : scheduler_(scheduler),
      store_(store),
      sink_(sink),
      options_(std::move(options)),
      claimer_(workers.claims),
      marker_(workers.marks) {}

void FirePath::produce(InFlight entry, TagKind kind) {
  const std::uint64_t tag = make_tag(kind, ++seq_);
  entry.record.tag = tag;
  entry.produced_at = std::chrono::steady_clock::now();
  const std::string shard = shard_of(entry.slot);
  auto [it, inserted] = in_flight_.emplace(tag, std::move(entry));
  // A refusal at enqueue time, or a full queue (this thread must not block), comes back through
  // on_report() as the sink reports it, so there is one failure path.
  if (options_.tracer != nullptr && kind == TagKind::ready) {
    produce_traced(it->second, shard);
  } else {
    sink_.produce(it->second.record, shard);
  }
  // In a transaction, an etf1 job's follow-ups ride with its ready record (FireOptions).
  if (kind == TagKind::ready && options_.follow_ups_with_record) {
    if (auto f = in_flight_.find(tag); f != in_flight_.end()) after_etf1_delivery(f->second, shard);
  }
}

void FirePath::produce_traced(InFlight& f, const std::string& shard) {
  f.trace.link = trace_context(f.record.headers);
  f.trace.context = options_.tracer->new_trace(f.trace.link);
  f.trace.start = telemetry::wall_now();
  const TraceHeaders scope(f.record.headers, f.trace.context);  // the producer's are back after it
  sink_.produce(f.record, shard);
}

void FirePath::end_span(InFlight& f, const connectors::DeliveryReport& report) {
  if (options_.tracer == nullptr || f.trace.start.count() == 0) return;
  options_.tracer->end(publish_span(f.trace, {f.job_id, f.business, f.attempt, f.repeat, f.deliver_at}, report));
  f.trace.start = std::chrono::nanoseconds(0);  // ended once, whatever reports follow
}

std::size_t FirePath::send_prepared(std::int64_t now_ms) {
  std::size_t sent = 0;
  const auto stale_before = std::chrono::steady_clock::now() - options_.fence_recheck;
  while (!prepared_.empty() && prepared_.begin()->first <= now_ms) {
    if (prepared_.begin()->second.claimed_at < stale_before) {
      recheck_ = true;  // held too long to trust our fences: fire_due() checks them first
      break;
    }
    const std::int64_t due = prepared_.begin()->first;
    InFlight entry = std::move(prepared_.extract(prepared_.begin()).mapped());
    if (scheduler_.job(entry.slot).orphan) {
      // Its shard was revoked while the record waited: the new owner delivers it (the job is
      // still delay in Redis). Not sending it here saves a duplicate.
      scheduler_.release(entry.slot);
      continue;
    }
    lateness_.observe(static_cast<double>(now_ms - due) / 1000.0);
    produce(std::move(entry), TagKind::ready);
    ++sent;
  }
  counters_.produced += sent;
  return sent;
}

std::optional<std::int64_t> FirePath::next_prepared() const {
  if (prepared_.empty()) return std::nullopt;
  return prepared_.begin()->first;
}

void FirePath::lose(const std::string& shard) {
  store_.drop_shard(shard);
  recovered_.erase(shard);
  sink_.close(shard, true);
  // Told even when the scheduler does not hold it: a shard whose stream was still opening
  // (Ownership's) has just lost that stream, and must be taken again, not left waiting for it.
  if (std::find(lost_.begin(), lost_.end(), shard) == lost_.end()) lost_.push_back(shard);
  if (!scheduler_.owns(shard)) return;
  spdlog::warn("shard {}: another member owns it now (fenced); giving it up", shard);
  scheduler_.revoke(shard);
  ++counters_.fenced;
}

std::vector<std::string> FirePath::take_lost() { return std::exchange(lost_, {}); }

void FirePath::recover(const std::string& shard, const std::vector<LoggedDelivery>& delivered) {
  auto& known = recovered_[shard];
  known.clear();
  for (const auto& d : delivered) known[d.job_id] = d;
  if (known.empty()) recovered_.erase(shard);
}

std::vector<int> FirePath::known_delivered(const std::vector<Scheduler::Slot>& slots,
                                           const std::vector<size_t>& index) const {
  std::vector<int> out;
  if (recovered_.empty() || index.empty()) return out;
  const auto shard = recovered_.find(shard_of(slots[index.front()]));
  if (shard == recovered_.end()) return out;
  out.reserve(index.size());
  for (size_t i : index) {
    const auto it = shard->second.find(scheduler_.job(slots[i]).job_id);
    out.push_back(it == shard->second.end() ? 0 : it->second.attempt);
  }
  return out;
}

bool FirePath::settle_recovered(InFlight& entry, const std::string& shard) {
  const auto known = recovered_.find(shard);
  if (known == recovered_.end()) return false;
  const auto it = known->second.find(entry.job_id);
  if (it == known->second.end()) return false;
  const LoggedDelivery d = std::move(it->second);
  known->second.erase(it);
  if (known->second.empty()) recovered_.erase(known);
  // The claim kept the attempt only if its entry still named the logged one; otherwise the job
  // has moved on since (a later claim of its own) and goes the usual way.
  if (d.attempt != entry.attempt) return false;
  const TagKind kind = d.kind == LoggedDelivery::Kind::dead ? TagKind::failed_dlq : TagKind::ready;
  if (kind == TagKind::failed_dlq) entry.reason = d.reason;
  entry.recovered = true;
  const std::uint64_t tag = make_tag(kind, ++seq_);
  entry.record.tag = tag;
  connectors::DeliveryReport r;
  r.tag = tag;
  r.topic = entry.record.topic;
  r.ok = true;
  in_flight_.emplace(tag, std::move(entry));
  reports_.push_back(std::move(r));
  ++counters_.recovered;
  spdlog::info(
      "job {} (shard {}, attempt {}): its {} is in Kafka already (the shard's delivery log); settled without "
      "producing it again",
      d.job_id, shard, d.attempt, kind == TagKind::ready ? "ready record" : "dead letter");
  return true;
}

void FirePath::recheck_fences() {
  for (const auto& shard : store_.lost_shards()) lose(shard);  // may throw: recheck_ stays set
  const auto now = std::chrono::steady_clock::now();
  for (auto& [at, entry] : prepared_) entry.claimed_at = now;
  recheck_ = false;
}

std::size_t FirePath::fire_due(std::int64_t now_ms) {
  std::size_t produced = apply_claims();  // may throw (an outage): their jobs are back in the wheel
  if (recheck_) recheck_fences();
  produced += send_prepared(now_ms);
  // A burst is taken in several batches of the scheduler's fire_batch, up to kMaxFireRounds per
  // call, so that one call keeps up with tens of thousands due per second; each claim call is
  // short and followed by the sends that fell due, so no record waits behind the rounds.
  for (int round = 0; round < kMaxFireRounds && !stuck(); ++round) {
    if (claims_full()) break;  // Redis has enough to do
    // A round starts when a job falls due within claim_ahead_ms and takes, with it, what falls
    // due up to claim_gather_ms later: under a steady load each shard gets a claim call every
    // claim_gather_ms or so instead of one per Redis round trip (fewer, larger calls: less of
    // Redis's and this process's time per job), and no job is claimed later than without it.
    if (const std::optional<std::int64_t> wait = claim_wait_ms(now_ms); !wait || *wait > 0) break;
    const std::int64_t ahead = options_.claim_ahead_ms + options_.claim_gather_ms;
    const std::vector<Scheduler::Slot> slots = scheduler_.take_due(now_ms, ahead);
    if (slots.empty()) break;
    if (claimer_ != nullptr) {
      submit_claims(slots, now_ms, ahead);
    } else {
      produced += claim_and_dispatch(slots, now_ms, ahead);
    }
    if (slots.size() < scheduler_.fire_batch()) break;
    now_ms = options_.clock();
  }
  return produced;
}

std::optional<std::int64_t> FirePath::claim_wait_ms(std::int64_t now_ms) const {
  const std::optional<std::int64_t> next = scheduler_.next_due();
  if (!next) return std::nullopt;
  // Filed after a round had looked past its time (a job accepted due within the gather): now.
  if (scheduler_.overdue()) return 0;
  return std::max<std::int64_t>(*next - options_.claim_ahead_ms - now_ms, 0);
}

std::size_t FirePath::claim_and_dispatch(const std::vector<Scheduler::Slot>& slots, std::int64_t now_ms,
                                         std::int64_t ahead_ms) {
  std::size_t produced = 0;
  std::vector<storage::Claim> claims(slots.size());
  std::vector<bool> claimed(slots.size(), false);
  std::exception_ptr outage;
  for (const auto& [shard, index] : by_shard(slots)) {
    std::vector<std::string> ids;
    std::vector<std::int64_t> due_at;
    ids.reserve(index.size());
    due_at.reserve(index.size());
    for (size_t i : index) {
      ids.push_back(scheduler_.job(slots[i]).job_id);
      due_at.push_back(scheduler_.job(slots[i]).due_at);
    }
    const std::vector<int> delivered = known_delivered(slots, index);
    try {
      auto got = store_.claim(scheduler_.shard_name(shard), ids, now_ms, ahead_ms, due_at, delivered);
      for (size_t k = 0; k < index.size(); ++k) {
        claims[index[k]] = std::move(got[k]);
        claimed[index[k]] = true;
      }
      produced += send_prepared(options_.clock());  // those claimed earlier that fell due meanwhile
    } catch (const storage::ShardFenced& e) {
      // Not ours any more: nothing of this call was claimed, and the new owner delivers them.
      lose(e.shard);
      for (size_t i : index) scheduler_.release(slots[i]);
    } catch (...) {
      // Not claimed, not produced: they stay due. Back into the wheel, shortly. The shards
      // claimed before the failure are dispatched below; the error is raised after that.
      for (size_t i : index) scheduler_.retry_at(slots[i], now_ms + kOutageRequeueMs);
      outage = std::current_exception();
    }
  }

  produced += dispatch(slots, claims, claimed, now_ms);
  if (outage) std::rethrow_exception(outage);
  return produced;
}

void FirePath::submit_claims(const std::vector<Scheduler::Slot>& slots, std::int64_t now_ms, std::int64_t ahead_ms) {
  const std::uint64_t round = ++stage_seq_;
  for (const auto& [shard, index] : by_shard(slots)) {
    ClaimRequest r;
    r.id = ++stage_seq_;
    r.shard = scheduler_.shard_name(shard);
    r.now_ms = now_ms;
    r.ahead_ms = ahead_ms;
    r.fence = store_.fence(r.shard);
    PendingClaim pc;
    pc.now_ms = now_ms;
    pc.round = round;
    ++rounds_[round];
    for (size_t i : index) {
      r.job_ids.push_back(scheduler_.job(slots[i]).job_id);
      r.due_at.push_back(scheduler_.job(slots[i]).due_at);
      pc.slots.push_back(slots[i]);
    }
    r.delivered = known_delivered(slots, index);
    claims_.emplace(r.id, std::move(pc));
    claimer_->submit(std::move(r));
  }
}

std::size_t FirePath::apply_claims() {
  if (claimer_ == nullptr) return 0;
  std::size_t produced = 0;
  std::exception_ptr outage;
  for (ClaimResult& r : claimer_->take_done()) {
    auto it = claims_.find(r.id);
    if (it == claims_.end()) continue;
    PendingClaim pc = std::move(it->second);
    claims_.erase(it);
    if (auto round = rounds_.find(pc.round); round != rounds_.end() && --round->second == 0) rounds_.erase(round);
    if (r.error) {
      try {
        std::rethrow_exception(r.error);
      } catch (const storage::ShardFenced& e) {
        // Not ours any more: nothing of this call was claimed, and the new owner delivers them.
        lose(e.shard);
        for (auto slot : pc.slots) scheduler_.release(slot);
      } catch (...) {
        // Not claimed, not produced: they stay due. Back into the wheel, shortly.
        for (auto slot : pc.slots) scheduler_.retry_at(slot, pc.now_ms + kOutageRequeueMs);
        if (!outage) outage = std::current_exception();
      }
      continue;
    }
    const std::vector<bool> claimed(pc.slots.size(), true);
    produced += dispatch(pc.slots, r.claims, claimed, options_.clock());
  }
  if (outage) std::rethrow_exception(outage);
  return produced;
}

std::size_t FirePath::dispatch(const std::vector<Scheduler::Slot>& slots, std::vector<storage::Claim>& claims,
                               const std::vector<bool>& claimed, std::int64_t now_ms) {
  std::size_t produced = 0;
  // The dispatch loop does no I/O, so it cannot stop half-way through the batch.
  std::vector<Scheduler::Slot> aside_slots;
  std::vector<storage::Claim> aside;
  std::vector<Scheduler::Slot> skip_slots;
  std::vector<storage::JobStore::Delivered> skips;
  for (size_t i = 0; i < slots.size(); ++i) {
    if (!claimed[i]) continue;
    storage::Claim& c = claims[i];
    switch (c.kind) {
      case storage::Claim::Kind::deliver: {
        if (c.redelivery && c.dead_reason.empty()) ++counters_.redelivered;
        InFlight entry{slots[i],
                       c.job_id,
                       c.attempt,
                       c.deliver_at,
                       c.business,
                       c.plain,
                       ready_record(c, options_.ready_topic_template),
                       {},
                       std::chrono::steady_clock::now()};
        entry.repeat = c.repeat;
        entry.rule = std::move(c.rule);
        // An earlier owner's delivery that a takeover found in Kafka: settled, not produced.
        if (!recovered_.empty() && settle_recovered(entry, shard_of(slots[i]))) break;
        // max-lateness-ms: reached too late, it is not delivered (a repeat's occurrence is
        // skipped, any other job dead-lettered as expired).
        const bool expired =
            c.dead_reason.empty() && c.max_lateness.count() > 0 && now_ms > c.deliver_at + c.max_lateness.count();
        if (c.dead_reason.empty() && entry.rule.repeats()) {
          if (auto to = missed(entry, expired, now_ms)) {
            skip_slots.push_back(slots[i]);
            skips.push_back(std::move(*to));
            break;
          }
        }
        if (expired) {
          c.dead_reason = "expired: " + std::to_string(now_ms - c.deliver_at) +
                          " ms past its deliver-at (max-lateness-ms " + std::to_string(c.max_lateness.count()) + ")";
        }
        if (std::string why = c.dead_reason; !why.empty()) {
          spdlog::error("job {}: {}; writing it to {}", c.job_id, why, options_.dlq_topic);
          dead_letter(std::move(entry), std::move(why), false,
                      expired        ? DeadLetterReason::expired
                      : c.redelivery ? DeadLetterReason::ack_timeout
                                     : DeadLetterReason::reported_failed);
          break;
        }
        // Never early: held back until the wall clock reaches deliver_at, or the later time a
        // retry or an ack deadline asks for (send_prepared()). Meanwhile (up to claim_ahead_ms)
        // the producer learns the topic, if it is new to it, so that the record leaves at once.
        sink_.prepare(entry.record.topic, shard_of(slots[i]));
        prepared_.emplace(c.not_before, std::move(entry));
        break;
      }
      case storage::Claim::Kind::early:
        // Our clock is behind the deliver-at Redis holds (only possible if they disagree, e.g.
        // after the wall clock stepped back): wait for it, never deliver early.
        scheduler_.retry_at(slots[i], c.deliver_at);
        break;
      case storage::Claim::Kind::finished:
      case storage::Claim::Kind::corrupt:
      case storage::Claim::Kind::unreadable:
        aside_slots.push_back(slots[i]);
        aside.push_back(std::move(c));
        break;
    }
  }
  skip_missed(skip_slots, skips, now_ms);
  set_aside(aside_slots, aside, now_ms);
  produced += send_prepared(now_ms);
  return produced;
}

std::vector<std::pair<std::uint32_t, std::vector<size_t>>> FirePath::by_shard(
    const std::vector<Scheduler::Slot>& slots) const {
  std::map<std::uint32_t, std::vector<size_t>> groups;
  for (size_t i = 0; i < slots.size(); ++i) groups[scheduler_.job(slots[i]).shard].push_back(i);
  std::vector<std::pair<std::uint32_t, std::vector<size_t>>> out;
  const size_t per_call = std::max<size_t>(options_.jobs_per_call, 1);
  for (auto& [shard, index] : groups) {
    for (size_t from = 0; from < index.size(); from += per_call) {
      const auto first = index.begin() + static_cast<std::ptrdiff_t>(from);
      out.emplace_back(shard, std::vector<size_t>(
                                  first, first + static_cast<std::ptrdiff_t>(std::min(per_call, index.size() - from))));
    }
  }
  return out;
}

bool FirePath::still_ours(Scheduler::Slot slot) {
  const std::string shard = shard_of(slot);
  if (scheduler_.job(slot).orphan || !scheduler_.owns(shard)) return false;
  const auto lost = store_.lost_shards();  // one round trip; dead letters are rare
  for (const auto& l : lost) lose(l);
  return std::find(lost.begin(), lost.end(), shard) == lost.end();
}

std::string FirePath::shard_of(Scheduler::Slot slot) const { return scheduler_.shard_name(scheduler_.job(slot).shard); }

void FirePath::set_aside(const std::vector<Scheduler::Slot>& slots, const std::vector<storage::Claim>& claims,
                         std::int64_t now_ms) {
  if (slots.empty()) return;
  std::map<std::uint32_t, std::vector<storage::Claim>> by_shard;
  for (size_t i = 0; i < slots.size(); ++i) by_shard[scheduler_.job(slots[i]).shard].push_back(claims[i]);
  try {
    for (const auto& [shard, list] : by_shard) store_.set_aside(scheduler_.shard_name(shard), list, now_ms);
  } catch (const storage::ShardFenced& e) {
    // The new owner meets them again and sets them aside itself.
    lose(e.shard);
    for (auto s : slots) scheduler_.release(s);
    return;
  } catch (...) {
    // Redis went away: meet them again shortly (every step of set_aside may be repeated).
    for (auto s : slots) scheduler_.retry_at(s, now_ms + kOutageRequeueMs);
    throw;
  }
  for (size_t i = 0; i < slots.size(); ++i) {
    const storage::Claim& c = claims[i];
    if (c.kind == storage::Claim::Kind::unreadable && c.kept) {
      // Redis could not move it aside (its quarantine hash is unwritable): meet it again later.
      spdlog::debug("job {} not set aside yet: {}", c.job_id, c.reason);
      scheduler_.retry_at(slots[i], now_ms + kOutageRequeueMs);
      continue;
    }
    if (c.kind == storage::Claim::Kind::finished) {
      ++counters_.dropped_stale;
    } else {
      // Logged once: the job is failed (or its entry quarantined) now, so it is not met again.
      spdlog::error("job {} set aside: {}", c.job_id, c.reason);
      ++counters_.set_aside;
      if (c.kind == storage::Claim::Kind::corrupt) ++counters_.failed;
    }
    scheduler_.release(slots[i]);
  }
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
      // Nothing known written: the reports go round again (a mark is safe to repeat).
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
    if (!marked[k].changed && marked[k].state != storage::JobState::ready) {
      spdlog::warn("job {} delivered but found in state {} (not marked ready)", it->second.job_id,
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
    sink_.produce(r, shard);  // a failure is reported, and told (on_report())
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
    if (const auto was = missing_topics_.delivered(reports_[i].topic)) {
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
    missing_for = note_missing_topic(f.record.topic, now_ms);
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

std::chrono::milliseconds FirePath::note_missing_topic(const std::string& topic, std::int64_t now_ms) {
  MissingTopics::Entry& e = missing_topics_.failed(topic, now_ms);
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

std::optional<storage::JobStore::Delivered> FirePath::missed(const InFlight& f, bool expired,
                                                             std::int64_t now_ms) const {
  if (unusable(f.rule)) return std::nullopt;  // delivered (or dead-lettered if expired); the series ends
  const storage::Occurrence due{f.deliver_at, f.repeat};
  const auto to =
      expired ? std::optional(after_expired(f.rule, due, now_ms, options_.max_catchup)) : skip(f.rule, due, now_ms);
  if (!to) return std::nullopt;
  storage::JobStore::Delivered d{f.job_id, f.deliver_at, f.attempt, f.business, storage::JobStore::Mode::drop, {}, 0};
  d.next_known = true;
  d.next = *to;
  d.skip = true;
  return d;
}

void FirePath::skip_missed(const std::vector<Scheduler::Slot>& slots,
                           const std::vector<storage::JobStore::Delivered>& jobs, std::int64_t now_ms) {
  std::map<std::uint32_t, std::vector<size_t>> groups;
  for (size_t i = 0; i < slots.size(); ++i) groups[scheduler_.job(slots[i]).shard].push_back(i);
  for (const auto& [shard, index] : groups) {
    const std::string name = scheduler_.shard_name(shard);
    std::vector<storage::JobStore::Delivered> list;
    for (size_t i : index) list.push_back(jobs[i]);
    try {
      const auto result = store_.mark_ready(name, std::span<const storage::JobStore::Delivered>(list), now_ms);
      for (size_t k = 0; k < index.size(); ++k) {
        scheduler_.release(slots[index[k]]);
        if (!result[k].changed) continue;
        ++counters_.skipped;
        // Where the series goes on (at once for catch-up latest), or nowhere: failed.
        if (result[k].state == storage::JobState::delay && result[k].at > 0) {
          scheduler_.offer(name, list[k].job_id, result[k].at);
        }
      }
    } catch (const std::exception& e) {
      // Redis went away: claimed again shortly, and skipped then (nothing was produced).
      spdlog::debug("skipping missed occurrences of shard {} failed: {}", name, e.what());
      for (size_t i : index) scheduler_.retry_at(slots[i], now_ms + kOutageRequeueMs);
    }
  }
}

void FirePath::follow_up(const InFlight& f, const storage::Transition& marked) {
  const std::string shard = shard_of(f.slot);
  scheduler_.release(f.slot);
  if (!marked.changed || marked.at <= 0) return;
  if (marked.state == storage::JobState::delay) ++counters_.repeated;
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

// FirePath's first half (fire_path.hpp): from "the wheel says it is due" to a record handed to the
// sink. Claims in Redis ahead of the due time (submit_claims(), apply_claims()), dispatch of each
// claim (produce, skip a missed repeat, set aside what cannot be sent), takeover recovery from
// the delivery log (recover(), settle_recovered()), and losing a shard. The second half, what a
// delivery report leads to, is fire_settle.cpp.
#include "broker/fire_path.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>

#include "broker/dead_letter.hpp"
#include "broker/delivery_tags.hpp"
#include "broker/header_convert.hpp"
#include "broker/repeat_plan.hpp"
#include "config/config_names.hpp"
#include "contract/ingest_parse.hpp"

namespace delayd::broker {

namespace {

// While Redis is unreachable, claimed-nothing jobs go back to the wheel this far ahead.
constexpr std::int64_t kOutageRequeueMs = 200;
// Batches of the scheduler's fire_batch one fire_due() call takes at most.
constexpr int kMaxFireRounds = 10;

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

}  // namespace

FirePath::FirePath(Scheduler& scheduler, storage::JobStore& store, RecordSink& sink, FireOptions options,
                   FireWorkers workers)
    : scheduler_(scheduler),
      store_(store),
      sink_(sink),
      options_(std::move(options)),
      claimer_(workers.claims),
      marker_(workers.marks) {}

void FirePath::produce(InFlight entry, TagKind kind, std::int64_t late_ms) {
  const std::uint64_t tag = make_tag(kind, ++seq_);
  entry.record.tag = tag;
  entry.produced_at = std::chrono::steady_clock::now();
  const std::string shard = shard_of(entry.slot);
  auto [it, inserted] = in_flight_.emplace(tag, std::move(entry));
  // A refusal at enqueue time, or a full queue (this thread must not block), comes back through
  // on_report() as the sink reports it, so there is one failure path.
  if (options_.tracer != nullptr && kind == TagKind::ready) {
    produce_traced(it->second, shard, late_ms);
  } else {
    sink_.produce(it->second.record, shard, late_ms);
  }
  // In a transaction, an etf1 job's follow-ups ride with its ready record (FireOptions).
  if (kind == TagKind::ready && options_.follow_ups_with_record) {
    if (auto f = in_flight_.find(tag); f != in_flight_.end()) after_etf1_delivery(f->second, shard);
  }
}

void FirePath::produce_traced(InFlight& f, const std::string& shard, std::int64_t late_ms) {
  f.trace.link = trace_context(f.record.headers);
  f.trace.context = options_.tracer->new_trace(f.trace.link);
  f.trace.start = telemetry::wall_now();
  const TraceHeaders scope(f.record.headers, f.trace.context);  // the producer's are back after it
  sink_.produce(f.record, shard, late_ms);
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
    produce(std::move(entry), TagKind::ready, now_ms - due);
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
  // Given up already (Ownership::give_up(), or an earlier lose()): no fence held, not scheduled.
  // The failures of its records still coming back land here one by one (a lost shard's purged
  // queue: one a record); closing its stream again would purge the producer's queue again, every
  // shard's records in it, and say so once a record. A shard whose stream is still opening holds
  // its fence (Ownership takes the fence first), so it is not skipped.
  if (!store_.fence(shard) && !scheduler_.owns(shard)) return;
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

std::vector<storage::KnownDelivery> FirePath::known_delivered(const std::vector<Scheduler::Slot>& slots,
                                                              const std::vector<size_t>& index) const {
  std::vector<storage::KnownDelivery> out;
  if (recovered_.empty() || index.empty()) return out;
  const auto shard = recovered_.find(shard_of(slots[index.front()]));
  if (shard == recovered_.end()) return out;
  out.reserve(index.size());
  for (size_t i : index) {
    const auto it = shard->second.find(scheduler_.job(slots[i]).job_id);
    out.push_back(it == shard->second.end() ? storage::KnownDelivery{}
                                            : storage::KnownDelivery{it->second.attempt, it->second.repeat});
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
  // has moved on since (a later claim of its own, or a repeat's next occurrence, which is attempt
  // 1 again) and goes the usual way.
  if (d.attempt != entry.attempt || d.repeat != entry.repeat) return false;
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
    const std::vector<storage::KnownDelivery> delivered = known_delivered(slots, index);
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
        if (result[k].changed) ++counters_.skipped;
        // Where the series goes on (at once for catch-up latest), or nowhere: failed. Unchanged
        // and delay: where it waits (follow_up() says why).
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

}  // namespace delayd::broker

#include "broker/ownership.hpp"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <exception>

#include "storage/key_schema.hpp"

namespace delayd::broker {

Ownership::Ownership(Options options, const WallClock& clock, Scheduler& scheduler, storage::JobStore& store,
                     FirePath& fire, RecordSink& sink)
    : options_(std::move(options)), clock_(clock), scheduler_(scheduler), store_(store), fire_(fire), sink_(sink) {}

void Ownership::enable_fencing() { store_.enable_fencing(member_name()); }

std::string Ownership::member_name() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) std::snprintf(host, sizeof host, "unknown");
  std::string name = std::string(host) + "/" + std::to_string(::getpid());
  std::replace(name.begin(), name.end(), ' ', '_');
  return name;
}

Handover::Listener Ownership::listener() {
  Handover::Listener h;
  auto& l = h.group;
  l.assigned = [this](const std::vector<connectors::TopicPartition>& tps) {
    for (const auto& tp : tps) {
      if (options_.ingest_topics.count(tp.topic) == 0) continue;
      const std::string shard = storage::shard_id(tp.topic, tp.partition);
      assigned_.insert(shard);
      retake_.erase(shard);
      to_take_.insert(shard);
    }
    ++rebalances_;
  };
  l.revoked = [this](const std::vector<connectors::TopicPartition>& tps) {
    // Records already produced for these shards are settled first (bounded wait), so that
    // the next owner finds them ready instead of producing them again.
    drain_before_revoke();
    for (const auto& tp : tps) {
      if (options_.ingest_topics.count(tp.topic) == 0) continue;
      give_up(storage::shard_id(tp.topic, tp.partition), GiveUp::revoked);
    }
    ++rebalances_;
  };
  l.lost = [this](const std::vector<connectors::TopicPartition>& tps) {
    // Another member may own them already: nothing of theirs may go out from here any more.
    for (const auto& tp : tps) {
      if (options_.ingest_topics.count(tp.topic) == 0) continue;
      give_up(storage::shard_id(tp.topic, tp.partition), GiveUp::lost);
    }
    ++rebalances_;
  };
  h.left = [this](const std::vector<connectors::TopicPartition>& tps) {
    // Nothing can be drained without Redis: the next owner's takeover settles what was in flight.
    for (const auto& tp : tps) {
      if (options_.ingest_topics.count(tp.topic) == 0) continue;
      give_up(storage::shard_id(tp.topic, tp.partition), GiveUp::left);
    }
    ++rebalances_;
  };
  return h;
}

void Ownership::give_up(const std::string& shard, GiveUp why) {
  assigned_.erase(shard);
  to_take_.erase(shard);
  opening_.erase(shard);
  retake_.erase(shard);
  sink_.close(shard, why != GiveUp::revoked);
  fire_.recover(shard, {});
  scheduler_.revoke(shard);
  store_.drop_shard(shard);
  switch (why) {
    case GiveUp::revoked:
      spdlog::info("shard {} revoked", shard);
      break;
    case GiveUp::lost:
      spdlog::warn("shard {} lost (the group took it away without a revoke): nothing of it is sent from here any more",
                   shard);
      break;
    case GiveUp::left:
      spdlog::info(
          "shard {} given up undrained (this instance left its group for want of Redis): nothing of it is sent from "
          "here any more; its next owner settles what was in flight",
          shard);
      break;
  }
}

void Ownership::take_assigned() {
  const auto now = Clock::now();
  for (const auto& shard : fire_.take_lost()) {
    opening_.erase(shard);  // its stream is closed: waiting for it would wait for ever
    if (assigned_.count(shard) != 0 && to_take_.count(shard) == 0) retake_.emplace(shard, now + options_.retake_after);
  }
  for (auto it = retake_.begin(); it != retake_.end();) {
    if (now < it->second) {
      ++it;
      continue;
    }
    if (scheduler_.owns(it->first) || opening_.count(it->first) != 0 || to_take_.count(it->first) != 0) {
      it = retake_.erase(it);  // taken again meanwhile (a new assignment)
      continue;
    }
    spdlog::warn("shard {}: the group still says it is ours {} ms after a fence gave it up; taking it again", it->first,
                 options_.retake_after.count());
    to_take_.insert(it->first);
    ++retaken_;
    it = retake_.erase(it);
  }
  while (!to_take_.empty()) {
    const std::string shard = *to_take_.begin();
    const std::int64_t epoch = store_.take_shard(shard, clock_.now_ms());  // may throw: retried
    std::vector<storage::InFlightEntry> earlier;
    if (options_.takeover_reads) {
      for (auto& e : store_.in_flight_entries(shard)) {  // may throw: taken again, with a larger epoch
        if (e.epoch < epoch) earlier.push_back(std::move(e));
      }
    }
    to_take_.erase(to_take_.begin());
    opening_[shard] = earlier.size();
    sink_.open(shard, std::move(earlier));
  }
  // Streams rebuilt after a failure go on only once Redis confirms our fence (ShardStream).
  if (const auto waiting = sink_.unconfirmed(); !waiting.empty()) {
    const auto lost = store_.lost_shards();  // may throw: asked again next turn
    for (const auto& shard : waiting) {
      if (std::find(lost.begin(), lost.end(), shard) != lost.end()) {
        fire_.lose(shard);
      } else {
        sink_.confirm(shard);
      }
    }
  }
  loading_problem_.clear();
  for (auto it = opening_.begin(); it != opening_.end();) {
    const RecordSink::Opened o = sink_.opened(it->first);
    if (!o.ready) {
      if (loading_problem_.empty() && !o.problem.empty()) {
        loading_problem_ = "shard " + it->first + " waits for its transactions: " + o.problem;
      }
      ++it;
      continue;
    }
    const std::string& shard = it->first;
    fire_.recover(shard, o.delivered);
    scheduler_.assign(shard);
    if (options_.takeover_reads && it->second > 0) {
      spdlog::info(
          "shard {} assigned (epoch {}); of {} jobs an earlier owner had in flight, its delivery log shows {} "
          "delivered (settled without a second record), the others go out again",
          shard, store_.fence(shard).value_or(0), it->second, o.delivered.size());
    } else {
      spdlog::info("shard {} assigned (epoch {})", shard, store_.fence(shard).value_or(0));
    }
    it = opening_.erase(it);
  }
}

std::vector<std::string> Ownership::loading() const {
  std::vector<std::string> out(to_take_.begin(), to_take_.end());
  for (const auto& [shard, n] : opening_) out.push_back(shard);
  for (const auto& shard : scheduler_.owned_shards()) {
    if (!scheduler_.horizon(shard)) out.push_back(shard);
  }
  return out;
}

void Ownership::drain_before_revoke() {
  if (fire_.unsettled() == 0) return;
  try {
    sink_.flush(kDrainMs);
    fire_.settle_all(std::chrono::milliseconds(kDrainMs));
  } catch (const std::exception& e) {
    spdlog::warn("settling before a revoke: {}", e.what());
  }
}

}  // namespace delayd::broker

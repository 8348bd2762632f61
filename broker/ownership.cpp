#include "broker/ownership.hpp"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <exception>

#include "storage/key_schema.hpp"

namespace delayd::broker {

Ownership::Ownership(std::set<std::string, std::less<>> ingest_topics, const WallClock& clock, Scheduler& scheduler,
                     storage::JobStore& store, FirePath& fire, connectors::KafkaProducer& producer)
    : ingest_topics_(std::move(ingest_topics)),
      clock_(clock),
      scheduler_(scheduler),
      store_(store),
      fire_(fire),
      producer_(producer) {}

void Ownership::enable_fencing() { store_.enable_fencing(member_name()); }

std::string Ownership::member_name() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) std::snprintf(host, sizeof host, "unknown");
  std::string name = std::string(host) + "/" + std::to_string(::getpid());
  std::replace(name.begin(), name.end(), ' ', '_');
  return name;
}

connectors::KafkaConsumer::Listener Ownership::listener() {
  connectors::KafkaConsumer::Listener l;
  l.assigned = [this](const std::vector<connectors::TopicPartition>& tps) {
    for (const auto& tp : tps) {
      if (ingest_topics_.count(tp.topic) > 0) to_take_.insert(storage::shard_id(tp.topic, tp.partition));
    }
    ++rebalances_;
  };
  l.revoked = [this](const std::vector<connectors::TopicPartition>& tps) {
    // Records already produced for these shards are settled first (bounded wait), so that
    // the next owner finds them ready instead of producing them again.
    drain_before_revoke();
    for (const auto& tp : tps) {
      if (ingest_topics_.count(tp.topic) == 0) continue;
      const std::string shard = storage::shard_id(tp.topic, tp.partition);
      to_take_.erase(shard);
      scheduler_.revoke(shard);
      store_.drop_shard(shard);
      spdlog::info("shard {} revoked", shard);
    }
    ++rebalances_;
  };
  return l;
}

void Ownership::take_assigned() {
  while (!to_take_.empty()) {
    const std::string shard = *to_take_.begin();
    const std::int64_t epoch = store_.take_shard(shard, clock_.now_ms());  // may throw: retried
    to_take_.erase(to_take_.begin());
    scheduler_.assign(shard);
    spdlog::info("shard {} assigned (epoch {})", shard, epoch);
  }
}

std::vector<std::string> Ownership::loading() const {
  std::vector<std::string> out(to_take_.begin(), to_take_.end());
  for (const auto& shard : scheduler_.owned_shards()) {
    if (!scheduler_.horizon(shard)) out.push_back(shard);
  }
  return out;
}

void Ownership::drain_before_revoke() {
  if (fire_.unsettled() == 0) return;
  try {
    producer_.flush(kDrainMs);
    fire_.settle_all(std::chrono::milliseconds(kDrainMs));
  } catch (const std::exception& e) {
    spdlog::warn("settling before a revoke: {}", e.what());
  }
}

}  // namespace delayd::broker

#include "broker/ingest_pause.hpp"

#include <spdlog/spdlog.h>

namespace delayd::broker {

void IngestPause::apply(bool fire_stuck, std::size_t unsettled, const IngestPath& ingest, std::uint64_t rebalances,
                        connectors::KafkaConsumer& consumer) {
  const bool want = fire_stuck || ingest.backlogged();
  if (want == paused_ && (!want || rebalances == paused_at_rebalance_)) return;
  consumer.set_paused(want);
  if (want && !paused_) {
    spdlog::warn("ingest paused: {} records await Kafka's reports, {} dead letters are unacknowledged", unsettled,
                 ingest.waiting_dead_letters());
  } else if (!want && paused_) {
    spdlog::info("ingest resumed ({} records in flight)", unsettled);
  }
  paused_ = want;
  paused_at_rebalance_ = rebalances;
}

}  // namespace delayd::broker

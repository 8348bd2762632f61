#include "broker/record_sink.hpp"

#include <spdlog/spdlog.h>

namespace delayd::broker {

void IdempotentSink::produce(const connectors::OutRecord& rec, const std::string& /*shard*/, std::int64_t /*late_ms*/) {
  // A full queue is not waited for (the loop must not block): a transient failure, reported like
  // any other, so that there is one failure path.
  try {
    producer_.produce(rec, 0);
  } catch (const connectors::KafkaError& e) {
    connectors::DeliveryReport r;
    r.tag = rec.tag;
    r.topic = rec.topic;
    r.error_class = connectors::DeliveryError::transient;
    r.error = e.what();
    // The handler is the producer's; reach it the way produce() reports a refusal.
    producer_.report_now(r);
  }
}

void IdempotentSink::close(const std::string& shard, bool lost) {
  if (!lost) return;  // revoked: drained before (Ownership), nothing to do
  const int outstanding = producer_.purge_queued();
  if (outstanding > 0) {
    spdlog::warn(
        "shard {} lost: {} records not acknowledged yet; those not sent are purged (produced again by whoever "
        "owns their shard), those already sent may be written (delivered twice)",
        shard, outstanding);
  }
}

}  // namespace delayd::broker

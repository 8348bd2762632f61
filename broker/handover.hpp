// Handover: what the ingest thread gives the scheduling loop's thread, the owner of the wheel.
//
// Two kinds of things cross, each in the order it was given:
//   wheel ops   offer / cancel / move of one job (WheelFeed), queued after the ingest thread's
//               Redis write is acknowledged and applied by the owner at its next drain(); the
//               ingest thread wakes the owner once per batch (flush()) and never waits for them.
//   rebalances  the consumer's assigned / revoked / lost callbacks, which librdkafka runs on the
//               ingest thread (inside poll_batch() or close()), and `left`: the revoke of a member
//               that left its group by itself with nothing drainable (IngestStage, Redis cut off
//               long). relay() queues one and blocks until the
//               owner has run it (serve()), so a revoke is complete (records drained, shards out of
//               the wheel, fences dropped) before librdkafka lets the partitions go, as it was
//               when one thread did everything.
// Wheel ops queued before a rebalance are applied before it (one queue, one order).
//
// THE HORIZON INVARIANT ACROSS THE HANDOVER (broker/scheduler.hpp states it for one thread).
// With ingest on a thread of its own it reads:
//     every pending job of an owned shard due by the shard's horizon is held in the wheel,
//     or its offer is in this queue.
// Why it holds at every instant:
//   - the ingest thread queues an offer only after Redis acknowledged the job; so a job pending in
//     Redis and not held is either in the queue, or was written before the refill that would
//     have read it (then that refill read it), or its acknowledgement is on its way: the reply
//     in the socket, read when the ingest thread posts its next batch or finds nothing to read
//     (send-ahead, ingest_path.hpp; at most one batch's processing later), or before any
//     rebalance is relayed;
//   - drain() offers each job against the shard's horizon at drain time, which is at least the
//     horizon when the job was written (horizons only grow while a shard is owned);
//   - a shard loaded after the offer was queued read Redis after the write, so an offer the
//     scheduler drops because the shard is not loaded yet loses nothing;
//   - a job both read by a refill and offered is held once (Scheduler looks it up first).
// A stale offer (a job that has fired meanwhile and was offered again) costs one claim that
// Redis answers stale; a cancel or move queued after an offer applies after it.
//
// Threading: push side (offer, cancel, move, relay, set_fire_state) on the ingest thread; owner
// side (drain, serve, wait, close) on the loop thread; fire_stuck() and unsettled() anywhere.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "broker/scheduler.hpp"
#include "broker/wheel_feed.hpp"
#include "connectors/kafka_consumer.hpp"

namespace delayd::broker {

class Handover final : public WheelFeed {
 public:
  // WheelFeed, ingest side: queued, never blocks on the owner.
  void offer(const std::string& shard, const std::string& job_id, std::int64_t deliver_at) override;
  void cancel(const std::string& shard, const std::string& job_id) override;
  void move(const std::string& shard, const std::string& job_id, std::int64_t at) override;
  // Wakes the owner if ops are queued (an owner awake for another reason takes them anyway).
  void flush() noexcept override;

  // Ingest side: queues the rebalance and returns once the owner has served it (or closed).
  enum class Rebalance : unsigned char { assigned, revoked, lost, left };
  void relay(Rebalance what, const std::vector<connectors::TopicPartition>& partitions);

  // What serve() runs for each rebalance (Ownership's): the group's three events, and `left` for
  // the partitions of a member that left its group by itself without draining them. A `left`
  // not set is run as `lost`, and a `lost` not set as `revoked` (as KafkaConsumer does).
  struct Listener {
    connectors::KafkaConsumer::Listener group;
    std::function<void(const std::vector<connectors::TopicPartition>&)> left;
  };
  // Owner side: applies the queued wheel ops and runs the queued rebalances through `listener`,
  // in the order they were given. Returns how many things it applied.
  std::size_t serve(Scheduler& scheduler, const Listener& listener);
  // Owner side: returns when something is queued, notify() was called, or `timeout` passed.
  void wait(std::chrono::milliseconds timeout);
  // Wakes a wait() (a stop request, say).
  void notify();
  // Owner side, at the end: every relay() now returns at once, unserved (the process is
  // stopping; nothing the owner could still do matters to Kafka).
  void close();

  // The fire side's state for the ingest thread's pause rule (IngestPause).
  void set_fire_state(bool stuck, std::size_t unsettled) {
    fire_stuck_.store(stuck, std::memory_order_relaxed);
    unsettled_.store(unsettled, std::memory_order_relaxed);
  }
  bool fire_stuck() const { return fire_stuck_.load(std::memory_order_relaxed); }
  // The loop's view of Redis for the ingest threads' rule on leaving their groups (IngestStage):
  // since when (steady-clock ms) its turns have failed on Redis; 0 while they do not.
  void set_redis_down_since(std::int64_t ms) { redis_down_since_.store(ms, std::memory_order_relaxed); }
  std::int64_t redis_down_since() const { return redis_down_since_.load(std::memory_order_relaxed); }
  std::size_t unsettled() const { return unsettled_.load(std::memory_order_relaxed); }

 private:
  struct Op {
    enum class Kind : unsigned char { offer, cancel, move, assigned, revoked, lost, left } kind = Kind::offer;
    std::string shard;
    std::string job_id;
    std::int64_t at = 0;                                 // offer, move: epoch ms
    std::vector<connectors::TopicPartition> partitions;  // the rebalances'
    std::uint64_t ticket = 0;                            // the rebalances': relay() waits for it
  };
  void push(Op op);

  std::mutex mutex_;
  std::condition_variable queued_;   // the owner waits for ops
  std::condition_variable served_;   // relay() waits for its ticket
  std::vector<Op> ops_;              // guarded by mutex_
  bool woken_ = false;               // guarded by mutex_: notify() since the last wait()
  bool closed_ = false;              // guarded by mutex_
  std::uint64_t next_ticket_ = 0;    // guarded by mutex_: the last ticket handed out
  std::uint64_t served_ticket_ = 0;  // guarded by mutex_: tickets up to this one are served
  std::atomic<bool> fire_stuck_{false};
  std::atomic<std::size_t> unsettled_{0};
  std::atomic<std::int64_t> redis_down_since_{0};
};

}  // namespace delayd::broker

// WheelFeed: what the ingest path tells the owner of the wheel after each Redis write, so that the
// horizon invariant (broker/scheduler.hpp) and the timers follow Redis.
//
//   offer   a job was accepted (or found pending on a replay): hold it if due by the horizon
//   cancel  a job was cancelled in Redis: drop its timer if it is waiting
//   move    a job's pending entry moved in Redis (a reschedule, a failed report's retry)
//   flush   the ops given since the last flush may be applied now: a feed may hold them until
//           then (Handover wakes the owner once per flush, not once per op)
//
// Implementations: SchedulerFeed (the scheduler itself, on the same thread: tests, tools) and
// Handover (broker/handover.hpp: queued for the scheduling loop's thread).
// Threading: an implementation says; the caller is the ingest path's thread.
#pragma once

#include <cstdint>
#include <string>

#include "broker/scheduler.hpp"

namespace delayd::broker {

class WheelFeed {
 public:
  virtual ~WheelFeed() = default;
  virtual void offer(const std::string& shard, const std::string& job_id, std::int64_t deliver_at) = 0;
  virtual void cancel(const std::string& shard, const std::string& job_id) = 0;
  virtual void move(const std::string& shard, const std::string& job_id, std::int64_t at) = 0;
  virtual void flush() noexcept = 0;
};

// The scheduler fed directly, on its own thread.
class SchedulerFeed final : public WheelFeed {
 public:
  explicit SchedulerFeed(Scheduler& scheduler) : scheduler_(scheduler) {}
  void offer(const std::string& shard, const std::string& job_id, std::int64_t deliver_at) override {
    scheduler_.offer(shard, job_id, deliver_at);
  }
  void cancel(const std::string& shard, const std::string& job_id) override { scheduler_.cancel(shard, job_id); }
  void move(const std::string& shard, const std::string& job_id, std::int64_t at) override {
    scheduler_.move(shard, job_id, at);
  }
  void flush() noexcept override {}  // each op applied when given

 private:
  Scheduler& scheduler_;
};

}  // namespace delayd::broker

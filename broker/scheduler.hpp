// Scheduler: the wheel, the jobs held in memory, and the load horizon of each owned shard.
//
// THE HORIZON INVARIANT. For every shard this instance owns, with h = horizon(shard):
//     every job of that shard that is pending in Redis with deliver_at <= h is held here
//     (waiting in the wheel, or in flight).
// Two paths keep it true, and both run on the scheduling loop's one thread, so no interleaving
// can slip a job between them:
//   - refill() reads the next window from the shard's sorted set and only then moves h forward
//     to what it has read (pages ending inside a run of equal scores move h to just below that
//     score, so the rest of the run is read next time);
//   - offer(), called by ingest after Redis acknowledged a new job, holds the job at once when
//     deliver_at <= h. A job whose deliver_at is beyond h is left to a later refill().
// Until a shard's first refill, h is "nothing loaded" and offer() holds nothing for it.
// A job held twice is impossible: both paths look the job up first, by (shard, job-id): the
// same job-id in two shards is two jobs (idempotency is per shard), held side by side.
// One exception is bounded, not excluded: a job another member moved (it read a report or a
// reschedule of a shard it does not own) is held at its new time once the owner applies the
// job's wake list entry (move(); the loop pops the owned shards' wake lists every
// duty::kWakeLists). Until then the job waits at its old time or, if it was not held, is
// missing; moved earlier, it is that much later.
// The news of such a move can be lost with a connection: Redis restarted (or the link broke)
// after running a call and before answering it, and the call's effect stands while its answer
// never comes. A wake list popped that way is gone, and a failed report sent again after its
// lost answer finds the job already back to delay and moves nothing; a job delivered and then
// reported failed is held by no one meanwhile, so both lost together left it below the horizon
// for good (a soak with a Redis restart lost 15 of 300 retries so). So the loop forgets every
// horizon when a Redis call fails on the connection (reload()): the next refills read each
// pending set from its start again, skipping what is held, and find such a job.
//
// Retries move a job's timer, not its deliver_at: the sorted set is re-scored with the retry
// time (by the caller, in Redis), and the job stays held unless the wheel cannot take that time.
// A held job beyond h is allowed: the invariant asks that nothing due by h is missing, and
// holding more is harmless because both paths look the job up first.
//
// Never early: timers are set at deliver_at (or later, for a retry) and the wheel releases a
// timer only when advanced to a time at or after its deadline.
//
// Time. deliver_at and every `now_ms` given here are wall-clock milliseconds, which can step
// backwards (NTP, a person). The wheel's time must not, so the scheduler keeps an offset:
//     wheel time = wall time + offset,   offset = the sum of every backward step seen so far.
// A backward step of d raises the offset by d, so wheel time stands still while the wall clock
// repeats those d milliseconds, and a timer set afterwards for deliver_at fires when the wall
// clock reaches deliver_at. Timers set before the step fire up to d early by the wall clock;
// the claim script compares deliver_at with the true wall time, answers "early", and the job is
// re-timed with the new offset (retry_at), so nothing is produced early. A forward step fires
// what is due by the new wall time (by definition not early) and, unlike a clock that refuses
// to go back, leaves nothing pinned ahead when the step is corrected.
//
// Threading: one owner thread. refill() may throw storage errors; it is safe to call again, as
// the horizon moves only past what was read.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "broker/held_jobs.hpp"
#include "config/config.hpp"
#include "storage/job_store.hpp"
#include "wheel/timing_wheel.hpp"

namespace delayd::broker {

struct SchedulerOptions {
  wheel::WheelConfig wheel;
  // Defaults: config/config.hpp's (their one home).
  std::int64_t load_window_ms = config::SchedulerConfig{}.load_window_ms;  // precondition: < wheel range
  std::size_t load_batch = static_cast<std::size_t>(config::SchedulerConfig{}.load_batch);
  std::size_t fire_batch = static_cast<std::size_t>(config::SchedulerConfig{}.fire_batch);
  std::size_t max_held = 2'000'000;  // refill pauses while this many jobs are held
};

class Scheduler {
 public:
  using Slot = HeldJobs::Slot;

  Scheduler(SchedulerOptions options, std::int64_t now_ms, storage::JobStore& store);

  // Ownership. assign() is idempotent; revoke() drops the shard's waiting jobs from the wheel
  // (they stay pending in Redis for the next owner) and marks its in-flight ones as orphans.
  void assign(const std::string& shard);
  void revoke(const std::string& shard);
  // Forgets the horizon of every owned shard, keeping what is held: the next refill() reads each
  // pending set from its start again (held jobs are skipped), so a pending job below an old
  // horizon that nobody holds is held once read. After a Redis call failed on the connection.
  // Postcondition: horizon(s) is nullopt for every shard.
  void reload();
  bool owns(const std::string& shard) const;
  std::vector<std::string> owned_shards() const;
  // nullopt until the shard's first refill.
  std::optional<std::int64_t> horizon(const std::string& shard) const;

  // Ingest's half of the horizon invariant. Returns true if the job is now held (or already was).
  bool offer(const std::string& shard, const std::string& job_id, std::int64_t deliver_at);

  // The loader's half. Moves each owned shard's horizon towards now + load_window, reading at
  // most `page_budget` pages per shard per call (so a large backlog is taken in steps). A page
  // full of one score is followed by one read of the rest of that run (however long), so the
  // horizon always moves.
  void refill(std::int64_t now_ms, std::size_t page_budget = 4);

  // Advances the wheel to now + ahead_ms and returns the slots of up to fire_batch jobs due by
  // then, now in phase in_flight. ahead_ms lets the fire path claim jobs before they are due;
  // it must hold each record until the wall clock reaches its deliver_at.
  // Precondition: ahead_ms >= 0. Postcondition: each returned job's due_at <= now_ms + ahead_ms.
  std::vector<Slot> take_due(std::int64_t now_ms, std::int64_t ahead_ms = 0);

  // A job taken by take_due() goes back to waiting, due at `at`. It is released from memory
  // instead (Redis has it) if its shard is no longer ours or `at` is beyond the wheel's range;
  // the caller must then have re-scored its pending entry to `at`. Returns true if held.
  bool retry_at(Slot slot, std::int64_t at);
  // The job is finished (or no longer ours): forget it, cancelling its timer if waiting. A job
  // moved while in flight (move()) is held again instead, at the time the move gave, as
  // retry_at() would: Redis may hold a new job under its id there (see move()).
  void release(Slot slot);
  // Cancel the job `job_id` of `shard`: if it is held and waiting, drop its timer and forget it.
  // Returns true if it was waiting here. (In flight: false, the delivery is already under way.)
  // The same id in another shard is another job and is left alone.
  bool cancel(const std::string& shard, const std::string& job_id);
  // The job's pending entry in Redis moved to `at` (a reschedule, a retry after a failed report;
  // the caller read it from Redis after the move). A waiting job's timer moves there; a job not
  // held is offered (held if `at` is within the horizon, which keeps the invariant when the
  // entry moved below it). An in-flight one keeps `at` for when its delivery settles: its claim
  // may already have read the old time, or its delivery be done and the id accepted again (a
  // new job, AcceptKind::again) before the loop released the slot, which would leave the new
  // job below the horizon and held by no one. release() and retry_at() hold it at `at`; the
  // claim then reads the truth in Redis (nothing to claim, or "early", is harmless).
  // Nothing for a shard not owned. Returns true if the job is held afterwards.
  bool move(const std::string& shard, const std::string& job_id, std::int64_t at);

  // When the next timer is due, in wall-clock milliseconds.
  std::optional<std::int64_t> next_due() const;
  // Whether a timer was filed for a time take_due() had already advanced the wheel past (an
  // offer(), move() or retry_at() for a time within an earlier call's ahead_ms): it is due for
  // take_due() at once, whatever the ahead_ms, and next_due() answers the wheel's time for it, not
  // its own. Also true while take_due() left due timers behind its fire_batch. O(levels).
  bool overdue() const;
  const HeldJob& job(Slot slot) const { return held_.at(slot); }
  bool live(Slot slot) const { return held_.live(slot); }
  const std::string& shard_name(std::uint32_t shard) const { return shards_[shard].name; }
  std::size_t held() const { return held_.size(); }
  std::size_t fire_batch() const { return options_.fire_batch; }
  // Whether the job `job_id` of `shard` is held (waiting or in flight).
  bool holds(const std::string& shard, const std::string& job_id) const;
  std::size_t in_wheel() const { return wheel_.size(); }
  std::int64_t wheel_now() const { return static_cast<std::int64_t>(wheel_.now()); }

 private:
  struct Shard {
    std::string name;
    bool owned = false;
    std::optional<std::int64_t> horizon;
  };
  std::uint32_t shard_index(const std::string& name);
  std::optional<std::uint32_t> find_shard(const std::string& name) const;
  bool hold(std::uint32_t shard, const std::string& job_id, std::int64_t due_at);
  // Drops the slot and what moved_in_flight_ keeps for it. Precondition: no timer of it is set.
  void forget(Slot slot);
  void refill_shard(Shard& shard, std::uint32_t index, std::int64_t target, std::size_t page_budget);
  // The wall clock as seen now: a step back since the last call raises offset_.
  void observe(std::int64_t now_ms);
  std::uint64_t to_wheel(std::int64_t wall_ms) const;

  SchedulerOptions options_;
  storage::JobStore& store_;
  wheel::TimingWheel wheel_;
  HeldJobs held_;
  // Jobs move()d while in flight: slot -> the time (wall ms) the latest move gave. Rare (a
  // report, reschedule or re-use of an id racing its delivery); used by release() and
  // retry_at(), and dropped with the slot (forget()).
  std::unordered_map<Slot, std::int64_t> moved_in_flight_;
  std::vector<Shard> shards_;
  std::vector<wheel::Expired> expired_;  // reused by take_due()
  std::int64_t last_wall_ = 0;           // the last wall time given, ms
  std::int64_t offset_ = 0;              // wheel time - wall time, ms; only grows
};

}  // namespace delayd::broker

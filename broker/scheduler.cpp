#include "broker/scheduler.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include "base/debug_assert.hpp"

namespace delayd::broker {

Scheduler::Scheduler(SchedulerOptions options, std::int64_t now_ms, storage::JobStore& store)
    : options_(options), store_(store), wheel_(options.wheel, static_cast<std::uint64_t>(now_ms)), last_wall_(now_ms) {
  if (static_cast<std::uint64_t>(options_.load_window_ms) >= wheel_.range()) {
    throw std::invalid_argument("load window must be shorter than the wheel's range");
  }
}

std::optional<std::uint32_t> Scheduler::find_shard(const std::string& name) const {
  for (std::uint32_t i = 0; i < shards_.size(); ++i) {
    if (shards_[i].name == name) return i;
  }
  return std::nullopt;
}

std::uint32_t Scheduler::shard_index(const std::string& name) {
  if (auto i = find_shard(name)) return *i;
  shards_.push_back({name, false, std::nullopt});
  return static_cast<std::uint32_t>(shards_.size() - 1);
}

void Scheduler::assign(const std::string& shard) {
  const std::uint32_t index = shard_index(shard);
  Shard& s = shards_[index];
  if (s.owned) return;
  s.owned = true;
  s.horizon.reset();  // whatever was loaded before a revoke is gone: start from nothing
  // Jobs still in flight from before a revoke are ours again. The first refill skips them (they
  // are held) and moves the horizon past them, so if their delivery fails they must stay held:
  // letting go of one would strand it below the horizon until the next rebalance.
  held_.for_each([&](Slot, HeldJob& job) {
    if (job.shard == index) job.orphan = false;
  });
}

void Scheduler::reload() {
  // Holding more than the invariant asks is harmless; a horizon above a job nobody holds is not.
  for (Shard& s : shards_) s.horizon.reset();
}

void Scheduler::revoke(const std::string& shard) {
  auto index = find_shard(shard);
  if (!index || !shards_[*index].owned) return;
  shards_[*index].owned = false;
  shards_[*index].horizon.reset();
  std::vector<Slot> drop;
  held_.for_each([&](Slot slot, HeldJob& job) {
    if (job.shard != *index) return;
    if (job.phase == Phase::waiting) {
      drop.push_back(slot);
    } else {
      job.orphan = true;  // its report will still come; the job is no longer ours to retry
    }
  });
  for (Slot slot : drop) release(slot);
}

bool Scheduler::owns(const std::string& shard) const {
  auto i = find_shard(shard);
  return i && shards_[*i].owned;
}

std::vector<std::string> Scheduler::owned_shards() const {
  std::vector<std::string> out;
  for (const auto& s : shards_) {
    if (s.owned) out.push_back(s.name);
  }
  return out;
}

std::optional<std::int64_t> Scheduler::horizon(const std::string& shard) const {
  auto i = find_shard(shard);
  if (!i) return std::nullopt;
  return shards_[*i].horizon;
}

bool Scheduler::hold(std::uint32_t shard, const std::string& job_id, std::int64_t due_at) {
  if (held_.find(shard, job_id)) return true;
  const Slot slot = held_.insert(HeldJob{.job_id = job_id, .due_at = due_at, .timer = {}, .shard = shard});
  // A deadline in the past fires on the next advance; that is how overdue jobs go out at once.
  auto r = wheel_.schedule(to_wheel(due_at), slot);
  DELAYD_ASSERT(r.status == wheel::ScheduleStatus::scheduled,
                "the wheel takes every held job: refill caps each horizon below wheel_now() + range()", job_id, due_at,
                to_wheel(due_at), wheel_.now(), wheel_.range());
  if (r.status != wheel::ScheduleStatus::scheduled) {
    // The safe fallback in a release build if the invariant broke: Redis still has the job, so
    // forget it here rather than hold it without a timer.
    forget(slot);
    return false;
  }
  held_.at(slot).timer = r.handle;
  return true;
}

bool Scheduler::offer(const std::string& shard, const std::string& job_id, std::int64_t deliver_at) {
  auto index = find_shard(shard);
  if (!index || !shards_[*index].owned) return false;
  const auto& h = shards_[*index].horizon;
  if (!h || deliver_at > *h) return false;  // beyond the horizon: the loader will bring it
  return hold(*index, job_id, deliver_at);
}

std::uint64_t Scheduler::to_wheel(std::int64_t wall_ms) const {
  return static_cast<std::uint64_t>(std::max<std::int64_t>(wall_ms, 0) + offset_);
}

void Scheduler::observe(std::int64_t now_ms) {
  if (now_ms < last_wall_) offset_ += last_wall_ - now_ms;  // the wall clock stepped back
  last_wall_ = now_ms;
}

void Scheduler::refill(std::int64_t now_ms, std::size_t page_budget) {
  observe(now_ms);
  // The wheel refuses deadlines at or beyond wheel_now + range; the horizon stays below that
  // even if the wheel has fallen behind now (a long stall), so every loaded job gets a timer.
  const std::int64_t wheel_limit = static_cast<std::int64_t>(wheel_.now() + wheel_.range()) - 1 - offset_;
  const std::int64_t target = std::min(now_ms + options_.load_window_ms, wheel_limit);
  // Refill in steps of an eighth of the window, not on every loop turn: one Redis round trip per
  // shard every window/8 ms is the whole steady-state cost of loading.
  const std::int64_t step = std::max<std::int64_t>(options_.load_window_ms / 8, 1);
  for (std::uint32_t i = 0; i < shards_.size(); ++i) {
    Shard& s = shards_[i];
    if (!s.owned) continue;
    if (s.horizon && *s.horizon > target - step) continue;
    if (held_.size() >= options_.max_held) return;
    refill_shard(s, i, target, page_budget);
  }
}

void Scheduler::refill_shard(Shard& s, std::uint32_t index, std::int64_t target, std::size_t page_budget) {
  const std::size_t limit = options_.load_batch;
  while (page_budget-- > 0) {
    const auto page = store_.pending_between(s.name, s.horizon, target, limit);
    for (const auto& e : page) hold(index, e.job_id, e.deliver_at);
    if (page.size() < limit) {
      s.horizon = target;  // everything up to target has been read
      return;
    }
    const std::int64_t last = page.back().deliver_at;
    if (page.front().deliver_at == last) {
      // A full page of one score: the run may go on past the page, and the horizon cannot be put
      // in the middle of a run (a score is all or nothing). Read the rest of the run in one
      // call, whatever its length: it is bounded by the jobs of one millisecond of one shard.
      for (const auto& e : store_.pending_between(s.name, last - 1, last, 0)) hold(index, e.job_id, e.deliver_at);
      s.horizon = last;
      continue;
    }
    // All scores below `last` were read completely; the run at `last` may continue.
    s.horizon = last - 1;
  }
}

std::vector<Scheduler::Slot> Scheduler::take_due(std::int64_t now_ms, std::int64_t ahead_ms) {
  if (ahead_ms < 0) {  // a broken contract: abort, never carry on with a wheel moved backwards
    std::fprintf(stderr, "Scheduler::take_due: ahead_ms %lld < 0\n", static_cast<long long>(ahead_ms));
    std::abort();
  }
  observe(now_ms);
  expired_.clear();
  // to_wheel(now) never decreases (observe() keeps it so), and the max() keeps a smaller ahead_ms
  // than the last call's from moving the wheel back, as the wheel requires.
  wheel_.advance(std::max(to_wheel(now_ms + ahead_ms), wheel_.now()), options_.fire_batch, expired_);
  std::vector<Slot> out;
  out.reserve(expired_.size());
  for (const auto& e : expired_) {
    const Slot slot = static_cast<Slot>(e.payload);
    if (!held_.live(slot) || held_.at(slot).timer != e.handle) continue;  // not ours any more
    HeldJob& job = held_.at(slot);
    job.phase = Phase::in_flight;
    job.timer = {};
    out.push_back(slot);
  }
  return out;
}

bool Scheduler::retry_at(Slot slot, std::int64_t at) {
  if (auto moved = moved_in_flight_.find(slot); moved != moved_in_flight_.end()) {
    at = std::min(at, moved->second);  // earlier than Redis has it is safe: the claim re-times it
    moved_in_flight_.erase(moved);
  }
  HeldJob& job = held_.at(slot);
  const Shard& s = shards_[job.shard];
  // Holding a job beyond the horizon is harmless (the loader finds it held and skips it), while
  // letting go of one whose pending entry still lies below the horizon would strand it until a
  // restart. So a job stays held unless it is no longer ours or the wheel cannot take its time;
  // only then does Redis alone keep it (the fire path re-scores the entry before retrying).
  if (job.orphan || !s.owned) {
    forget(slot);
    return false;
  }
  auto r = wheel_.schedule(to_wheel(at), slot);
  if (r.status != wheel::ScheduleStatus::scheduled) {
    forget(slot);
    return false;
  }
  job.phase = Phase::waiting;
  job.due_at = at;
  job.timer = r.handle;
  return true;
}

void Scheduler::release(Slot slot) {
  HeldJob& job = held_.at(slot);
  if (job.phase == Phase::waiting) wheel_.cancel(job.timer);
  if (auto moved = moved_in_flight_.find(slot); moved != moved_in_flight_.end()) {
    // Moved while in flight: what Redis has at that time may be a new job under this id (its
    // earlier one finished), below the horizon, which only this slot can bring back.
    const std::int64_t at = moved->second;
    moved_in_flight_.erase(moved);
    if (job.phase != Phase::waiting) {
      retry_at(slot, at);
      return;
    }
  }
  forget(slot);
}

void Scheduler::forget(Slot slot) {
  moved_in_flight_.erase(slot);
  held_.erase(slot);
}

bool Scheduler::cancel(const std::string& shard, const std::string& job_id) {
  const auto index = find_shard(shard);
  if (!index) return false;
  auto slot = held_.find(*index, job_id);
  if (!slot || held_.at(*slot).phase != Phase::waiting) return false;
  release(*slot);
  return true;
}

bool Scheduler::move(const std::string& shard, const std::string& job_id, std::int64_t at) {
  const auto index = find_shard(shard);
  if (!index || !shards_[*index].owned) return false;
  const auto slot = held_.find(*index, job_id);
  if (!slot) return offer(shard, job_id, at);
  HeldJob& job = held_.at(*slot);
  if (job.phase != Phase::waiting) {
    // Its claim may have read the old time already, or its delivery be done and only the
    // release to come: release() or retry_at() holds it at `at` (the latest move wins).
    moved_in_flight_[*slot] = at;
    return true;
  }
  wheel_.cancel(job.timer);
  job.timer = {};
  job.phase = Phase::in_flight;  // retry_at() puts a taken job back to waiting at `at`
  return retry_at(*slot, at);
}

bool Scheduler::holds(const std::string& shard, const std::string& job_id) const {
  const auto index = find_shard(shard);
  return index && held_.find(*index, job_id).has_value();
}

bool Scheduler::overdue() const {
  const auto t = wheel_.next_expiry();
  return t && *t <= wheel_.now();
}

std::optional<std::int64_t> Scheduler::next_due() const {
  auto t = wheel_.next_expiry();
  if (!t) return std::nullopt;
  return static_cast<std::int64_t>(*t) - offset_;
}

}  // namespace delayd::broker

// cancel_and_wait(): what an operator's cancel does, the one flow behind `delayctl cancel` and
// `DELETE /jobs/{id}`. A cancel goes through the ingest topic like any producer's (so the
// instance that owns the job drops it from its wheel); the caller then watches Redis for the
// outcome, for at most `wait`.
//
// Verdicts (docs/operating/admin.md, DELETE /jobs/{id}): no_job (nothing under that id), not_waiting (delivered,
// failed, cancelled already or in flight: nothing published), cancelled, not_cancelled (delayd acted, but the job was
// no longer waiting: it went out first), pending (published, delayd has not acted within `wait`: if it arrives while
// the job is in flight, it has no effect). Threading: blocks the calling thread; no state of its own.
#pragma once

#include <chrono>
#include <functional>
#include <string>

namespace delayd::admin {

enum class CancelVerdict { no_job, not_waiting, cancelled, not_cancelled, pending };

struct CancelOutcome {
  CancelVerdict verdict = CancelVerdict::no_job;
  std::string state;  // the job's state as last read ("missing" for no_job)
};

// Reads the job's state ("missing" when there is none), publishes the cancel with `publish`
// (which throws when Kafka does not take it) only if the job is waiting ("delay"), then reads
// the state every 50 ms until it is not "delay" or `wait` has passed.
CancelOutcome cancel_and_wait(const std::function<std::string()>& state_of, const std::function<void()>& publish,
                              std::chrono::milliseconds wait);

}  // namespace delayd::admin

// BusinessPolicy: what the job lifecycle (docs/consuming.md, "Job lifecycle") does for one business's jobs
// once they are delivered: how many deliveries failed reports may cost, the backoff between
// them, whether and when silence means "deliver again", and whether the payload is kept after
// ready so that either can happen.
//
// The defaults are the scheduler.* settings of the same names; scheduler.business overrides them
// per business, as "<business>.<setting>" entries:
//     [scheduler.business.orders]              DELAYD_SCHEDULER_BUSINESS=
//     ack_timeout_ms = 30000                     "orders.ack_timeout_ms=30000,orders.keep_payload=true"
//     keep_payload = true                      --set scheduler.business.orders.ack_timeout_ms=30000
// Invariants of a BusinessPolicy: max_process_attempts >= 1; 0 <= retry_base <= retry_max;
// ack_timeout >= 0 (0: off); ack_timeout > 0 implies keep_payload (a redelivery needs it).
// Threading: immutable after construction; read from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "config/config.hpp"

namespace delayd::config {

struct BusinessPolicy {
  // Defaults: the [scheduler] settings' (config.hpp, their one home).
  // deliveries, the first included
  int max_process_attempts = static_cast<int>(SchedulerConfig{}.max_process_attempts);
  // backoff after the first failed report, and its ceiling
  std::chrono::milliseconds retry_base{SchedulerConfig{}.process_retry_base_ms};
  std::chrono::milliseconds retry_max{SchedulerConfig{}.process_retry_max_ms};
  std::chrono::milliseconds ack_timeout{SchedulerConfig{}.ack_timeout_ms};  // 0: silence never redelivers
  bool keep_payload = SchedulerConfig{}.keep_payload;                       // payload kept after ready

  // When a job whose delivery number `attempt` (from 1) was reported failed at now_ms is due
  // again: retry_after if the report gave one, else retry_base * 2^(attempt-1) capped at
  // retry_max, with "equal jitter" (uniform in [d/2, d], from `jitter` in [0, 1)) so that a burst
  // of failures does not come back as one burst.
  std::int64_t retry_at(int attempt, std::int64_t now_ms, std::optional<std::chrono::milliseconds> retry_after,
                        double jitter) const;
};

class BusinessPolicies {
 public:
  // Throws ConfigError for an entry of scheduler.business that is not "<business>.<setting>"
  // with a known setting and a value in its range (the message names the entry).
  explicit BusinessPolicies(const Config& config);
  // The built-in defaults for every business (tests, tools).
  BusinessPolicies() = default;
  // The policy of a business: its overrides on top of the defaults.
  const BusinessPolicy& of(std::string_view business) const;

 private:
  BusinessPolicy defaults_;
  std::map<std::string, BusinessPolicy, std::less<>> overrides_;
};

}  // namespace delayd::config

// The admin endpoint's audit trail: every write action (a cancel, and the operator's console's
// run-now, reschedule, retry, bulk-cancel, redrive), done or refused, calls audit() once, which
// writes one log line and counts it in delayd_admin_actions_total{action,outcome}:
//
//   admin action: {"access":"admin","action":"cancel","target":"order-42","outcome":"ok"}
//   admin action: {"access":"admin","action":"bulk-cancel","target":{"business":"orders"},
//                  "counts":{"matched":12,"done":10,"skipped":2,"failed":0},"outcome":"ok"}
//
// (one line; wrapped here). After the prefix the line is compact JSON, so a job id of any bytes
// cannot break it (invalid UTF-8 is replaced); "access" is the level the request's token
// granted (admin/access.hpp), never the token. Logged at info through spdlog, so it follows
// log.format (with json, the line is the "msg" of the object).
//
// Label values are bounded: actions and outcomes are enums, the target is never a label.
// Threading: audit() may be called from any thread (the io thread refuses writes, the worker
// thread does them); the rest are pure functions.
#pragma once

#include <boost/beast/http/verb.hpp>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "admin/access.hpp"
#include "admin/metrics.hpp"

namespace delayd::admin {

// What a write asked for. `other`: a write the endpoint has no action for (refused or not).
enum class AuditAction {
  cancel,
  run_now,
  reschedule,
  retry,
  bulk_cancel,
  bulk_run_now,
  bulk_retry,
  stop_operation,
  redrive,
  other
};

// How it ended: done (ok), accepted but not done yet (pending: a cancel no instance acted on
// yet), a bad request (invalid), the read token asked to write (refused), no such job
// (not_found), the job's state did not allow it (conflict), an operation stopped before its
// end (stopped), Redis or Kafka failing, or an operation that could not go on (error).
enum class AuditOutcome { ok, pending, invalid, refused, not_found, conflict, stopped, error };

// For actions over many jobs: how many the filter matched, were acted on, were left alone
// (their state did not allow it) and failed.
struct AuditCounts {
  std::int64_t matched = 0;
  std::int64_t done = 0;
  std::int64_t skipped = 0;
  std::int64_t failed = 0;
};

struct AuditEntry {
  Access access = Access::open;
  AuditAction action = AuditAction::other;
  nlohmann::json target;              // the job id (a string), or the filter (an object)
  std::optional<AuditCounts> counts;  // actions over many jobs only
  AuditOutcome outcome = AuditOutcome::ok;
};

// "cancel", "run-now", "reschedule", "retry", "bulk-cancel", "bulk-run-now", "bulk-retry",
// "stop-operation", "redrive", "other".
std::string_view to_string(AuditAction action);
// "ok", "pending", "invalid", "refused", "not_found", "conflict", "error".
std::string_view to_string(AuditOutcome outcome);

// The outcome an answer's HTTP status stands for: 202 pending, other 2xx ok, 400 and 422
// invalid, 403 refused, 404 not_found, 409 conflict, anything else error.
AuditOutcome outcome_of_status(unsigned status);

// The action and target a write request asks for, for the audit line of a refused write:
// DELETE /jobs/{id} is a cancel of that id; any other write is `other`, its target
// "<METHOD> <path>". A route that adds an action adds its request here too.
AuditEntry requested_action(boost::beast::http::verb method, std::string_view path);

// The line's JSON, without the "admin action: " prefix.
std::string audit_json(const AuditEntry& entry);

// Logs "admin action: <audit_json>" and counts the entry in `metrics`.
void audit(Metrics& metrics, const AuditEntry& entry);

}  // namespace delayd::admin

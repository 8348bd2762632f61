#include "admin/audit.hpp"

#include <spdlog/spdlog.h>

#include "admin/request_target.hpp"

namespace delayd::admin {

namespace http = boost::beast::http;

std::string_view to_string(AuditAction action) {
  switch (action) {
    case AuditAction::cancel:
      return "cancel";
    case AuditAction::run_now:
      return "run-now";
    case AuditAction::reschedule:
      return "reschedule";
    case AuditAction::retry:
      return "retry";
    case AuditAction::bulk_cancel:
      return "bulk-cancel";
    case AuditAction::bulk_run_now:
      return "bulk-run-now";
    case AuditAction::bulk_retry:
      return "bulk-retry";
    case AuditAction::stop_operation:
      return "stop-operation";
    case AuditAction::redrive:
      return "redrive";
    case AuditAction::other:
      break;
  }
  return "other";
}

std::string_view to_string(AuditOutcome outcome) {
  switch (outcome) {
    case AuditOutcome::ok:
      return "ok";
    case AuditOutcome::pending:
      return "pending";
    case AuditOutcome::invalid:
      return "invalid";
    case AuditOutcome::refused:
      return "refused";
    case AuditOutcome::not_found:
      return "not_found";
    case AuditOutcome::conflict:
      return "conflict";
    case AuditOutcome::stopped:
      return "stopped";
    case AuditOutcome::error:
      break;
  }
  return "error";
}

AuditOutcome outcome_of_status(unsigned status) {
  switch (status) {
    case 202:
      return AuditOutcome::pending;
    case 400:
    case 422:
      return AuditOutcome::invalid;
    case 403:
      return AuditOutcome::refused;
    case 404:
      return AuditOutcome::not_found;
    case 409:
      return AuditOutcome::conflict;
    default:
      return status >= 200 && status < 300 ? AuditOutcome::ok : AuditOutcome::error;
  }
}

AuditEntry requested_action(http::verb method, std::string_view path) {
  AuditEntry e;
  if (method == http::verb::delete_ && path.starts_with("/operations/")) {
    e.action = AuditAction::stop_operation;
    e.target = std::string(path.substr(std::string_view("/operations/").size()));
    return e;
  }
  if (auto route = job_route(path)) {
    constexpr std::pair<JobAction, AuditAction> kActions[] = {{JobAction::none, AuditAction::cancel},
                                                              {JobAction::run_now, AuditAction::run_now},
                                                              {JobAction::reschedule, AuditAction::reschedule},
                                                              {JobAction::retry, AuditAction::retry}};
    const bool fits = route->action == JobAction::none ? method == http::verb::delete_ : method == http::verb::post;
    for (const auto& [route_action, action] : kActions) {
      if (fits && route->action == route_action) {
        e.action = action;
        e.target = std::move(route->job_id);
        return e;
      }
    }
  }
  const auto name = http::to_string(method);
  e.target = std::string(name.data(), name.size()) + " " + std::string(path);
  return e;
}

std::string audit_json(const AuditEntry& e) {
  nlohmann::ordered_json j{{"access", to_string(e.access)}, {"action", to_string(e.action)}, {"target", e.target}};
  if (e.counts) {
    j["counts"] = {{"matched", e.counts->matched},
                   {"done", e.counts->done},
                   {"skipped", e.counts->skipped},
                   {"failed", e.counts->failed}};
  }
  j["outcome"] = to_string(e.outcome);
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

void audit(Metrics& metrics, const AuditEntry& entry) {
  spdlog::info("admin action: {}", audit_json(entry));
  metrics.count_admin_action(to_string(entry.action), to_string(entry.outcome));
}

}  // namespace delayd::admin

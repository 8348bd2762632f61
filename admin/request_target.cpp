#include "admin/request_target.hpp"

namespace delayd::admin {

namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// `rest` with each %XX decoded (and '+' as a space when plus_is_space); nullopt on a bad escape.
std::optional<std::string> percent_decoded(std::string_view rest, bool plus_is_space) {
  std::string out;
  out.reserve(rest.size());
  for (std::size_t i = 0; i < rest.size(); ++i) {
    if (rest[i] != '%') {
      out.push_back(plus_is_space && rest[i] == '+' ? ' ' : rest[i]);
      continue;
    }
    if (i + 2 >= rest.size()) return std::nullopt;
    const int hi = hex_digit(rest[i + 1]);
    const int lo = hex_digit(rest[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out.push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return out;
}

}  // namespace

std::string_view target_path(std::string_view target) { return target.substr(0, target.find('?')); }

std::optional<std::string> job_id_of(std::string_view path) {
  if (!path.starts_with(kJobsPrefix)) return std::nullopt;
  const std::string_view rest = path.substr(kJobsPrefix.size());
  if (rest.empty() || rest.find('/') != std::string_view::npos) return std::nullopt;
  return percent_decoded(rest, false);
}

std::optional<JobRoute> job_route(std::string_view path) {
  constexpr std::pair<std::string_view, JobAction> kActions[] = {
      {"/run-now", JobAction::run_now}, {"/reschedule", JobAction::reschedule}, {"/retry", JobAction::retry}};
  for (const auto& [suffix, action] : kActions) {
    if (!path.ends_with(suffix)) continue;
    // "/jobs/run-now" is the job "run-now"; "/jobs/x/run-now" runs job x.
    if (auto id = job_id_of(path.substr(0, path.size() - suffix.size()))) return JobRoute{std::move(*id), action};
  }
  auto id = job_id_of(path);
  if (!id) return std::nullopt;
  return JobRoute{std::move(*id), JobAction::none};
}

QueryParams query_params(std::string_view target) {
  QueryParams out;
  const auto q = target.find('?');
  if (q == std::string_view::npos) return out;
  std::string_view rest = target.substr(q + 1);
  while (!rest.empty()) {
    const auto amp = rest.find('&');
    const std::string_view pair = rest.substr(0, amp);
    rest = amp == std::string_view::npos ? std::string_view{} : rest.substr(amp + 1);
    if (pair.empty()) continue;
    const auto eq = pair.find('=');
    auto name = percent_decoded(pair.substr(0, eq), true);
    auto value = percent_decoded(eq == std::string_view::npos ? std::string_view{} : pair.substr(eq + 1), true);
    if (!name || !value) {
      out.error = "the query has a bad %-escape";
      return out;
    }
    if (!out.values.emplace(std::move(*name), std::move(*value)).second) {
      out.error = "parameter '" + std::string(pair.substr(0, eq)) + "' is given twice";
      return out;
    }
  }
  return out;
}

}  // namespace delayd::admin

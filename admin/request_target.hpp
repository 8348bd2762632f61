// The admin endpoint's reading of a request target (what Boost.Beast's parser leaves to us):
// the path without its query, the query's parameters, and the job id and action of
// /jobs/{id}[/<action>], %XX-decoded.
// Threading: pure functions, total on any bytes.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace delayd::admin {

inline constexpr std::string_view kJobsPrefix = "/jobs/";

// `target` up to its first '?'.
std::string_view target_path(std::string_view target);

// The id of a path "/jobs/{id}": the rest %XX-decoded. nullopt when the path does not start
// with /jobs/, the rest is empty, holds a '/', or has a bad escape (a '%' not followed by two
// hex digits); the decoded id may hold any byte.
std::optional<std::string> job_id_of(std::string_view path);

// What a path under /jobs/ names: a job, and an action on it (none: the job itself).
enum class JobAction { none, run_now, reschedule, retry };
struct JobRoute {
  std::string job_id;
  JobAction action = JobAction::none;
};
// "/jobs/{id}" or "/jobs/{id}/run-now|reschedule|retry"; nullopt for anything else (job_id_of()'s
// rules for the id).
std::optional<JobRoute> job_route(std::string_view path);

// The parameters of `target`'s query ("a=1&b=x%20y"): names and values %XX-decoded, '+' read as a
// space. Result: the parameters, or the reason the query is unreadable (a bad escape, or a name
// given twice), for a 400.
struct QueryParams {
  std::map<std::string, std::string, std::less<>> values;
  std::string error;  // non-empty: unreadable
};
QueryParams query_params(std::string_view target);

}  // namespace delayd::admin

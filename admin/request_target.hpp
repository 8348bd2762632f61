// The admin endpoint's reading of a request target (what Boost.Beast's parser leaves to us):
// the path without its query, and the job id of /jobs/{id}, %XX-decoded.
// Threading: pure functions, total on any bytes.
#pragma once

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

}  // namespace delayd::admin

// JobState: the states a job record can be in, parsed once where Redis replies are read.
//
// Stored as text, the first word of the job record ("delay", "ready", "running", "finished",
// "cancelled", "failed"), which is what a person reads with `redis-cli GET`. The other values never are
// stored: they describe what a call found (`missing`: no record; `in_flight`: a cancel met a job
// whose record may be on its way; `corrupt`: the key exists but holds no record that parses).
// Threading: pure functions.
#pragma once

#include <optional>
#include <string_view>

namespace delayd::storage {

enum class JobState { delay, ready, running, finished, cancelled, failed, missing, in_flight, corrupt };

constexpr std::string_view to_string(JobState s) {
  switch (s) {
    case JobState::delay:
      return "delay";
    case JobState::ready:
      return "ready";
    case JobState::running:
      return "running";
    case JobState::finished:
      return "finished";
    case JobState::cancelled:
      return "cancelled";
    case JobState::failed:
      return "failed";
    case JobState::missing:
      return "missing";
    case JobState::in_flight:
      return "in_flight";
    case JobState::corrupt:
      return "corrupt";
  }
  return "corrupt";
}

// Any text the scripts or a stored record may hold; nullopt for anything else.
constexpr std::optional<JobState> parse_job_state(std::string_view s) {
  for (JobState st : {JobState::delay, JobState::ready, JobState::running, JobState::finished, JobState::cancelled,
                      JobState::failed, JobState::missing, JobState::in_flight, JobState::corrupt}) {
    if (to_string(st) == s) return st;
  }
  return std::nullopt;
}

// Nothing more will happen to the job by delayd's own doing: ready (a consumer's report may
// still move it on, see docs/consuming.md "Job lifecycle"), running, finished, cancelled and failed.
constexpr bool is_final(JobState s) {
  return s == JobState::ready || s == JobState::running || s == JobState::finished || s == JobState::cancelled ||
         s == JobState::failed;
}

// What a consumer reports on a delivered job (docs/consuming.md, "Job lifecycle"): the `status` header of a
// status-topic record, as the broker parses it and the report script applies it.
enum class ReportStatus { running, finished, failed };
constexpr std::string_view to_string(ReportStatus s) {
  return s == ReportStatus::running ? "running" : s == ReportStatus::finished ? "finished" : "failed";
}

}  // namespace delayd::storage

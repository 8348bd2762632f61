// Metrics: delayd's Prometheus metrics, kept in a prometheus-cpp Registry and rendered with its
// TextSerializer (the text exposition format); delayd serves the text itself (admin/http_server),
// prometheus-cpp's own pull server is not used.
//
// Source of truth: the scheduling loop's LoopSnapshot, whose counters and histograms count since
// start. update() moves each Prometheus counter and histogram by what the snapshot gained since
// the previous update(), so the loop pays nothing for metrics: the admin thread does the work,
// at scrape time. Pending jobs per shard come from Redis (set_pending, refreshed by the caller
// at most every few seconds); process metrics are read from /proc at render().
//
// Label sets are bounded: outage{dependency} has the loop's four dependencies, dead-letter
// reasons and shards are capped (kMaxLabelValues each; beyond it, new values are not added).
//
// Threading: not thread-safe; one caller at a time (the admin endpoint's thread), except
// count_admin_action(), which any thread may call at any time (it only adds to one family of
// prometheus-cpp, whose Family::Add and Counter::Increment are thread-safe, as is the
// Registry::Collect of render()).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "admin/http_server.hpp"
#include "broker/snapshot.hpp"

namespace delayd::admin {

class Metrics {
 public:
  static constexpr std::size_t kMaxLabelValues = 256;

  Metrics();
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // Brings every loop metric up to `snapshot`: counters and histograms move by the snapshot's
  // gain since the last call (a counter that went down is taken as a restart from 0), gauges
  // take its values.
  void update(const broker::LoopSnapshot& snapshot);
  // Sets delayd_jobs_pending{shard} to `by_shard` (shards no longer listed are removed).
  void set_pending(const std::map<std::string, std::int64_t>& by_shard);
  // Sets delayd_jobs{business,state} from Redis's counters per business and state (the
  // lifecycle's running, finished, failed and redelivered included); capped at
  // kMaxLabelValues series, like the other labels.
  void set_job_counts(const std::map<std::string, std::map<std::string, std::int64_t>>& by_business_state);
  // Adds one to delayd_admin_actions_total{action,outcome} (admin/audit.hpp: both come from
  // enums, so the label set is bounded). Any thread.
  void count_admin_action(std::string_view action, std::string_view outcome);
  // Sets delayd_ready: 1 while /readyz answers 200, 0 while it answers 503 (for alerts).
  void set_ready(bool ready);
  // Sets the admin endpoint's own connection counters.
  void set_http(const HttpServerCounters& counters, std::size_t open_connections);
  // The whole registry in the Prometheus text format, with process metrics read now.
  std::string render();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace delayd::admin

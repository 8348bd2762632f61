// The subcommands of bench/e2e_load, one function each: main.cpp dispatches to them by name and
// lists their options. Each prints its figures as JSON lines on stdout and returns the exit
// status (0 whole, kPipelineBroken a job lost or early, 1 an error; UsageError for bad options).
#pragma once

#include "support.hpp"

namespace e2e {

// phases.cpp: against a running delayd (or Kafka alone for the limit).
int cmd_kafka_limit(const Options& o);
int cmd_ingest(const Options& o);
int cmd_burst(const Options& o);
int cmd_rate(const Options& o);
int cmd_restart_publish(const Options& o);
int cmd_restart_measure(const Options& o);

// lives.cpp: whole lives of every kind (cancels, reschedules, failing reports, repeats), the soak's.
int cmd_lives(const Options& o);

// scale.cpp: the scale benchmark's fill and its watch across a restart.
int cmd_fill(const Options& o);
int cmd_watch(const Options& o);

// report.cpp: from the JSON lines of earlier runs.
int cmd_report(const Options& o);
int cmd_compare(const Options& o);
int cmd_medians(const Options& o);

}  // namespace e2e

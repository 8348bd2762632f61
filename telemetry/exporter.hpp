// SpanExporter: finished spans, batched on a thread of its own and sent as OTLP/HTTP JSON
// (otlp_json.hpp) to a collector, without ever making the caller wait.
//
//   submit(span)  any thread; takes a mutex for a push onto the queue, never waits for I/O. A
//                 full queue (max_queue spans) drops the span and counts it (dropped_full): the
//                 fire path is never slowed by a slow or absent collector.
//   the thread    runs at the lowest CPU priority (nice 19): under CPU pressure spans wait, and
//                 drop once the queue is full, instead of taking CPU from the delivery of jobs;
//                 takes the whole queue in one swap when max_batch spans wait, or every
//                 schedule_delay otherwise, and sends it in batches of max_batch spans:
//                 one POST per batch over a kept-alive connection (opened again after an error),
//                 each bounded by `timeout` (resolve, connect, write and read together).
//   failures      a batch the collector refuses (non-2xx), or that cannot be sent, is dropped and
//                 counted (dropped_failed): spans are telemetry, not jobs, and a retry queue
//                 would only hold memory the fire path may need. The thread then waits a
//                 backoff (1 s doubling to 30 s) before the next POST, spans meanwhile queueing
//                 (and dropping when full). One log line when exports start failing (with the
//                 reason), one when they work again.
//   shutdown(t)   sends what is queued, in batches, for at most t; drops (and counts) the rest;
//                 joins the thread. The destructor calls it with 2 s if it was not called.
// Counters are atomics any thread may read; they only grow.
// Threading: submit() and counters() from any thread; shutdown() from one.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "telemetry/otlp_json.hpp"
#include "telemetry/span.hpp"

namespace delayd::telemetry {

struct ExporterOptions {
  std::string host;  // the collector's host name or address
  std::uint16_t port = 4318;
  std::string target = "/v1/traces";                         // the request target (path)
  std::vector<std::pair<std::string, std::string>> headers;  // sent with every POST
  std::chrono::milliseconds timeout{10'000};                 // one POST, end to end
  std::size_t max_queue = 2048;                              // spans waiting, at most
  std::size_t max_batch = 512;                               // spans per POST, at most; <= max_queue
  std::chrono::milliseconds schedule_delay{5000};            // between POSTs of a batch not full
  Resource resource;
};

struct ExporterCounters {
  std::uint64_t exported = 0;        // spans the collector accepted (2xx)
  std::uint64_t dropped_full = 0;    // spans not queued: the queue was full
  std::uint64_t dropped_failed = 0;  // spans of batches that failed to send or were refused
};

class SpanExporter {
 public:
  explicit SpanExporter(ExporterOptions options);
  ~SpanExporter();
  SpanExporter(const SpanExporter&) = delete;
  SpanExporter& operator=(const SpanExporter&) = delete;

  // Queues `span` for export; false (and counted) if the queue is full or shutdown began.
  bool submit(SpanData span);
  // Sends what is queued within `timeout`, then stops the thread. Idempotent.
  void shutdown(std::chrono::milliseconds timeout);
  ExporterCounters counters() const;

 private:
  class Poster;  // one HTTP/1.1 connection to the collector; the exporter thread's own
  void run();
  // Sends `batch`; counts it exported or dropped; logs the start and end of a failing stretch.
  bool send(Poster& poster, std::span<const SpanData> batch);

  ExporterOptions options_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;                      // a full batch waits, or shutdown began
  std::vector<SpanData> queue_;                       // guarded by mutex_; taken whole by a swap
  bool stopping_ = false;                             // guarded by mutex_
  std::chrono::steady_clock::time_point deadline_{};  // shutdown's end; guarded by mutex_
  std::atomic<std::uint64_t> exported_{0};
  std::atomic<std::uint64_t> dropped_full_{0};
  std::atomic<std::uint64_t> dropped_failed_{0};
  bool failing_ = false;  // the exporter thread's: exports are failing now
  std::thread thread_;    // last: started once everything above exists
};

}  // namespace delayd::telemetry

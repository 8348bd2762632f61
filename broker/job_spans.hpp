// The spans delayd adds to a job's trace (the Tracer: telemetry/tracer.hpp), with OpenTelemetry's
// messaging attributes and delayd's own. Hours may pass between the two, so they are in two
// traces, the second linked to the first, as OpenTelemetry's messaging conventions advise:
//
//   producer  send delay-ingest ──parent──▶ accept delay-ingest      (trace of the producer)
//                  ▲                            kind consumer, from reading the record to Redis
//                  │ link                       acknowledging it; a new trace when the record
//                  │                            carries no traceparent
//   delayd    send ready.<business>            (a new trace per delivery attempt, and so per
//                  │                            occurrence of a repeating job) kind producer, from
//                  │ parent (the ready          the produce call to Kafka's acknowledgement; its
//                  ▼ record's traceparent)      status is error when the delivery failed
//   consumer  its receive / process spans
//
//   accept attributes  messaging.system "kafka", messaging.operation.type "process",
//                      messaging.operation.name "accept", messaging.destination.name (the ingest
//                      topic), messaging.destination.partition.id, messaging.kafka.offset,
//                      delayd.job_id, delayd.business, delayd.deliver_at (epoch ms),
//                      delayd.accept (created, existed, cancelled_early, in_flight, updated, again)
//   send attributes    messaging.system "kafka", messaging.operation.type "send",
//                      messaging.operation.name "send", messaging.destination.name (the ready
//                      topic), messaging.destination.partition.id and messaging.kafka.offset
//                      once Kafka acknowledged it, delayd.job_id, delayd.business,
//                      delayd.deliver_at, delayd.attempt, delayd.repeat (a repeating job's
//                      occurrence), delayd.lateness_ms (the produce call's time - deliver_at)
// Threading: pure functions.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "connectors/record.hpp"
#include "storage/job_store.hpp"
#include "telemetry/span.hpp"

namespace delayd::broker {

// The context a record's first `traceparent` header names, if it parses.
std::optional<telemetry::SpanContext> trace_context(const connectors::Headers& headers);

// An accept span begun when its ingest record was read.
struct AcceptTrace {
  telemetry::SpanContext context;                // the span's own
  std::optional<telemetry::SpanContext> parent;  // the producer's, from the record
  std::chrono::nanoseconds start{0};             // since the Unix epoch
  std::string topic;                             // the ingest record's
  std::int32_t partition = -1;
  std::int64_t offset = -1;
};
telemetry::SpanData accept_span(const AcceptTrace& t, const storage::NewJob& job, const storage::AcceptOutcome& o);

// A publish span begun at a ready record's produce call.
struct PublishTrace {
  telemetry::SpanContext context;
  std::optional<telemetry::SpanContext> link;  // the producer's context, from the job's headers
  std::chrono::nanoseconds start{0};           // since the Unix epoch; 0: not traced
};
struct PublishedJob {
  const std::string& job_id;
  const std::string& business;
  int attempt = 0;
  int repeat = 0;  // 0: not a repeating job
  std::int64_t deliver_at = 0;
};
telemetry::SpanData publish_span(const PublishTrace& t, const PublishedJob& job,
                                 const connectors::DeliveryReport& report);

// A ready record's headers as delayd produces them with tracing on, for the scope of the produce
// call: every `traceparent` and `tracestate` taken out (they spoke for the producer's trace),
// `span`'s traceparent added last. The end of the scope puts the headers back as they were
// (librdkafka has copied them by then), so the job keeps the producer's context for a retry or
// a dead-letter copy. No copy of the other headers is made.
class TraceHeaders {
 public:
  TraceHeaders(connectors::Headers& headers, const telemetry::SpanContext& span);
  ~TraceHeaders();
  TraceHeaders(const TraceHeaders&) = delete;
  TraceHeaders& operator=(const TraceHeaders&) = delete;

 private:
  connectors::Headers& headers_;
  std::vector<std::pair<std::size_t, connectors::Header>> taken_;  // the producer's, by position, last first
};

}  // namespace delayd::broker

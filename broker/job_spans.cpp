#include "broker/job_spans.hpp"

#include <algorithm>
#include <cstddef>

namespace delayd::broker {
namespace {

using telemetry::Attribute;
using telemetry::kTraceparentHeader;
using telemetry::kTracestateHeader;

std::string_view accept_name(storage::AcceptKind kind) {
  using storage::AcceptKind;
  switch (kind) {
    case AcceptKind::existed:
      return "existed";
    case AcceptKind::created:
      return "created";
    case AcceptKind::cancelled_early:
      return "cancelled_early";
    case AcceptKind::in_flight:
      return "in_flight";
    case AcceptKind::updated:
      return "updated";
    case AcceptKind::again:
      return "again";
  }
  return "?";
}

}  // namespace

std::optional<telemetry::SpanContext> trace_context(const connectors::Headers& headers) {
  for (const connectors::Header& h : headers) {
    if (h.name == kTraceparentHeader && h.value) return telemetry::parse_traceparent(*h.value);
  }
  return std::nullopt;
}

telemetry::SpanData accept_span(const AcceptTrace& t, const storage::NewJob& job, const storage::AcceptOutcome& o) {
  telemetry::SpanData s;
  s.context = t.context;
  if (t.parent) s.parent = t.parent->span_id;
  s.name = "accept " + t.topic;
  s.kind = telemetry::SpanKind::consumer;
  s.start = t.start;
  s.end = std::max(t.start, telemetry::wall_now());
  s.attributes = {{"messaging.system", std::string_view("kafka")},
                  {"messaging.operation.type", std::string_view("process")},
                  {"messaging.operation.name", std::string_view("accept")},
                  {"messaging.destination.name", t.topic},
                  {"messaging.destination.partition.id", std::to_string(t.partition)},
                  {"messaging.kafka.offset", t.offset},
                  {"delayd.job_id", job.job_id},
                  {"delayd.business", job.business},
                  {"delayd.deliver_at", o.deliver_at},
                  {"delayd.accept", accept_name(o.kind)}};
  return s;
}

telemetry::SpanData publish_span(const PublishTrace& t, const PublishedJob& job,
                                 const connectors::DeliveryReport& report) {
  telemetry::SpanData s;
  s.context = t.context;
  if (t.link) s.links.push_back(*t.link);
  s.name = "send " + report.topic;
  s.kind = telemetry::SpanKind::producer;
  s.start = t.start;
  s.end = std::max(t.start, telemetry::wall_now());
  const std::int64_t start_ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.start).count();
  s.attributes = {{"messaging.system", std::string_view("kafka")},
                  {"messaging.operation.type", std::string_view("send")},
                  {"messaging.operation.name", std::string_view("send")},
                  {"messaging.destination.name", report.topic},
                  {"delayd.job_id", job.job_id},
                  {"delayd.business", job.business},
                  {"delayd.deliver_at", job.deliver_at},
                  {"delayd.attempt", static_cast<std::int64_t>(job.attempt)},
                  {"delayd.lateness_ms", start_ms - job.deliver_at}};
  if (job.repeat > 0) s.attributes.push_back({"delayd.repeat", static_cast<std::int64_t>(job.repeat)});
  if (report.ok) {
    s.attributes.push_back({"messaging.destination.partition.id", std::to_string(report.partition)});
    s.attributes.push_back({"messaging.kafka.offset", report.offset});
  } else {
    s.status = telemetry::StatusCode::error;
    s.status_message = report.error;
  }
  return s;
}

TraceHeaders::TraceHeaders(connectors::Headers& headers, const telemetry::SpanContext& span) : headers_(headers) {
  for (std::size_t k = headers_.size(); k-- > 0;) {
    if (headers_[k].name == kTraceparentHeader || headers_[k].name == kTracestateHeader) {
      taken_.emplace_back(k, std::move(headers_[k]));
      headers_.erase(headers_.begin() + static_cast<std::ptrdiff_t>(k));
    }
  }
  headers_.push_back({std::string(kTraceparentHeader), telemetry::format_traceparent(span)});
}

TraceHeaders::~TraceHeaders() {
  headers_.pop_back();
  for (auto it = taken_.rbegin(); it != taken_.rend(); ++it) {  // first position first
    headers_.insert(headers_.begin() + static_cast<std::ptrdiff_t>(it->first), std::move(it->second));
  }
}

}  // namespace delayd::broker
